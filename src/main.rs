//! The `memlens` binary: parse arguments, run one command, map the outcome to an exit code.

mod cli;

fn main() {
    std::process::exit(cli::main());
}
