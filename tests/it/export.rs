//! `memlens export --format perfetto` and `memlens slice`.
//!
//! Perfetto: the trace-event JSON's structure (the object format, phases, pid/tid, µs), its
//! counters against `timeline` on every sample, capture and real file (each series' maximum
//! equals timeline's, also when downsampled), and a hand-worked trace without `time_us`.
//! Slice: a hand-worked layout; and on every file with a trace, the slice read by Python's
//! pickle with an unpickler that refuses every class (the oracle), holding the invariants,
//! its totals equal to memlens's state at the window's end in the original (`frag --at`),
//! memlens reading it with the same totals and the same live bytes at its end, and the keys
//! PyTorch's viewer reads.

use crate::common;
use common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn ok(args: &[&str]) -> Vec<u8> {
    let o = memlens(args);
    assert!(
        o.status.success(),
        "memlens {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

fn json_of(args: &[&str]) -> Value {
    serde_json::from_slice(&ok(args)).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Every file with a trace: samples, captures and (under the CI rule) the real snapshots.
fn traced_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = samples();
    v.extend(captured());
    v.extend(require_shared().unwrap_or_default());
    v.into_iter()
        .filter(|f| {
            let s = load(f);
            s.devices.iter().any(|d| !d.trace.is_empty())
        })
        .collect()
}

/// Per pid, what the counters and spans of a trace-event file hold.
#[derive(Default, Debug)]
struct Tracks {
    max: BTreeMap<String, u64>,
    counter_ts: Vec<i64>,
    instants: Vec<(String, i64)>,
    spans: Vec<(String, i64, i64)>,
}

/// Checks the structure of a Chrome trace-event object and collects each process's tracks.
fn check_trace(v: &Value) -> (BTreeMap<u64, Tracks>, Value) {
    assert_eq!(v["displayTimeUnit"], "ms");
    let other = v["otherData"].clone();
    for (k, x) in other.as_object().expect("otherData is an object") {
        assert!(x.is_string(), "otherData.{k} is a string: {x}");
    }
    let events = v["traceEvents"].as_array().expect("traceEvents array");
    let mut per: BTreeMap<u64, Tracks> = BTreeMap::new();
    let mut open: BTreeMap<String, (i64, String)> = BTreeMap::new();
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        let pid = e["pid"].as_u64().expect("pid");
        assert!(e["tid"].is_u64(), "tid: {e}");
        assert!(e["name"].is_string(), "name: {e}");
        let t = per.entry(pid).or_default();
        if ph == "M" {
            assert!(matches!(
                e["name"].as_str(),
                Some("process_name" | "thread_name")
            ));
            continue;
        }
        let ts = e["ts"]
            .as_i64()
            .unwrap_or_else(|| panic!("integer ts: {e}"));
        match ph {
            "C" => {
                let args = e["args"].as_object().unwrap();
                assert_eq!(args.len(), 1, "one series per counter event: {e}");
                let b = args["bytes"].as_u64().expect("bytes");
                let m = t.max.entry(e["name"].as_str().unwrap().into()).or_default();
                *m = (*m).max(b);
                t.counter_ts.push(ts);
            }
            "X" => {
                let dur = e["dur"].as_i64().expect("dur");
                assert!(dur >= 1, "{e}");
                t.spans.push((e["name"].as_str().unwrap().into(), ts, dur));
            }
            "i" => {
                assert!(matches!(e["s"].as_str(), Some("t" | "p")), "{e}");
                t.instants.push((e["name"].as_str().unwrap().into(), ts));
            }
            "b" => {
                let id = e["id"].as_str().expect("id").to_string();
                assert_eq!(e["cat"], "allocation");
                assert!(e["args"]["bytes"].as_u64().unwrap() > 0);
                assert!(e["args"]["site"].is_string());
                assert!(open.insert(id, (ts, e["name"].to_string())).is_none());
            }
            "e" => {
                let id = e["id"].as_str().expect("id");
                let (start, name) = open.remove(id).expect("an e after its b");
                assert_eq!(name, e["name"].to_string());
                assert!(ts > start, "{e}");
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    assert!(open.is_empty(), "every b has its e");
    (per, other)
}

#[test]
fn perfetto_counters_equal_timeline_on_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let files = traced_files();
    assert!(files.len() > 20, "{} files", files.len());
    for f in &files {
        let fs = f.to_str().unwrap();
        let timeline = json_of(&["timeline", fs, "--format", "json", "--points", "0"]);
        for points in ["20000", "60"] {
            let out = dir.path().join(format!("t{points}.json"));
            ok(&[
                "export",
                fs,
                "--points",
                points,
                "-o",
                out.to_str().unwrap(),
                "-f",
            ]);
            let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
            let (per, other) = check_trace(&v);
            for d in timeline["devices"].as_array().unwrap() {
                let dev = d["device"].as_u64().unwrap();
                let t = &per[&dev];
                let pts = d["points"].as_array().unwrap();
                let max_alloc = pts
                    .iter()
                    .map(|p| p["allocated_bytes"].as_u64().unwrap())
                    .max()
                    .unwrap();
                let name = format!("{} device {dev} --points {points}", f.display());
                assert_eq!(t.max["live (requested)"], d["peak_bytes"], "{name}");
                assert_eq!(t.max["reserved"], d["max_reserved_bytes"], "{name}");
                assert_eq!(t.max["allocated"], max_alloc, "{name}");
                // Times are the trace's own time_us (the state before it 1 µs earlier).
                if other["time_basis"] == "time_us" {
                    let times: std::collections::BTreeSet<i64> =
                        pts.iter().filter_map(|p| p["time_us"].as_i64()).collect();
                    let first = *times.iter().next().unwrap();
                    for ts in &t.counter_ts {
                        assert!(times.contains(ts) || *ts == first - 1, "{name}: ts {ts}");
                    }
                }
                if points == "60" && pts.len() > 60 {
                    assert!(t.counter_ts.len() <= 3 * 62, "{name}: downsampled");
                }
            }
        }
    }
}

#[test]
fn perfetto_steps_and_ooms_of_the_samples() {
    // train_small: 6 ProfilerStep annotations, the same steps found from them.
    let v = json_of(&["export", sample("train_small.pickle").to_str().unwrap()]);
    let (per, other) = check_trace(&v);
    assert_eq!(other["time_basis"], "time_us");
    let steps: Vec<&str> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "step")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let timeline = json_of(&[
        "timeline",
        sample("train_small.pickle").to_str().unwrap(),
        "--format",
        "json",
    ]);
    let phases: Vec<&str> = timeline["devices"][0]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .filter(|n| n.starts_with("ProfilerStep#"))
        .collect();
    assert!(!steps.is_empty());
    assert_eq!(steps, phases);
    // frag_oom: every oom event of the trace is an instant at its time_us.
    let f = sample("frag_oom.pickle");
    let v = json_of(&["export", f.to_str().unwrap()]);
    let (per2, _) = check_trace(&v);
    let snap = load(&f);
    let want: Vec<i64> = snap
        .events
        .iter()
        .filter(|e| e.action == memlens::model::Action::Oom)
        .map(|e| e.time_us)
        .collect();
    let got: Vec<i64> = per2[&0]
        .instants
        .iter()
        .filter(|(n, _)| n == "oom")
        .map(|x| x.1)
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    drop(per);
}

/// A hand-made device 0 without `time_us`: a 20 MiB segment, allocs of 1000 and 3000 bytes,
/// the first freed, then an OOM.
fn hand_made(dir: &Path) -> PathBuf {
    const A: u64 = 0x7f00_0000_0000;
    let seg = 20 << 20;
    let v = json!({
        "segments": [{
            "device": 0, "address": A, "total_size": seg, "allocated_size": 3072,
            "active_size": 3072, "requested_size": 3000, "stream": 0, "segment_type": "large",
            "segment_pool_id": [0, 0], "is_expandable": false, "frames": [],
            "blocks": [
                {"address": A, "size": 1024, "requested_size": 1000, "state": "inactive", "frames": []},
                {"address": A + 1024, "size": 3072, "requested_size": 3000, "state": "active_allocated",
                 "frames": [{"name": "main", "filename": "/w/train.py", "line": 7}]},
                {"address": A + 4096, "size": seg - 4096, "requested_size": 0, "state": "inactive", "frames": []}
            ]
        }],
        "device_traces": [[
            {"action": "segment_alloc", "addr": A, "size": seg, "stream": 0},
            {"action": "alloc", "addr": A, "size": 1000, "stream": 0,
             "frames": [{"name": "load", "filename": "/w/data.py", "line": 3}]},
            {"action": "alloc", "addr": A + 1024, "size": 3000, "stream": 0,
             "frames": [{"name": "main", "filename": "/w/train.py", "line": 7}]},
            {"action": "free_requested", "addr": A, "size": 1000, "stream": 0},
            {"action": "free_completed", "addr": A, "size": 1000, "stream": 0},
            {"action": "oom", "device_free": 5000, "size": 2097152, "stream": 0}
        ]],
        "allocator_settings": {"expandable_segments": false, "max_split_size": -1},
        "external_annotations": []
    });
    let p = dir.join("hand.json");
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

#[test]
fn perfetto_of_a_hand_worked_trace_without_time() {
    let dir = tempfile::tempdir().unwrap();
    let f = hand_made(dir.path());
    let o = memlens(["export", f.to_str().unwrap()]);
    assert!(o.status.success());
    // The note is said on stderr and carried in otherData.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("records no time_us"), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let (per, other) = check_trace(&v);
    assert_eq!(other["time_basis"], "event_index");
    assert!(other["note"].as_str().unwrap().contains("index + 1"));
    let series = |name: &str| -> Vec<(i64, u64)> {
        v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == name)
            .map(|e| {
                (
                    e["ts"].as_i64().unwrap(),
                    e["args"]["bytes"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    // The state before the first entry at 0 µs, entry i at i + 1.
    const SEG: u64 = 20 << 20;
    assert_eq!(
        series("live (requested)"),
        vec![
            (0, 0),
            (1, 0),
            (2, 1000),
            (3, 4000),
            (4, 4000),
            (5, 3000),
            (6, 3000)
        ]
    );
    assert_eq!(
        series("allocated"),
        vec![
            (0, 0),
            (1, 0),
            (2, 1024),
            (3, 4096),
            (4, 4096),
            (5, 3072),
            (6, 3072)
        ]
    );
    assert_eq!(
        series("reserved"),
        vec![
            (0, 0),
            (1, SEG),
            (2, SEG),
            (3, SEG),
            (4, SEG),
            (5, SEG),
            (6, SEG)
        ]
    );
    assert_eq!(
        per[&0].instants,
        vec![("segment_alloc".to_string(), 1), ("oom".to_string(), 6)]
    );
    // The two allocations as async spans, biggest first, with their sites; the one never
    // freed ends at the last entry.
    let spans: Vec<(String, i64, u64)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "b")
        .map(|e| {
            (
                e["args"]["site"].as_str().unwrap().to_string(),
                e["ts"].as_i64().unwrap(),
                e["args"]["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        spans,
        vec![
            ("/w/train.py:7:main".to_string(), 3, 3000),
            ("/w/data.py:3:load".to_string(), 2, 1000)
        ]
    );
    let ends: Vec<i64> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "e")
        .map(|e| e["ts"].as_i64().unwrap())
        .collect();
    assert_eq!(ends, vec![6, 5]);
    // --largest 0 draws none; a window keeps its counters.
    let v = json_of(&[
        "export",
        f.to_str().unwrap(),
        "--largest",
        "0",
        "--window",
        "2:4",
    ]);
    assert!(!v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["ph"] == "b"));
    let (per, _) = check_trace(&v);
    assert_eq!(per[&0].max["live (requested)"], 4000);
}

#[test]
fn export_refusals_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = hand_made(dir.path());
    for (args, want) in [
        (
            vec!["export", f.to_str().unwrap(), "--device", "3"],
            "no device 3",
        ),
        (
            vec!["export", f.to_str().unwrap(), "--window", "2:99"],
            "outside the trace",
        ),
        (
            vec![
                "slice",
                f.to_str().unwrap(),
                "--to",
                "oom:2",
                "-o",
                "/tmp/never.pickle",
            ],
            "oom event",
        ),
    ] {
        let o = memlens(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
    }
    // -o over an existing file needs --force.
    let out = dir.path().join("s.pickle");
    std::fs::write(&out, b"x").unwrap();
    let o = memlens(["slice", f.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read(&out).unwrap(), b"x");
}

/// What the oracle (Python's pickle with a class-refusing unpickler) reads of a slice.
fn oracle_totals(v: &Value, device: u64) -> [u64; 4] {
    let d = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == device)
        .unwrap_or_else(|| panic!("device {device} in {v}"));
    [
        d["reserved_bytes"].as_u64().unwrap(),
        d["allocated_bytes"].as_u64().unwrap(),
        d["requested_bytes"].as_u64().unwrap(),
        d["pending_free_bytes"].as_u64().unwrap(),
    ]
}

#[test]
fn slice_of_a_hand_worked_layout() {
    let dir = tempfile::tempdir().unwrap();
    let f = hand_made(dir.path());
    let out = dir.path().join("s.pickle");
    let o = ok(&[
        "slice",
        f.to_str().unwrap(),
        "--window",
        "2:4",
        "-o",
        out.to_str().unwrap(),
    ]);
    let text = String::from_utf8(o).unwrap();
    assert!(
        text.contains("device 0: events 2..4 (3 entries); at the end 20.00 MiB reserved in 1 segment, 3.00 KiB allocated, 2.93 KiB requested (3 blocks)"),
        "{text}"
    );
    let s = load(&out);
    let trace: Vec<(&str, u64)> = s
        .events
        .iter()
        .map(|e| (e.action.as_str(), e.size))
        .collect();
    assert_eq!(
        trace,
        vec![
            ("alloc", 3000),
            ("free_requested", 1000),
            ("free_completed", 1000)
        ]
    );
    let blocks: Vec<(u64, u64, &str)> = s
        .blocks
        .iter()
        .map(|b| {
            (
                b.size,
                b.requested_size,
                match b.state {
                    memlens::model::BlockState::Inactive => "inactive",
                    memlens::model::BlockState::ActiveAllocated => "active_allocated",
                    memlens::model::BlockState::ActivePendingFree => "pending",
                },
            )
        })
        .collect();
    assert_eq!(
        blocks,
        vec![
            (1024, 0, "inactive"),
            (3072, 3000, "active_allocated"),
            ((20 << 20) - 4096, 0, "inactive")
        ]
    );
    assert_eq!(
        s.setting("max_split_size"),
        Some(&memlens::model::SettingValue::Int(-1))
    );
    // At event 1 (--to 1): the free undone re-creates the 1000-byte block (1024 bytes, as
    // round_size gives), the second alloc undone frees its block into the tail.
    ok(&[
        "slice",
        f.to_str().unwrap(),
        "--to",
        "1",
        "-o",
        out.to_str().unwrap(),
        "-f",
    ]);
    if require_python() {
        let v = oracle("summary", &out);
        assert_eq!(oracle_totals(&v, 0), [20 << 20, 1024, 1000, 0]);
        assert_eq!(v["devices"][0]["trace_entries"], 2);
        assert_eq!(oracle("check", &out), json!([]));
    }
}

/// The viewer's keys (snapshot-format.md §6): segments, blocks, trace entries and frames.
fn assert_viewer_keys(path: &Path) {
    let script = r#"
import pickle, sys
class NoClasses(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("refused %s.%s" % (module, name))
d = NoClasses(open(sys.argv[1], "rb")).load()
assert set(d) >= {"segments", "device_traces"}, d.keys()
for s in d["segments"]:
    for k in ("device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream", "blocks", "frames"):
        assert k in s, (k, s.keys())
    at = s["address"]
    for b in s["blocks"]:
        assert {"address", "size", "requested_size", "state", "frames"} <= set(b), b.keys()
        assert b["address"] == at; at += b["size"]
        assert b["state"] in ("active_allocated", "active_pending_free", "inactive")
    assert at == s["address"] + s["total_size"]
for t in d["device_traces"]:
    for e in t:
        assert {"action", "size", "stream"} <= set(e), e.keys()
        assert ("addr" in e) != (e["action"] == "oom"), e
        for f in e.get("frames", []):
            # the FX keys of compiled-graph frames (augment_with_fx_traces=True) come along
            assert {"name", "filename", "line"} <= set(f) <= {"name", "filename", "line", "fx_node_op", "fx_node_name", "fx_node_target", "fx_original_trace"}, f
print("ok")
"#;
    let o = std::process::Command::new(python3())
        .arg("-c")
        .arg(script)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        o.status.success() && o.stdout == b"ok\n",
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn slices_round_trip_through_python_and_memlens() {
    if !require_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("slice.pickle");
    let mut checked = 0;
    for f in traced_files() {
        let snap = load(&f);
        for dev in &snap.devices {
            let n = dev.trace.len() as i64;
            if n < 3 {
                continue;
            }
            let (a, b) = (n / 3, 2 * n / 3);
            let fs = f.to_str().unwrap();
            let d = dev.id.to_string();
            let window = format!("{a}:{b}");
            let name = format!("{} device {d} window {window}", f.display());
            ok(&[
                "slice",
                fs,
                "--device",
                &d,
                "--window",
                &window,
                "-o",
                out.to_str().unwrap(),
                "-f",
            ]);
            // memlens's state at the window's end in the original.
            let frag = json_of(&[
                "frag",
                fs,
                "--device",
                &d,
                "--at",
                &b.to_string(),
                "--format",
                "json",
            ]);
            let total = &frag["devices"][0]["total"];
            let want = [
                total["reserved_bytes"].as_u64().unwrap(),
                total["allocated_bytes"].as_u64().unwrap(),
                total["requested_bytes"].as_u64().unwrap(),
                total["pending_free_bytes"].as_u64().unwrap(),
            ];
            // Python reads it with no class allowed; its totals are that state's.
            let v = oracle("summary", &out);
            assert_eq!(oracle_totals(&v, dev.id as u64), want, "{name}");
            let entries = v["devices"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["device"] == dev.id)
                .unwrap()["trace_entries"]
                .clone();
            assert_eq!(entries, b - a + 1, "{name}");
            assert_eq!(oracle("check", &out), json!([]), "{name}: invariants");
            assert_viewer_keys(&out);
            // memlens reads it with the same totals, and the live bytes at its end are the
            // original's at event B.
            let sliced = load(&out);
            let sum = memlens::analyze::summary::run(&sliced);
            let sd = sum.devices.iter().find(|x| x.device == dev.id).unwrap();
            assert_eq!(
                [
                    sd.reserved_bytes,
                    sd.allocated_bytes,
                    sd.requested_bytes,
                    sd.pending_free_bytes
                ],
                want,
                "{name}"
            );
            let orig = memlens::replay::replay_device(&snap, dev);
            let sdev = sliced.device(dev.id).unwrap();
            let r = memlens::replay::replay_device(&sliced, sdev);
            let st = memlens::replay::state::state_at(&snap, dev, b);
            if st.inconsistencies == 0 && orig.unconfirmed_at_end == 0 {
                assert_eq!(r.live_at(r.events as i64 - 1), orig.live_at(b), "{name}");
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "{checked} slices checked");
}

#[test]
fn perfetto_counts_from_a_profiler_base_time() {
    // A torch.profiler trace's `ts` count from its `baseTimeNanoseconds`; given the same base,
    // every timestamp moves back by base / 1000 µs and the base is carried at the top level.
    let f = sample("train_small.pickle");
    let fs = f.to_str().unwrap();
    let plain = json_of(&["export", fs]);
    let base: i64 = 1_732_950_000_000_000_000;
    let shifted = json_of(&["export", fs, "--base-ns", &base.to_string()]);
    assert_eq!(shifted["baseTimeNanoseconds"], base);
    assert!(plain.get("baseTimeNanoseconds").is_none());
    let ts = |v: &Value| -> Vec<i64> {
        v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["ts"].as_i64())
            .collect()
    };
    let (a, b) = (ts(&plain), ts(&shifted));
    assert_eq!(a.len(), b.len());
    assert!(!a.is_empty());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x - y, base / 1000);
    }
    // This run's events start within its first second after the base.
    assert!(
        b.iter().all(|&t| (0..1_000_000).contains(&t)),
        "{:?}",
        &b[..3]
    );
}
