//! Analyses: each takes a [`crate::model::Snapshot`] (and its replays) and returns a plain,
//! serializable report value, one folder each. An analysis may use the shared vocabulary
//! ([`crate::vocab`]) and other analyses, never a composition ([`crate::compose`]). Nothing
//! here formats or prints.

pub mod categories;
pub mod diff;
pub mod explain;
pub mod export;
pub mod fit;
pub mod flame;
pub mod frag;
pub mod leaks;
pub mod lines;
pub mod oom;
pub mod phase;
pub mod pinners;
pub mod predict;
pub mod pretrace;
pub mod profile;
pub mod summary;
pub mod timeline;
pub mod top;
pub mod whatif;

/// Version of every JSON report's schema; fields are only ever added.
pub const SCHEMA_VERSION: u32 = 1;
