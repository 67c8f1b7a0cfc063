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
use memlens::model::{build, build_arriving, Arriving, BuildOptions, Strategy};

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

#[path = "edits.rs"]
mod edits;

/// The integration tests' `canonical` (tests/common/canonical.rs), the same file.
#[path = "../../tests/common/canonical.rs"]
mod canonical;
use canonical::canonical;

/// The samples, and the benchmark layouts that take other paths through both decoders
/// (samples/layouts: PyTorch's memo layout, frame dicts rewritten per entry, the C++ pickler).
const SEEDS: [&[u8]; 8] = [
    include_bytes!("../../samples/train_small.pickle"),
    include_bytes!("../../samples/cpp_proto2.pickle"),
    include_bytes!("../../samples/expandable_multi.pickle"),
    include_bytes!("../../samples/retained_graph.pickle"),
    include_bytes!("../../samples/layouts/torch.pickle"),
    include_bytes!("../../samples/layouts/memo.pickle"),
    include_bytes!("../../samples/layouts/cpp.pickle"),
    include_bytes!("../../samples/layouts/torch_batches.pickle"),
];

fuzz_target!(|data: &[u8]| {
    let Some(buf) = edits::apply(&SEEDS, data) else {
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
            Some(cap) => build_arriving(&Steps { buf: &buf, step, cap }, options),
        };
        match (&want, &got) {
            (Ok(w), Ok(g)) => assert_eq!(
                canonical(w),
                canonical(g),
                "{strategy:?} threads={threads} chunk={chunk} cap={cap:?} step={step}"
            ),
            (Err(_), Err(_)) => {}
            (w, g) => panic!(
                "reference ok={} {strategy:?} ok={}",
                w.is_ok(),
                g.is_ok()
            ),
        }
    }
});
