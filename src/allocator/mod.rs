//! A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp;
//! snapshot-format.md §8), to replay a snapshot's recorded requests under other settings.
//!
//! In: a [`crate::model::Snapshot`] and a device. Out: what the allocator would have reserved
//! ([`drive::Outcome`]) and how closely the model reproduces the recorded run
//! ([`fidelity::Agreement`]). A layer of its own below `analyze`: it uses `model` and
//! `replay` (the state before the trace, [`crate::replay::state`]), nothing above.
//!
//! - [`settings`]: the settings modelled, from the file or `PYTORCH_CUDA_ALLOC_CONF` syntax;
//! - [`rounding`]: request and segment sizes;
//! - [`pool`]: blocks and pools of cached blocks (best fit over ordered sets, O(log n));
//! - [`expandable`]: an expandable segment's pages;
//! - [`device`]: one device's allocator (malloc, free, release and retry, gc, streams,
//!   private pools, expandable segments) and the segment events it records;
//! - [`recorded`]: what the trace says beyond its requests (owners of segment events,
//!   `empty_cache` calls, the limit it implies, the start state);
//! - [`drive`]: the replay of a trace's requests through the model;
//! - [`fidelity`]: the model's segment events against the recorded ones.
//!
//! ```no_run
//! use memlens::allocator::{drive, fidelity, recorded, settings::Settings};
//! let snap = memlens::load(std::path::Path::new("snapshot.pickle"), &mut |_| {}).unwrap();
//! let dev = &snap.devices[0];
//! let settings = Settings::recorded(&snap).unwrap_or_default();
//! let rec = recorded::read(&snap, dev, &settings);
//! let sc = drive::Scenario { settings, capacity: None, va_bytes: 1 << 40, follow_recorded: true, probe: None, repack_start: false, reorder: Default::default() };
//! let out = drive::run(&snap, &rec, &sc);
//! let agreement = fidelity::compare(&rec.segs, &out.events);
//! println!("peak reserved {} ({} of {} segment events matched)", out.peak_reserved,
//!          agreement.matched, agreement.recorded);
//! ```

pub mod device;
pub mod drive;
pub mod expandable;
pub mod fidelity;
pub mod pool;
pub mod recorded;
pub mod rounding;
pub mod settings;

#[cfg(test)]
mod tests;
