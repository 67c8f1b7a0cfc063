//! What a reader of a snapshot is told beyond sites and categories (issue 19, item 8): a loop
//! without annotations found as steps, a device holding far more than the others, and no
//! claim about an OOM from a trace of one entry.

use crate::common;
use common::*;
use serde_json::Value;
use std::path::Path;

fn json(args: &[&str], file: &Path) -> Value {
    let mut a: Vec<std::ffi::OsString> = args.iter().map(|x| x.into()).collect();
    a.push("--format".into());
    a.push("json".into());
    a.push(file.into());
    let o = memlens(a);
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{args:?} {}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn text(args: &[&str], file: &Path) -> String {
    let mut a: Vec<std::ffi::OsString> = args.iter().map(|x| x.into()).collect();
    a.push(file.into());
    let o = memlens(a);
    String::from_utf8(o.stdout).unwrap()
}

fn step_starts(v: &Value) -> Vec<i64> {
    v["devices"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["first_event"].as_i64().unwrap())
        .collect()
}

#[test]
fn a_loop_without_annotations_is_found_by_its_lines() {
    // Generated: two requests, every allocation but the input copy inside the model, too few
    // repeats for the periodic rule.
    let t: Value =
        serde_json::from_slice(&std::fs::read(root().join("samples/truth/serve_kv.json")).unwrap())
            .unwrap();
    let v = json(&["leaks"], &sample("serve_kv.pickle"));
    assert_eq!(v["devices"][0]["source"], "loop");
    assert_eq!(
        v["devices"][0]["marker"],
        "loop in /home/user/proj/serve.py:handle_requests"
    );
    let want: Vec<i64> = t["step_starts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    assert_eq!(step_starts(&v), want);
    // Real: a LLaMA validation loop (validate_old.py:59-63, two batches in the trace) had no
    // steps.
    let Some(p) = require_real("Maphsge4__select_n__04d383c__snapshot.pickle") else {
        return;
    };
    let v = json(&["leaks"], &p);
    assert_eq!(v["devices"][0]["source"], "loop");
    assert!(v["devices"][0]["marker"]
        .as_str()
        .unwrap()
        .ends_with("validate_old.py:validate"));
    assert_eq!(step_starts(&v), vec![0, 5034]);
    // Files whose steps other rules find keep them.
    for (name, source) in [
        ("JasperSolt__EoR_NN__snapshot.pickle", "optimizer_step"),
        ("MercuryB1__SQAttn__cuda_memory_snapshot.pickle", "periodic"),
    ] {
        if let Some(p) = require_real(name) {
            assert_eq!(
                json(&["leaks"], &p)["devices"][0]["source"],
                source,
                "{name}"
            );
        }
    }
}

#[test]
fn one_device_far_ahead_of_the_others_is_said() {
    // Generated: device 1 of expandable_multi peaks at 73.6x device 0.
    let v = json(&["top"], &sample("expandable_multi.pickle"));
    assert_eq!(v["device_imbalance"]["device"], 1);
    assert_eq!(v["device_imbalance"]["next_device"], 0);
    let single = json(&["top"], &sample("train_small.pickle"));
    assert!(single.get("device_imbalance").is_none());
    // Real: a GCN + Qwen job on three GPUs whose replica on device 1 peaks at 78.29 GiB.
    let Some(p) = require_real("Constructor-Sun__code_location__memory_snapshot.pickle") else {
        return;
    };
    let v = json(&["top"], &p);
    let i = &v["device_imbalance"];
    assert_eq!(i["device"], 1);
    assert_eq!(i["peak_bytes"], 84063351764u64);
    assert_eq!(i["next_device"], 2);
    assert_eq!(i["least_device"], 0);
    let r = i["ratio_to_next"].as_f64().unwrap();
    assert!((3.8..4.0).contains(&r), "{r}");
    assert_eq!(i["loads"].as_array().unwrap().len(), 3);
    let t = text(&["top", "-n", "1"], &p);
    assert!(
        t.contains("note: device 1 holds far more than the others: 78.29 GiB live at its peak, 3.9× device 2's 20.08 GiB and 9.9× device 0's 7.88 GiB"),
        "{t}"
    );
    // --device N reads one device: nothing to compare.
    let one = json(&["top", "--device", "1"], &p);
    assert!(one.get("device_imbalance").is_none());
}

#[test]
fn a_one_entry_trace_makes_no_oom_claim() {
    // legacy_2_0 holds one `snapshot` entry; the real FlexGen snapshot below was taken at an
    // OOM, which its one-entry trace cannot show.
    let mut files = vec![sample("legacy_2_0.pickle")];
    files.extend(require_real(
        "Yiyi-philosophy__LLM-inference__oom_snapshot.pickle",
    ));
    files.extend(require_real("LfieLike__SketchKV2__my_snapshot.pickle"));
    for p in files {
        let v = json(&["oom"], &p);
        let notes: Vec<&str> = v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        assert!(
            notes
                .iter()
                .all(|n| !n.contains("was not taken at an out-of-memory")),
            "{}: {notes:?}",
            p.display()
        );
        assert!(
            notes.iter().any(|n| n
                .contains("cannot say whether the snapshot was taken at an out-of-memory error")),
            "{}: {notes:?}",
            p.display()
        );
    }
    // A real trace without an oom entry still says so.
    if let Some(p) = require_real(
        "Wedsonlin__assignment2-systems__results_medium_512_training_memory_snapshot.pickle",
    ) {
        let v = json(&["oom"], &p);
        assert!(v["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("no oom event in the trace"));
    }
}
