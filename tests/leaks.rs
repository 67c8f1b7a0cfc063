//! `memlens leaks`, steps and `memlens categories` against samples with known answers.

mod common;
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

fn truth(name: &str) -> serde_json::Value {
    serde_json::from_slice(
        &std::fs::read(root().join("samples/truth").join(format!("{name}.json"))).unwrap(),
    )
    .unwrap()
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
