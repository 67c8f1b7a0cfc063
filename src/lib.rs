//! memlens reads PyTorch CUDA memory snapshots (`torch.cuda.memory._dump_snapshot()`) without
//! executing anything, and reports where GPU memory went.
//!
//! Layers, lowest first: [`input`] (bytes of a file, decompressed), [`pickle`] (a safe pickle
//! decoder), [`model`] (the typed [`model::Snapshot`]), [`load`] (a file to a snapshot: input
//! and model joined, with [`LoadOptions`]), [`replay`] (the trace walked forward:
//! lifetimes, the peak, moments, allocator states, steps), [`allocator`] (a model of the
//! caching allocator the trace's requests are replayed through), [`vocab`] (the vocabulary
//! reports share: call sites, devices, the GPU table, the units of advice, what a snapshot
//! lacks), [`analyze`] (the analyses, one folder each, each returning its report as a plain
//! value), [`compose`] (reports built from other reports: the OOM report with its fit, the
//! page, batch, check, the dataset), [`render`] (text, JSON, CSV, SVG), [`serve`] (the page
//! and its window and moment answers from a local HTTP server, over `compose` and `render`),
//! and the command line in `cli` (binary only). Each layer imports only those before it
//! (`tests/layers.rs` checks it); [`units`], [`error`], [`alloc_guard`] and [`timings`] (what
//! a decode cost, for `--timings`) serve them all.
//!
//! ```no_run
//! let snap = memlens::load(std::path::Path::new("snapshot.pickle"), &mut |_| {}).unwrap();
//! let summary = memlens::analyze::summary::run(&snap);
//! println!("{} devices", summary.devices.len());
//! ```

#![deny(missing_docs)]

// Unit tests share test code written against the crate's public name (`memlens::...`).
#[cfg(test)]
extern crate self as memlens;

// The tests' one definition of "under CI" and the CI rule (tests/common/ci.rs), for the unit
// tests that read `../shared/samples/real`.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../tests/common/ci.rs"]
mod test_ci;

pub mod alloc_guard;
pub mod allocator;
pub mod analyze;
// The command line lives in the library, not the binary: its serializers and sorts are then
// generated once, with the library's, instead of again in the binary (docs/performance.md,
// "Build"). Only its entry point is public.
mod cli;
#[cfg(test)]
mod code_size;
pub mod compose;
pub mod error;
pub mod input;
#[cfg(test)]
mod layering;
pub mod load;
pub mod model;
pub mod pickle;
pub mod render;
pub mod replay;
pub mod serve;
pub mod timings;
pub mod units;
pub mod vocab;

pub use error::Error;

/// Runs the command line in `std::env::args` (the `memlens` binary's whole work) and returns
/// its exit code: 0 ok, 1 findings or a broken budget, 2 usage or input errors.
pub fn run_cli() -> i32 {
    cli::main()
}

pub use load::{load, load_with, LoadOptions};
