//! The `memlens` binary: parse arguments, run one command, map the outcome to an exit code.

/// A refused allocation is one line naming the input and exit code 2, never an abort.
#[global_allocator]
static ALLOCATOR: memlens::alloc_guard::Guarded = memlens::alloc_guard::Guarded;

fn main() {
    std::process::exit(memlens::run_cli());
}
