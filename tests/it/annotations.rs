//! Issue 39, items 1 and 2: `annotate` events attached to the allocation live at their
//! address, and the entries' `user_metadata` grouped by `top --by metadata[:KEY]`, on
//! `samples/annotated.pickle` against `samples/truth/annotations.json` (computed by
//! `samples/gen/memgen/annotations.py`).

use crate::common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;

const SAMPLE: &str = "samples/annotated.pickle";

fn truth() -> Value {
    common::truth("annotations")["annotated.pickle"].clone()
}

fn json(args: &[&str]) -> Value {
    json_ok(args)
}

/// Short site (`train.py:41:train_step`) of a row's full site path.
fn short(site: &str) -> String {
    site.rsplit('/').next().unwrap().to_string()
}

#[test]
fn top_rows_carry_each_sites_annotations() {
    let t = truth();
    let v = json(&["top", SAMPLE, "--format", "json", "-n", "50"]);
    let mut got: BTreeMap<String, BTreeMap<String, (u64, u64)>> = BTreeMap::new();
    for r in v["devices"][0]["sites"].as_array().unwrap() {
        let Some(a) = r["annotations"].as_array() else {
            continue;
        };
        let row = got.entry(short(r["site"].as_str().unwrap())).or_default();
        for n in a {
            row.insert(
                n["text"].as_str().unwrap().to_string(),
                (n["count"].as_u64().unwrap(), n["bytes"].as_u64().unwrap()),
            );
        }
    }
    let mut want: BTreeMap<String, BTreeMap<String, (u64, u64)>> = BTreeMap::new();
    for (site, texts) in t["per_site_annotations"].as_object().unwrap() {
        // The top moment is the peak: every annotated allocation of the truth is live there.
        let row = want.entry(site.clone()).or_default();
        for (text, c) in texts.as_object().unwrap() {
            row.insert(
                text.clone(),
                (c["count"].as_u64().unwrap(), c["bytes"].as_u64().unwrap()),
            );
        }
    }
    assert_eq!(got, want);
    // Annotations stay in trace order on their allocation; the activation has two.
    let two = t["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["annotations"].as_array().unwrap().len() == 2)
        .unwrap();
    assert_eq!(two["annotations"][0], "packed into autograd graph");
}

#[test]
fn a_realloc_at_the_same_address_starts_clean_and_dead_addresses_are_unattached() {
    let t = truth();
    // The freed temporary (no annotations) and its successor at the same address (one).
    let allocs = t["allocations"].as_array().unwrap();
    let same: Vec<&Value> = allocs
        .iter()
        .filter(|a| a["addr"] == allocs[2]["addr"])
        .collect();
    assert_eq!(same.len(), 2);
    assert!(same[0]["annotations"].as_array().unwrap().is_empty());
    assert_eq!(same[1]["annotations"].as_array().unwrap().len(), 1);
    assert_eq!(t["unattached"], 1);
    // memlens: the realloc's site carries only its own text.
    let v = json(&["top", SAMPLE, "--format", "json", "-n", "50"]);
    let total: u64 = v["devices"][0]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["annotations"].as_array())
        .flatten()
        .map(|n| n["count"].as_u64().unwrap())
        .sum();
    let want: u64 = allocs
        .iter()
        .map(|a| a["annotations"].as_array().unwrap().len() as u64)
        .sum();
    assert_eq!(
        total, want,
        "the dead-address annotate is attached to nothing"
    );
}

#[test]
fn top_by_metadata_key_groups_live_bytes_at_the_peak() {
    let t = truth();
    assert_eq!(t["moment"], "peak");
    let v = json(&[
        "top",
        SAMPLE,
        "--by",
        "metadata:phase",
        "--format",
        "json",
        "-n",
        "50",
    ]);
    assert_eq!(v["by"], "metadata");
    let got: BTreeMap<String, u64> = v["devices"][0]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["site"].as_str().unwrap().to_string(),
                r["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: BTreeMap<String, u64> = t["metadata_phase_live_bytes_at_peak"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, b)| (k.clone(), b.as_u64().unwrap()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        v["devices"][0]["live_requested_bytes"],
        t["peak_live_bytes"]
    );
}

#[test]
fn top_by_whole_metadata_keeps_user_and_internal_apart() {
    let t = truth();
    let v = json(&["top", SAMPLE, "--by", "metadata", "--format", "json"]);
    let labels: Vec<String> = v["devices"][0]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["site"].as_str().unwrap().to_string())
        .collect();
    for a in t["allocations"].as_array().unwrap() {
        let md = a["user_metadata"].as_str().unwrap();
        let want = if md.is_empty() { "(none)" } else { md };
        assert!(labels.iter().any(|l| l == want), "{want} in {labels:?}");
        let internal = a["internal_metadata"].as_str().unwrap();
        if !internal.is_empty() {
            assert!(!labels.iter().any(|l| l.contains(internal)));
        }
    }
}

#[test]
fn a_bad_by_is_a_usage_error() {
    let o = memlens_in_root(["top", SAMPLE, "--by", "metadata:"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `samples/annotated_graph.pickle`: six steps each keep a tensor annotated "packed into
/// autograd graph" outside any module's forward; an annotate made before its tensor existed
/// marks nothing. `leaks` names the retained graph on the annotation's evidence and lists the
/// annotation per finding and per site (JSON), and in words (text).
#[test]
fn leaks_use_and_list_the_annotations_of_kept_tensors() {
    let t = common::truth("annotations")["annotated_graph.pickle"].clone();
    let want = &t["finding"];
    // A finding: exit code 1.
    let run = |args: &[&str]| {
        let o = memlens_in_root(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        o.stdout
    };
    let v: Value = serde_json::from_slice(&run(&[
        "leaks",
        "samples/annotated_graph.pickle",
        "--format",
        "json",
    ]))
    .unwrap();
    let f = &v["findings"].as_array().unwrap();
    assert_eq!(f.len(), 1, "{v}");
    let f = &f[0];
    for key in [
        "kind",
        "graph_evidence",
        "bytes_per_step",
        "live_bytes_at_end",
        "tensors_at_end",
    ] {
        assert_eq!(f[key], want[key], "{key}");
    }
    assert_eq!(short(f["site"].as_str().unwrap()), want["site"]);
    assert_eq!(f["annotations"], t["annotations"]);
    assert_eq!(f["sites"][0]["annotations"], t["annotations"]);
    let text = String::from_utf8(run(&["leaks", "samples/annotated_graph.pickle"])).unwrap();
    assert!(
        text.contains("Annotated: \"packed into autograd graph\" on 6 tensors (6.00 MiB)"),
        "{text}"
    );
    assert!(!text.contains("not yet made"), "{text}");
}
