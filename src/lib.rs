//! memlens reads PyTorch CUDA memory snapshots (`torch.cuda.memory._dump_snapshot()`) without
//! executing anything, and reports where GPU memory went.
//!
//! Layers, lowest first: [`input`] (bytes of a file, decompressed), [`pickle`] (a safe pickle
//! decoder), [`model`] (the typed [`model::Snapshot`]), [`analyze`] (reports as plain values),
//! [`render`] (text and JSON), and the command line in `cli`.
//!
//! ```no_run
//! let snap = memlens::load(std::path::Path::new("snapshot.pickle"), &mut |_| {}).unwrap();
//! let summary = memlens::analyze::summary::run(&snap);
//! println!("{} devices", summary.devices.len());
//! ```

pub mod analyze;
pub mod error;
pub mod input;
pub mod model;
pub mod pickle;
pub mod render;
pub mod replay;
pub mod units;

pub use error::Error;
pub use input::load;
