//! Issue 52: steps are not layers, and "cannot judge" is a state of `leaks` — the same in
//! text, JSON (top level and per device), the page's JSON and its exit code.

use crate::common;
use common::*;
use serde_json::{json, Value};
use std::path::Path;

/// `memlens ARGS --format json FILE`: (exit code, JSON).
fn run_json(args: &[&str], file: &Path) -> (i32, Value) {
    let mut a: Vec<std::ffi::OsString> = args.iter().map(|x| x.into()).collect();
    a.extend(["--format".into(), "json".into(), file.into()]);
    let o = memlens(a);
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?} {}: {e}: {}",
            file.display(),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code().unwrap(), v)
}

/// `memlens leaks FILE` in text: (exit code, stdout).
fn run_text(file: &Path) -> (i32, String) {
    let o = memlens([std::ffi::OsStr::new("leaks"), file.as_os_str()]);
    (
        o.status.code().unwrap(),
        String::from_utf8(o.stdout).unwrap(),
    )
}

/// The "record" advice every `cannot_judge` of `leaks` gives with the default options.
const RECORD: &str = "at least 4 steps of the training loop with `torch.cuda.memory._record_memory_history(max_entries=...)` (enough entries to keep them all), then `torch.cuda.memory._dump_snapshot(...)`";

/// GIVEN one training step whose backward runs through 12 identical layers (the same engine
/// sites repeating once per layer, each keeping its weight gradient) WHEN leaks runs THEN no
/// step is found (the repeats are layers of one backward), there is no finding, and it cannot
/// judge: one backward pass, record at least 4 steps. The gradients are there (categories at
/// the end count them): they are not a leak. Before issue 52: 12 steps and a "leak".
#[test]
fn layers_of_one_backward_are_not_steps() {
    let t = truth("backward_layers");
    let file = sample("backward_layers.pickle");
    let (code, v) = run_json(&["leaks"], &file);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["findings"], json!([]));
    assert_eq!(t["findings"], 0);
    let d = &v["devices"][0];
    assert_eq!(d["source"], Value::Null, "{d}");
    assert_eq!(d["steps"].as_array().unwrap().len() as u64, t["steps"]);
    assert_eq!(v["judged_devices"], json!([]));
    let want = json!({"state": t["judgement"], "why": t["judgement_why"], "record": RECORD});
    assert_eq!(v["judgement"], want);
    assert_eq!(d["judgement"], want);
    assert_eq!(v["absent"][0]["code"], "no_steps");
    // the gradients the backward made are alive at the end, one per layer
    let (_, c) = run_json(&["categories", "--at", "end"], &file);
    let grads = c["devices"][0]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["category"] == "gradients")
        .expect("gradients at the end");
    assert_eq!(grads["bytes"], t["gradient_bytes_at_end"]);
    assert_eq!(grads["count"], t["layers"]);
    let (code, text) = run_text(&file);
    assert_eq!(code, 0);
    assert!(
        text.contains(&format!(
            "cannot judge: {}; record at least 4 steps",
            t["judgement_why"].as_str().unwrap()
        )),
        "{text}"
    );
    assert!(!text.contains("Findings"), "{text}");
}

/// Real: ftcourse (a QLoRA fine-tune) is one `backward()`: the 44 "steps" of 200 KiB that
/// `leaks` reported were its layers, the kept tensors its gradients. Now: no step, no
/// finding, `cannot_judge`, exit 0.
#[test]
fn one_real_backward_is_not_judged() {
    let Some(f) = require_real("cranberrii__ftcourse__memory_snapshot.pickle") else {
        return;
    };
    let (code, v) = run_json(&["leaks"], &f);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["findings"], json!([]));
    assert_eq!(v["devices"][0]["source"], Value::Null);
    assert_eq!(v["judgement"]["state"], "cannot_judge");
    assert_eq!(
        v["judgement"]["why"],
        "the trace holds one backward pass and no repeated step"
    );
    assert_eq!(v["judgement"]["record"], RECORD);
}

/// Real files whose steps are real loops are judged: JasperSolt's 10 optimizer steps and
/// MercuryB1's 28 periodic steps (an inference loop), both with nothing growing.
#[test]
fn real_loops_are_judged() {
    for (name, source, steps) in [
        ("JasperSolt__EoR_NN__snapshot.pickle", "optimizer_step", 10),
        (
            "MercuryB1__SQAttn__cuda_memory_snapshot.pickle",
            "periodic",
            28,
        ),
    ] {
        let Some(f) = require_real(name) else {
            return;
        };
        let (code, v) = run_json(&["leaks"], &f);
        assert_eq!(code, 0, "{name}");
        let d = &v["devices"][0];
        assert_eq!(d["source"], source, "{name}");
        assert_eq!(d["steps"].as_array().unwrap().len(), steps, "{name}");
        let why = format!("judged {steps} steps: nothing grows");
        let want = json!({"state": "none", "why": why, "record": null});
        assert_eq!(v["judgement"], want, "{name}");
        assert_eq!(d["judgement"], want, "{name}");
        assert_eq!(v["judged_devices"], json!([0]), "{name}");
        let (_, text) = run_text(&f);
        assert!(
            text.contains(&format!("\nJudged {steps} steps: nothing grows.")),
            "{text}"
        );
    }
}

/// GIVEN a file of each state — found (list_leak), none (kv_cache), cannot_judge
/// (backward_layers, adam_loop's 3 steps, bare_list without a trace) — WHEN leaks runs in
/// text and JSON and the page's JSON (`report --format json`) is made THEN they say the same:
/// the page's leaks judgement is the command's, text says the state's sentence, and the exit
/// code is 1 only when found.
#[test]
fn every_surface_says_the_same_judgement() {
    for (name, state) in [
        ("list_leak", "found"),
        ("kv_cache", "none"),
        ("backward_layers", "cannot_judge"),
        ("adam_loop", "cannot_judge"),
        ("bare_list", "cannot_judge"),
    ] {
        let file = sample(&format!("{name}.pickle"));
        let (code, v) = run_json(&["leaks"], &file);
        let j = &v["judgement"];
        assert_eq!(j["state"], state, "{name}: {v}");
        assert_eq!(code, i32::from(state == "found"), "{name}");
        // per device: the same states, and the top level follows from them
        let states: Vec<&str> = v["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["judgement"]["state"].as_str().unwrap())
            .collect();
        assert!(!states.is_empty(), "{name}");
        match state {
            "found" => assert!(states.contains(&"found"), "{name}"),
            "none" => assert!(states.iter().all(|s| *s == "none"), "{name}"),
            _ => assert!(states.contains(&"cannot_judge"), "{name}"),
        }
        assert_eq!(j["record"].is_string(), state == "cannot_judge", "{name}");
        // the page's JSON carries the same report
        let (_, page) = run_json(&["report"], &file);
        assert_eq!(page["leaks"]["judgement"], *j, "{name}");
        assert_eq!(page["leaks"]["devices"], v["devices"], "{name}");
        // text: the same sentence
        let (tcode, text) = run_text(&file);
        assert_eq!(tcode, code, "{name}");
        let why = j["why"].as_str().unwrap();
        match state {
            "found" => assert!(text.contains("Findings, biggest growth first"), "{text}"),
            "none" => {
                assert!(
                    text.contains(&format!("\nJ{}.", &why[1..])),
                    "{name}: {text}"
                );
                assert!(!text.contains("cannot judge"), "{name}: {text}");
            }
            _ => {
                let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
                assert!(
                    flat.contains(&format!("cannot judge: {why}; record ")),
                    "{name}: {text}"
                );
                assert!(!text.contains("No memory grows"), "{name}: {text}");
            }
        }
    }
}
