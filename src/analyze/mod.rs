//! Analyses: each takes a [`crate::model::Snapshot`] and returns a plain, serializable report
//! value. Nothing here formats or prints.

pub mod absence;
pub mod advice;
pub mod batch;
pub mod categories;
pub mod check;
pub mod devices;
pub mod diff;
pub mod explain;
pub mod export;
pub mod fit;
pub mod gpus;
pub mod leaks;
pub mod oom;
pub mod predict;
pub mod pretrace;
pub mod profile;
pub mod summary;

/// Version of every JSON report's schema; fields are only ever added.
pub const SCHEMA_VERSION: u32 = 1;
pub mod flame;
pub mod frag;
pub mod page;
pub mod sites;
pub mod timeline;
pub mod top;
pub mod whatif;
