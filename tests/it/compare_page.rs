//! The page of several runs (`memlens report A B ...`, issue 40): its JSON against independent
//! figures (each run's `timeline`, `diff`, the samples' truth), and the page in headless
//! Chromium (tests/browser/check_runs.mjs): every run's peak and reserved bytes painted at
//! their height, a click on the plot opening both live sets at that moment, the diff tables,
//! the outlier of a job's ranks and the view a click on a run opens.

use crate::common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `memlens report FILES --format json`.
fn runs_json(files: &[&Path]) -> Value {
    let mut args: Vec<String> = vec!["report".into()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["--format".into(), "json".into()]);
    let o = memlens_in_root(&args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Live requested and reserved bytes after every event of `file`'s device `device`, from
/// `memlens timeline --points 0` (event index → (live, reserved)).
fn timeline(file: &Path, device: u64) -> BTreeMap<i64, (u64, u64)> {
    let o = memlens_in_root([
        "timeline",
        file.to_str().unwrap(),
        "--points",
        "0",
        "--format",
        "csv",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = String::from_utf8(o.stdout).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (d, e, live, res) = (
        col("device"),
        col("event_index"),
        col("live_requested_bytes"),
        col("reserved_bytes"),
    );
    lines
        .map(|l| l.split(',').collect::<Vec<&str>>())
        .filter(|f| f[d].parse::<u64>().ok() == Some(device))
        .map(|f| {
            (
                f[e].parse().unwrap(),
                (f[live].parse().unwrap(), f[res].parse().unwrap()),
            )
        })
        .collect()
}

/// What every page of runs must hold, checked against each run's own timeline: each run's
/// peak and most reserved bytes, its line's highest point, and at every moment pair each
/// side's live bytes (the timeline's after that event) split exactly into what only it holds
/// and what it holds at sites both hold.
fn check_against_timelines(files: &[&Path], page: &Value) {
    let runs = page["runs"].as_array().unwrap();
    assert_eq!(runs.len(), files.len());
    let mut lines = Vec::new();
    for (r, file) in runs.iter().zip(files) {
        if r["events"] == 0 {
            assert_eq!(r["points"], serde_json::json!([]), "{}", file.display());
            lines.push(BTreeMap::new());
            continue;
        }
        let t = timeline(file, as_u64(&r["device"]));
        let peak = t.values().map(|v| v.0).max().unwrap();
        let reserved = t.values().map(|v| v.1).max().unwrap();
        assert_eq!(as_u64(&r["peak_bytes"]), peak, "{}", file.display());
        assert_eq!(
            as_u64(&r["max_reserved_bytes"]),
            reserved,
            "{}",
            file.display()
        );
        let pts = r["points"].as_array().unwrap();
        assert!(pts.len() <= 1000, "{} points", pts.len());
        let high = |k: &str| pts.iter().map(|p| as_u64(&p[k])).max().unwrap();
        assert_eq!(high("live_bytes"), peak, "the line reaches the peak");
        assert_eq!(high("reserved_bytes"), reserved);
        assert_eq!(
            r["events"].as_u64().unwrap() as usize,
            t.keys().filter(|e| **e >= 0).count()
        );
        lines.push(t);
    }
    let Some(pair) = page["pair"].as_object() else {
        return;
    };
    let moments = pair["moments"].as_array().unwrap();
    if runs.iter().any(|r| r["events"] == 0) {
        assert!(moments.is_empty(), "a run without a trace has no moment");
        return;
    }
    assert!(moments.len() > 3, "{}", moments.len());
    assert_eq!(moments[0]["kind"], "peak");
    for m in moments {
        for (k, side) in ["base", "cand"].into_iter().enumerate() {
            let s = &m[side];
            let e = s["at"]["event_index"].as_i64().unwrap();
            let live = as_u64(&s["live_bytes"]);
            if let Some((l, r)) = lines[k].get(&e) {
                assert_eq!(live, *l, "{} {side} after event {e}", m["label"]);
                assert_eq!(as_u64(&s["reserved_bytes"]), *r);
            }
            let (only, common) = if side == "base" {
                ("only_base_bytes", "common_base_bytes")
            } else {
                ("only_cand_bytes", "common_cand_bytes")
            };
            assert_eq!(
                as_u64(&m[only]) + as_u64(&m[common]),
                live,
                "{} {side}: only + common = live",
                m["label"]
            );
        }
        // The sites listed are the largest changes, and the changes of the listed and the
        // unlisted sites add up to the live bytes' change.
        let listed: i64 = m["sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["delta_bytes"].as_i64().unwrap())
            .sum();
        if m["more_sites"] == 0 {
            let change =
                as_u64(&m["cand"]["live_bytes"]) as i64 - as_u64(&m["base"]["live_bytes"]) as i64;
            assert_eq!(listed, change, "{}", m["label"]);
        }
    }
}

/// The page as check_runs.mjs reads it (None where no browser is, outside CI).
fn browse(files: &[&Path], shot: Option<&Path>) -> Option<Value> {
    let browser = require_browser()?;
    let script = browser.script.with_file_name("check_runs.mjs");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("page.html");
    let mut args: Vec<String> = vec!["report".into()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["-o".into(), html.display().to_string()]);
    let o = memlens_in_root(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut cmd = std::process::Command::new("node");
    cmd.arg(&script).arg(&html);
    if let Some(s) = shot {
        cmd.arg(s);
    }
    let run = cmd.output().unwrap();
    assert!(
        run.status.success(),
        "the driver failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let page: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(page["ready"], true, "{page}");
    assert_eq!(page["errors"], serde_json::json!([]), "{page}");
    Some(page)
}

/// Each stacked run's live area reaches its peak's height and its reserved line its most
/// reserved bytes' (one row of slack: the reserved line is drawn over the area's top row), on
/// the scale all runs share and on each run's own.
fn check_paint(report: &Value, page: &Value) {
    let runs = report["runs"].as_array().unwrap();
    let highest = |r: &Value| {
        r["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| as_u64(&p["reserved_bytes"]).max(as_u64(&p["live_bytes"])))
            .max()
            .unwrap_or(0)
    };
    let shared = runs.iter().map(highest).max().unwrap();
    assert_eq!(
        as_u64(&page["scale_bytes"]),
        shared,
        "the shared scale is the highest point of any run"
    );
    for (list, own) in [("stacked", false), ("stacked_own", true)] {
        let drawn = page[list].as_array().unwrap();
        assert_eq!(drawn.len(), runs.len(), "{list}");
        for d in drawn {
            let r = &runs[d["run"].as_u64().unwrap() as usize];
            if r["points"].as_array().unwrap().is_empty() {
                // A run without a trace has no line: its canvas stays empty.
                assert_eq!(d["live_top"], 0, "{}", r["file"]);
                continue;
            }
            let scale = if own { highest(r) } else { shared };
            assert_eq!(as_u64(&d["scale_bytes"]), scale, "{list} {}", r["file"]);
            let h = as_u64(&d["height"]) as f64 / d["dpr"].as_f64().unwrap();
            let rows = |bytes: u64| (bytes as f64 / scale as f64 * (h - 2.0)).round() as i64;
            let (live, res) = (
                d["live_top"].as_i64().unwrap(),
                d["reserved_top"].as_i64().unwrap(),
            );
            let (want_l, want_r) = (
                rows(as_u64(&r["peak_bytes"])),
                rows(as_u64(&r["max_reserved_bytes"])),
            );
            assert!(
                (live - want_l).abs() <= 1,
                "{list} {}: live {live} rows, want {want_l}",
                r["file"]
            );
            assert!(
                (res - want_r).abs() <= 1,
                "{list} {}: reserved {res} rows, want {want_r}",
                r["file"]
            );
        }
    }
    for (i, row) in page["runs"].as_array().unwrap().iter().enumerate() {
        assert_eq!(
            row["peak_bytes"], runs[i]["peak_bytes"],
            "runs table row {i}"
        );
    }
}

/// A click on the plot at an event moment shows both live sets there: the totals only one side
/// holds and the sites' changes, as the JSON has them.
fn check_click(report: &Value, page: &Value) {
    let c = &page["clicked"];
    let m = &report["pair"]["moments"][c["moment"].as_u64().unwrap() as usize];
    assert_eq!(m["kind"], "event", "the click chose an event moment: {c}");
    assert_eq!(
        c["label"],
        format!("At a moment: {}", m["label"].as_str().unwrap())
    );
    for (shown, key) in [
        ("only_base", "only_base_bytes"),
        ("only_cand", "only_cand_bytes"),
        ("common_base", "common_base_bytes"),
        ("common_cand", "common_cand_bytes"),
    ] {
        assert_eq!(c[shown], m[key], "{key}");
    }
    let sites: Vec<(String, i64)> = m["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["site"].as_str().unwrap().to_string(),
                s["delta_bytes"].as_i64().unwrap(),
            )
        })
        .collect();
    let shown: Vec<(String, i64)> = serde_json::from_value(c["sites"].clone()).unwrap();
    assert_eq!(shown, sites);
}

/// The generated pair (truth `diff.json`): the page paints both runs, marks the step where
/// they part, lists the category that grew by the truth's bytes, answers a click, and draws
/// the difference.
#[test]
fn the_compare_page_of_the_generated_pair() {
    let (base, cand) = (sample("diff_base.pickle"), sample("diff_cand.pickle"));
    let report = runs_json(&[&base, &cand]);
    check_against_timelines(&[&base, &cand], &report);
    let truth = truth("diff");
    assert_eq!(
        report["runs"][0]["peak_bytes"],
        truth["peak_base"]["peak_bytes"]
    );
    assert_eq!(
        report["runs"][1]["peak_bytes"],
        truth["peak_cand"]["peak_bytes"]
    );
    // The page's diff is `memlens diff`'s.
    let diff = json_ok(&[
        "diff",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(report["pair"]["diff"], diff);
    let Some(page) = browse(&[&base, &cand], None) else {
        return;
    };
    check_paint(&report, &page);
    check_click(&report, &page);
    assert_eq!(strs(&page["axes"]), ["event", "time", "step"]);
    let cats: Vec<(String, i64)> = serde_json::from_value(page["categories"].clone()).unwrap();
    let want: Vec<(String, i64)> = diff["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["category"].as_str().unwrap().into(),
                c["delta_bytes"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(cats, want);
    assert_eq!(
        page["steps_marked"],
        serde_json::json!([diff["steps"]["divergence"]["step"]])
    );
    assert!(page["difference_bars"].as_u64().unwrap() > 0);
    assert_eq!(page["observations"], diff["observations"]);
}

/// The run and its copy with every line of its model file moved: at every moment of the
/// compare page, neither side holds anything the other does not.
#[test]
fn a_shifted_copy_differs_at_no_moment() {
    let (base, cand) = (sample("diff_base.pickle"), sample("diff_shifted.pickle"));
    let report = runs_json(&[&base, &cand]);
    check_against_timelines(&[&base, &cand], &report);
    let pair = &report["pair"];
    assert_eq!(pair["diff"]["sites"], serde_json::json!([]));
    assert!(pair["diff"]["counts"]["moved"].as_u64().unwrap() > 0);
    for m in pair["moments"].as_array().unwrap() {
        assert_eq!(m["only_base_bytes"], 0, "{}", m["label"]);
        assert_eq!(m["only_cand_bytes"], 0, "{}", m["label"]);
        assert_eq!(m["sites"], serde_json::json!([]), "{}", m["label"]);
    }
    for d in pair["difference"].as_array().unwrap() {
        assert!(
            d["points"]
                .as_array()
                .unwrap()
                .iter()
                .all(|p| p["delta_bytes"] == 0),
            "{} axis",
            d["axis"]
        );
    }
}

/// Four ranks of one job, rank 2 keeping an extra 1 GiB (truth `ranks.json`): the page marks
/// rank 2 as the outlier with the site that explains it, paints every rank, and a click on
/// another rank opens its own view (its top sites at its peak).
#[test]
fn many_runs_mark_the_outlier_rank() {
    let files: Vec<PathBuf> = (0..4)
        .map(|r| sample(&format!("ranks/rank{r}.pickle")))
        .collect();
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let report = runs_json(&refs);
    check_against_timelines(&refs, &report);
    let truth = truth("ranks");
    assert_eq!(report["outlier"], truth["outlier_rank"], "{truth}");
    let im = &report["imbalance"];
    assert_eq!(im["outlier_rank"], truth["outlier_rank"]);
    assert!(im["sites"][0]["site"]
        .as_str()
        .unwrap()
        .ends_with("eval.py:31:gather_predictions"));
    assert!(report["pair"].is_null());
    let Some(page) = browse(&refs, None) else {
        return;
    };
    check_paint(&report, &page);
    assert_eq!(
        page["outlier_rows"],
        serde_json::json!([truth["outlier_rank"]])
    );
    let view = &page["run_view"];
    let k = view["run"].as_u64().unwrap() as usize;
    assert_ne!(serde_json::json!(k), truth["outlier_rank"]);
    let want: Vec<(String, u64)> = report["runs"][k]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().into(), as_u64(&s["bytes"])))
        .collect();
    let shown: Vec<(String, u64)> = serde_json::from_value(view["sites"].clone()).unwrap();
    assert_eq!(shown, want);
}

/// A real pair (`../shared/samples/real`: one model at sequence length 128 and 256): the page
/// holds against both timelines, is painted to each run's peak in Chromium, and its step
/// moments are each run's step peaks as `diff` lists them.
#[test]
fn the_compare_page_of_a_real_pair() {
    let (Some(base), Some(cand)) = (
        require_real(
            "Wedsonlin__assignment2-systems__results_medium_128_training_memory_snapshot.pickle",
        ),
        require_real(
            "Wedsonlin__assignment2-systems__results_medium_256_training_memory_snapshot.pickle",
        ),
    ) else {
        return;
    };
    let report = runs_json(&[&base, &cand]);
    check_against_timelines(&[&base, &cand], &report);
    let rows = report["pair"]["diff"]["steps"]["rows"].as_array().unwrap();
    for m in report["pair"]["moments"].as_array().unwrap() {
        if m["kind"] != "step" {
            continue;
        }
        let k: usize = m["label"].as_str().unwrap()[5..].parse().unwrap();
        for side in ["base", "cand"] {
            assert_eq!(
                m[side]["live_bytes"],
                rows[k - 1][side]["peak_bytes"],
                "step {k} {side}"
            );
        }
    }
    let Some(page) = browse(&[&base, &cand], None) else {
        return;
    };
    check_paint(&report, &page);
    check_click(&report, &page);
}

/// Options of the page of one file are refused, in one line, with several.
#[test]
fn options_of_one_page_are_refused_with_several_runs() {
    let (base, cand) = (sample("diff_base.pickle"), sample("diff_cand.pickle"));
    for extra in [
        &["--at", "end"][..],
        &["--window", "0:10"],
        &["--step", "1"],
    ] {
        let mut args = vec!["report", base.to_str().unwrap(), cand.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--format", "json"]);
        let o = memlens_in_root(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("several runs"), "{err}");
    }
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

/// A real sweep (`../shared/samples/real`: one model trained at sequence lengths 128, 256,
/// 512 and 1024). What an engineer reads from it: memory grows with the sequence length, the
/// longest run stands out. The page says so: peaks in that order, the 1024 run the outlier
/// (named by its place: the names carry no rank), each line holding against its timeline.
#[test]
fn a_sweep_of_sequence_lengths_grows_and_its_longest_run_stands_out() {
    let files: Option<Vec<PathBuf>> = [128, 256, 512, 1024]
        .iter()
        .map(|n| {
            require_real(&format!(
                "Wedsonlin__assignment2-systems__results_medium_{n}_training_memory_snapshot.pickle"
            ))
        })
        .collect();
    let Some(files) = files else {
        return;
    };
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let report = runs_json(&refs);
    check_against_timelines(&refs, &report);
    let peaks: Vec<u64> = report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| as_u64(&r["peak_bytes"]))
        .collect();
    assert!(peaks.windows(2).all(|w| w[0] < w[1]), "{peaks:?}");
    assert_eq!(report["outlier"], 3);
    assert_eq!(report["imbalance"]["outlier_rank"], 3);
    assert!(report["runs"][3]["rank"].is_null());
}

/// Real pairs of one project each (`../shared/samples/real`), and what an engineer reading
/// them concludes, which the page must say:
/// - silmont2000, a forward in fp32 and under bf16 autocast: autocast keeps the fp32
///   parameters and adds low-precision copies and activations, so the bf16 run peaks higher,
///   all of it activations, the parameters unchanged; the page paints both and answers a click.
/// - ZijianDu, two commits, final states only: the later commit holds more parameter memory,
///   all of the change; there is no line and no moment, and the page says so instead of
///   failing.
/// - Maphsge4, two commits run on different devices, the later one without a trace: only the
///   first has a line, the page says the other has no trace, and no moment is compared.
#[test]
fn real_pairs_say_what_an_engineer_reads_from_them() {
    let real = |n: &str| require_real(n);
    let (Some(fp32), Some(bf16)) = (
        real("silmont2000__assignment2-systems__memory_forward_fp32_128.pickle"),
        real("silmont2000__assignment2-systems__memory_forward_bf16_128.pickle"),
    ) else {
        return;
    };
    let report = runs_json(&[&fp32, &bf16]);
    check_against_timelines(&[&fp32, &bf16], &report);
    let d = &report["pair"]["diff"];
    let peak = d["peak"]["delta_bytes"].as_i64().unwrap();
    assert!(peak > 0, "autocast peaks higher: {}", d["peak"]);
    let cat = |name: &str| {
        d["categories"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["category"] == name)
            .map(|c| c["delta_bytes"].as_i64().unwrap())
    };
    assert_eq!(cat("parameters"), Some(0), "fp32 parameters kept");
    assert_eq!(cat("activations"), Some(peak), "the growth is activations");
    if let Some(page) = browse(&[&fp32, &bf16], None) {
        check_paint(&report, &page);
        check_click(&report, &page);
    }

    let (Some(a), Some(b)) = (
        real("ZijianDu__Attention__7e5ba32__memory.pickle"),
        real("ZijianDu__Attention__c3bcd01__memory.pickle"),
    ) else {
        return;
    };
    let report = runs_json(&[&a, &b]);
    assert_eq!(report["axes"], serde_json::json!([]));
    assert_eq!(report["pair"]["moments"], serde_json::json!([]));
    assert_eq!(report["notes"].as_array().unwrap().len(), 2);
    let d = &report["pair"]["diff"];
    let params = d["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == "parameters")
        .unwrap();
    assert!(params["delta_bytes"].as_i64().unwrap() > 0);
    assert_eq!(params["delta_bytes"], d["peak"]["delta_bytes"]);
    if let Some(page) = browse(&[&a, &b], None) {
        assert_eq!(page["no_timeline"], true);
        assert_eq!(page["no_moments"], true);
    }

    let (Some(a), Some(b)) = (
        real("Maphsge4__select_n__04d383c__snapshot.pickle"),
        real("Maphsge4__select_n__dec166a__snapshot.pickle"),
    ) else {
        return;
    };
    let report = runs_json(&[&a, &b]);
    check_against_timelines(&[&a, &b], &report);
    assert!(report["runs"][0]["events"].as_u64().unwrap() > 0);
    assert_eq!(report["runs"][1]["events"], 0);
    let notes = report["notes"].as_array().unwrap();
    assert!(
        notes.len() == 1 && notes[0].as_str().unwrap().contains("dec166a"),
        "{notes:?}"
    );
    assert_eq!(report["pair"]["moments"], serde_json::json!([]));
    assert_eq!(report["pair"]["diff"]["sites_compared"], false);
    if let Some(page) = browse(&[&a, &b], None) {
        check_paint(&report, &page);
        assert_eq!(page["no_moments"], true);
    }
}
