//! Compositions: reports built from other reports. The OOM report with its fit ([`oom`]), the
//! HTML page's report ([`page`]), a fleet of snapshots ranked ([`batch`]) and compared rank
//! against rank ([`cross_rank`]), CI gates
//! ([`check`]) and the Parquet dataset's rows ([`dataset`]), read back by
//! [`dataset_read`]. A composition may import
//! analyses ([`crate::analyze`]) and the vocabulary ([`crate::vocab`]); no analysis imports a
//! composition.

pub mod batch;
pub mod check;
pub mod cross_rank;
pub mod dataset;
pub mod dataset_read;
pub mod oom;
pub mod page;
pub mod runs;
