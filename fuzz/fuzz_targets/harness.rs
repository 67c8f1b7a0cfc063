//! The body of every fuzz target, each a plain function of the fuzzer's bytes, so that
//! `cargo test` can run them too (`tests/it/fuzz_targets.rs`: seeded pseudo-random inputs
//! for a bounded time each; docs/fuzzing.md says why CI does not run cargo-fuzz itself).
//! Each target in this directory is one line: `fuzz_target!(|data| harness::NAME(data))`.
//! Every function panics on a finding and returns on anything else.
#![allow(dead_code)] // each fuzz binary calls one of them

use memlens::model::{build, build_arriving, Arriving, BuildOptions, Strategy};

#[path = "oracle.rs"]
mod oracle;

#[path = "edits.rs"]
pub mod edits;

#[path = "outputs_harness.rs"]
pub mod outputs_harness;

#[path = "oom_paths_harness.rs"]
pub mod oom_paths_harness;

/// The integration tests' `canonical` (tests/common/canonical.rs), the same file.
#[path = "../../tests/common/canonical.rs"]
mod canonical;
use canonical::canonical;

/// The seeds of the structure-aware targets (`mutate_snapshot`, `outputs`).
pub const SEEDS: [&[u8]; 6] = [
    include_bytes!("../../samples/train_small.pickle"),
    include_bytes!("../../samples/cpp_proto2.pickle"),
    include_bytes!("../../samples/legacy_2_0.pickle"),
    include_bytes!("../../samples/expandable_multi.pickle"),
    include_bytes!("../../samples/wrapped_ring.pickle"),
    include_bytes!("../../samples/retained_graph.pickle"),
];

/// `parallel_agrees`' seeds: the samples, and the benchmark layouts that take other paths
/// through both decoders (samples/layouts: PyTorch's memo layout, frame dicts rewritten per
/// entry, the C++ pickler).
pub const PARALLEL_SEEDS: [&[u8]; 8] = [
    include_bytes!("../../samples/train_small.pickle"),
    include_bytes!("../../samples/cpp_proto2.pickle"),
    include_bytes!("../../samples/expandable_multi.pickle"),
    include_bytes!("../../samples/retained_graph.pickle"),
    include_bytes!("../../samples/layouts/torch.pickle"),
    include_bytes!("../../samples/layouts/memo.pickle"),
    include_bytes!("../../samples/layouts/cpp.pickle"),
    include_bytes!("../../samples/layouts/torch_batches.pickle"),
];

/// `decode`: arbitrary bytes through the decoder and the model builder, normally and with
/// salvage; whatever builds must also analyze, and its totals, added up again in u128, must
/// stay within the bound and agree with the summary and the replay (`oracle.rs`).
pub fn decode(data: &[u8]) {
    for salvage in [false, true] {
        let opts = BuildOptions {
            salvage,
            threads: 1,
            ..Default::default()
        };
        if let Ok(snap) = build(data, opts) {
            let replays = memlens::replay::replay(&snap);
            oracle::check(&snap, &replays);
            let _ = memlens::analyze::summary::run(&snap);
            let _ = memlens::analyze::top::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::frag::run(&snap, &replays, &Default::default());
        }
    }
    let _ = memlens::input::json_to_pickle(data);
}

/// `mutate_snapshot`: the bytes steer opcode-level edits of the committed samples
/// (`edits.rs`), so mutations land inside valid pickles and reach the model builder, the
/// replay and every analysis; whatever builds also goes through the overflow oracle.
pub fn mutate_snapshot(data: &[u8]) {
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
            oracle::check(&snap, &replays);
            let _ = memlens::analyze::summary::run(&snap);
            let _ = memlens::analyze::top::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::frag::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::leaks::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::categories::run(&snap, &replays, &Default::default());
            let _ = memlens::compose::oom::run(&snap, &replays, &Default::default());
        }
    }
}

/// `outputs`: the same edit scripts, through the output surfaces (`outputs_harness.rs`).
pub fn outputs(data: &[u8]) {
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
}

/// `oom_paths`: small OOM traces through `oom`, `fit`, `whatif --suggest` and `report`
/// (`oom_paths_harness.rs`).
pub fn oom_paths(data: &[u8]) -> oom_paths_harness::Reached {
    oom_paths_harness::run(data)
}

/// Input handed out in prefixes of whole `step`s, never more than `cap` bytes but by `all`.
struct Steps<'a> {
    buf: &'a [u8],
    step: usize,
    cap: usize,
}

impl Arriving for Steps<'_> {
    fn upto(&self, n: usize) -> &[u8] {
        let end = n.div_ceil(self.step).saturating_mul(self.step);
        &self.buf[..end.min(self.cap).min(self.buf.len())]
    }
    fn all(&self) -> &[u8] {
        self.buf
    }
    fn capacity(&self) -> usize {
        self.cap
    }
}

/// `parallel_agrees`, differential: after the same edits, the sequential decoder with its
/// fast path for trace entries, and the two-pass parallel decoder (tiny chunks, so chunk
/// boundaries fall everywhere), must each give exactly what the sequential decoder without
/// the fast path gives: the same error-or-success, and the same snapshot once interned ids
/// are replaced by what they name. So must the parallel decoder on input that arrives in
/// steps, whole or outgrowing its reservation, and with pass 1 split into one region per
/// thread.
pub fn parallel_agrees(data: &[u8]) {
    let Some(buf) = edits::apply(&PARALLEL_SEEDS, data) else {
        return;
    };
    let opts = |strategy, threads, chunk_bytes, no_fast_entries| BuildOptions {
        strategy,
        threads,
        chunk_bytes,
        no_fast_entries,
        // Pass 1 split into one region per thread, as small as the input allows.
        split_regions: threads,
        split_bytes: 1,
        ..Default::default()
    };
    let want = build(&buf, opts(Strategy::Sequential, 1, 0, true));
    let step = 1 + data.first().map_or(0, |&b| b as usize) * 13;
    for (strategy, threads, chunk, cap) in [
        (Strategy::Sequential, 1, 0, None),
        (Strategy::Parallel, 2, 64, None),
        (Strategy::Parallel, 2, 4096, None),
        (Strategy::Parallel, 3, 64, None),
        (Strategy::Parallel, 2, 64, Some(buf.len())),
        (Strategy::Parallel, 2, 64, Some(buf.len() * 2 / 3)),
    ] {
        let options = opts(strategy, threads, chunk, false);
        let got = match cap {
            None => build(&buf, options),
            Some(cap) => build_arriving(
                &Steps {
                    buf: &buf,
                    step,
                    cap,
                },
                options,
            ),
        };
        match (&want, &got) {
            (Ok(w), Ok(g)) => assert_eq!(
                canonical(w),
                canonical(g),
                "{strategy:?} threads={threads} chunk={chunk} cap={cap:?} step={step}"
            ),
            (Err(_), Err(_)) => {}
            (w, g) => panic!("reference ok={} {strategy:?} ok={}", w.is_ok(), g.is_ok()),
        }
    }
}
