//! `memlens lines`: memory per user source line.
//!
//! - `samples/lines/nested_lines.pickle` (samples/gen/memgen/lines.py) against the figures of
//!   its construction: written out below by hand, and every line against
//!   `samples/truth/lines.json`, at the peak, at the end and allocated over the trace;
//! - every sample, capture and real snapshot against an oracle computed here from the raw
//!   stacks, allocation by allocation (no per-stack cache, its own reading of forward frames
//!   and FX traces): each line's self, total and allocations, Σ self = framed, and framed +
//!   unattributed = what `top` counts at the same moment (live) or over the trace (allocated);
//! - the text, the annotated source of `--source-root`, what cannot be judged, bad input.

use crate::common;
use common::*;
use memlens::model::{Snapshot, StackId};
use memlens::replay::{self, NEVER};
use memlens::vocab::sites::kinds::{self, Kind};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const NESTED: &str = "samples/lines/nested_lines.pickle";
const USER: &str = "/home/user/proj/";
const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

/// `lines ARGS --format json FILE`, exit 0.
fn lines_json(args: &[&str], file: &str) -> Value {
    let mut a = vec!["lines"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--format", "json", file]);
    json_ok(&a)
}

/// The row of `file:line` (file under the sample's user directory).
fn row<'a>(d: &'a Value, file: &str, line: i64) -> &'a Value {
    d["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["file"] == format!("{USER}{file}") && l["line"] == line)
        .unwrap_or_else(|| panic!("no row {file}:{line}"))
}

/// (self, total) of `file:line`.
fn st(d: &Value, file: &str, line: i64) -> (u64, u64) {
    let r = row(d, file, line);
    (as_u64(&r["self_bytes"]), as_u64(&r["total_bytes"]))
}

#[test]
fn nested_lines_at_the_peak_are_the_construction() {
    let r = lines_json(&[], NESTED);
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["cost"], "live");
    let d = &r["devices"][0];
    // Written from the construction: parameters 4 + 2 MiB (model.py:8, :9 under
    // train.py:12), x 1 MiB (train.py:19), two blocks of 8 MiB (blocks.py:16 under model.py:31
    // and :32; their 1 MiB temporaries freed), the recursion 256 + 512 KiB (model.py:41 under
    // model.py:42 once and twice, under model.py:33), the forward's 2 MiB (model.py:34), the
    // loss 128 KiB (inside torch, under train.py:22); 3 MiB without a stack and 1 MiB of C++
    // frames only.
    let framed = 6 * MIB + MIB + 16 * MIB + 768 * KIB + 2 * MIB + 128 * KIB;
    assert_eq!(as_u64(&d["framed_bytes"]), framed);
    assert_eq!(as_u64(&d["unattributed_bytes"]), 4 * MIB);
    assert_eq!(as_u64(&d["counted_bytes"]), framed + 4 * MIB);
    assert_eq!(st(d, "train.py", 50), (0, framed));
    assert_eq!(st(d, "train.py", 20), (0, 16 * MIB + 768 * KIB + 2 * MIB));
    assert_eq!(st(d, "train.py", 12), (0, 6 * MIB));
    assert_eq!(st(d, "train.py", 22), (128 * KIB, 128 * KIB));
    assert_eq!(st(d, "blocks.py", 16), (16 * MIB, 16 * MIB));
    assert_eq!(as_u64(&row(d, "blocks.py", 16)["allocations"]), 2);
    assert_eq!(st(d, "model.py", 31), (0, 8 * MIB));
    assert_eq!(st(d, "model.py", 32), (0, 8 * MIB));
    // The recursive line counts each allocation once, however often it is on the stack.
    assert_eq!(st(d, "model.py", 42), (0, 768 * KIB));
    assert_eq!(as_u64(&row(d, "model.py", 42)["allocations"]), 2);
    assert_eq!(st(d, "model.py", 41), (768 * KIB, 768 * KIB));
    assert_eq!(row(d, "model.py", 41)["function"], "tree");
    assert!(d["lines"].as_array().unwrap().iter().all(|l| !l["file"]
        .as_str()
        .unwrap()
        .contains("blocks.py")
        || l["line"] == 16));
    let why: BTreeMap<String, u64> = d["unattributed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["reason"].as_str().unwrap().to_string(),
                as_u64(&u["bytes"]),
            )
        })
        .collect();
    assert_eq!(
        why,
        BTreeMap::from([("no_frames".into(), 3 * MIB), ("no_user_frame".into(), MIB)])
    );
    // The order: total, then self.
    let order: Vec<(u64, u64)> = d["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (as_u64(&l["total_bytes"]), as_u64(&l["self_bytes"])))
        .collect();
    assert!(order.windows(2).all(|w| w[0] >= w[1]), "{order:?}");
    assert_eq!(d["judgement"]["state"], "found");
}

#[test]
fn nested_lines_match_the_truth_at_every_cost() {
    let truth = truth("lines");
    let t = &truth["lines/nested_lines.pickle"];
    for (args, key) in [
        (vec![], "live_peak"),
        (vec!["--at", "end"], "live_end"),
        (vec!["--cost", "allocated"], "allocated"),
    ] {
        let r = lines_json(&args, NESTED);
        let d = &r["devices"][0];
        let want = &t[key];
        assert_eq!(d["framed_bytes"], want["framed_bytes"], "{key}");
        assert_eq!(d["unattributed_bytes"], want["unattributed_bytes"], "{key}");
        let got: BTreeMap<String, (u64, u64)> = d["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                (
                    format!("{}:{}", l["file"].as_str().unwrap(), l["line"]),
                    (as_u64(&l["self_bytes"]), as_u64(&l["total_bytes"])),
                )
            })
            .collect();
        let want: BTreeMap<String, (u64, u64)> = want["lines"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    (as_u64(&v["self_bytes"]), as_u64(&v["total_bytes"])),
                )
            })
            .collect();
        assert_eq!(got, want, "{key}");
    }
    // Allocated over the trace: the freed temporaries of blocks.py:17 too.
    let d = &lines_json(&["--cost", "allocated"], NESTED)["devices"][0];
    assert_eq!(st(d, "blocks.py", 17), (2 * MIB, 2 * MIB));
    assert_eq!(st(d, "model.py", 31), (0, 9 * MIB));
}

/// One line's figures in the oracle: self, total, allocations.
type Figures = (u64, u64, u64);

/// The distinct user lines of `stack`, the self line first, read from the raw frames: the
/// forward part (after the forward marker) first, then the stack's own; in each, an FX node's
/// original trace stands for the generated code before the first user frame.
fn oracle_lines(snap: &Snapshot, stack: StackId) -> Vec<(String, i64)> {
    let frames = snap.stacks.get(stack);
    let cut = snap
        .forward_marker
        .and_then(|m| frames.iter().position(|&f| f == m));
    let (own, forward) = match cut {
        Some(i) => (&frames[..i], &frames[i + 1..]),
        None => (frames, &frames[..0]),
    };
    let user = |f: memlens::model::FrameId| {
        let fr = snap.frames.get(f);
        (kinds::kind(snap.strings.get(fr.filename), snap.strings.get(fr.name)) == Kind::User)
            .then(|| (snap.strings.get(fr.filename).to_string(), fr.line))
    };
    let mut out: Vec<(String, i64)> = Vec::new();
    for part in [forward, own] {
        let mut inside = false;
        for &f in part {
            if let Some(l) = user(f) {
                inside = true;
                out.push(l);
            } else if !inside {
                if let Some(orig) = snap.fx_stack(snap.frames.get(f).fx) {
                    out.extend(snap.stacks.get(orig).iter().filter_map(|&g| user(g)));
                    inside = true;
                }
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|l| seen.insert(l.clone()));
    out
}

/// Per line (`file:line`) the figures of `allocs` (stack, bytes), and (framed, unattributed).
fn oracle(
    snap: &Snapshot,
    allocs: impl Iterator<Item = (StackId, u64)>,
) -> (BTreeMap<String, Figures>, u64, u64) {
    let mut m: BTreeMap<String, Figures> = BTreeMap::new();
    let (mut framed, mut unattributed) = (0, 0);
    for (stack, bytes) in allocs {
        let ls = oracle_lines(snap, stack);
        if ls.is_empty() {
            unattributed += bytes;
            continue;
        }
        framed += bytes;
        for (i, (f, l)) in ls.iter().enumerate() {
            let e = m.entry(format!("{f}:{l}")).or_default();
            if i == 0 {
                e.0 += bytes;
            }
            e.1 += bytes;
            e.2 += 1;
        }
    }
    (m, framed, unattributed)
}

/// The figures of a device of `lines --format json`.
fn reported(d: &Value) -> BTreeMap<String, Figures> {
    d["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                format!("{}:{}", l["file"].as_str().unwrap(), l["line"]),
                (
                    as_u64(&l["self_bytes"]),
                    as_u64(&l["total_bytes"]),
                    as_u64(&l["allocations"]),
                ),
            )
        })
        .collect()
}

/// Every file the oracle test reads: samples, the lines sample, captures, real snapshots.
fn every_file() -> Vec<PathBuf> {
    let mut files = samples();
    files.push(root().join(NESTED));
    files.extend(captured());
    files.extend(require_shared().unwrap_or_default());
    files
}

/// One file against the oracle, at the peak (live) and over the trace (allocated).
fn check_file(path: &Path) {
    let snap = memlens::load(path, &mut |_| {}).unwrap();
    let replays = replay::replay(&snap);
    let name = path.display().to_string();
    for (cost, top_args) in [
        ("live", vec!["top"]),
        ("allocated", vec!["top", "--cost", "allocated"]),
    ] {
        let got = json_report(&["lines", "--cost", cost], path);
        let top = json_report(&top_args, path);
        let devs = got["devices"].as_array().unwrap();
        for d in devs.iter().filter(|d| d["basis"] == "trace") {
            let dev = as_u64(&d["device"]) as u32;
            let r = replays.iter().find(|r| r.device == dev).unwrap();
            let allocs: Vec<(StackId, u64)> = r
                .allocations
                .iter()
                .filter(|a| match cost {
                    "live" => a.live_at(r.peak),
                    _ => a.start >= 0,
                })
                .map(|a| (a.stack, a.size))
                .collect();
            let (want, framed, unattributed) = oracle(&snap, allocs.into_iter());
            assert_eq!(reported(d), want, "{name} device {dev} {cost}");
            let self_sum: u64 = want.values().map(|f| f.0).sum();
            assert_eq!(as_u64(&d["framed_bytes"]), framed, "{name} {dev} {cost}");
            assert_eq!(self_sum, framed, "{name} {dev} {cost}");
            assert_eq!(as_u64(&d["unattributed_bytes"]), unattributed, "{name}");
            let t = top["devices"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["device"] == dev)
                .unwrap();
            let counted = if cost == "live" {
                assert_eq!(d["at"]["event_index"], r.peak, "{name}");
                as_u64(&t["live_requested_bytes"])
            } else {
                as_u64(&t["total"])
            };
            assert_eq!(framed + unattributed, counted, "{name} {dev} {cost}: top");
        }
        for d in devs.iter().filter(|d| d["basis"] == "final_state") {
            let dev = snap.device(as_u64(&d["device"]) as u32).unwrap();
            if cost != "live" {
                assert_eq!(d["judgement"]["state"], "cannot_judge", "{name}");
                continue;
            }
            let blocks = snap.live_blocks(dev).map(|b| (b.stack, b.requested_size));
            let (want, framed, unattributed) = oracle(&snap, blocks);
            assert_eq!(reported(d), want, "{name} final state");
            assert_eq!(as_u64(&d["framed_bytes"]), framed, "{name}");
            assert_eq!(as_u64(&d["unattributed_bytes"]), unattributed, "{name}");
        }
    }
}

#[test]
fn every_file_matches_the_oracle_from_raw_stacks() {
    let files = every_file();
    assert!(files.len() > 50, "{} files", files.len());
    for f in &files {
        check_file(f);
    }
}

#[test]
fn lifetime_is_bytes_times_microseconds_to_the_free_or_the_end() {
    let path = root().join(NESTED);
    let snap = memlens::load(&path, &mut |_| {}).unwrap();
    let r = &replay::replay(&snap)[0];
    let trace = snap.device_trace(&snap.devices[0]);
    let time = |i: i64| trace[i.max(0) as usize].time().unwrap();
    let last = trace.len() as i64 - 1;
    let allocs = r.allocations.iter().map(|a| {
        let end = if a.end == NEVER { last } else { a.end };
        (a.stack, a.size * (time(end) - time(a.start)) as u64)
    });
    let (want, framed, unattributed) = oracle(&snap, allocs);
    let got = lines_json(&["--cost", "lifetime"], NESTED);
    let d = &got["devices"][0];
    assert_eq!(d["unit"], "byte_us");
    assert_eq!(reported(d), want);
    assert_eq!(as_u64(&d["framed_bytes"]), framed);
    assert_eq!(as_u64(&d["unattributed_bytes"]), unattributed);
    assert!(framed > 0 && unattributed > 0);
}

#[test]
fn what_cannot_be_judged_says_why() {
    // No time_us (PyTorch 2.0): no lifetime.
    let r = lines_json(&["--cost", "lifetime"], "samples/legacy_2_0.pickle");
    let d = &r["devices"][0];
    assert_eq!(d["judgement"]["state"], "cannot_judge");
    assert!(d["judgement"]["why"].as_str().unwrap().contains("time_us"));
    assert_eq!(d["lines"].as_array().unwrap().len(), 0);
    // No trace: the live cost reads the final blocks; the others cannot be judged.
    let live = lines_json(&[], "samples/state_only.pickle");
    assert!(live["devices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["basis"] == "final_state"));
    let alloc = lines_json(&["--cost", "allocated"], "samples/state_only.pickle");
    for d in alloc["devices"].as_array().unwrap() {
        assert_eq!(d["judgement"]["state"], "cannot_judge");
        assert!(d["judgement"]["why"].as_str().unwrap().contains("no trace"));
    }
    let o = memlens_in_root(["lines", "--cost", "allocated", "samples/state_only.pickle"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("cannot judge: device"));
}

#[test]
fn text_shows_the_hottest_lines_and_the_totals() {
    let o = memlens_in_root(["lines", "--top", "5", NESTED]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.starts_with(NESTED), "{text}");
    assert!(
        text.contains("Device 0 — live at peak (after event"),
        "{text}"
    );
    assert!(text.contains("29.88 MiB counted"), "{text}");
    assert!(
        text.contains("25.88 MiB under 14 user lines; 4.00 MiB without a user line"),
        "{text}"
    );
    assert!(text.contains("3.00 MiB: no stack recorded for the allocation (1 allocation)"));
    assert!(text.contains("5 of 14 lines shown"), "{text}");
    // Paths below the snapshot's user directory, as sites are shortened.
    let first = text
        .lines()
        .find(|l| l.contains("train.py:50"))
        .expect("the outermost line is first");
    assert!(
        first.contains("<module>") && first.contains("25.88 MiB"),
        "{first}"
    );
    assert!(!text.contains("/home/user/proj/"), "{text}");
    let rows = text.lines().filter(|l| l.starts_with('│')).count();
    assert_eq!(rows, 6, "a header and five lines:\n{text}");
    // An 80-column terminal's width is kept.
    let o = memlens_in_root(["lines", "--width", "80", NESTED]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

#[test]
fn source_root_shows_each_hot_file_beside_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let proj = dir.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    let source = |n: usize, at: &[(usize, &str)]| {
        (1..=n)
            .map(|i| {
                at.iter()
                    .find(|(l, _)| *l == i)
                    .map_or(format!("# line {i}"), |(_, s)| s.to_string())
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    std::fs::write(
        proj.join("blocks.py"),
        source(30, &[(16, "    h = x @ w"), (17, "    t = h.relu()")]),
    )
    .unwrap();
    std::fs::write(
        proj.join("model.py"),
        source(
            45,
            &[
                (8, "        self.w1 = init()"),
                (42, "    return tree(depth - 1)"),
            ],
        ),
    )
    .unwrap();
    // train.py is not there: one note, not an error.
    let o = memlens_in_root([
        "lines",
        "--source-root",
        dir.path().to_str().unwrap(),
        NESTED,
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout).unwrap();
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{text}"))
            .to_string()
    };
    assert!(line("blocks.py (16.00 MiB self; read from").contains("proj/blocks.py"));
    let hot = line("│     h = x @ w");
    assert!(hot.contains("16.00 MiB") && hot.contains(" 16 │"), "{hot}");
    // Self and total alike: the total is not repeated.
    assert_eq!(hot.matches("MiB").count(), 1, "{hot}");
    // A line with only a total (the recursion's call): its total, after an empty self.
    let call = line("│     return tree(depth - 1)");
    assert!(
        call.contains("768.00 KiB") && call.contains(" 42 │"),
        "{call}"
    );
    // Context lines around the hot ones carry no bytes.
    assert!(!line("14 │ # line 14").contains("B "));
    assert!(line("train.py: ").contains("not found under"), "{text}");
    // The JSON has the same excerpt.
    let r = json_ok(&[
        "lines",
        "--source-root",
        dir.path().to_str().unwrap(),
        "--format",
        "json",
        NESTED,
    ]);
    let sources = r["devices"][0]["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 3);
    let blocks = sources
        .iter()
        .find(|s| s["file"] == format!("{USER}blocks.py"))
        .unwrap();
    let l16 = blocks["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["line"] == 16)
        .unwrap();
    assert_eq!(l16["text"], "    h = x @ w");
    assert_eq!(as_u64(&l16["self_bytes"]), 16 * MIB);
    // Without --source-root, recorded paths that do not exist are passed over silently.
    let r = lines_json(&[], NESTED);
    assert!(r["devices"][0].get("sources").is_none());
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, says) in [
        (
            vec!["lines", "--source-root", "/nonexistent/src", NESTED],
            "not a directory",
        ),
        (vec!["lines", "--cost", "bogus", NESTED], "bogus"),
        (vec!["lines", "--at", "999999", NESTED], "outside the trace"),
        (vec!["lines", "--top", "x", NESTED], "--top"),
        (vec!["lines", "samples/no_such_file.pickle"], "no_such_file"),
    ] {
        let o = memlens_in_root(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    // A file given as --source-root is not a directory either.
    let o = memlens_in_root(["lines", "--source-root", NESTED, NESTED]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
}

#[test]
fn fx_original_traces_name_the_model_lines() {
    // samples/gen/memgen/frames2026.py's fx_frames, at its peak (the second step's graph
    // buffers made, before its frees): the weight 16 MiB (model.py:20 under train.py:12); the
    // graph's nodes, each under model.py:118 (the compiled module's call) and train.py:61: mm
    // 2 MiB (model.py:46 under :120), gelu 6 MiB (model.py:47 under :120), mm_1 6 MiB
    // (model.py:52 under :121) in the second step, and the first step's mm_1 6 MiB; two
    // losses of 1 MiB (train.py:70 under train.py:62).
    let r = lines_json(&[], "samples/fx_frames.pickle");
    let d = &r["devices"][0];
    assert_eq!(as_u64(&d["framed_bytes"]), 38 * MIB);
    assert_eq!(as_u64(&d["unattributed_bytes"]), 0);
    assert_eq!(st(d, "model.py", 52), (12 * MIB, 12 * MIB));
    assert_eq!(st(d, "model.py", 121), (0, 12 * MIB));
    assert_eq!(st(d, "model.py", 47), (6 * MIB, 6 * MIB));
    assert_eq!(st(d, "model.py", 46), (2 * MIB, 2 * MIB));
    assert_eq!(st(d, "model.py", 120), (0, 8 * MIB));
    assert_eq!(st(d, "model.py", 118), (0, 20 * MIB));
    assert_eq!(st(d, "train.py", 70), (2 * MIB, 2 * MIB));
    assert_eq!(st(d, "train.py", 90), (0, 38 * MIB));
    // The generated file itself is no user line.
    assert!(d["lines"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| !l["file"].as_str().unwrap().contains("fx_generated")));
}
