//! memlens reads PyTorch CUDA memory snapshots (`torch.cuda.memory._dump_snapshot()`) without
//! executing anything, and reports where GPU memory went.
//!
//! Layers, lowest first: [`input`] (bytes of a file, decompressed), [`pickle`] (a safe pickle
//! decoder), [`model`] (the typed [`model::Snapshot`]), [`load`] (a file to a snapshot: input
//! and model joined, with [`LoadOptions`]), [`replay`] (the trace walked forward:
//! lifetimes, the peak, moments, allocator states, steps), [`allocator`] (a model of the
//! caching allocator the trace's requests are replayed through), [`analyze`] (reports as plain
//! values), [`render`] (text, JSON, CSV, SVG), [`serve`] (the page and its window and moment
//! answers from a local HTTP server, over `analyze` and `render`), and the command line in
//! `cli` (binary only).
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
pub mod error;
pub mod input;
pub mod load;
pub mod model;
pub mod pickle;
pub mod render;
pub mod replay;
pub mod serve;
pub mod units;

pub use error::Error;
pub use load::{load, load_with, LoadOptions};
