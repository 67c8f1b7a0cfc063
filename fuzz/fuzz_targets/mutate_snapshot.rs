//! Structure-aware: the fuzzer's bytes steer opcode-level edits of real-layout snapshots
//! (the committed samples), so mutations land inside valid pickles — a changed integer, a
//! swapped opcode, a duplicated or dropped element, a size near 2^60 or 2^64 — and reach the
//! model builder, the replay and every analysis instead of dying in the first bytes. Whatever
//! builds also goes through the overflow oracle (`oracle.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlens::model::{build, BuildOptions};

#[path = "oracle.rs"]
mod oracle;

#[path = "edits.rs"]
mod edits;

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
        if let Ok(snap) = build(&buf, BuildOptions { salvage, threads: 1, ..Default::default() }) {
            let replays = memlens::replay::replay(&snap);
            oracle::check(&snap, &replays);
            let _ = memlens::analyze::summary::run(&snap);
            let _ = memlens::analyze::top::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::frag::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::leaks::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::categories::run(&snap, &replays, &Default::default());
            let _ = memlens::compose::oom::run(&snap, &replays, &Default::default());
        }
    }
});
