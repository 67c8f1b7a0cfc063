//! Every fuzz target's body (`fuzz/fuzz_targets/harness.rs`), run in `cargo test` over a fixed
//! number of seeded pseudo-random inputs each (a few seconds apiece in release): CI cannot
//! afford to build cargo-fuzz and the sanitized targets (docs/fuzzing.md, "In CI"), so this is
//! how it runs each fuzzer for a bounded time, and how the harnesses keep compiling against
//! the library. An input that panics fails the test with its bytes in the message, ready to
//! replay with `cargo fuzz run TARGET FILE`.

use memlens::model::{build, BuildOptions};

#[path = "../../fuzz/fuzz_targets/harness.rs"]
mod harness;

use harness::oom_paths_harness::Reached;

/// `count` inputs of 1 to `max_len` bytes from a linear congruential sequence seeded with
/// `seed`, each given to `body`; the input that panics is named.
fn drive(name: &str, seed: u64, count: usize, max_len: usize, mut body: impl FnMut(&[u8])) {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as u8
    };
    for i in 0..count {
        let len = 1 + next() as usize % max_len;
        let data: Vec<u8> = (0..len).map(|_| next()).collect();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&data)));
        assert!(r.is_ok(), "{name}: input {i} panicked: {data:?}");
    }
}

#[test]
fn decode_runs_on_seeded_inputs() {
    // Arbitrary bytes mostly fail in the first opcodes; a pickle prefix takes them further.
    drive("decode", 1, 3000, 64, harness::decode);
    drive("decode", 2, 3000, 64, |d| {
        let mut v = vec![0x80, 4, b'}', 0x94, b'('];
        v.extend_from_slice(d);
        harness::decode(&v);
    });
}

#[test]
fn mutate_snapshot_runs_on_seeded_inputs() {
    drive("mutate_snapshot", 3, 60, 16, harness::mutate_snapshot);
}

#[test]
fn outputs_runs_on_seeded_inputs() {
    drive("outputs", 4, 30, 16, harness::outputs);
}

#[test]
fn parallel_agrees_runs_on_seeded_inputs() {
    drive("parallel_agrees", 5, 30, 16, harness::parallel_agrees);
}

#[test]
fn oom_paths_runs_on_seeded_inputs_and_reaches_every_path() {
    let mut total = Reached::default();
    let mut n = 0;
    drive("oom_paths", 6, 400, 48, |d| {
        let r = harness::oom_paths(d);
        total.built |= r.built;
        n += usize::from(r.built);
        total.ooms += r.ooms;
        total.fits += r.fits;
        total.whatif |= r.whatif;
        total.page |= r.page;
    });
    // Most generated snapshots build, and each path is reached.
    assert!(n > 250, "only {n} of 400 built");
    assert!(
        total.ooms >= n,
        "OOMs found {} in {n} snapshots",
        total.ooms
    );
    assert!(total.fits >= n, "fit reports {} in {n}", total.fits);
    assert!(total.whatif && total.page, "{total:?}");
}

/// Issue 53's file through the harness: a 2 MiB segment, 512 bytes allocated, an OOM of 1 GiB
/// (and larger) with nothing free, under the default and the expandable settings: every path
/// answers (the expandable replay of `fit` at the OOM once followed the end of a segment's
/// chain of blocks and panicked).
#[test]
fn the_small_oom_of_issue_53_goes_through_every_path() {
    for conf in ["", "expandable_segments:True"] {
        for oom in [1u64 << 30, 1 << 40, 1 << 59] {
            let json =
                serde_json::to_vec(&harness::oom_paths_harness::small_oom(oom, conf)).unwrap();
            let pickle = memlens::input::json_to_pickle(&json).unwrap();
            let snap = build(&pickle, BuildOptions::default()).expect("builds");
            for cap in [None, Some(80u64 << 30)] {
                let r = harness::oom_paths_harness::exercise(&snap, cap);
                assert_eq!(r.ooms, 1, "{conf:?} {oom} {cap:?}: {r:?}");
                // Every moment but `oom:2` (there is one OOM).
                assert_eq!(r.fits, 5, "{conf:?} {oom} {cap:?}: {r:?}");
                assert!(r.whatif && r.page, "{conf:?} {oom} {cap:?}: {r:?}");
            }
        }
    }
}
