//! `memlens categories` as a person would write them down (issue 19, items 1 and 8):
//! gradients made on the autograd engine's thread and gradients older than the trace,
//! optimizer state rebuilt out of place, KV caches in a library's cache code, inference
//! outputs, library workspaces. Against the generated samples' truths, the GPU captures and
//! the real files.

use crate::common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Category → (bytes, count, confidence) of device `d`.
fn categories(args: &[&str], file: &Path, d: usize) -> BTreeMap<String, (u64, u64, String)> {
    let mut a = vec!["categories"];
    a.extend_from_slice(args);
    let v = json_report(&a, file);
    let dev = &v["devices"][d];
    let rows = dev["categories"].as_array().unwrap();
    let total: u64 = rows.iter().map(|r| as_u64(&r["bytes"])).sum();
    assert_eq!(
        total,
        as_u64(&dev["live_requested_bytes"]),
        "every byte in one category"
    );
    rows.iter()
        .map(|r| {
            (
                r["category"].as_str().unwrap().to_string(),
                (
                    as_u64(&r["bytes"]),
                    as_u64(&r["count"]),
                    r["confidence"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect()
}

fn bytes(c: &BTreeMap<String, (u64, u64, String)>, k: &str) -> u64 {
    c.get(k).map_or(0, |x| x.0)
}

fn rule_of(file: &Path, args: &[&str], category: &str) -> String {
    let mut a = vec!["categories"];
    a.extend_from_slice(args);
    let v = json_report(&a, file);
    v["devices"][0]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["category"] == category)
        .map(|r| r["rules"][0]["rule"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

#[test]
fn gradients_from_the_autograd_engine_thread() {
    // Generated: a training step recorded with stacks="all"; the truth's own tally.
    let t = truth("train_stacks_all");
    let p = sample("train_stacks_all.pickle");
    for (args, cats) in [
        (vec![], &t["categories_at_peak"]),
        (vec!["--at", "end"], &t["categories_at_end"]),
    ] {
        let c = categories(&args, &p, 0);
        let want = |k: &str| cats.get(k).map_or(0, as_u64);
        assert_eq!(bytes(&c, "parameters"), want("param"), "{args:?} {c:?}");
        assert_eq!(bytes(&c, "gradients"), want("grad"), "{args:?} {c:?}");
        assert_eq!(
            bytes(&c, "optimizer_state"),
            want("opt_state"),
            "{args:?} {c:?}"
        );
        assert_eq!(
            bytes(&c, "activations"),
            want("act") + want("loss"),
            "{args:?} {c:?}"
        );
        assert_eq!(
            bytes(&c, "autograd_temporaries"),
            want("act_grad"),
            "{args:?} {c:?}"
        );
        assert_eq!(bytes(&c, "workspaces"), want("workspace"), "{args:?} {c:?}");
        assert_eq!(bytes(&c, "inputs"), want("input"), "{args:?} {c:?}");
        assert_eq!(bytes(&c, "unknown"), 0, "{args:?} {c:?}");
    }
    let c = categories(&["--at", "end"], &p, 0);
    assert_eq!(c["gradients"].0, as_u64(&t["gradient_bytes_at_end"]));
    assert_eq!(c["gradients"].2, "high");
    // The capture: x.grad (256 KiB, made under MmBackward0 on the engine thread) and two cuBLAS
    // workspaces were `unknown`.
    let c = categories(
        &["--at", "end"],
        &root().join("samples/captured/stacks_all.pickle"),
        0,
    );
    assert_eq!(c["gradients"], (256 << 10, 1, "high".to_string()));
    assert_eq!(c["workspaces"], (64 << 20, 2, "high".to_string()));
    // A real training step with stacks="all": at its end the gradients were `<no frames>` or
    // `unknown`; each equals its parameter's first Adam moment, so they total the same.
    let Some(w) = require_real(
        "Wedsonlin__assignment2-systems__results_medium_512_training_memory_snapshot.pickle",
    ) else {
        return;
    };
    let c = categories(&["--at", "end"], &w, 0);
    assert_eq!(c["gradients"], (1692733440, 219, "high".to_string()));
    let top = json_report(&["top", "--at", "end"], &w);
    let m = top["devices"][0]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["site"]
                .as_str()
                .unwrap()
                .ends_with("optimizer.py:76:step")
        })
        .unwrap();
    assert_eq!(as_u64(&m["bytes"]), c["gradients"].0);
}

#[test]
fn optimizer_state_rebuilt_out_of_place_is_state() {
    // The real snapshot's custom AdamW builds m and v anew each step (optimizer.py:73/74) and
    // frees the old ones: 3.15 GiB were called temporaries.
    if let Some(w) = require_real(
        "Wedsonlin__assignment2-systems__results_medium_512_training_memory_snapshot.pickle",
    ) {
        let c = categories(&[], &w, 0);
        assert_eq!(c["optimizer_state"].0, 3385466880);
        assert_eq!(c["optimizer_state"].1, 438);
        assert!(!c.contains_key("temporaries"), "{c:?}");
        let c = categories(&["--at", "end"], &w, 0);
        assert_eq!(c["optimizer_state"], (3385466880, 438, "high".to_string()));
    }
    // Generated: every step frees the old moments at optimizer.py:73/74.
    let t = truth("train_stacks_all");
    let c = categories(&["--at", "end"], &sample("train_stacks_all.pickle"), 0);
    assert_eq!(
        c["optimizer_state"].0,
        as_u64(&t["optimizer_state_bytes_at_end"])
    );
}

#[test]
fn a_kv_cache_in_cache_code_is_kv_cache() {
    let t = truth("serve_kv");
    let p = sample("serve_kv.pickle");
    let c = categories(&["--at", "end"], &p, 0);
    assert_eq!(c["kv_cache"].0, as_u64(&t["kv_cache_bytes_at_end"]));
    assert_eq!(c["kv_cache"].2, "high");
    assert_eq!(c["parameters"].0, as_u64(&t["parameter_bytes"]));
    // The real KIVI run: K/V buffers under cache_utils_V2.py:update_new (and the quantizer it
    // calls) were parameters.
    let Some(l) = require_real("LfieLike__SketchKV2__my_snapshot.pickle") else {
        return;
    };
    let c = categories(&[], &l, 0);
    assert_eq!(c["kv_cache"], (2894524416, 512, "high".to_string()));
    // Its one-entry trace dates nothing: the 325 frameless blocks predate the recording
    // (the weights), the framed ones go by their frames (8519680 B of a forward's activation,
    // 32008 B no rule names).
    assert_eq!(c["parameters"], (13477032064, 325, "low".to_string()));
    assert_eq!(c["activations"].0, 8519680);
    assert_eq!(c["unknown"].0, 32008);
}

#[test]
fn inference_outputs_are_outputs() {
    let t = truth("serve_kv");
    let p = sample("serve_kv.pickle");
    let c = categories(&["--at", "end"], &p, 0);
    assert_eq!(c["outputs"].0, as_u64(&t["outputs_bytes_at_end"]));
    assert!(!c.contains_key("activations"), "{c:?}");
    assert!(rule_of(&p, &["--at", "end"], "outputs").contains("without backward"));
    // The capture that keeps every step's logits (kv_cache --leak): those logits are kept
    // outputs, not activations kept for a backward that never comes.
    let leak = root().join("samples/captured/kv_cache_leak.pickle");
    let facts = &serde_json::from_slice::<Value>(
        &std::fs::read(root().join("samples/captured/kv_cache_leak.truth.json")).unwrap(),
    )
    .unwrap()["facts"];
    let logits = as_u64(&facts["retained_total_bytes_at_snapshot"]);
    let c = categories(&["--at", "end"], &leak, 0);
    assert!(c["outputs"].0 >= logits, "{c:?} vs {logits}");
    assert!(!c.contains_key("activations"), "{c:?}");
    // A forward cut short by an OOM never returned: what it made stays activations.
    let c = categories(&[], &sample("capacity_oom.pickle"), 0);
    assert!(!c.contains_key("outputs"), "{c:?}");
    assert_eq!(
        rule_of(&sample("capacity_oom.pickle"), &[], "activations"),
        "allocated under a module's forward"
    );
}

#[test]
fn gradients_older_than_the_trace_pair_with_the_parameters() {
    let t = truth("late_grads");
    let c = categories(&["--at", "end"], &sample("late_grads.pickle"), 0);
    assert_eq!(
        c["parameters"],
        (as_u64(&t["parameter_bytes"]), 7, "high".to_string())
    );
    assert_eq!(
        c["gradients"],
        (as_u64(&t["gradient_bytes"]), 7, "low".to_string())
    );
    assert_eq!(
        c["optimizer_state"],
        (as_u64(&t["optimizer_state_bytes"]), 7, "high".to_string())
    );
    assert_eq!(c.len(), 3, "{c:?}");
}
