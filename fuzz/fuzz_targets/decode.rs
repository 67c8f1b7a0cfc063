//! Arbitrary bytes through the decoder and the model builder, normally and with salvage;
//! whatever builds must also analyze, and its totals, added up again in u128, must stay within
//! the bound and agree with the summary and the replay (`oracle.rs`). The only acceptable
//! outcomes are Ok and Err.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::decode(data);
});
