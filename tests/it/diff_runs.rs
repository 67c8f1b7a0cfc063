//! Issue 40 item 1 (part): `diff` that explains — sites that only moved are matched, the
//! allocator settings that differ, each run's steps side by side with the step where they
//! part most, and observations in words.

use crate::common;
use common::*;
use serde_json::Value;

/// `memlens diff BASE CAND --format json ARGS`, exit 0 (no gate given).
fn diff(base: &str, cand: &str, args: &[&str]) -> Value {
    let mut a = vec!["diff", base, cand, "--format", "json"];
    a.extend_from_slice(args);
    json_ok(&a)
}

/// GIVEN a run and its copy with every line of its user file moved down SHIFT lines WHEN
/// diffed THEN nothing changed, and every site of that file is matched to its old line.
#[test]
fn a_run_with_shifted_lines_has_no_changes() {
    let t = common::truth("diff")["shifted"].clone();
    let shift = t["shift"].as_i64().unwrap();
    let file = t["file"].as_str().unwrap();
    let shifted = format!("samples/{}", t["sample"].as_str().unwrap());
    let r = diff("samples/diff_base.pickle", &shifted, &[]);
    let c = &r["counts"];
    for k in ["new", "removed", "grown", "shrunk"] {
        assert_eq!(c[k], 0, "{k}: {r}");
    }
    assert_eq!(r["sites"], serde_json::json!([]));
    assert_eq!(r["peak"]["delta_bytes"], 0);
    assert!(as_u64(&c["moved"]) > 0);
    // --all lists them: each site of the file moved by exactly SHIFT lines.
    let r = diff("samples/diff_base.pickle", &shifted, &["--all"]);
    let short = file.rsplit('/').next().unwrap();
    let mut moved = 0;
    for s in r["sites"].as_array().unwrap() {
        let site = s["site"].as_str().unwrap();
        if !site.starts_with(short) {
            assert!(s.get("moved_from").is_none(), "{s}");
            continue;
        }
        let line: i64 = site.split(':').nth(1).unwrap().parse().unwrap();
        assert_eq!(s["moved_from"], format!(":{}", line - shift), "{s}");
        assert_eq!(s["status"], "unchanged");
        moved += 1;
    }
    assert_eq!(moved, as_u64(&r["counts"]["moved"]));
    // A real change next to moved lines is still one: the known pair has its two changes.
    let r = diff("samples/diff_cand.pickle", &shifted, &[]);
    assert_eq!(
        as_u64(&r["counts"]["new"]) + as_u64(&r["counts"]["removed"]),
        1,
        "{r}"
    );
    assert_eq!(as_u64(&r["counts"]["shrunk"]), 1, "{r}");
}

/// GIVEN train_small and the same run recorded under 2026 settings WHEN diffed THEN the
/// settings that differ are listed with both values, and said in words.
#[test]
fn settings_that_differ_are_listed() {
    let t = common::truth("settings2026")["alloc_conf_2026.pickle"].clone();
    let r = diff(
        "samples/train_small.pickle",
        "samples/alloc_conf_2026.pickle",
        &[],
    );
    let keys: Vec<&str> = r["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            t["conf_key"].as_str().unwrap(),
            "PYTORCH_CUDA_ALLOC_CONF",
            "graph_capture_record_stream_reuse"
        ]
    );
    let conf = &r["settings"][0];
    assert_eq!(conf["base"], Value::Null);
    assert!(conf["cand"]
        .as_str()
        .unwrap()
        .contains(&format!("per_process_memory_fraction:{}", t["fraction"])));
    assert_eq!(r["settings"][2]["base"], "false");
    assert_eq!(r["settings"][2]["cand"], "true");
    assert!(r["observations"][0]
        .as_str()
        .unwrap()
        .starts_with("allocator settings differ: "));
    // The same file: no settings differ, no observation.
    let r = diff(
        "samples/train_small.pickle",
        "samples/train_small.pickle",
        &[],
    );
    assert!(
        r.get("settings").is_none() && r.get("observations").is_none(),
        "{r}"
    );
}

/// GIVEN a retained graph and its fix WHEN diffed THEN each run's steps are the steps `leaks`
/// finds (same peaks), the step where they part most is the one with the largest peak
/// change, and its sites are the retained graph's.
#[test]
fn steps_side_by_side_and_where_runs_part() {
    let (base, cand) = (
        "samples/retained_graph.pickle",
        "samples/retained_graph_fixed.pickle",
    );
    let r = diff(base, cand, &[]);
    let steps = &r["steps"];
    let rows = steps["rows"].as_array().unwrap();
    let leaks = |f: &str| -> Vec<u64> {
        let o = memlens_in_root(["leaks", f, "--format", "json"]);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["devices"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| as_u64(&s["peak_bytes"]))
            .collect()
    };
    let (pb, pc) = (leaks(base), leaks(cand));
    assert_eq!(rows.len(), pb.len().max(pc.len()));
    let mut best = (0usize, 0i64);
    for (k, row) in rows.iter().enumerate() {
        assert_eq!(as_u64(&row["base"]["peak_bytes"]), pb[k]);
        assert_eq!(as_u64(&row["cand"]["peak_bytes"]), pc[k]);
        let d = pc[k] as i64 - pb[k] as i64;
        assert_eq!(row["delta_bytes"], d);
        if d.unsigned_abs() > best.1.unsigned_abs() {
            best = (k + 1, d);
        }
    }
    let div = &steps["divergence"];
    assert_eq!(as_u64(&div["step"]) as usize, best.0);
    assert_eq!(div["delta_bytes"], best.1);
    let truth = common::truth("retained_graph");
    let site = truth["finding"]["site"].as_str().unwrap();
    let first = &div["sites"][0];
    assert!(
        site.ends_with(first["site"].as_str().unwrap()),
        "{site} vs {div}"
    );
    // The sites at the step peaks account for the whole peak change there.
    let sum: i64 = div["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["delta_bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(sum, best.1);
    let text = String::from_utf8(memlens_in_root(["diff", base, cand]).stdout).unwrap();
    assert!(text.contains("◀ parts most"), "{text}");
    assert!(text.contains("Where the runs part most: step 6"), "{text}");
}

/// GIVEN two runs of one loop WHEN diffed `--at step:N` THEN each side is measured at its own
/// step N's peak (the steps table's peaks); `--at time:5ms` measures each side after its last
/// event at most 5 ms after its first; a step either run lacks is one line and exit 2.
#[test]
fn moments_by_step_and_time_since_start() {
    let (base, cand) = (
        "samples/retained_graph.pickle",
        "samples/retained_graph_fixed.pickle",
    );
    let rows = diff(base, cand, &[])["steps"]["rows"].clone();
    for k in [1usize, 3, 6] {
        let r = diff(base, cand, &["--at", &format!("step:{k}")]);
        assert_eq!(r["moment"], format!("step:{k}"));
        assert_eq!(
            r["peak"]["base"],
            rows[k - 1]["base"]["peak_bytes"],
            "step {k}"
        );
        assert_eq!(
            r["peak"]["cand"],
            rows[k - 1]["cand"]["peak_bytes"],
            "step {k}"
        );
    }
    let r = diff(base, cand, &["--at", "time:5ms"]);
    for (side, file) in [("base", base), ("cand", cand)] {
        let csv = String::from_utf8(
            memlens_in_root(["timeline", file, "--points", "0", "--format", "csv"]).stdout,
        )
        .unwrap();
        // device,event_index,time_us,...: the first event's time, and each event's.
        let times: Vec<(i64, i64)> = csv
            .lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                Some((f[1].parse().ok()?, f[2].parse().ok()?))
            })
            .collect();
        let t0 = times.iter().find(|(i, _)| *i >= 0).unwrap().1;
        let want = times
            .iter()
            .filter(|(i, t)| *i >= 0 && *t <= t0 + 5000)
            .map(|(i, _)| *i)
            .max()
            .unwrap();
        assert_eq!(r["devices"][0][side]["at"]["event_index"], want, "{side}");
    }
    let o = memlens_in_root(["diff", base, cand, "--at", "step:30"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("step 30 does not exist (6 steps found)"),
        "{err}"
    );
}

/// GIVEN the known pair WHEN diffed with `--frame-depth 2` THEN each site carries its two
/// callers (the new buffer is made under `main`, called from `<module>`), the totals are
/// those of the plain diff, and the shifted copy still has no change (callers' lines moved
/// too).
#[test]
fn frame_depth_keys_sites_with_their_callers() {
    let t = common::truth("diff");
    let plain = diff("samples/diff_base.pickle", "samples/diff_cand.pickle", &[]);
    let deep = diff(
        "samples/diff_base.pickle",
        "samples/diff_cand.pickle",
        &["--frame-depth", "2"],
    );
    let new_site = t["new_site"]["site"].as_str().unwrap();
    let short = new_site.rsplit('/').next().unwrap();
    let row = deep["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["status"] == "new")
        .unwrap();
    let frames: Vec<&str> = row["site"].as_str().unwrap().split(" < ").collect();
    assert_eq!(frames.len(), 3, "{row}");
    assert_eq!(frames[0], short);
    assert!(
        frames[1].ends_with(":main") && frames[2].ends_with(":<module>"),
        "{row}"
    );
    assert_eq!(row["cand_bytes"], t["new_site"]["bytes"]);
    assert_eq!(deep["peak"], plain["peak"]);
    let sum = |r: &Value| -> i64 {
        r["sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["delta_bytes"].as_i64().unwrap())
            .sum()
    };
    assert_eq!(sum(&deep), sum(&plain));
    let shifted = diff(
        "samples/diff_base.pickle",
        "samples/diff_shifted.pickle",
        &["--frame-depth", "2"],
    );
    assert_eq!(shifted["sites"], serde_json::json!([]), "{shifted}");
}

/// Real pair (`../shared/samples/real`): one model trained at sequence length 128 and 256
/// (Wedsonlin/assignment2-systems). What an engineer concludes: the longer run peaks higher,
/// in its forward pass, and the growth is the model's activations (`cs336_basics/model.py`),
/// not a new buffer. memlens must say so: a higher peak, the step where they part grows, and
/// the site that grows most there is in the model's code.
#[test]
fn real_pair_longer_sequences_grow_the_models_activations() {
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
    let r = diff(base.to_str().unwrap(), cand.to_str().unwrap(), &[]);
    assert!(
        r["peak"]["delta_bytes"].as_i64().unwrap() > 0,
        "{}",
        r["peak"]
    );
    let d = &r["steps"]["divergence"];
    assert!(d["delta_bytes"].as_i64().unwrap() > 0, "{d}");
    let grown = d["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["delta_bytes"].as_i64().unwrap() > 0)
        .max_by_key(|s| s["delta_bytes"].as_i64().unwrap())
        .unwrap();
    assert!(
        grown["site"]
            .as_str()
            .unwrap()
            .contains("cs336_basics/model.py"),
        "{grown}"
    );
    // The step where they part is said, with the model's site (observations go by the
    // bytes they explain, after the moved peak: the 128 run peaks in its optimizer step, the
    // 256 run in its loss, between phases).
    let parts = r["observation_details"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["code"] == "divergence")
        .unwrap();
    let text = parts["text"].as_str().unwrap();
    assert!(
        text.contains("higher in the candidate, most at") && text.contains("model.py"),
        "{text}"
    );
    assert_eq!(r["peak_phases"]["base"]["phase"], "optimizer");
    assert_eq!(r["observation_details"][0]["code"], "peak_moved");
}

/// The same request sequence run on a GPU under five allocator settings (the captures
/// `alloc_settings_*`, one fresh process each, under one fraction cap). Comparing the default
/// run with each other one, `diff` names the setting that differs, and `whatif` on the default
/// run alone, given that setting, predicts what the other run recorded: the same peak of
/// reserved bytes and whether it runs out; the diff's observations say which run hit an OOM.
#[test]
fn settings_diff_and_whatif_agree_with_the_runs_under_each_setting() {
    let dir = root().join("samples/captured");
    let all = truth_file(&dir.join("alloc_settings.truth.json"));
    let base = dir.join("alloc_settings_default.pickle");
    let cap = all["facts"]["runs"][0]["memory_cap"]["cap_bytes"]
        .as_u64()
        .or_else(|| {
            truth_file(&dir.join("alloc_settings_default.truth.json"))["facts"]["memory_cap"]
                ["cap_bytes"]
                .as_u64()
        })
        .unwrap();
    let runs = all["facts"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 5);
    assert_eq!(runs[0]["setting"], "default");
    assert_eq!(runs[0]["oomed"], true, "the default run ran out");
    for run in &runs[1..] {
        let conf = run["alloc_conf"].as_str().unwrap();
        let cand = dir.join(run["snapshot"].as_str().unwrap());
        let d = diff(base.to_str().unwrap(), cand.to_str().unwrap(), &[]);
        let conf_row = d["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == "PYTORCH_CUDA_ALLOC_CONF")
            .unwrap_or_else(|| panic!("{conf}: {}", d["settings"]));
        let named: String = serde_json::from_str(conf_row["cand"].as_str().unwrap()).unwrap();
        assert_eq!(
            named, conf,
            "the settings diff names the candidate's setting"
        );
        let w = json_ok(&[
            "whatif",
            base.to_str().unwrap(),
            "--capacity",
            &cap.to_string(),
            "--set",
            &named,
            "--format",
            "json",
        ]);
        let s = w["devices"][0]["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["set"] == named.as_str())
            .unwrap();
        assert_eq!(
            s["peak_reserved_bytes"], run["peak_reserved_bytes"],
            "{conf}: predicted from the default run vs recorded"
        );
        assert_eq!(
            s["ooms"].as_u64().unwrap() > 0,
            run["oomed"].as_bool().unwrap(),
            "{conf}: runs out"
        );
        let said_oom = d["observations"].as_array().unwrap().iter().any(|o| {
            o.as_str()
                .unwrap()
                .starts_with("the base hits 1 OOM and the candidate no OOM")
        });
        assert_eq!(
            said_oom,
            !run["oomed"].as_bool().unwrap(),
            "{conf}: {}",
            d["observations"]
        );
    }
}

fn truth_file(p: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}
