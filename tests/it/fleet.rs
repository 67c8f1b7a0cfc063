//! The fleet recipe (`examples/fleet_scan.py`, `docs/scale.md`): memlens as the map step of
//! Dask's local scheduler over a directory of snapshots, then DuckDB's answer, checked
//! against values memlens computes without Dask or DuckDB: `batch --format json` for the
//! worst ranks of `samples/ranks`, `diff --format json` for the sites that grew between two
//! runs.

use crate::common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn fleet_scan(snapshots: &Path, dataset: &Path, scheduler: &str) -> Value {
    let o = Command::new(python3())
        .arg(root().join("examples/fleet_scan.py"))
        .arg(snapshots)
        .arg(dataset)
        .args(["--json", "--shard-size", "1", "--workers", "2"])
        .args(["--scheduler", scheduler])
        .env("MEMLENS_BIN", env!("CARGO_BIN_EXE_memlens"))
        .output()
        .expect("run python3");
    assert!(
        o.status.success(),
        "fleet_scan.py failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON answer")
}

fn json_of(args: &[&str]) -> Value {
    let o = memlens_in_root(args);
    assert!(o.status.success(), "{args:?}");
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn worst_ranks_of_a_rank_set() {
    if !require_python_modules(&["duckdb", "dask.bag"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let got = fleet_scan(
        &root().join("samples/ranks"),
        &tmp.path().join("ds"),
        "threads",
    );
    assert_eq!(got["files"], 4);
    assert_eq!(got["shards"], 4);
    // Independently: batch's rows and imbalance.
    let batch = json_of(&["batch", "--format", "json", "samples/ranks"]);
    let imb = &batch["imbalance"];
    let worst = got["worst_ranks"].as_array().unwrap();
    assert_eq!(worst.len(), 4);
    assert_eq!(worst[0]["rank"], imb["outlier_rank"]);
    assert_eq!(worst[0]["peak_bytes"], imb["max_peak_bytes"]);
    let ratio = imb["max_over_median"].as_f64().unwrap();
    assert!((worst[0]["over_median"].as_f64().unwrap() - ratio).abs() < 5e-4);
    // Every rank's peak and top site as batch has them, highest first (rank on ties).
    let mut want: Vec<(u64, u64, String)> = batch["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["peak_bytes"].as_u64().unwrap(),
                r["rank"].as_u64().unwrap(),
                r["top_site"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    want.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let got_rows: Vec<(u64, u64, String)> = worst
        .iter()
        .map(|r| {
            (
                r["peak_bytes"].as_u64().unwrap(),
                r["rank"].as_u64().unwrap(),
                r["top_site"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(got_rows, want);
    // samples/truth/ranks.json: rank 2 keeps an extra 1 GiB at eval.py:31.
    assert_eq!(worst[0]["rank"], 2);
    assert_eq!(worst[0]["top_site"], "eval.py:31:gather_predictions");
    // One run: nothing to compare across runs.
    assert_eq!(got["grown_sites"], serde_json::json!([]));
}

#[test]
fn sites_that_grew_between_two_runs() {
    if !require_python_modules(&["duckdb", "dask.bag"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let snaps = tmp.path().join("snapshots");
    for (run, src) in [("run1", "diff_base.pickle"), ("run2", "diff_cand.pickle")] {
        std::fs::create_dir_all(snaps.join(run)).unwrap();
        std::fs::copy(sample(src), snaps.join(run).join("rank0.pickle")).unwrap();
    }
    let got = fleet_scan(&snaps, &tmp.path().join("ds"), "processes");
    // Independently: memlens diff of the two files (sites keyed the same way, at the peak).
    let diff = json_of(&[
        "diff",
        "samples/diff_base.pickle",
        "samples/diff_cand.pickle",
        "--format",
        "json",
    ]);
    let mut want: Vec<(String, u64, u64)> = diff["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "new" || s["status"] == "grown")
        .map(|s| {
            (
                s["site"].as_str().unwrap().to_string(),
                s["cand_bytes"].as_u64().unwrap(),
                s["delta_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    want.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    assert!(!want.is_empty());
    let grown: Vec<(String, u64, u64)> = got["grown_sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(
                (&r["from_run"], &r["to_run"]),
                (&"run1".into(), &"run2".into())
            );
            (
                r["site"].as_str().unwrap().to_string(),
                r["after_bytes"].as_u64().unwrap(),
                r["growth_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(grown, want);
    // The worst rank is run2's, at diff's candidate peak.
    assert_eq!(got["worst_ranks"][0]["run"], "run2");
    assert_eq!(got["worst_ranks"][0]["peak_bytes"], diff["peak"]["cand"]);
}
