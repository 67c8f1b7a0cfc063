//! Structure-aware: the fuzzer's bytes steer opcode-level edits of real-layout snapshots
//! (the committed samples), so mutations land inside valid pickles — a changed integer, a
//! swapped opcode, a duplicated or dropped element, a size near 2^60 or 2^64 — and reach the
//! model builder, the replay and every analysis instead of dying in the first bytes. Whatever
//! builds also goes through the overflow oracle (`oracle.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::mutate_snapshot(data);
});
