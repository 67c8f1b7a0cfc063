//! Every real snapshot in ../shared/samples/real parses, holds the format's invariants, and
//! its totals equal an independent computation (tests/oracle/snapshot_oracle.py).

mod common;
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
