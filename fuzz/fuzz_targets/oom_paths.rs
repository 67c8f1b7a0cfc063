//! Small out-of-memory traces, steered by the fuzzer's bytes, through `oom` (with `fit` at the
//! OOM), `fit`, `whatif --suggest` and the `report` page: the paths that replay the caching
//! allocator model (`oom_paths_harness.rs`; issue 53).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    let _ = harness::oom_paths(data);
});
