//! Structure-aware, like `mutate_snapshot` (the same edit scripts over the committed samples),
//! but through the output surfaces instead of the text analyses: the report page, the
//! Perfetto export, the slice (read back), the Parquet dataset tables of `batch` and `check`'s
//! Markdown and JUnit, each written to memory with what must hold of it
//! (`outputs_harness.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::outputs(data);
});
