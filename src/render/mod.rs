//! Renderers: report values → text, tables or JSON. Renderers never compute numbers; a missing
//! number belongs in the report.

pub mod explain;
pub mod json;
pub mod summary;
pub mod units;
