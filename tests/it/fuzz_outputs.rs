//! The `outputs` fuzz target's harness (`fuzz/fuzz_targets/outputs_harness.rs`), run in
//! `cargo test`: the fuzz crate is never built here, so this keeps the harness compiling
//! against the library, and runs its properties (the page's script elements, the Perfetto
//! trace as JSON, the slice read back, Parquet files, `check`'s Markdown lines) over every
//! sample and over fixed edit scripts of the fuzz target's seeds.

use crate::common;
use common::*;
use memlens::model::{build, BuildOptions};

#[path = "../../fuzz/fuzz_targets/outputs_harness.rs"]
mod outputs_harness;

#[path = "../../fuzz/fuzz_targets/edits.rs"]
#[allow(dead_code)]
mod edits;

use outputs_harness::{exercise, Written};

/// Adds up what the harness wrote.
fn add(total: &mut Written, w: Written) -> (usize, usize, usize, usize) {
    total.slices += w.slices;
    total.tables += w.tables;
    (
        usize::from(w.page),
        usize::from(w.perfetto),
        usize::from(w.check),
        w.slices,
    )
}

#[test]
fn every_sample_goes_through_every_output() {
    let mut total = Written::default();
    let (mut pages, mut traces, mut checks, mut n) = (0, 0, 0, 0);
    for path in samples() {
        let snap =
            memlens::load(&path, &mut |_| {}).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let replays = memlens::replay::replay(&snap);
        let w = exercise(&snap, &replays);
        // Every sample writes its Parquet tables: the five of the file and the failed file's.
        assert!(w.tables >= 6, "{}: {w:?}", path.display());
        let (p, t, c, _) = add(&mut total, w);
        pages += p;
        traces += t;
        checks += c;
        n += 1;
    }
    assert!(n >= 20, "expected the committed samples, found {n}");
    // Each surface is reached by most samples (some have no trace: no page moment, no slice).
    assert!(pages * 2 > n, "pages {pages} of {n}");
    assert!(traces * 2 > n, "Perfetto traces {traces} of {n}");
    assert!(checks * 2 > n, "check reports {checks} of {n}");
    assert!(total.slices > n, "slices {} of {n} samples", total.slices);
}

const SEEDS: [&[u8]; 6] = [
    include_bytes!("../../samples/train_small.pickle"),
    include_bytes!("../../samples/cpp_proto2.pickle"),
    include_bytes!("../../samples/legacy_2_0.pickle"),
    include_bytes!("../../samples/expandable_multi.pickle"),
    include_bytes!("../../samples/wrapped_ring.pickle"),
    include_bytes!("../../samples/retained_graph.pickle"),
];

/// The fuzz target's loop over fixed edit scripts (a linear congruential sequence of 1 to 4
/// edits each): mutated snapshots that still build go through every output.
#[test]
fn edited_seeds_go_through_every_output() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as u8
    };
    let mut built = 0;
    let mut total = Written::default();
    for i in 0..240usize {
        let mut data = vec![i as u8];
        for _ in 0..4 * (1 + i % 4) {
            data.push(next());
        }
        let Some(buf) = edits::apply(&SEEDS, &data) else {
            continue;
        };
        for salvage in [false, true] {
            let opts = BuildOptions {
                salvage,
                threads: 1,
                ..Default::default()
            };
            if let Ok(snap) = build(&buf, opts) {
                let replays = memlens::replay::replay(&snap);
                add(&mut total, exercise(&snap, &replays));
                built += 1;
            }
        }
    }
    assert!(built >= 100, "only {built} edited snapshots built");
    assert!(total.slices >= built, "slices {} of {built}", total.slices);
}

/// Found by the harness: `slice --to peak` where the peak is the state before the first event
/// (`legacy_2_0.pickle`: its one trace entry allocates nothing) panicked on the range 0..=-1
/// (exit 101). The window holds no entries; the slice is the allocator state there.
#[test]
fn slice_to_a_peak_before_the_first_event_is_the_state_there() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("start.pickle");
    let o = memlens([
        "slice".as_ref(),
        sample("legacy_2_0.pickle").as_os_str(),
        "--to".as_ref(),
        "peak".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = &r["devices"][0];
    assert_eq!(d["window"], serde_json::json!({"first": -1, "last": -1}));
    assert_eq!(d["entries"], 0);
    // The state before the first event is the final state (the entry changes nothing):
    // summary's figures of the original file.
    let whole = summary_json(&sample("legacy_2_0.pickle"));
    let sliced = summary_json(&out);
    for key in [
        "reserved_bytes",
        "allocated_bytes",
        "requested_bytes",
        "segments",
        "blocks",
    ] {
        assert_eq!(sliced["devices"][0][key], whole["devices"][0][key], "{key}");
    }
    assert_eq!(whole["devices"][0]["reserved_bytes"], 383_778_816);
    assert_eq!(sliced["devices"][0]["trace_entries"], 0);
}

/// Found by the harness: `check --format md` replaced `\n` in a file or frame name but not
/// `\r`, which CommonMark also reads as a line ending: a file named `a\rb.pickle` split its
/// heading, and a frame name its table row.
#[cfg(unix)]
#[test]
fn check_markdown_keeps_a_carriage_return_inside_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a\rb.pickle");
    std::fs::copy(sample("train_small.pickle"), &path).unwrap();
    let o = memlens([
        "check".as_ref(),
        path.as_os_str(),
        "--max-peak".as_ref(),
        "40GiB".as_ref(),
        "--format".as_ref(),
        "md".as_ref(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(!md.contains('\r'), "{md:?}");
    let heading: Vec<&str> = md.lines().filter(|l| l.starts_with("### ")).collect();
    assert_eq!(heading.len(), 1, "{md}");
    assert!(
        heading[0].starts_with("### ✅ `") && heading[0].ends_with("b.pickle`"),
        "{md}"
    );
}

/// Found by the `outputs` target (4 min, 18k runs): an edited `train_small.pickle`, read with
/// `--salvage`, has a segment whose one inactive block does not cover it; the page's
/// fragmentation at a moment counted the whole segment as releasable, more than its free
/// bytes, and `free - releasable` overflowed (a panic where overflow is checked, as in
/// `cargo test` without `--release` and in the fuzz build; wrapped stranded bytes otherwise).
/// Releasable bytes are now at most the free ones.
#[test]
fn a_segment_its_blocks_do_not_cover_releases_at_most_its_free_bytes() {
    // The fuzzer's input: byte 0 picks the seed (train_small), then six 4-byte edits.
    let data: [u8; 26] = [
        0x00, 0x0b, 0xdb, 0xdb, 0xdb, 0xdb, 0xdb, 0xdb, 0xdb, 0xdb, 0xdb, 0xdb, 0xdb, 0xdb, 0xdb,
        0x7a, 0x00, 0x00, 0x00, 0x80, 0x00, 0x01, 0x7c, 0x20, 0x31, 0x76,
    ];
    let buf = edits::apply(&SEEDS, &data).expect("the edits apply");
    let opts = BuildOptions {
        salvage: true,
        threads: 1,
        ..Default::default()
    };
    let snap = build(&buf, opts).expect("salvage reads the edited file");
    let replays = memlens::replay::replay(&snap);
    let w = exercise(&snap, &replays);
    assert!(w.page, "the page of the edited file is written: {w:?}");
    let trace = snap.device_trace(&snap.devices[0]).len() as i64;
    for i in -1..trace {
        let opts = memlens::analyze::frag::FragOptions {
            at: memlens::replay::MomentSpec::Index(i),
            ..Default::default()
        };
        let Ok(r) = memlens::analyze::frag::run(&snap, &replays, &opts) else {
            continue;
        };
        for d in &r.devices {
            for p in std::iter::once(&d.total).chain(&d.pools) {
                assert!(p.releasable_bytes <= p.free_bytes, "event {i}: {p:?}");
                assert_eq!(
                    p.releasable_bytes.checked_add(p.stranded_free_bytes),
                    Some(p.free_bytes),
                    "event {i}"
                );
            }
        }
    }
}
