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
    assert_eq!(lines.len(), 6);
    // The last line is the cross-rank answer, the same as `--format json`'s.
    assert_eq!(lines[5]["kind"], "cross_rank");
    let doc = memlens_in_root(["batch", "samples/ranks", "--format", "json"]);
    let doc: Value = serde_json::from_slice(&doc.stdout).unwrap();
    let mut line = lines[5].clone();
    let line = line.as_object_mut().unwrap();
    line.remove("kind");
    line.remove("schema_version");
    assert_eq!(Value::Object(line.clone()), doc["cross_rank"]);
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
    assert_eq!(
        lines.len(),
        5,
        "3 rows + imbalance and cross-rank answer of the 3 ranked files"
    );
    assert_eq!(lines[0]["ok"], true);
    assert_eq!(lines[1]["ok"], true);
    assert_eq!(lines[2]["ok"], false);
    assert!(lines[2]["error"].as_str().unwrap().contains("truncated"));
    assert_eq!(lines[3]["kind"], "imbalance");
    assert_eq!(lines[4]["kind"], "cross_rank");
    assert_eq!(lines[4]["ranks"], 2, "the two ranks read");
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

/// The peak `batch` reads for each of `files` (one run), by path.
fn peaks_of(files: &[std::path::PathBuf]) -> std::collections::BTreeMap<String, u64> {
    let mut args: Vec<std::ffi::OsString> = vec!["batch".into(), "--format".into(), "json".into()];
    args.extend(files.iter().map(|f| f.as_os_str().to_owned()));
    let o = memlens(args);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["file"].as_str().unwrap().to_string(),
                f["peak_bytes"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A pipeline-parallel job dumped at two steps, torchtitan's way
/// (`iteration_N/rankR_memory_snapshot.pickle`), 16 ranks as tp 2 × dp 4 × pp 2 (Megatron's
/// order: tp fastest, then dp, then pp). At step 20 stage 0 (ranks 0-7) holds more than stage
/// 1 by design, and rank 13 of stage 1 holds as much as stage 0: only it stands out within its
/// stage, and no rank stands out across all 16. The answer is about step 20, the step × rank
/// matrix has both steps, and the paths' coordinates (`tp1_pp0_dp3`) group the ranks as the
/// topology file does. Every expected figure is computed here from `batch`'s rows.
#[test]
fn a_pipeline_job_over_two_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let big = root().join("samples/ranks/rank2.pickle");
    let small = root().join("samples/ranks/rank0.pickle");
    let peaks = peaks_of(&[big.clone(), small.clone()]);
    let (big_peak, small_peak) = (
        peaks[&big.display().to_string()],
        peaks[&small.display().to_string()],
    );
    assert!(big_peak > small_peak * 2, "{big_peak} {small_peak}");
    let coords = |r: u32| (r % 2, (r / 2) % 4, r / 8); // (tp, dp, pp)
    let source = |step: u32, r: u32| {
        if step == 20 && (coords(r).2 == 0 || r == 13) {
            &big
        } else {
            &small
        }
    };
    for step in [10, 20] {
        let dir = tmp.path().join(format!("iteration_{step}"));
        std::fs::create_dir(&dir).unwrap();
        for r in 0..16 {
            std::os::unix::fs::symlink(
                source(step, r),
                dir.join(format!("rank{r}_memory_snapshot.pickle")),
            )
            .unwrap();
        }
    }
    let topo = tmp.path().join("topology.json");
    std::fs::write(&topo, r#"{"tp": 2, "dp": 4, "pp": 2}"#).unwrap();
    let glob = format!("{}/**/rank*.pickle", tmp.path().display());
    let o = memlens([
        "batch".as_ref(),
        glob.as_ref(),
        "--topology".as_ref(),
        topo.as_os_str(),
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
    assert_eq!(x["at_step"], 20);
    assert_eq!(x["ranks"], 16);
    let at20: Vec<u64> = (0..16)
        .map(|r| {
            if coords(r).2 == 0 || r == 13 {
                big_peak
            } else {
                small_peak
            }
        })
        .collect();
    let (m, thr) = independent_rule(&at20);
    assert_eq!(
        (
            x["median_peak_bytes"].as_u64(),
            x["peak_threshold_bytes"].as_u64()
        ),
        (Some(m), Some(thr))
    );
    assert_eq!(
        x["outliers"],
        Value::Array(vec![]),
        "nine of sixteen ranks are big: none stands out"
    );
    // The step × rank matrix: both steps, every rank.
    let s = &x["steps"];
    assert_eq!(s["source"], "path");
    assert_eq!(s["steps"], serde_json::json!(["10", "20"]));
    assert_eq!(s["ranks"].as_array().unwrap().len(), 16);
    for (r, row) in s["ranks"].as_array().unwrap().iter().enumerate() {
        assert_eq!(row["rank"], r);
        assert_eq!(row["peaks"], serde_json::json!([small_peak, at20[r]]));
    }
    assert_eq!(s["columns"][0]["median_bytes"], small_peak);
    assert_eq!(s["columns"][0]["outlier_ranks"], serde_json::json!([]));
    assert_eq!(s["columns"][1]["median_bytes"], m);
    assert_eq!(s["columns"][1]["max_rank"], 0);
    // By parallel coordinates: pp separates the medians; within stage 1 rank 13 stands out.
    let p = &x["parallel"];
    assert_eq!(p["source"], "topology");
    assert_eq!(p["ranks_placed"], 16);
    let axes: Vec<&str> = p["by_axis"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["axis"].as_str().unwrap())
        .collect();
    assert_eq!(axes, ["tp", "dp", "pp"]);
    let pp = &p["by_axis"][2];
    assert_eq!(pp["groups"][0]["median_peak_bytes"], big_peak);
    let stage1: Vec<u64> = (8..16).map(|r| at20[r as usize]).collect();
    let (m1, thr1) = independent_rule(&stage1);
    assert_eq!(pp["groups"][1]["median_peak_bytes"], m1);
    assert_eq!(pp["between_bytes"], big_peak - m1);
    assert_eq!(pp["within_bytes"], big_peak - small_peak);
    assert!(big_peak > m1 + thr1);
    assert_eq!(p["widest_axis"], "pp");
    assert_eq!(p["stages_judged"], 2);
    assert_eq!(
        p["stage_outliers"],
        serde_json::json!([{"rank": 13, "stage": 1, "peak_bytes": big_peak, "stage_median_bytes": m1, "excess_bytes": big_peak - m1, "stage_ranks": 8}])
    );
    // The text says it.
    let t = memlens([
        "batch".as_ref(),
        glob.as_ref(),
        "--topology".as_ref(),
        topo.as_os_str(),
    ]);
    let text = String::from_utf8_lossy(&t.stdout);
    for want in [
        "the answer below is about step 20",
        "Across 16 ranks: no rank's peak stands out",
        "By parallel coordinates (from --topology, 16 ranks placed):",
        "Stands out within pipeline stage 1: rank 13,",
        "Peaks follow pp: its medians lie ",
        "Peak per step across ranks (the paths name the steps):",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    // The same coordinates from the paths give the same groups.
    let named = tmp.path().join("named");
    std::fs::create_dir(&named).unwrap();
    for r in 0..16 {
        let (tp, dp, pp) = coords(r);
        std::os::unix::fs::symlink(
            source(20, r),
            named.join(format!("rank{r}_tp{tp}_dp{dp}_pp{pp}.pickle")),
        )
        .unwrap();
    }
    let o = memlens([
        "batch".as_ref(),
        named.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    let w: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(w["cross_rank"]["parallel"]["source"], "names");
    assert_eq!(w["cross_rank"]["parallel"]["by_axis"], p["by_axis"]);
    assert_eq!(
        w["cross_rank"]["parallel"]["stage_outliers"],
        p["stage_outliers"]
    );
    assert_eq!(w["cross_rank"]["at_step"], Value::Null);
    // A topology too small for the ranks is one line and exit 2.
    let small_topo = tmp.path().join("small.json");
    std::fs::write(&small_topo, r#"{"tp": 2, "pp": 2}"#).unwrap();
    let o = memlens([
        "batch".as_ref(),
        named.as_os_str(),
        "--topology".as_ref(),
        small_topo.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("is beyond its 4 ranks (tp 2 × pp 2)"), "{err}");
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, r#"{"tp": 2, "xp": 3}"#).unwrap();
    let o = memlens([
        "batch".as_ref(),
        named.as_os_str(),
        "--topology".as_ref(),
        bad.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("key \"xp\": expected one of tp, cp, ep, dp, pp"));
}
