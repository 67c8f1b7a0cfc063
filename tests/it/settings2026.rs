//! Issue 39, items 5, 6 and 8, on the samples of `samples/gen/memgen/settings2026.py` against
//! `samples/truth/settings2026.json`: a trace recorded with a whole action kind skipped
//! (`skip_actions`) says so with a stable code and keeps the live timeline the full trace
//! gives; unknown actions are counted per name and never taken for an allocation or a free;
//! the allocator settings of 2026 (`PYTORCH_ALLOC_CONF`, `per_process_memory_fraction`,
//! `throw_on_cudamalloc_oom`, `graph_capture_record_stream_reuse`) are read, carried in
//! `whatif`'s JSON, modelled, and accepted by `--set`.

use crate::common;
use common::*;
use serde_json::Value;

fn truth(name: &str) -> Value {
    let p = root().join("samples/truth/settings2026.json");
    let all: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    all[name].clone()
}

fn json(args: &[&str]) -> Value {
    let o = memlens_in_root(args);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Live requested bytes at `moment` (`peak`, `end`).
fn live(path: &str, moment: &str) -> u64 {
    let v = json(&["top", path, "--at", moment, "--format", "json"]);
    v["devices"][0]["live_requested_bytes"].as_u64().unwrap()
}

fn codes(path: &str) -> Vec<String> {
    let v = json(&["summary", path, "--format", "json"]);
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn skipped_kinds_are_named_and_the_timeline_stays() {
    for name in ["skip_free_requested.pickle", "skip_free_completed.pickle"] {
        let t = truth(name);
        let path = format!("samples/{name}");
        let s = json(&["summary", &path, "--format", "json"]);
        assert_eq!(
            s["devices"][0]["trace"]["by_action"], t["by_action"],
            "{name}"
        );
        let codes = codes(&path);
        assert!(
            codes.contains(&t["warning"].as_str().unwrap().to_string()),
            "{name}: {codes:?}"
        );
        // Nothing else is wrong with the file: no mismatch, no coverage gap.
        assert!(
            !codes
                .iter()
                .any(|c| c == "trace_state_mismatch" || c == "segments_do_not_cover_trace"),
            "{name}: {codes:?}"
        );
        assert_eq!(
            live(&path, "peak"),
            t["peak_live_bytes"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            live(&path, "end"),
            t["end_live_bytes"].as_u64().unwrap(),
            "{name}"
        );
    }
    // The full trace has neither code.
    let full = codes("samples/train_small.pickle");
    assert!(!full.iter().any(|c| c.starts_with("skipped_")), "{full:?}");
}

#[test]
fn unknown_actions_are_counted_and_change_nothing() {
    let t = truth("unknown_actions.pickle");
    let s = json(&[
        "summary",
        "samples/unknown_actions.pickle",
        "--format",
        "json",
    ]);
    let got: serde_json::Map<String, Value> = s["unknown_actions"]
        .as_array()
        .expect("unknown_actions")
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap().to_string(),
                a["entries"].clone(),
            )
        })
        .collect();
    assert_eq!(Value::Object(got), t["unknown_actions"]);
    let text =
        String::from_utf8(memlens_in_root(["summary", "samples/unknown_actions.pickle"]).stdout)
            .unwrap();
    assert!(
        text.contains("Unknown actions (kept, not interpreted)\n  workspace_snapshot: 72 entries"),
        "{text}"
    );
    for moment in ["peak", "end"] {
        assert_eq!(
            live("samples/unknown_actions.pickle", moment),
            t[format!("{moment}_live_bytes")].as_u64().unwrap(),
            "{moment}"
        );
    }
    // A file without unknown actions has no such field (older readers' JSON unchanged).
    let plain = json(&["summary", "samples/train_small.pickle", "--format", "json"]);
    assert!(plain.get("unknown_actions").is_none());
}

#[test]
fn the_2026_settings_are_read_and_modelled() {
    let t = truth("alloc_conf_2026.pickle");
    let s = json(&[
        "summary",
        "samples/alloc_conf_2026.pickle",
        "--format",
        "json",
    ]);
    assert!(s["allocator_settings"][t["conf_key"].as_str().unwrap()].is_string());
    let w = json(&[
        "whatif",
        "samples/alloc_conf_2026.pickle",
        "--capacity",
        "16GiB",
        "--set",
        "per_process_memory_fraction:1",
        "--format",
        "json",
    ]);
    let d = &w["devices"][0];
    // The recorded run is held to the fraction of the device's memory, a per-process limit.
    assert_eq!(d["capacity"]["kind"], "per_process_limit", "{d}");
    assert_eq!(d["capacity"]["bytes"], t["limit_bytes"], "{d}");
    let conf = d["recorded_conf"].as_str().unwrap();
    assert!(conf.contains("per_process_memory_fraction:0.5"), "{conf}");
    assert!(conf.contains("throw_on_cudamalloc_oom:True"), "{conf}");
    let recorded = &d["scenarios"][0]["settings"];
    assert_eq!(recorded["per_process_memory_fraction"], t["fraction"]);
    assert_eq!(recorded["throw_on_cudamalloc_oom"], true);
    assert_eq!(recorded["graph_capture_record_stream_reuse"], true);
    // `--set per_process_memory_fraction:1` lifts the limit: the whole device.
    let lifted = d["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == "per_process_memory_fraction:1")
        .expect("the --set scenario");
    assert!(
        lifted["settings"]
            .get("per_process_memory_fraction")
            .is_none(),
        "{lifted}"
    );
}

#[test]
fn a_fraction_below_what_the_run_needs_runs_out() {
    // train_small reserves ~172 MiB at its peak: a 1% share of 16 GiB (~164 MiB) cannot hold
    // it, with or without the retry (throw_on_cudamalloc_oom skips it).
    let w = json(&[
        "whatif",
        "samples/train_small.pickle",
        "--capacity",
        "16GiB",
        "--set",
        "per_process_memory_fraction:0.01",
        "--set",
        "per_process_memory_fraction:0.5",
        "--format",
        "json",
    ]);
    let scen = w["devices"][0]["scenarios"].as_array().unwrap();
    let ooms = |label: &str| {
        scen.iter()
            .find(|s| s["label"] == label)
            .map(|s| s["ooms"].as_u64().unwrap())
            .unwrap()
    };
    assert!(ooms("per_process_memory_fraction:0.01") > 0, "{scen:?}");
    assert_eq!(ooms("per_process_memory_fraction:0.5"), 0, "{scen:?}");
    // Bad values are usage errors naming the key.
    let o = memlens_in_root([
        "whatif",
        "samples/train_small.pickle",
        "--set",
        "per_process_memory_fraction:2",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("per_process_memory_fraction:2"));
}
