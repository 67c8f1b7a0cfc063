//! `memlens leaks`, steps and `memlens categories` against samples with known answers.

use crate::common;
use common::*;
use std::path::Path;

fn run_json(args: &[&str], file: &Path) -> (i32, serde_json::Value) {
    let mut a: Vec<std::ffi::OsString> = args.iter().map(|x| x.into()).collect();
    a.push("--format".into());
    a.push("json".into());
    a.push(file.into());
    let o = memlens(a);
    (
        o.status.code().unwrap(),
        serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null),
    )
}

#[test]
fn accumulated_loss_is_a_retained_graph() {
    let t = truth("retained_graph");
    let (code, v) = run_json(&["leaks"], &sample("retained_graph.pickle"));
    assert_eq!(code, 1, "findings exit 1");
    assert_eq!(v["schema_version"], 1);
    let f = &v["findings"].as_array().unwrap();
    assert_eq!(f.len(), 1, "{v}");
    assert_eq!(f[0]["kind"], "retained_graph");
    assert_eq!(f[0]["site"], t["finding"]["site"]);
    assert_eq!(f[0]["bytes_per_step"], t["finding"]["bytes_per_step"]);
    assert_eq!(f[0]["steps"], t["finding"]["steps"]);
    assert_eq!(
        f[0]["live_bytes_at_end"],
        t["finding"]["retained_bytes_at_end"]
    );
    assert_eq!(f[0]["device"], 0);
}

#[test]
fn the_fixed_loop_and_a_filled_cache_have_no_finding() {
    for name in [
        "retained_graph_fixed",
        "kv_cache",
        "loop_freed",
        "train_small",
    ] {
        let (code, v) = run_json(&["leaks"], &sample(&format!("{name}.pickle")));
        assert_eq!(code, 0, "{name}: {v}");
        assert_eq!(v["findings"], serde_json::json!([]), "{name}");
    }
}

#[test]
fn a_growing_list_is_a_leak() {
    let t = truth("list_leak");
    let (code, v) = run_json(&["leaks"], &sample("list_leak.pickle"));
    assert_eq!(code, 1);
    let f = &v["findings"][0];
    assert_eq!(f["kind"], "leak");
    assert_eq!(f["site"], t["finding"]["site"]);
    assert_eq!(f["bytes_per_step"], t["finding"]["bytes_per_step"]);
    assert_eq!(f["steps"], t["finding"]["steps"]);
}

#[test]
fn too_few_steps_is_said_not_guessed() {
    let (code, v) = run_json(&["leaks"], &sample("adam_loop.pickle"));
    assert_eq!(code, 0);
    assert!(v["devices"][0]["notes"][0]
        .as_str()
        .unwrap()
        .contains("steps found"));
    let (code, v) = run_json(&["leaks"], &sample("bare_list.pickle"));
    assert_eq!(code, 0);
    assert_eq!(v["findings"], serde_json::json!([]));
}

#[test]
fn steps_come_from_profiler_annotations_with_boundaries() {
    let t = truth("loop_freed");
    let (_, v) = run_json(&["leaks"], &sample("loop_freed.pickle"));
    let d = &v["devices"][0];
    assert_eq!(d["source"], "annotations");
    let steps = d["steps"].as_array().unwrap();
    assert_eq!(steps.len() as u64, t["steps"].as_u64().unwrap());
    let ends: Vec<u64> = steps
        .iter()
        .map(|s| s["live_at_end"].as_u64().unwrap())
        .collect();
    let expect: Vec<u64> = t["step_end_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(ends, expect);
    // The per-step peaks include the global peak.
    let peak = steps
        .iter()
        .map(|s| s["peak_bytes"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(peak, t["peak"]["peak_bytes"].as_u64().unwrap());
}

#[test]
fn adam_categories_at_peak_and_end() {
    let t = truth("adam_loop");
    let c = &t["categories_at_peak"];
    let (_, v) = run_json(&["categories"], &sample("adam_loop.pickle"));
    let cats: std::collections::BTreeMap<String, u64> = v["devices"][0]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["category"].as_str().unwrap().to_string(),
                r["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let get = |k: &str| cats.get(k).copied().unwrap_or(0);
    assert_eq!(get("parameters"), c["param"].as_u64().unwrap());
    assert_eq!(get("optimizer_state"), c["opt_state"].as_u64().unwrap());
    assert_eq!(
        get("optimizer_state"),
        2 * get("parameters"),
        "Adam keeps two fp32 moments per parameter"
    );
    assert_eq!(get("autograd_temporaries"), c["act_grad"].as_u64().unwrap());
    assert_eq!(get("inputs"), c["input"].as_u64().unwrap());
    assert_eq!(
        get("activations"),
        c["act"].as_u64().unwrap() + c["loss"].as_u64().unwrap()
    );
    let total: u64 = cats.values().sum();
    assert_eq!(
        total,
        v["devices"][0]["live_requested_bytes"].as_u64().unwrap()
    );
    // At the end of the last step only the persistent state remains.
    let (_, v) = run_json(&["categories", "--at", "end"], &sample("adam_loop.pickle"));
    let cats: std::collections::BTreeMap<String, u64> = v["devices"][0]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["category"].as_str().unwrap().to_string(),
                r["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        cats.get("gradients").copied(),
        Some(t["gradient_bytes"].as_u64().unwrap())
    );
    assert_eq!(cats.len(), 3, "{cats:?}");
}

#[test]
fn user_rules_come_first() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.txt");
    std::fs::write(&rules, "# ours\nkv_cache: /home/user/proj/train\\.py:24:\n").unwrap();
    let (code, v) = run_json(
        &["categories", "--rules", rules.to_str().unwrap()],
        &sample("adam_loop.pickle"),
    );
    assert_eq!(code, 0);
    let row = v["devices"][0]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["category"] == "kv_cache")
        .cloned()
        .unwrap();
    assert!(row["bytes"].as_u64().unwrap() > 0);
    assert!(row["rules"][0]["rule"]
        .as_str()
        .unwrap()
        .starts_with("user rule"));
    std::fs::write(&rules, "no colon here\n").unwrap();
    let (code, _) = run_json(
        &["categories", "--rules", rules.to_str().unwrap()],
        &sample("adam_loop.pickle"),
    );
    assert_eq!(code, 2);
}

/// Issue 19, item 2: a validation loop whose loss is summed as a tensor keeps a tensor at every
/// line its forward pass saved one (and its inputs): one finding, named by the line that ran
/// the forward pass, with the whole growth per step and the tensors it keeps.
#[test]
fn a_retained_validation_graph_is_one_finding() {
    let t = truth("retained_val");
    let want = &t["finding"];
    let (code, v) = run_json(&["leaks"], &sample("retained_val.pickle"));
    assert_eq!(code, 1);
    let f = v["findings"].as_array().unwrap();
    assert_eq!(
        f.len(),
        1,
        "one cause, not {}: {v}",
        t["findings_before_grouping"]
    );
    let f = &f[0];
    assert_eq!(f["kind"], "retained_graph");
    assert_eq!(f["graph_evidence"], "module_forward");
    assert_eq!(f["site"], want["site"]);
    assert_eq!(f["bytes_per_step"], want["bytes_per_step"]);
    assert_eq!(f["live_bytes_at_end"], want["retained_bytes_at_end"]);
    assert_eq!(
        f["tensors_per_step"].as_f64(),
        want["tensors_per_step"].as_f64()
    );
    assert_eq!(
        f["tensors_at_end"].as_u64().unwrap(),
        want["tensors_per_step"].as_u64().unwrap() * want["steps"].as_u64().unwrap()
    );
    let sites = f["sites"].as_array().unwrap();
    let expected = want["sites"].as_array().unwrap();
    assert_eq!(sites.len(), expected.len());
    for e in expected {
        let s = sites
            .iter()
            .find(|s| s["site"] == e["site"])
            .unwrap_or_else(|| panic!("{} missing: {f}", e["site"]));
        assert_eq!(s["bytes_per_step"], e["bytes_per_step"], "{s}");
        assert_eq!(
            s["tensors_per_step"].as_f64(),
            e["tensors_per_step"].as_f64(),
            "{s}"
        );
        let role = if s["site"] == want["input_site"] {
            "input"
        } else {
            "saved"
        };
        assert_eq!(s["role"], role, "{s}");
    }
    // The member sites add up to the finding.
    let sum: u64 = sites
        .iter()
        .map(|s| s["live_bytes_at_end"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, f["live_bytes_at_end"].as_u64().unwrap());
    let fix = f["fix"].as_str().unwrap();
    assert!(
        fix.contains("val.py:44:validate") && fix.contains("torch.no_grad()"),
        "{fix}"
    );
}

/// Issue 37: a validation loop whose loss is computed in the script (`F.cross_entropy(logits,
/// yb)`, outside any module's forward) and summed as a tensor keeps, with the forward pass's
/// saved tensors and inputs, what the loss computation saved (the log-softmax output, the loss):
/// one finding covers all of it, the loss computation's site with the role `loss`.
#[test]
fn a_retained_graph_includes_what_its_loss_saved() {
    let t = truth("retained_loss");
    let want = &t["finding"];
    let (code, v) = run_json(&["leaks"], &sample("retained_loss.pickle"));
    assert_eq!(code, 1);
    let f = v["findings"].as_array().unwrap();
    assert_eq!(f.len(), 1, "{v}");
    let f = &f[0];
    assert_eq!(f["kind"], "retained_graph");
    assert_eq!(f["graph_evidence"], "module_forward");
    assert_eq!(f["site"], want["site"]);
    assert_eq!(f["steps"], want["steps"]);
    assert_eq!(f["bytes_per_step"], want["bytes_per_step"]);
    assert_eq!(f["live_bytes_at_end"], want["retained_bytes_at_end"]);
    assert_eq!(
        f["tensors_per_step"].as_f64(),
        want["tensors_per_step"].as_f64()
    );
    assert_eq!(
        f["tensors_at_end"].as_u64().unwrap(),
        want["tensors_per_step"].as_u64().unwrap() * want["steps"].as_u64().unwrap()
    );
    // every site of the graph, with its role: the loss computation's as `loss`
    let sites = f["sites"].as_array().unwrap();
    let expected = want["sites"].as_array().unwrap();
    assert_eq!(sites.len(), expected.len(), "{f}");
    for e in expected {
        let s = sites
            .iter()
            .find(|s| s["site"] == e["site"])
            .unwrap_or_else(|| panic!("{} missing: {f}", e["site"]));
        assert_eq!(s["role"], e["role"], "{s}");
        assert_eq!(s["bytes_per_step"], e["bytes_per_step"], "{s}");
        assert_eq!(
            s["tensors_per_step"].as_f64(),
            e["tensors_per_step"].as_f64(),
            "{s}"
        );
    }
    let loss = sites
        .iter()
        .find(|s| s["site"] == want["loss_site"])
        .unwrap_or_else(|| panic!("no loss site: {f}"));
    assert_eq!(loss["role"], "loss");
    assert_eq!(loss["bytes_per_step"], t["loss_bytes_per_step"]);
    let sum: u64 = sites
        .iter()
        .map(|s| s["live_bytes_at_end"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, f["live_bytes_at_end"].as_u64().unwrap());
    let fix = f["fix"].as_str().unwrap();
    assert!(
        fix.contains("what the loss computed at /home/user/proj/val.py:45:validate saved"),
        "{fix}"
    );
}

/// `check --max-leaked` sums the findings after grouping: the same total as the truth's, under
/// the one line to change.
#[test]
fn max_leaked_totals_survive_the_grouping() {
    let t = truth("retained_val");
    let o = memlens([
        "check",
        "--max-leaked",
        "1MiB",
        "--format",
        "json",
        sample("retained_val.pickle").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let b = &v["files"][0]["budgets"][0];
    assert_eq!(b["budget"], "max_leaked");
    assert_eq!(b["actual_bytes"], t["finding"]["retained_bytes_at_end"]);
    let text = String::from_utf8(
        memlens([
            "check",
            "--max-leaked",
            "1MiB",
            sample("retained_val.pickle").to_str().unwrap(),
        ])
        .stdout,
    )
    .unwrap();
    assert!(text.contains("val.py:44:validate"), "{text}");
}

/// Issue 19, item 6: the steps are summarized (first and last, growth, highest peak); every
/// step is listed with `--steps`.
#[test]
fn steps_are_summarized_unless_asked_for() {
    let f = root().join("samples/captured/kv_cache_leak.pickle");
    let text = |extra: &[&str]| {
        let mut a: Vec<std::ffi::OsString> = vec!["leaks".into()];
        a.extend(extra.iter().map(|x| x.into()));
        a.push(f.clone().into());
        String::from_utf8(memlens(a).stdout).unwrap()
    };
    let short = text(&[]);
    assert!(!short.contains("│ step 2 "), "{short}");
    assert!(short.contains("128 steps"), "{short}");
    assert!(short.contains("after step 128"), "{short}");
    assert!(short.lines().count() < 30, "{short}");
    let long = text(&["--steps"]);
    for k in 1..=128 {
        assert!(long.contains(&format!("│ step {k} ")), "step {k}");
    }
    let (_, v) = run_json(&["leaks"], &f);
    let s = &v["devices"][0]["summary"];
    let steps = v["devices"][0]["steps"].as_array().unwrap();
    assert_eq!(s["steps"].as_u64(), Some(steps.len() as u64));
    assert_eq!(s["live_at_start"], steps[0]["live_at_start"]);
    assert_eq!(s["live_at_end"], steps[127]["live_at_end"]);
    assert_eq!(
        s["delta_bytes"].as_i64().unwrap(),
        s["live_at_end"].as_i64().unwrap() - s["live_at_start"].as_i64().unwrap()
    );
    let top = steps
        .iter()
        .map(|x| x["peak_bytes"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(s["highest_peak_bytes"].as_u64(), Some(top));
}

/// A single growing site stays a finding of its own, at its own line, with its kind.
#[test]
fn single_sites_keep_their_kind_and_site() {
    let t = truth("retained_graph");
    let (_, v) = run_json(&["leaks"], &sample("retained_graph.pickle"));
    let f = &v["findings"][0];
    assert_eq!(f["site"], t["finding"]["site"]);
    assert_eq!(f["sites"].as_array().unwrap().len(), 1);
    assert_eq!(f["sites"][0]["site"], t["finding"]["site"]);
    assert_eq!(
        f["tensors_per_step"].as_f64(),
        t["finding"]["allocations_per_step"].as_f64()
    );
    let t = truth("list_leak");
    let (_, v) = run_json(&["leaks"], &sample("list_leak.pickle"));
    let f = &v["findings"][0];
    assert_eq!(f["kind"], "leak");
    assert_eq!(f["graph_evidence"], serde_json::Value::Null);
    assert_eq!(f["sites"][0]["role"], "kept");
    assert_eq!(
        f["tensors_per_step"].as_f64(),
        t["finding"]["allocations_per_step"].as_f64()
    );
}

/// Golden `leaks` text on real snapshots whose steps are found (annotations, the optimizer,
/// a repeating allocation) or none (ftcourse, one backward pass): the steps summarized; no
/// finding.
#[test]
fn golden_leaks_on_real_files() {
    for name in [
        "cranberrii__ftcourse__memory_snapshot.pickle",
        "JasperSolt__EoR_NN__snapshot.pickle",
        "MercuryB1__SQAttn__cuda_memory_snapshot.pickle",
    ] {
        let Some(f) = require_real(name) else {
            return;
        };
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_memlens"))
            .current_dir(f.parent().unwrap())
            .args(["leaks", name])
            .output()
            .unwrap();
        let short = name.split("__").next().unwrap();
        // ftcourse is one backward pass: its 44 repeats are layers, its kept tensors gradients
        // (issue 52): no step, no finding, "cannot judge".
        assert_eq!(o.status.code(), Some(0), "{name}");
        golden(&format!("real/{short}.leaks.txt"), &o.stdout);
    }
}
