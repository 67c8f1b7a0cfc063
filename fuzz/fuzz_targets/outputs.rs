//! Structure-aware, like `mutate_snapshot` (the same edit scripts over the committed samples),
//! but through the output surfaces instead of the text analyses: the report page, the
//! Perfetto export, the slice (read back), the Parquet dataset tables of `batch` and `check`'s
//! Markdown and JUnit, each written to memory with what must hold of it
//! (`outputs_harness.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlens::model::{build, BuildOptions};

#[path = "edits.rs"]
mod edits;

#[path = "outputs_harness.rs"]
#[allow(dead_code)] // `Written` is read by tests/it/fuzz_outputs.rs, not here
mod outputs_harness;

const SEEDS: [&[u8]; 6] = [
    include_bytes!("../../samples/train_small.pickle"),
    include_bytes!("../../samples/cpp_proto2.pickle"),
    include_bytes!("../../samples/legacy_2_0.pickle"),
    include_bytes!("../../samples/expandable_multi.pickle"),
    include_bytes!("../../samples/wrapped_ring.pickle"),
    include_bytes!("../../samples/retained_graph.pickle"),
];

fuzz_target!(|data: &[u8]| {
    let Some(buf) = edits::apply(&SEEDS, data) else {
        return;
    };
    for salvage in [false, true] {
        let opts = BuildOptions {
            salvage,
            threads: 1,
            ..Default::default()
        };
        if let Ok(snap) = build(&buf, opts) {
            let replays = memlens::replay::replay(&snap);
            let _ = outputs_harness::exercise(&snap, &replays);
        }
    }
});
