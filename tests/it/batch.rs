//! `memlens batch`: rows per file, the rank imbalance, failures, and the real snapshots.

use crate::common;
use common::*;
use serde_json::Value;

fn jsonl(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn rank_set_finds_the_outlier() {
    let t: Value =
        serde_json::from_slice(&std::fs::read(sample("truth/ranks.json")).unwrap()).unwrap();
    let o = memlens_in_root(["batch", "samples/ranks", "--format", "jsonl"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines = jsonl(&o.stdout);
    assert_eq!(lines.len(), 5);
    for (r, line) in lines[..4].iter().enumerate() {
        assert_eq!(line["kind"], "file");
        assert_eq!(line["schema_version"], 1);
        assert_eq!(line["rank"], r);
        assert_eq!(line["peak_device"], r, "rank r uses cuda:r");
        assert_eq!(line["peak_bytes"], t["peak_bytes_by_rank"][r]);
    }
    let imb = &lines[4];
    assert_eq!(imb["kind"], "imbalance");
    assert_eq!(imb["outlier_rank"], t["outlier_rank"]);
    assert_eq!(imb["median_peak_bytes"], t["peak_bytes_by_rank"][0]);
    let want_site = t["outlier_site"].as_str().unwrap();
    let top = &imb["sites"][0];
    assert!(
        want_site.ends_with(top["site"].as_str().unwrap()),
        "{top} vs {want_site}"
    );
    assert_eq!(top["excess_bytes"], t["outlier_extra_bytes"]);
    let ratio = imb["max_over_median"].as_f64().unwrap();
    assert!((ratio - 1694588932.0 / 620847108.0).abs() < 1e-9);
}

#[test]
fn table_golden_and_csv() {
    let o = memlens_in_root([
        "batch",
        "samples/ranks/rank0.pickle",
        "samples/ranks/rank1.pickle",
        "samples/ranks/rank2.pickle",
        "samples/ranks/rank3.pickle",
        "--jobs",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(0));
    golden("batch_ranks.txt", &o.stdout);
    let o = memlens_in_root(["batch", "samples/ranks", "--format", "csv"]);
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5);
    assert!(lines[0].starts_with("file,rank,ok,"));
    assert!(lines[3].contains(",1694588932,"), "{}", lines[3]);
}

#[test]
fn globs_and_jobs_agree() {
    let a = memlens_in_root([
        "batch",
        "samples/ranks/rank*.pickle",
        "--jobs",
        "1",
        "--format",
        "jsonl",
    ]);
    let b = memlens_in_root(["batch", "samples/ranks", "--jobs", "2", "--format", "jsonl"]);
    assert_eq!(a.status.code(), Some(0));
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn corrupt_file_is_reported_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    for r in [0, 1] {
        std::fs::copy(
            sample(&format!("ranks/rank{r}.pickle")),
            dir.path().join(format!("rank{r}.pickle")),
        )
        .unwrap();
    }
    let bytes = std::fs::read(sample("ranks/rank2.pickle")).unwrap();
    std::fs::write(dir.path().join("rank2.pickle"), &bytes[..bytes.len() / 3]).unwrap();
    std::fs::write(dir.path().join("notes.md"), "not a snapshot").unwrap();
    let o = memlens([
        "batch".as_ref(),
        dir.path().as_os_str(),
        "--format".as_ref(),
        "jsonl".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(2), "any failure exits 2");
    let lines = jsonl(&o.stdout);
    assert_eq!(lines.len(), 4, "3 rows + imbalance of the 2 good ranks");
    assert_eq!(lines[0]["ok"], true);
    assert_eq!(lines[1]["ok"], true);
    assert_eq!(lines[2]["ok"], false);
    assert!(lines[2]["error"].as_str().unwrap().contains("truncated"));
    assert_eq!(lines[3]["kind"], "imbalance");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("rank2.pickle") && err.contains("truncated"),
        "{err}"
    );
    // The table still shows the good rows.
    let o = memlens(["batch".as_ref(), dir.path().as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("592.09 MiB") && out.contains("error: "),
        "{out}"
    );
    // A path that names nothing is a failed row too.
    let o = memlens_in_root([
        "batch",
        "samples/ranks/rank0.pickle",
        "samples/none.pickle",
        "--format",
        "csv",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 3);
}

#[test]
fn every_real_snapshot_in_one_batch() {
    let Some(files) = require_shared() else {
        return;
    };
    let dir = shared_real_dir();
    let o = memlens([
        "batch".as_ref(),
        dir.as_os_str(),
        "--format".as_ref(),
        "jsonl".as_ref(),
    ]);
    let lines = jsonl(&o.stdout);
    let rows: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "file").collect();
    assert_eq!(rows.len(), files.len(), "one row per file");
    for r in &rows {
        assert_eq!(r["ok"], true, "{r}");
    }
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
