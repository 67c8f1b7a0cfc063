//! Every real snapshot in ../shared/samples/real parses, holds the format's invariants, and
//! its totals equal an independent computation (tests/oracle/snapshot_oracle.py).

use crate::common;
use common::*;

const FIELDS: &[&str] = &[
    "device",
    "segments",
    "blocks",
    "reserved_bytes",
    "allocated_bytes",
    "requested_bytes",
    "pending_free_bytes",
    "inactive_bytes",
    "largest_inactive_block_bytes",
    "trace_entries",
];

fn project(devices: &serde_json::Value) -> Vec<serde_json::Value> {
    devices
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let mut m = serde_json::Map::new();
            for f in FIELDS {
                m.insert(f.to_string(), d[*f].clone());
            }
            serde_json::Value::Object(m)
        })
        .collect()
}

#[test]
fn real_snapshots_parse_hold_invariants_and_match_the_oracle() {
    let Some(files) = require_shared() else {
        return;
    };
    let python = require_python();
    for f in &files {
        let snap = load(f);
        let broken: Vec<_> = snap
            .warnings
            .iter()
            .filter(|w| INVARIANT_CODES.contains(&w.code))
            .collect();
        assert!(broken.is_empty(), "{}: {broken:?}", f.display());
        if python {
            let ours = summary_json(f);
            let theirs = oracle("summary", f);
            assert_eq!(
                project(&ours["devices"]),
                project(&theirs["devices"]),
                "{}",
                f.display()
            );
            // Trace action counts too.
            for (o, t) in ours["devices"]
                .as_array()
                .unwrap()
                .iter()
                .zip(theirs["devices"].as_array().unwrap())
            {
                assert_eq!(o["trace"]["by_action"], t["actions"], "{}", f.display());
            }
        }
    }
}

#[test]
fn real_snapshot_shapes_are_recognized() {
    let Some(files) = require_shared() else {
        return;
    };
    use memlens::model::Layout;
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let snap = load(f);
        let expected = if name.starts_with("Yiyi-philosophy") {
            Layout::Legacy
        } else if name == "Muduard__LayoutEditing__memory_snapshot.pkl" {
            Layout::SegmentList
        } else {
            Layout::Modern
        };
        assert_eq!(snap.layout, expected, "{name}");
    }
}

#[test]
fn real_multi_gpu_expandable_oom_file_is_read_per_device() {
    let Some(f) = require_real("Constructor-Sun__code_location__memory_snapshot.pickle") else {
        return;
    };
    let snap = load(&f);
    let ids: Vec<u32> = snap.devices.iter().map(|d| d.id).collect();
    assert_eq!(ids, vec![0, 1, 2]);
    assert!(snap.segments.iter().all(|s| s.expandable));
    let ooms: Vec<_> = snap
        .events
        .iter()
        .filter(|e| e.action == memlens::model::Action::Oom)
        .collect();
    assert_eq!(ooms.len(), 1);
    assert!(ooms[0].device_free().unwrap() > 0);
}

#[test]
fn line_numbers_of_2_pow_64_minus_1_mean_no_line() {
    let Some(f) = require_real("drisspg__transformer_nuggets__test_data_mini_snapshot.pickle")
    else {
        return;
    };
    let snap = load(&f);
    let frames: Vec<_> = (0..snap.frames.len() as u32)
        .map(|i| *snap.frames.get(memlens::model::FrameId(i)))
        .collect();
    assert!(frames.iter().any(|fr| fr.line == -1));
    assert!(frames.iter().all(|fr| fr.line >= -1));
}

/// The oracle's (tests/oracle/replay_oracle.py) bytes and allocations alive at the peak of
/// the first device that were alive before the trace's first event and carry no frames.
fn oracle_older_without_frames(f: &std::path::Path) -> (u64, u64) {
    let o = replay_oracle_peak(f);
    let d = &o["devices"][0]["before_trace_no_frames"];
    (as_u64(&d["bytes"]), as_u64(&d["count"]))
}

/// GIVEN a real forward-and-backward trace whose history started after the weights were
/// loaded (notHanmin forward: 7.44 GiB of frameless blocks older than the trace) WHEN `top`
/// lists the peak THEN its first row is that memory labelled as older than the trace and
/// likely parameters (not `<no frames>`), its bytes those the oracle finds alive before the
/// first event without frames, and `categories` puts them among the parameters: the rule's
/// bytes are those plus one framed 2-byte allocation older than the trace.
#[test]
fn real_weights_older_than_the_trace_are_labelled_likely_parameters() {
    let Some(f) = require_real("notHanmin__assignment2-systems__memory_snapshot_forward.pickle")
    else {
        return;
    };
    let top = json_report(&["top", "-n", "1000"], &f);
    let rows = top["devices"][0]["sites"].as_array().unwrap();
    let first = &rows[0];
    assert_eq!(first["site"], "<before trace, no stack> likely parameters");
    assert_eq!(first["predates_trace"], true);
    assert_eq!(first["likely_kind"], "parameters");
    assert_eq!(first["kind_confidence"], "low");
    assert!(first["evidence"]
        .as_str()
        .unwrap()
        .contains("allocated before the first step and never freed"));
    let (bytes, count) = (as_u64(&first["bytes"]), as_u64(&first["count"]));
    assert_eq!((bytes, count), (7992948992, 436));
    assert!(rows.iter().all(|r| r["site"] != "<no frames>"), "{top}");
    if require_python() {
        assert_eq!(oracle_older_without_frames(&f), (bytes, count));
    }
    let cats = json_report(&["categories"], &f);
    let params = cats["devices"][0]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == "parameters")
        .unwrap();
    let framed = rows
        .iter()
        .find(|r| {
            r["site"]
                .as_str()
                .unwrap()
                .ends_with("benchmarking_script.py:110:run_benchmark_with_nvtx")
        })
        .unwrap();
    assert_eq!(as_u64(&framed["bytes"]), 2);
    assert_eq!(as_u64(&params["bytes"]), bytes + 2);
    assert_eq!(as_u64(&params["count"]), count + 1);
}

/// GIVEN two real training runs of one program at two context lengths, both with weights
/// older than the trace WHEN diffed THEN that memory is one labelled row, each side's bytes
/// those the oracle finds alive at its peak before the trace without frames.
#[test]
fn real_runs_compare_their_pre_trace_memory_as_one_row() {
    let (Some(base), Some(cand)) = (
        require_real(
            "Wedsonlin__assignment2-systems__results_medium_128_training_memory_snapshot.pickle",
        ),
        require_real(
            "Wedsonlin__assignment2-systems__results_medium_256_training_memory_snapshot.pickle",
        ),
    ) else {
        return;
    };
    let o = memlens([
        std::ffi::OsStr::new("diff"),
        base.as_os_str(),
        cand.as_os_str(),
        std::ffi::OsStr::new("--all"),
        std::ffi::OsStr::new("--format"),
        std::ffi::OsStr::new("json"),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let older: Vec<&serde_json::Value> = d["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["site"].as_str().unwrap().starts_with("<before trace"))
        .collect();
    assert_eq!(older.len(), 1, "{d}");
    let row = older[0];
    assert_eq!(row["site"], "<before trace, no stack> likely parameters");
    assert_eq!(row["predates_trace"], true);
    assert_eq!(row["likely_kind"], "parameters");
    assert!(d["sites"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["site"] != "<no frames>"));
    if require_python() {
        let (b, bc) = oracle_older_without_frames(&base);
        let (c, cc) = oracle_older_without_frames(&cand);
        assert_eq!(
            (as_u64(&row["base_bytes"]), as_u64(&row["base_count"])),
            (b, bc)
        );
        assert_eq!(
            (as_u64(&row["cand_bytes"]), as_u64(&row["cand_count"])),
            (c, cc)
        );
    }
}
