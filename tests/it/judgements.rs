//! Issue 52, item 3: every analysis that can lack evidence — leaks, each kind of growth (leak,
//! retained graph), categories, capacity — says `found`, `none` or `cannot_judge` (why, and
//! what to record), the state follows from the report's own numbers by the rule written here
//! independently, and text and the page's JSON say the same, on every sample and real file.

use crate::common;
use common::*;
use serde_json::Value;
use std::path::Path;

/// `memlens ARGS FILE --format json` and `memlens ARGS FILE` (text, 100 columns), with
/// whitespace flattened (text wraps between tokens only).
fn both(args: &[&str], file: &Path) -> (Value, String) {
    let f = file.to_str().unwrap();
    let mut a: Vec<&str> = args.to_vec();
    a.extend([f, "--format", "json"]);
    let o = memlens(&a);
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{a:?}: {e}: {}", String::from_utf8_lossy(&o.stderr)));
    let mut a: Vec<&str> = args.to_vec();
    a.extend([f, "--width", "100"]);
    let o = memlens(&a);
    let text = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (v, text)
}

fn state(j: &Value) -> &str {
    j["state"]
        .as_str()
        .unwrap_or_else(|| panic!("not a judgement: {j}"))
}

/// A judgement's `record` is there exactly when it cannot judge.
fn well_formed(what: &str, j: &Value) {
    assert!(
        matches!(state(j), "found" | "none" | "cannot_judge"),
        "{what}: {j}"
    );
    assert!(!j["why"].as_str().unwrap().is_empty(), "{what}: {j}");
    assert_eq!(
        j["record"].is_string(),
        state(j) == "cannot_judge",
        "{what}: {j}"
    );
}

/// `cannot judge: WHY; record RECORD`, as text says it.
fn sentence(j: &Value) -> String {
    match state(j) {
        "cannot_judge" => format!(
            "cannot judge: {}; record {}",
            j["why"].as_str().unwrap(),
            j["record"].as_str().unwrap()
        ),
        s => s.to_string(),
    }
}

/// Leaks: each kind follows from the growth judgement and the findings; text names each kind
/// when growth was found.
fn check_leaks(name: &str, v: &Value, text: &str) {
    let growth = &v["judgement"];
    for key in ["judgement", "leak", "retained_graph"] {
        well_formed(&format!("{name} leaks.{key}"), &v[key]);
    }
    let findings = v["findings"].as_array().unwrap();
    let told = |kind: &str| {
        findings
            .iter()
            .any(|f| f["kind"] == kind && (kind == "retained_graph" || f["site"] != "<no frames>"))
    };
    match state(growth) {
        "found" => {
            for kind in ["leak", "retained_graph"] {
                let want = if told(kind) { "found" } else { "none" };
                let got = state(&v[kind]);
                assert!(
                    got == want
                        || (got == "cannot_judge"
                            && findings.iter().any(|f| f["site"] == "<no frames>")),
                    "{name}: {kind} {got}, the findings say {want}"
                );
            }
            let want = format!(
                "Leak: {}. Retained graph: {}.",
                sentence(&v["leak"]),
                sentence(&v["retained_graph"])
            );
            assert!(text.contains(&want), "{name}: text lacks {want:?}");
        }
        _ => {
            assert!(findings.is_empty(), "{name}");
            assert_eq!(v["leak"], *growth, "{name}");
            assert_eq!(v["retained_graph"], *growth, "{name}");
            assert!(!text.contains("Retained graph:"), "{name}");
        }
    }
}

/// Categories: per device, the state from the rows' bytes (nothing alive: none; more than
/// half unknown: cannot judge; else found); the report's from its devices'; text says what is
/// not `found`.
fn check_categories(name: &str, v: &Value, text: &str) {
    let devices = v["devices"].as_array().unwrap();
    let mut states = Vec::new();
    for d in devices {
        let j = &d["judgement"];
        well_formed(&format!("{name} categories device {}", d["device"]), j);
        let live = d["live_requested_bytes"].as_u64().unwrap();
        let rows = d["categories"].as_array().unwrap();
        assert_eq!(
            rows.iter()
                .map(|r| r["bytes"].as_u64().unwrap())
                .sum::<u64>(),
            live,
            "{name}"
        );
        let unknown: u64 = rows
            .iter()
            .filter(|r| r["category"] == "unknown")
            .map(|r| r["bytes"].as_u64().unwrap())
            .sum();
        let want = if live == 0 {
            "none"
        } else if unknown * 2 > live {
            "cannot_judge"
        } else {
            "found"
        };
        assert_eq!(state(j), want, "{name} device {}: {j}", d["device"]);
        match want {
            "cannot_judge" => assert!(
                text.contains(&format!("{}.", sentence(j))),
                "{name}: {text}"
            ),
            "none" => assert!(text.contains("Nothing is alive at the moment."), "{name}"),
            _ => {}
        }
        states.push(want);
    }
    let top = &v["judgement"];
    well_formed(&format!("{name} categories"), top);
    let want = if states.is_empty() || states.contains(&"cannot_judge") {
        "cannot_judge"
    } else if states.iter().all(|s| *s == "none") {
        "none"
    } else {
        "found"
    };
    assert_eq!(state(top), want, "{name}: {top}");
}

/// Capacity: no plan is `cannot_judge`; a plan that fits now is `none`; else `found`; text says
/// "Capacity: cannot judge" without a plan.
fn check_capacity(name: &str, v: &Value, text: &str) {
    for d in v["devices"].as_array().unwrap() {
        let j = &d["capacity"];
        well_formed(&format!("{name} fit device {} capacity", d["device"]), j);
        let plan = &d["plan"];
        let want = if plan.is_null() {
            "cannot_judge"
        } else if plan["fits_now"] == true {
            "none"
        } else {
            "found"
        };
        assert_eq!(state(j), want, "{name}: {j}");
        if want == "cannot_judge" {
            let line = format!("Capacity: {}.", sentence(j));
            assert!(text.contains(&line), "{name}: text lacks {line:?}");
        }
    }
}

/// Every sample and every real snapshot: each judgement by its rule, the same in text and in
/// the page's JSON (whose advice is `fit`'s at the same moment).
#[test]
fn every_judgement_follows_from_its_report_on_every_file() {
    let mut files = samples();
    files.retain(|p| p.extension().and_then(|e| e.to_str()) == Some("pickle"));
    files.extend(require_shared().unwrap_or_default());
    let mut states = std::collections::BTreeSet::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let (leaks, text) = both(&["leaks"], file);
        check_leaks(&name, &leaks, &text);
        let (categories, text) = both(&["categories"], file);
        check_categories(&name, &categories, &text);
        let (fit, text) = both(&["fit"], file);
        check_capacity(&name, &fit, &text);
        let o = memlens(["report", file.to_str().unwrap(), "--format", "json"]);
        let page: Value = serde_json::from_slice(&o.stdout).unwrap();
        for key in ["judgement", "leak", "retained_graph"] {
            assert_eq!(page["leaks"][key], leaks[key], "{name}: page leaks.{key}");
        }
        assert_eq!(
            page["categories"]["judgement"], categories["judgement"],
            "{name}"
        );
        for (a, f) in page["advice"]
            .as_array()
            .unwrap()
            .iter()
            .zip(fit["devices"].as_array().unwrap())
        {
            assert_eq!(a["capacity"], f["capacity"], "{name}: page advice capacity");
        }
        for (what, j) in [
            ("leaks", &leaks["judgement"]),
            ("leak", &leaks["leak"]),
            ("retained_graph", &leaks["retained_graph"]),
            ("categories", &categories["judgement"]),
        ] {
            states.insert((what, state(j).to_string()));
        }
        for d in fit["devices"].as_array().unwrap() {
            states.insert(("capacity", state(&d["capacity"]).to_string()));
        }
    }
    // A capacity given: the same rule, and what fits is `none`.
    for cap in ["80GiB", "100MiB"] {
        let (fit, text) = both(&["fit", "--capacity", cap], &sample("train_small.pickle"));
        check_capacity(&format!("train_small --capacity {cap}"), &fit, &text);
        states.insert((
            "capacity",
            state(&fit["devices"][0]["capacity"]).to_string(),
        ));
    }
    // The files exercise every state of every analysis.
    for what in ["leaks", "leak", "retained_graph", "categories", "capacity"] {
        for s in ["found", "none", "cannot_judge"] {
            if what == "categories" && s == "none" {
                continue; // no committed file is empty at its peak: the unit test covers it
            }
            assert!(
                states.contains(&(what, s.to_string())),
                "{what}: no file is {s}: {states:?}"
            );
        }
    }
}
