//! Hand-offs to the tools around memlens: what a snapshot becomes for another program.
//!
//! - [`perfetto`]: counter, span and instant tracks per device for a Chrome trace-event file
//!   (Perfetto UI, `chrome://tracing`), written by `render::perfetto`.
//! - [`slice`]: a smaller snapshot holding a window of the trace and the allocator state at
//!   its end, as the value tree `pickle::write` encodes (PyTorch's viewer, `pickle.load` and
//!   memlens read it).
//!
//! The Parquet dataset's rows, built from other reports, are a composition:
//! [`crate::compose::dataset`].

pub mod perfetto;
pub mod slice;
