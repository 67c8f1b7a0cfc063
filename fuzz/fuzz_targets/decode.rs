//! Arbitrary bytes through the decoder and the model builder, normally and with salvage;
//! whatever builds must also analyze, and its totals, added up again in u128, must stay within
//! the bound and agree with the summary and the replay (`oracle.rs`). The only acceptable
//! outcomes are Ok and Err.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlens::model::{build, BuildOptions};

#[path = "oracle.rs"]
mod oracle;

fuzz_target!(|data: &[u8]| {
    for salvage in [false, true] {
        let opts = BuildOptions { salvage, threads: 1, ..Default::default() };
        if let Ok(snap) = build(data, opts) {
            let replays = memlens::replay::replay(&snap);
            oracle::check(&snap, &replays);
            let _ = memlens::analyze::summary::run(&snap);
            let _ = memlens::analyze::top::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::frag::run(&snap, &replays, &Default::default());
        }
    }
    let _ = memlens::input::json_to_pickle(data);
});
