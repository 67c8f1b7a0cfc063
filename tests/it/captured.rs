//! memlens on the real snapshots of `samples/captured/` (PyTorch 2.11.0+cu130 on an H200,
//! recorded by the scripts of `samples/capture/`) against what each workload knows: the
//! `NAME.truth.json` beside each capture (`facts` from the script, `observed` numbers computed
//! from the pickled dict) and the independent oracles of `tests/oracle/`.
//!
//! Truth sites are `basename:line:function`; memlens prints the recorded absolute path, so
//! sites are matched on that suffix. Numbers are read from the truth files at test time.

use crate::common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn pickle(name: &str) -> PathBuf {
    root()
        .join("samples/captured")
        .join(format!("{name}.pickle"))
}

fn truth(name: &str) -> Value {
    let p = root()
        .join("samples/captured")
        .join(format!("{name}.truth.json"));
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

fn facts(name: &str) -> Value {
    truth(name)["facts"].clone()
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// Runs `memlens ARGS --format json FILES...`: the exit code and the parsed report.
fn run(args: &[&str], files: &[&Path]) -> (i32, Value) {
    let mut a: Vec<std::ffi::OsString> = args.iter().map(|x| x.into()).collect();
    a.push("--format".into());
    a.push("json".into());
    a.extend(files.iter().map(|f| f.as_os_str().to_owned()));
    let o = memlens(a);
    let code = o.status.code().expect("memlens exited");
    assert!(
        code == 0 || code == 1,
        "memlens {args:?} {files:?}: exit {code}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "memlens {args:?}: {e}: {}",
            String::from_utf8_lossy(&o.stdout)
        )
    });
    (code, v)
}

/// `run` on one capture, expecting exit 0.
fn report(args: &[&str], name: &str) -> Value {
    let (code, v) = run(args, &[&pickle(name)]);
    assert_eq!(code, 0, "memlens {args:?} {name}");
    v
}

/// True when memlens's site label names the truth's site: the recorded path ends in
/// `basename:line:function`, and the truth's `<no python frame>` is memlens's `<no frames>`.
fn same_site(label: &str, site: &str) -> bool {
    if site == "<no python frame>" {
        return label == "<no frames>";
    }
    label == site || label.ends_with(&format!("/{site}"))
}

/// The row of `rows` whose site is `site`.
fn row<'a>(rows: &'a Value, site: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| same_site(text(&r["site"]), site))
        .unwrap_or_else(|| panic!("no row for {site} in {rows}"))
}

/// Every capture and the `observed` numbers of its truth file (`None`: the truth has none for
/// that file, as for the second snapshot call of `protocols`).
fn captures() -> Vec<(PathBuf, Option<Value>)> {
    let mut v = Vec::new();
    for p in captured() {
        let stem = p.file_stem().unwrap().to_string_lossy().to_string();
        let observed = match stem.as_str() {
            "side_stream" => Some(truth("side_stream")["observed"]["at_snapshot"].clone()),
            "side_stream_after" => Some(truth("side_stream")["observed"]["after"].clone()),
            // One snapshot object pickled twice; the default-protocol file is a second call.
            "protocol4" | "protocol5" => Some(truth("protocols")["observed"].clone()),
            "protocol_default" => None,
            _ => Some(truth(&stem)["observed"].clone()),
        };
        v.push((p, observed));
    }
    assert_eq!(v.len(), 20, "the 20 captures of samples/captured");
    v
}

#[test]
fn every_capture_held_its_story() {
    // The inputs first: a capture whose story failed would make every other test meaningless.
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(root().join("samples/captured/manifest.json")).unwrap(),
    )
    .unwrap();
    let mut named = Vec::new();
    for c in manifest["captures"].as_array().unwrap() {
        assert_eq!(c["status"], "ok", "{}", c["name"]);
    }
    for e in std::fs::read_dir(root().join("samples/captured")).unwrap() {
        let p = e.unwrap().path();
        let Some(name) = p
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .strip_suffix(".truth.json")
        else {
            continue;
        };
        let t = truth(name);
        assert_eq!(t["schema"], "memlens-capture-truth/1", "{name}");
        assert_eq!(t["story_held"], true, "{name}");
        for (check, ok) in t["checks"].as_object().unwrap() {
            assert_eq!(ok, &Value::Bool(true), "{name}: check {check}");
        }
        for s in t["snapshots"].as_array().unwrap() {
            let file = text(&s["file"]).to_string();
            assert!(
                root().join("samples/captured").join(&file).exists(),
                "{file}"
            );
            named.push(file);
        }
    }
    for p in captured() {
        let file = p.file_name().unwrap().to_string_lossy().to_string();
        assert!(named.contains(&file), "{file} has no truth file");
    }
}

#[test]
fn totals_equal_the_truth_and_the_oracle() {
    let python = require_python();
    for (p, observed) in captures() {
        let f = p.display().to_string();
        let s = summary_json(&p);
        let snap = load(&p);
        let broken: Vec<_> = snap
            .warnings
            .iter()
            .filter(|w| INVARIANT_CODES.contains(&w.code))
            .collect();
        assert!(broken.is_empty(), "{f}: {broken:?}");
        let d = &s["devices"][0];
        assert_eq!(s["devices"].as_array().unwrap().len(), 1, "{f}");
        if let Some(o) = observed {
            let state = |k: &str| o["blocks_by_state"][k]["bytes"].as_u64().unwrap_or(0);
            let blocks: u64 = o["blocks_by_state"]
                .as_object()
                .unwrap()
                .values()
                .map(|b| u(&b["count"]))
                .sum();
            assert_eq!(u(&d["segments"]), u(&o["segments"]), "{f}");
            assert_eq!(u(&d["blocks"]), blocks, "{f}");
            assert_eq!(u(&d["reserved_bytes"]), u(&o["reserved_bytes"]), "{f}");
            assert_eq!(u(&d["allocated_bytes"]), u(&o["allocated_bytes"]), "{f}");
            assert_eq!(
                u(&d["pending_free_bytes"]),
                state("active_pending_free"),
                "{f}"
            );
            assert_eq!(u(&d["inactive_bytes"]), u(&o["inactive_bytes"]), "{f}");
            assert_eq!(
                u(&d["largest_inactive_block_bytes"]),
                u(&o["largest_inactive_block"]),
                "{f}"
            );
            assert_eq!(u(&d["trace_entries"]), u(&o["trace_entries"]), "{f}");
            assert_eq!(d["trace"]["by_action"], o["trace_actions"], "{f}");
            assert_eq!(
                u(&d["expandable_segments"]),
                u(&o["expandable_segments"]),
                "{f}"
            );
            assert_eq!(
                s["allocator_settings"]["expandable_segments"],
                o["allocator_settings"]["expandable_segments"],
                "{f}"
            );
        }
        if python {
            // The independent oracle: device totals, invariants and distinct frames.
            let theirs = oracle("summary", &p);
            let t = &theirs["devices"][0];
            for k in [
                "segments",
                "blocks",
                "reserved_bytes",
                "allocated_bytes",
                "requested_bytes",
                "pending_free_bytes",
                "inactive_bytes",
                "largest_inactive_block_bytes",
                "trace_entries",
            ] {
                assert_eq!(d[k], t[k], "{f}: {k}");
            }
            assert_eq!(d["trace"]["by_action"], t["actions"], "{f}");
            assert_eq!(oracle("check", &p), serde_json::json!([]), "{f}");
            assert_eq!(
                s["distinct_frames"],
                oracle("frames", &p)["distinct"],
                "{f}: distinct frames"
            );
        }
    }
}

#[test]
fn top_at_the_peak_and_at_the_end_match_the_truth() {
    for (p, observed) in captures() {
        let Some(o) = observed else { continue };
        let f = p.display().to_string();
        // The truth's site is the innermost Python frame, inside torch or not, and
        // `<no python frame>` for a stack of C++ frames alone: `--keep torch --frames python`.
        // The peak: the truth replays alloc/free_completed in requested bytes, like memlens.
        let (_, top) = run(
            &["top", "--keep", "torch", "--frames", "python", "-n", "1000"],
            &[&p],
        );
        let d = &top["devices"][0];
        let peak = &o["peak"];
        assert_eq!(d["at"]["event_index"], peak["peak_trace_index"], "{f}");
        assert_eq!(
            u(&d["live_requested_bytes"]),
            u(&peak["peak_requested_bytes"]),
            "{f}"
        );
        let want = peak["top_sites_at_peak"].as_array().unwrap();
        assert!(!want.is_empty(), "{f}");
        for w in want {
            let r = row(&d["sites"], text(&w["site"]));
            assert_eq!(u(&r["bytes"]), u(&w["bytes"]), "{f}: {}", w["site"]);
            assert_eq!(u(&r["count"]), u(&w["count"]), "{f}: {}", w["site"]);
        }
        // The end: the truth counts the final blocks (block sizes, so at most 511 bytes of
        // rounding each), live and pending; memlens counts requested bytes of the trace.
        let (_, top) = run(
            &[
                "top", "--keep", "torch", "--frames", "python", "--at", "end", "-n", "1000",
            ],
            &[&p],
        );
        let d = &top["devices"][0];
        assert_eq!(
            u(&d["live_requested_bytes"]),
            u(&peak["end_requested_bytes"]),
            "{f}"
        );
        let mut want: Vec<Value> = o["live_by_site"].as_array().unwrap().clone();
        want.extend(
            o["pending_free_by_site"]
                .as_array()
                .unwrap()
                .iter()
                .cloned(),
        );
        let rows = d["sites"].as_array().unwrap();
        assert_eq!(rows.len(), want.len(), "{f}: {rows:?}");
        // Under `roundup_power2_divisions:N` a block is its size rounded up to the next of N
        // steps between powers of two: up to a quarter (N = 4) of it above the request.
        let divisions = o["allocator_settings"]["roundup_power2_divisions"]
            .as_object()
            .map_or(0, |m| {
                m.values().filter_map(Value::as_u64).max().unwrap_or(0)
            });
        for w in &want {
            let r = row(&d["sites"], text(&w["site"]));
            let (ours, theirs, n) = (u(&r["bytes"]), u(&w["bytes"]), u(&w["count"]));
            assert_eq!(u(&r["count"]), n, "{f}: {}", w["site"]);
            let slack = theirs
                .checked_div(divisions)
                .map_or(512 * n, |q| (512 * n).max(q + 1));
            assert!(
                ours <= theirs && theirs - ours < slack,
                "{f}: {}: {ours} requested vs {theirs} in blocks",
                w["site"]
            );
        }
    }
}

/// Issue 19: the three growing sites of the retained eval graph are one cause, named by the
/// line that ran the eval forward pass, with the whole growth per step and its tensors.
#[test]
fn retained_graph_leaks_are_the_saved_eval_tensors() {
    let t = facts("retained_graph");
    let (code, v) = run(&["leaks"], &[&pickle("retained_graph")]);
    assert_eq!(code, 1, "findings exit 1");
    let steps = &v["devices"][0];
    // No ProfilerStep annotations: the loop is found by its repeating first allocation.
    assert_eq!(steps["source"], "periodic");
    assert_eq!(
        steps["steps"].as_array().unwrap().len() as u64,
        u(&t["steps"])
    );
    assert!(steps["notes"].as_array().unwrap().is_empty(), "{steps}");
    assert_eq!(v["absent"], serde_json::json!([]));
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "one cause: {v}");
    let f = &findings[0];
    // Raw torch.mm/relu calls, no nn.Module: three lines of eval_step keep a tensor each step
    // while the others die, intermediates an autograd graph saved.
    assert_eq!(f["kind"], "retained_graph");
    assert_eq!(f["graph_evidence"], "kept_intermediates");
    // The line to change is the call of eval_step in run(), which all three share.
    assert!(
        text(&f["site"]).ends_with("retained_graph.py:75:run"),
        "{f}"
    );
    assert!(text(&f["fix"]).contains("total += loss"), "{f}");
    assert!(text(&f["fix"]).contains("torch.no_grad()"), "{f}");
    // The whole growth, and one tensor per line per step.
    assert_eq!(u(&f["bytes_per_step"]), u(&t["bytes_retained_per_step"]));
    assert_eq!(
        u(&f["live_bytes_at_end"]),
        u(&t["retained_total_bytes_at_snapshot"])
    );
    assert_eq!(f["tensors_per_step"].as_f64(), Some(3.0));
    assert_eq!(u(&f["tensors_at_end"]), 3 * u(&t["steps"]));
    assert!(f["fit_r2"].as_f64().unwrap() > 0.99, "{f}");
    let expected = t["leak_sites_expected"].as_array().unwrap();
    let sites = f["sites"].as_array().unwrap();
    assert_eq!(sites.len(), expected.len(), "{f}");
    for e in expected {
        let s = row(&f["sites"], text(&e["site"]));
        assert_eq!(u(&s["bytes_per_step"]), u(&e["bytes_per_step"]), "{s}");
        assert_eq!(
            u(&s["live_bytes_at_end"]),
            u(&e["bytes_per_step"]) * u(&t["steps"])
        );
        assert_eq!(s["role"], "saved");
    }
    // Biggest first: the relu output.
    assert!(same_site(text(&sites[0]["site"]), text(&t["leak_site"])));
    // top at the peak and at the end are led by the leak site.
    for at in ["peak", "end"] {
        let top = report(&["top", "--at", at], "retained_graph");
        let site = text(&top["devices"][0]["sites"][0]["site"]);
        assert!(same_site(site, text(&t["top_peak_site"])), "{at}: {site}");
    }
}

#[test]
fn the_fixed_loop_has_steps_and_no_finding() {
    let t = facts("retained_graph_fixed");
    assert_eq!(t["verdict"], "none");
    let (code, v) = run(&["leaks"], &[&pickle("retained_graph_fixed")]);
    assert_eq!(code, 0);
    assert_eq!(v["findings"], serde_json::json!([]));
    // A real "no": the 20 steps were found, not too few to judge.
    let d = &v["devices"][0];
    assert_eq!(d["steps"].as_array().unwrap().len() as u64, u(&t["steps"]));
    assert!(d["notes"].as_array().unwrap().is_empty(), "{d}");
    // Flat after the first step, as allocated_bytes_after_each_step says.
    let after = t["allocated_bytes_after_each_step"].as_array().unwrap();
    assert!(after[1..].iter().all(|a| a == &after[1]));
    let live: Vec<u64> = d["steps"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|s| u(&s["live_at_end"]))
        .collect();
    assert!(live.windows(2).all(|w| w[0] == w[1]), "{live:?}");
}

#[test]
fn the_kv_cache_is_flat_and_the_kept_logits_leak() {
    // Filled once: 128 decode steps found, no finding; the cache tops the peak and the end.
    let t = facts("kv_cache");
    let (code, v) = run(&["leaks"], &[&pickle("kv_cache")]);
    assert_eq!(code, 0);
    assert_eq!(v["findings"], serde_json::json!([]));
    let d = &v["devices"][0];
    assert_eq!(d["source"], "periodic");
    assert_eq!(d["steps"].as_array().unwrap().len() as u64, u(&t["steps"]));
    for (at, site) in [("peak", "top_peak_site"), ("end", "top_live_site")] {
        let top = report(&["top", "--at", at], "kv_cache");
        let r = &top["devices"][0]["sites"][0];
        assert!(same_site(text(&r["site"]), text(&t[site])), "{at}: {r}");
        assert!(same_site(text(&r["site"]), text(&t["kv_cache_site"])));
        assert_eq!(u(&r["bytes"]), u(&t["kv_cache_bytes"]));
        assert_eq!(u(&r["count"]), u(&t["kv_cache_allocations_expected"]));
    }

    // history.append(logits): one finding at the logits line, 2 MiB per decode step.
    let t = facts("kv_cache_leak");
    let (code, v) = run(&["leaks"], &[&pickle("kv_cache_leak")]);
    assert_eq!(code, 1);
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{v}");
    let f = &findings[0];
    assert!(same_site(text(&f["site"]), text(&t["leak_site"])), "{f}");
    assert_eq!(f["kind"], "leak");
    assert_eq!(u(&f["bytes_per_step"]), u(&t["bytes_retained_per_step"]));
    assert_eq!(u(&f["steps"]), u(&t["steps"]));
    assert_eq!(
        u(&f["live_bytes_at_end"]),
        u(&t["retained_total_bytes_at_snapshot"])
    );
    // At the end the logits (256 MiB) top the 128 MiB cache.
    let top = report(&["top", "--at", "end"], "kv_cache_leak");
    let rows = &top["devices"][0]["sites"];
    assert!(same_site(text(&rows[0]["site"]), text(&t["top_live_site"])));
    assert_eq!(
        u(&rows[0]["bytes"]),
        u(&t["retained_total_bytes_at_snapshot"])
    );
    assert!(same_site(text(&rows[1]["site"]), text(&t["kv_cache_site"])));
}

/// `memlens oom --format json` on a capture: its single OOM, checked against the truth's
/// `oom` trace entry, and the whole report as text for wording checks.
/// The capture's truth facts and its one OOM report, whose verdict, request and allocated
/// bytes are checked against them.
fn oom_with_truth(name: &str) -> (Value, Value, String) {
    let t = facts(name);
    let (o, words) = single_oom(name, &[]);
    assert_eq!(o["verdict"], t["verdict"]);
    assert_eq!(u(&o["requested_bytes"]), u(&t["requested_bytes"]));
    assert_eq!(
        u(&o["allocated_bytes"]),
        u(&t["allocated_bytes_at_request"])
    );
    (t, o, words)
}

fn single_oom(name: &str, extra: &[&str]) -> (Value, String) {
    let mut args = vec!["oom"];
    args.extend_from_slice(extra);
    let v = report(&args, name);
    let ooms = v["ooms"].as_array().unwrap();
    assert_eq!(ooms.len(), 1, "{name}");
    let o = ooms[0].clone();
    let observed = &truth(name)["observed"];
    let event = &observed["oom_events"][0];
    let t = facts(name);
    assert_eq!(
        u(&o["device_free_bytes"]),
        u(&event["device_free"]),
        "{name}"
    );
    assert_eq!(u(&o["request_rounded_bytes"]), u(&event["size"]), "{name}");
    assert_eq!(u(&o["requested_bytes"]), u(&t["tried_to_allocate_bytes"]));
    // The oom entry is the last of the trace.
    assert_eq!(u(&o["event_index"]) + 1, u(&observed["trace_entries"]));
    let words = serde_json::to_string(&o).unwrap();
    (o, words)
}

/// A right answer under a `set_per_process_memory_fraction` cap: the implied limit holds the
/// cap, and nothing blames another process or says the device simply had memory to spare.
fn judged_against_the_cap(name: &str, o: &Value, words: &str) {
    let cap = u(&facts(name)["memory_cap"]["cap_bytes"]);
    assert_eq!(facts(name)["memory_cap"]["fraction_cap_used"], true);
    let limit = &o["implied_limit"];
    let (lo, hi) = (u(&limit["at_least_bytes"]), u(&limit["below_bytes"]));
    assert!(
        lo <= cap && cap < hi,
        "{name}: cap {cap} not in [{lo}, {hi})"
    );
    assert_eq!(
        hi,
        u(&o["reserved_bytes"]) + u(&o["requested_bytes"]),
        "{name}"
    );
    for wrong in [
        "another process",
        "other processes",
        "nvidia-smi",
        "released between",
        "Unclear",
    ] {
        assert!(!words.contains(wrong), "{name}: says {wrong:?}: {words}");
    }
    let free_line = o["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(text)
        .find(|l| l.starts_with("Device free"))
        .unwrap_or_else(|| panic!("{name}: no device free line"));
    assert!(
        free_line.contains("per-process limit")
            && free_line.contains("set_per_process_memory_fraction"),
        "{name}: {free_line}"
    );
}

#[test]
fn the_fragmentation_oom_has_its_numbers_and_verdict() {
    let (t, o, words) = oom_with_truth("frag_oom");
    assert_eq!(u(&o["reserved_bytes"]), u(&t["reserved_bytes_at_request"]));
    assert_eq!(
        u(&o["reserved_unallocated_bytes"]),
        u(&t["expected_free_in_segments_bytes_native"])
    );
    let largest = u(&o["largest_free_block_bytes"]);
    assert_eq!(largest, u(&t["expected_largest_free_block_bytes_native"]));
    assert!(largest < u(&o["requested_bytes"]));
    assert!(same_site(
        text(&o["live_sites"][0]["site"]),
        text(&t["top_live_site"])
    ));
    assert_eq!(
        u(&o["live_sites"][0]["bytes"]),
        u(&t["allocated_bytes_at_request"])
    );
    assert!(text(&o["recommendations"][0]["action"]).contains("expandable_segments:True"));
    judged_against_the_cap("frag_oom", &o, &words);
    // The cap leaves 48 MiB above what memlens finds reserved, less than the 72 MiB segment.
    let cap = u(&t["memory_cap"]["cap_bytes"]);
    let headroom = u(&t["cap_headroom_bytes_at_request"]);
    assert_eq!(u(&o["reserved_bytes"]) + headroom, cap);
    assert!(headroom < u(&o["requested_bytes"]));

    // With the GPU named, the capacity is the H200's as PyTorch measured it, and the verdict
    // stays fragmentation (not memory outside PyTorch).
    let (o, _) = single_oom("frag_oom", &["--gpu", "h200"]);
    assert_eq!(
        u(&o["capacity_bytes"]),
        u(&truth("frag_oom")["total_capacity_bytes"])
    );
    assert_eq!(o["verdict"], "fragmentation");

    // memlens frag at the OOM: 1800 MiB free in 40 holes, largest 60 MiB, 2000 MiB reserved in
    // 20 split segments, nothing a flush could release.
    let v = report(&["frag", "--at", "oom"], "frag_oom");
    let total = &v["devices"][0]["total"];
    assert_eq!(
        u(&total["free_bytes"]),
        u(&t["expected_free_in_segments_bytes_native"])
    );
    assert_eq!(
        u(&total["largest_free_block_bytes"]),
        u(&t["expected_largest_free_block_bytes_native"])
    );
    assert_eq!(
        u(&total["reserved_bytes"]),
        u(&t["expected_reserved_bytes_native"])
    );
    assert_eq!(
        u(&total["allocated_bytes"]),
        u(&t["expected_allocated_bytes"])
    );
    assert_eq!(u(&total["segments"]), u(&t["arenas"]));
    assert_eq!(u(&total["releasable_bytes"]), 0);
    let holes: u64 = total["free_histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| u(&b["blocks"]))
        .sum();
    assert_eq!(holes, u(&t["expected_free_holes_native"]));
    assert!(u(&total["largest_request_without_new_memory_bytes"]) < u(&t["requested_bytes"]));
}

#[test]
fn expandable_segments_avoid_the_oom() {
    let t = facts("frag_oom_expandable");
    assert_eq!(t["verdict"], "none");
    let v = report(&["oom"], "frag_oom_expandable");
    assert_eq!(v["ooms"], serde_json::json!([]));
    assert!(text(&v["notes"][0]).contains("no oom event"));
    let s = summary_json(&pickle("frag_oom_expandable"));
    let d = &s["devices"][0];
    assert_eq!(s["allocator_settings"]["expandable_segments"], true);
    assert_eq!(d["expandable_segments"], d["segments"]);
    assert_eq!(
        u(&d["trace"]["by_action"]["segment_unmap"]),
        u(&t["observed_segment_unmap"])
    );
    assert!(u(&d["trace"]["by_action"]["segment_map"]) > 0);
    // The 72 MiB request was served and is live at the end.
    let top = report(&["top", "--at", "end"], "frag_oom_expandable");
    let r = row(&top["devices"][0]["sites"], text(&t["request_site"]));
    assert_eq!(u(&r["bytes"]), u(&t["requested_bytes"]));
}

#[test]
fn the_capacity_oom_is_a_shortage_under_the_cap() {
    let (t, o, words) = oom_with_truth("capacity_oom");
    // The flush released the 64 MiB scratch segment before the oom entry.
    assert_eq!(u(&o["reserved_bytes"]), u(&t["reserved_bytes_after_flush"]));
    let summary = summary_json(&pickle("capacity_oom"));
    assert_eq!(
        summary["devices"][0]["trace"]["by_action"]["segment_free"],
        1
    );
    // The live set: the parameters.
    let r = &o["live_sites"][0];
    assert!(
        same_site(text(&r["site"]), text(&t["top_live_site"])),
        "{r}"
    );
    assert_eq!(u(&r["bytes"]), u(&t["top_live_site_bytes"]));
    judged_against_the_cap("capacity_oom", &o, &words);
    assert!(text(&o["headline"]).contains("per-process limit"));
    assert!(text(&o["recommendations"][0]["action"]).contains("set_per_process_memory_fraction"));
    // The shortfall is against the limit: the most it can be is reserved + request − the
    // lower bound; the cap's real one is less, and positive.
    let (res, req) = (u(&o["reserved_bytes"]), u(&o["requested_bytes"]));
    let cap = u(&t["memory_cap"]["cap_bytes"]);
    let short = u(&o["shortfall_bytes"]);
    assert_eq!(short, res + req - u(&o["implied_limit"]["at_least_bytes"]));
    assert!(res + req - cap <= short);
    // With the H200 named: still capacity, no memory blamed outside PyTorch.
    let (o, _) = single_oom("capacity_oom", &["--gpu", "h200"]);
    assert_eq!(o["verdict"], "capacity");
}

/// `memlens explain` on an OOM message: the report's single OOM.
fn explain(message: &str) -> Value {
    let o = memlens(["explain", "--format", "json", message]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ooms"].as_array().unwrap().len(), 1, "{v}");
    v["ooms"][0].clone()
}

/// `x` equals `exact` up to the message's rounding to two decimals of its unit.
fn near(x: u64, exact: u64, unit: u64) -> bool {
    x.abs_diff(exact) <= unit / 200
}

#[test]
fn explain_reads_the_captured_messages_with_their_allowed_limit() {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    for name in ["frag_oom", "capacity_oom"] {
        let t = facts(name);
        let whole = truth(name);
        let o = explain(text(&t["oom_message"]));
        // The four numbers of the message.
        assert_eq!(u(&o["requested_bytes"]), u(&t["requested_bytes"]), "{name}");
        let free = u(&whole["observed"]["oom_events"][0]["device_free"]);
        assert!(near(u(&o["device_free_bytes"]), free, GIB), "{name}");
        assert!(
            near(
                u(&o["allocated_bytes"]),
                u(&t["allocated_bytes_at_request"]),
                MIB
            ),
            "{name}"
        );
        let reserved = u(&whole["observed"]["reserved_bytes"]);
        let unallocated = if name == "frag_oom" {
            reserved - u(&t["allocated_bytes_at_request"])
        } else {
            u(&t["reserved_bytes_after_flush"]) - u(&t["allocated_bytes_at_request"])
        };
        let unit = if unallocated >= GIB { GIB } else { MIB };
        assert!(
            near(u(&o["reserved_unallocated_bytes"]), unallocated, unit),
            "{name}: {} vs {unallocated}",
            o["reserved_unallocated_bytes"]
        );
        // "2.00 GiB allowed;" and "total capacity of 139.80 GiB".
        assert_eq!(
            u(&o["allowed_bytes"]),
            u(&t["memory_cap"]["cap_bytes"]),
            "{name}"
        );
        assert!(
            near(
                u(&o["capacity_bytes"]),
                u(&whole["total_capacity_bytes"]),
                GIB
            ),
            "{name}"
        );
        assert_eq!(o["verdict"], t["verdict"], "{name}");
    }
    // Under the limit the shortfall is what the allocator checks: reserved + request − allowed.
    let t = facts("capacity_oom");
    let o = explain(text(&t["oom_message"]));
    assert_eq!(
        u(&o["shortfall_bytes"]),
        u(&t["reserved_bytes_after_flush"]) + u(&t["requested_bytes"])
            - u(&t["memory_cap"]["cap_bytes"])
    );
}

#[test]
fn the_diff_is_the_extra_buffer() {
    let pair = truth("diff_pair");
    let expected = &pair["facts"]["expected_diff"];
    let (base, cand) = (pickle("diff_base"), pickle("diff_extra"));
    for (at, delta) in [
        ("peak", "observed_peak_delta_bytes"),
        ("end", "observed_live_delta_bytes"),
    ] {
        let (code, v) = run(&["diff", "--at", at], &[&base, &cand]);
        assert_eq!(code, 0, "no gate, no failure");
        assert_eq!(
            u(&v["peak"]["delta_bytes"]),
            u(&pair["facts"][delta]),
            "{at}"
        );
        let sites = v["sites"].as_array().unwrap();
        assert_eq!(sites.len() as u64, u(&expected["blocks"]), "{at}: {v}");
        let s = &sites[0];
        assert!(same_site(text(&s["site"]), text(&expected["site"])), "{s}");
        assert_eq!(s["status"], "new");
        assert_eq!(u(&s["delta_bytes"]), u(&expected["bytes"]));
        assert_eq!((u(&s["base_count"]), u(&s["cand_count"])), (0, 1));
        assert_eq!(v["counts"]["grown"], 0);
        assert_eq!(v["counts"]["shrunk"], 0);
        assert_eq!(v["counts"]["removed"], 0);
    }
    // --fail-on-growth P --min-abs X: exit 1 only when both hold (+128 MiB is +81% here).
    let extra = u(&expected["bytes"]);
    let mib = |b: u64| format!("{}MiB", b >> 20);
    for (pct, abs, want) in [
        ("5%", mib(extra / 2), 1),
        ("5%", mib(extra * 2), 0),
        ("90%", mib(extra / 2), 0),
    ] {
        let (code, v) = run(
            &["diff", "--fail-on-growth", pct, "--min-abs", &abs],
            &[&base, &cand],
        );
        assert_eq!(code, want, "{pct} {abs}");
        assert_eq!(v["gate"]["failed"], want == 1);
    }
    // Shrinking never fails the gate.
    let (code, v) = run(&["diff", "--fail-on-growth", "0%"], &[&cand, &base]);
    assert_eq!(code, 0);
    assert_eq!(v["sites"][0]["status"], "removed");
}

#[test]
fn a_block_freed_behind_a_side_stream_is_pending() {
    let t = facts("side_stream");
    let pending = u(&t["pending_free_bytes"]);
    let s = summary_json(&pickle("side_stream"));
    assert_eq!(u(&s["devices"][0]["pending_free_bytes"]), pending);
    // top names it: live (the memory is still held), and pending at its allocation site.
    let top = report(&["top", "--at", "end"], "side_stream");
    let d = &top["devices"][0];
    assert_eq!(u(&d["pending_free_bytes"]), pending);
    let r = row(&d["sites"], text(&t["pending_free_site"]));
    assert_eq!(u(&r["bytes"]), pending);
    let site = text(&t["pending_free_site"]);
    assert!(
        d["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| text(n).contains(site) && text(n).contains("record_stream")),
        "{d}"
    );
    // frag: the pending bytes sit in the main stream's large pool; the side stream has its own.
    let v = report(&["frag"], "side_stream");
    let pools = v["devices"][0]["pools"].as_array().unwrap();
    let holder: Vec<&Value> = pools
        .iter()
        .filter(|p| u(&p["pending_free_bytes"]) > 0)
        .collect();
    assert_eq!(holder.len(), 1, "{pools:?}");
    assert_eq!(u(&holder[0]["pending_free_bytes"]), pending);
    assert_eq!(holder[0]["pool"], "large");
    assert_eq!(holder[0]["stream"], t["main_stream_handle"]);
    assert!(pools.iter().any(|p| p["stream"] == t["side_stream_handle"]));

    // After a sync and one malloc: completed, the 64 MiB block is cached free.
    assert_eq!(t["after"]["pending_free_present"], false);
    let s = summary_json(&pickle("side_stream_after"));
    assert_eq!(u(&s["devices"][0]["pending_free_bytes"]), 0);
    assert_eq!(u(&s["devices"][0]["largest_inactive_block_bytes"]), pending);
    let top = report(&["top", "--at", "end"], "side_stream_after");
    let d = &top["devices"][0];
    assert_eq!(u(&d["pending_free_bytes"]), 0);
    let rows = d["sites"].as_array().unwrap();
    assert!(!rows.iter().any(|r| same_site(text(&r["site"]), site)));
    assert!(rows
        .iter()
        .any(|r| same_site(text(&r["site"]), text(&t["after"]["free_completed_site"]))));
}

#[test]
fn full_stacks_keep_the_cpp_frames() {
    let t = facts("stacks_all");
    let observed = &truth("stacks_all")["observed"];
    assert_eq!(t["cpp_frames_present"], true);
    // Distinct frames: more than the Python ones the truth counts.
    let s = summary_json(&pickle("stacks_all"));
    assert!(u(&s["distinct_frames"]) > u(&observed["python_frames"]));
    // The buffer's site is its innermost Python frame, though C++ frames lie inside it.
    let top = report(&["top", "--at", "end", "--full-stacks"], "stacks_all");
    let r = row(&top["devices"][0]["sites"], text(&t["buffer_site"]));
    assert_eq!(u(&r["bytes"]), u(&t["buffer_bytes"]));
    let frames: Vec<&str> = r["frames"].as_array().unwrap().iter().map(text).collect();
    let at = frames
        .iter()
        .position(|f| same_site(f, text(&t["buffer_site"])))
        .unwrap_or_else(|| panic!("{frames:?}"));
    assert!(at > 0, "C++ frames come first (innermost): {frames:?}");
    // The truth's C++ frames of that stack, as `library:offset:symbol`: those the viewer does
    // not hide (the unwinder's own frames) are in memlens's stack.
    let examples = observed["buffer_cpp_frame_examples"].as_array().unwrap();
    let mut shown = 0;
    for e in examples.iter().map(text) {
        let hidden = [
            "unwind::unwind",
            "CapturedTraceback::gather",
            "gather_with_cpp",
        ]
        .iter()
        .any(|h| e.contains(h));
        let found = frames.iter().any(|f| f.ends_with(e) && f.contains('/'));
        assert_eq!(found, !hidden, "{e} in {frames:?}");
        shown += usize::from(found);
    }
    assert!(shown >= 2, "{shown}");
}

#[test]
fn protocols_4_and_5_give_identical_reports() {
    let t = facts("protocols");
    assert_eq!(t["same_object"], true);
    let p4 = pickle("protocol4");
    let p5 = pickle("protocol5");
    let pd = pickle("protocol_default");
    // The files differ in their PROTO byte only.
    let (b4, b5) = (std::fs::read(&p4).unwrap(), std::fs::read(&p5).unwrap());
    assert_eq!(b4.len(), b5.len());
    let diffs: Vec<usize> = (0..b4.len()).filter(|&i| b4[i] != b5[i]).collect();
    assert_eq!(diffs, vec![1]);
    let strip = |mut v: Value| {
        if let Some(m) = v.as_object_mut() {
            m.remove("file");
        }
        v
    };
    for args in [
        vec!["summary"],
        vec!["top"],
        vec!["top", "--at", "end", "--full-stacks"],
        vec!["frag"],
        vec!["leaks"],
        vec!["oom"],
        vec!["categories"],
    ] {
        let (_, a) = run(&args, &[&p4]);
        let (_, b) = run(&args, &[&p5]);
        assert_eq!(strip(a), strip(b), "{args:?}");
    }
    // _dump_snapshot (the default protocol) was a second snapshot call: the same memory, and a
    // trace longer by the `snapshot` entry of the first call.
    let (s4, sd) = (summary_json(&p4), summary_json(&pd));
    let (d4, dd) = (&s4["devices"][0], &sd["devices"][0]);
    for k in [
        "segments",
        "blocks",
        "reserved_bytes",
        "allocated_bytes",
        "requested_bytes",
        "inactive_bytes",
    ] {
        assert_eq!(d4[k], dd[k], "{k}");
    }
    assert_eq!(u(&dd["trace_entries"]), u(&d4["trace_entries"]) + 1);
    assert_eq!(dd["trace"]["by_action"]["snapshot"], 1);
    let (_, a) = run(&["top"], &[&p4]);
    let (_, b) = run(&["top"], &[&pd]);
    assert_eq!(a["devices"][0]["sites"], b["devices"][0]["sites"]);
    assert_eq!(a["devices"][0]["at"], b["devices"][0]["at"]);
}

/// Text reports of a few captures against `tests/golden/captured/` (`MEMLENS_BLESS=1` rewrites
/// them; review the diff like code).
#[test]
fn golden_text_reports() {
    for (args, golden_name) in [
        (
            vec!["leaks", "samples/captured/retained_graph.pickle"],
            "retained_graph.leaks.txt",
        ),
        (
            vec!["oom", "samples/captured/capacity_oom.pickle"],
            "capacity_oom.oom.txt",
        ),
        (
            vec!["oom", "samples/captured/frag_oom.pickle"],
            "frag_oom.oom.txt",
        ),
        (
            vec!["frag", "--at", "oom", "samples/captured/frag_oom.pickle"],
            "frag_oom.frag.txt",
        ),
        (
            vec!["top", "--at", "end", "samples/captured/side_stream.pickle"],
            "side_stream.top.txt",
        ),
        (
            vec!["top", "--at", "end", "samples/captured/stacks_all.pickle"],
            "stacks_all.top.txt",
        ),
        (
            vec![
                "diff",
                "samples/captured/diff_base.pickle",
                "samples/captured/diff_extra.pickle",
            ],
            "diff_pair.diff.txt",
        ),
    ] {
        let o = memlens_in_root(&args);
        let code = o.status.code();
        assert!(
            matches!(code, Some(0) | Some(1)),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        golden(&format!("captured/{golden_name}"), &o.stdout);
    }
}
