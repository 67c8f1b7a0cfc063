//! Differential: the same structure-aware edits as `mutate_snapshot`, then the sequential
//! decoder with its fast path for trace entries, and the two-pass parallel decoder (tiny
//! chunks, so chunk boundaries fall everywhere), must each give exactly what the sequential
//! decoder without the fast path (the reference, every opcode through the general loop)
//! gives: the same error-or-success, and the same snapshot once interned ids are replaced by
//! what they name. So must the parallel decoder on input that arrives in steps (as from a
//! decompressing thread), whole or outgrowing its reservation, and with pass 1 split into one
//! region per thread (torch_batches has batch boundaries where regions start).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::parallel_agrees(data);
});
