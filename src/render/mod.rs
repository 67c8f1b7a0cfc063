//! Renderers: report values → text, tables or JSON. Renderers never compute numbers; a missing
//! number belongs in the report.

pub mod batch;
pub mod categories;
pub mod check;
pub mod diff;
pub mod diff_lines;
pub mod diff_md;
pub mod explain;
pub mod fit;
pub mod flame;
pub mod frag;
pub mod html;
pub mod json;
pub mod layout;
pub mod leaks;
pub mod lines;
pub mod markdown;
pub mod oom;
pub mod parquet;
pub mod perfetto;
pub mod pinners;
pub mod slice;
pub mod summary;
pub mod text;
pub mod visible;
pub mod wrap;
pub use crate::units;
pub mod timeline;
pub mod top;
pub mod whatif;
