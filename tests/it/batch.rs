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

/// The median and the threshold of the cross-rank rule, computed here from the rows alone:
/// more than max(3 × 1.4826 × MAD, median / 10, 1 MiB) above the median stands out.
fn independent_rule(values: &[u64]) -> (u64, u64) {
    fn med(mut v: Vec<u64>) -> u64 {
        v.sort();
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            ((v[n / 2 - 1] as u128 + v[n / 2] as u128) / 2) as u64
        }
    }
    let m = med(values.to_vec());
    let mad = med(values.iter().map(|&x| x.abs_diff(m)).collect());
    let robust = (3.0 * 1.4826 * mad as f64).ceil() as u64;
    (m, robust.max(m / 10).max(1 << 20))
}

/// Ten real snapshots as one job's ranks (eight runs of one project, one that ran out of
/// memory, one that records no allocator settings): `cross_rank` names exactly the ranks the
/// rule names from `batch`'s own rows, the OOM rank with `oom`'s time, the settings that
/// differ as `summary` reads them, and what it cannot judge.
#[test]
fn cross_rank_of_real_snapshots_as_ranks() {
    if require_shared().is_none() {
        return;
    }
    let real = shared_real_dir();
    let mut names: Vec<String> = std::fs::read_dir(&real)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("Wedsonlin__"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 8, "{names:?}");
    names.push("Constructor-Sun__code_location__memory_snapshot.pickle".into());
    names.push("JasperSolt__EoR_NN__snapshot.pickle".into());
    let tmp = tempfile::tempdir().unwrap();
    for (r, n) in names.iter().enumerate() {
        std::os::unix::fs::symlink(real.join(n), tmp.path().join(format!("rank{r}.pickle")))
            .unwrap();
    }
    let o = memlens([
        "batch".as_ref(),
        tmp.path().as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let x = &v["cross_rank"];
    assert_eq!(x["ranks"], 10);
    let peaks: Vec<(u64, u64)> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rank"].as_u64().unwrap(),
                f["peak_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let (m, thr) = independent_rule(&peaks.iter().map(|p| p.1).collect::<Vec<_>>());
    assert_eq!(x["median_peak_bytes"], m);
    assert_eq!(x["peak_threshold_bytes"], thr);
    let mut want: Vec<(u64, u64)> = peaks
        .iter()
        .filter(|p| p.1 > m + thr)
        .map(|p| (p.1 - m, p.0))
        .collect();
    want.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let got: Vec<(u64, u64)> = x["outliers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["excess_bytes"].as_u64().unwrap(),
                o["rank"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert!(
        !want.is_empty(),
        "Constructor-Sun's 84 GB peak stands out among these"
    );
    // The OOM: rank 8, at the time `oom` gives its first event.
    let oom = memlens([
        "oom".as_ref(),
        real.join(&names[8]).as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let oom: Value = serde_json::from_slice(&oom.stdout).unwrap();
    let first_time = oom["ooms"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["time_us"].as_i64())
        .min()
        .unwrap();
    assert_eq!(x["first_oom"]["rank"], 8);
    assert_eq!(x["first_oom"]["oom"]["time_us"], first_time);
    assert_eq!(x["ranks_with_oom"], 1);
    // Settings: the keys whose values differ among the nine files that record them, as
    // `summary` reads each file's settings.
    let mut per_rank: Vec<serde_json::Map<String, Value>> = Vec::new();
    for n in &names[..9] {
        let s = memlens([
            "summary".as_ref(),
            real.join(n).as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
        ]);
        let s: Value = serde_json::from_slice(&s.stdout).unwrap();
        per_rank.push(s["allocator_settings"].as_object().unwrap().clone());
    }
    let keys: std::collections::BTreeSet<&String> =
        per_rank.iter().flat_map(|m| m.keys()).collect();
    let differ: Vec<&String> = keys
        .into_iter()
        .filter(|k| per_rank.iter().any(|m| m.get(*k) != per_rank[0].get(*k)))
        .collect();
    let got: Vec<&str> = x["settings_differ"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["key"].as_str().unwrap())
        .collect();
    assert_eq!(got, differ.iter().map(|k| k.as_str()).collect::<Vec<_>>());
    let cannot: Vec<&str> = x["cannot_judge"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(
        cannot,
        ["whether allocator settings differ: 1 of 10 ranks' files do not record them (PyTorch before 2.5)"]
    );
    // The text says the same.
    let t = memlens(["batch".as_ref(), tmp.path().as_os_str()]);
    let text = String::from_utf8_lossy(&t.stdout);
    assert!(text.contains("Across 10 ranks: "), "{text}");
    assert!(
        text.contains("First out of memory: rank 8 (1 rank ran out)"),
        "{text}"
    );
    assert!(
        text.contains("cannot judge whether allocator settings differ"),
        "{text}"
    );
}

/// Forty ranks (samples/ranks four times over): the imbalance table lists the 16 highest and
/// one line for the other 24; the cross-rank answer names the ten copies of rank 2.
#[test]
fn forty_ranks_fit_and_the_copies_of_the_outlier_stand_out() {
    let tmp = tempfile::tempdir().unwrap();
    for r in 0..40 {
        std::os::unix::fs::symlink(
            root().join(format!("samples/ranks/rank{}.pickle", r % 4)),
            tmp.path().join(format!("rank{r}.pickle")),
        )
        .unwrap();
    }
    let t = memlens(["batch".as_ref(), tmp.path().as_os_str()]);
    assert_eq!(t.status.code(), Some(0));
    let text = String::from_utf8_lossy(&t.stdout);
    assert!(
        text.contains("… and 24 more ranks, peaks ") && text.contains("(the highest 16 above)"),
        "{text}"
    );
    let j = memlens([
        "batch".as_ref(),
        tmp.path().as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let v: Value = serde_json::from_slice(&j.stdout).unwrap();
    let mut out: Vec<u64> = v["cross_rank"]["outliers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["rank"].as_u64().unwrap())
        .collect();
    out.sort();
    assert_eq!(out, (0..40).filter(|r| r % 4 == 2).collect::<Vec<u64>>());
    assert!(
        text.contains("Across 40 ranks: 10 ranks stand out"),
        "{text}"
    );
}
