//! `memlens check`: budgets, exit codes, Markdown and JUnit output.

use crate::common;
use common::*;

const BASE: &str = "samples/diff_base.pickle";
const CAND: &str = "samples/diff_cand.pickle";

fn check(args: &[&str]) -> (i32, String, String) {
    let mut a = vec!["check"];
    a.extend_from_slice(args);
    let o = memlens_in_root(&a);
    (
        o.status.code().unwrap(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn within_budget_passes() {
    let (code, out, _) = check(&[
        BASE,
        CAND,
        "--max-peak",
        "2GiB",
        "--max-reserved",
        "2GiB",
        "--max-frag",
        "30%",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("0 of 2 file(s) broke a budget\n"), "{out}");
    // Leaked bytes are measured on a loop with enough steps (the pair has one step each: see
    // `max_leaked_unmeasured_without_enough_steps`).
    let (code, out, _) = check(&["samples/list_leak.pickle", "--max-leaked", "1GiB"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("ok   max_leaked: leaked 49.08 MiB within 1.00 GiB (974.92 MiB to spare)"),
        "{out}"
    );
}

#[test]
fn each_budget_broken_says_which_and_by_how_much() {
    let cases: [(&[&str], &str); 5] = [
        (
            &[CAND, "--max-peak", "1GiB"],
            "FAIL max_peak: peak 1.28 GiB on device 0 exceeds 1.00 GiB by 288.07 MiB (+28.1%)",
        ),
        (
            &[CAND, "--max-reserved", "1GiB"],
            "FAIL max_reserved: reserved 1.28 GiB on device 0 exceeds 1.00 GiB by",
        ),
        (
            &["samples/ranks/rank0.pickle", "--max-frag", "10%"],
            "FAIL max_frag: fragmentation 23.7% on device 0 exceeds 10.0% by 13.7 points",
        ),
        (
            &["samples/list_leak.pickle", "--max-leaked", "10MiB"],
            "FAIL max_leaked: leaked 49.08 MiB exceeds 10.00 MiB by 39.08 MiB",
        ),
        (
            &[CAND, "--baseline", BASE],
            "FAIL baseline: peak 1.28 GiB vs baseline 992.07 MiB: +320.00 MiB (+32.3%)",
        ),
    ];
    for (args, want) in cases {
        let (code, out, err) = check(args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(out.contains(want), "{args:?}: expected {want:?} in\n{out}");
        assert!(out.contains("top sites:"), "{out}");
    }
    // The sites behind the peak and the growth.
    let (_, out, _) = check(&[CAND, "--max-peak", "1GiB"]);
    assert!(out.contains("train.py:47:setup_prefetch"), "{out}");
    let (_, out, _) = check(&[CAND, "--baseline", BASE]);
    assert!(
        out.contains("+256.00 MiB ×1    train.py:47:setup_prefetch"),
        "{out}"
    );
    assert!(
        out.contains("+64.00 MiB ×1    train.py:44:build_rope_cache"),
        "{out}"
    );
}

#[test]
fn baseline_thresholds() {
    // +32.3%, +320 MiB: both thresholds must hold.
    assert_eq!(
        check(&[CAND, "--baseline", BASE, "--min-abs", "256MiB"]).0,
        1
    );
    assert_eq!(check(&[CAND, "--baseline", BASE, "--min-abs", "1GiB"]).0, 0);
    assert_eq!(
        check(&[CAND, "--baseline", BASE, "--fail-on-growth", "50%"]).0,
        0
    );
    assert_eq!(check(&[BASE, "--baseline", BASE]).0, 0);
    assert_eq!(check(&[BASE, "--baseline", CAND]).0, 0);
}

#[test]
fn percentages_of_capacity() {
    assert_eq!(
        check(&[CAND, "--max-peak", "50%", "--capacity", "2GiB"]).0,
        1
    );
    assert_eq!(
        check(&[CAND, "--max-peak", "50%", "--capacity", "4GiB"]).0,
        0
    );
    let (code, out, _) = check(&[CAND, "--max-reserved", "90%", "--gpu", "h100"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("(90% of 79.11 GiB --gpu H100 80GB HBM3)"),
        "{out}"
    );
}

#[test]
fn bad_usage_exits_2() {
    for (args, want) in [
        (vec![CAND, "--max-peak", "50%"], "needs the capacity"),
        (vec![CAND, "--max-leaked", "10%"], "needs the capacity"),
        (vec![CAND, "--max-peak", "5parsecs"], "unknown unit"),
        (vec![CAND, "--max-frag", "30"], "fraction"),
        (vec![CAND], "no budget given"),
        (
            vec![CAND, "--max-peak", "1GiB", "--gpu", "gtx9800"],
            "unknown GPU",
        ),
    ] {
        let (code, out, err) = check(&args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn unreadable_file_exits_2() {
    let (code, _, err) = check(&["samples/nope.pickle", "--max-peak", "1GiB"]);
    assert_eq!(code, 2);
    assert!(err.contains("samples/nope.pickle"), "{err}");
    let (code, _, _) = check(&[BASE, "samples/README.md", "--max-peak", "1GiB"]);
    assert_eq!(code, 2);
}

#[test]
fn markdown_is_a_table_per_file() {
    let (code, out, _) = check(&[BASE, CAND, "--max-peak", "1GiB", "--format", "md"]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("## memlens check: ❌ 1 of 2 file(s) over budget"),
        "{out}"
    );
    assert!(out.contains("### ✅ `samples/diff_base.pickle`"), "{out}");
    assert!(out.contains("### ❌ `samples/diff_cand.pickle`"), "{out}");
    assert_eq!(out.matches("| | budget | limit | result |").count(), 2);
    assert!(out.contains("Top sites behind **max_peak**"), "{out}");
    // Every table row has the header's column count.
    for line in out.lines().filter(|l| l.starts_with('|')) {
        let cols = line.replace("\\|", "").matches('|').count();
        assert!(cols == 5 || cols == 4, "{line}");
    }
    golden("check_pair.md", out.as_bytes());
}

/// A tiny XML well-formedness check: tags balance and nest; returns the element names seen.
fn xml_elements(xml: &str) -> Vec<String> {
    let mut stack: Vec<String> = Vec::new();
    let mut seen = Vec::new();
    let mut rest = xml;
    while let Some(i) = rest.find('<') {
        let text = &rest[..i];
        assert!(!text.contains('>'), "stray '>' in {text:?}");
        let j = rest[i..].find('>').expect("unclosed tag") + i;
        let tag = &rest[i + 1..j];
        rest = &rest[j + 1..];
        if tag.starts_with('?') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name), "mismatched </{name}>");
        } else {
            let name = tag.split_whitespace().next().unwrap().trim_end_matches('/');
            seen.push(name.to_string());
            if !tag.ends_with('/') {
                stack.push(name.to_string());
            }
            assert_eq!(
                tag.matches('"').count() % 2,
                0,
                "unbalanced quotes in <{tag}>"
            );
        }
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    seen
}

#[test]
fn junit_is_well_formed() {
    let (code, out, _) = check(&[
        BASE,
        CAND,
        "--max-peak",
        "1GiB",
        "--max-reserved",
        "1GiB",
        "--format",
        "junit",
    ]);
    assert_eq!(code, 1);
    let elements = xml_elements(&out);
    assert_eq!(elements.iter().filter(|e| *e == "testsuite").count(), 1);
    assert_eq!(elements.iter().filter(|e| *e == "testcase").count(), 4);
    let failures = elements.iter().filter(|e| *e == "failure").count();
    assert_eq!(failures, 2);
    assert!(
        out.contains(&format!(r#"tests="4" failures="{failures}""#)),
        "{out}"
    );
    assert!(out.contains("&lt;no frames&gt;"), "{out}");
    assert!(out.contains("exceeds 1.00 GiB by 288.07 MiB"), "{out}");
}

#[test]
fn leaked_is_the_leak_findings_live_bytes() {
    let t: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sample("truth/list_leak.json")).unwrap()).unwrap();
    let (code, out, _) = check(&[
        "samples/list_leak.pickle",
        "--max-leaked",
        "1GiB",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let b = &r["files"][0]["budgets"][0];
    assert_eq!(b["budget"], "max_leaked");
    assert_eq!(b["actual_bytes"], t["finding"]["leaked_bytes_at_end"]);
    assert_eq!(b["status"], "pass");
    // A cache that fills once is not a leak (8 steps: measured, nothing found).
    assert_eq!(
        check(&["samples/kv_cache.pickle", "--max-leaked", "1MiB"]).0,
        0
    );
}

#[test]
fn json_report() {
    let (code, out, _) = check(&[CAND, "--max-peak", "1GiB", "--format", "json"]);
    assert_eq!(code, 1);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["schema_version"], 1);
    let b = &r["files"][0]["budgets"][0];
    assert_eq!(b["budget"], "max_peak");
    assert_eq!(b["limit_bytes"], 1u64 << 30);
    assert_eq!(b["actual_bytes"], 1375805444u64);
    assert_eq!(b["over_bytes"], 1375805444i64 - (1 << 30));
    assert_eq!(b["passed"], false);
}

/// `check ARGS --format json` and its first file's budgets.
fn check_json(args: &[&str]) -> (i32, serde_json::Value) {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    let (code, out, err) = check(&a);
    let r: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}{err}"));
    (code, r)
}

/// Asserts that `args` leave their only budget unmeasured for `reason`: exit 1, and 0 with
/// --allow-unmeasured; JSON status, reason, no number; text, Markdown and JUnit say so.
fn assert_unmeasured(args: &[&str], budget: &str, reason: &str) {
    let (code, r) = check_json(args);
    assert_eq!(code, 1, "{args:?}: {r}");
    let b = &r["files"][0]["budgets"][0];
    assert_eq!(b["budget"], budget, "{args:?}: {r}");
    assert_eq!(b["status"], "unmeasured", "{args:?}: {r}");
    assert_eq!(b["reason"], reason, "{args:?}");
    assert_eq!(b["passed"], false);
    for absent in ["actual_bytes", "actual_ratio", "over_bytes", "lower_bound"] {
        assert!(b.get(absent).is_none(), "{args:?}: {absent} in {b}");
    }
    assert_eq!(b["device"], serde_json::Value::Null);
    assert_eq!(b["top_sites"], serde_json::json!([]));
    assert_eq!(r["files"][0]["status"], "unmeasured");
    assert_eq!(r["files"][0]["passed"], false);
    assert_eq!(
        (
            &r["status"],
            &r["passed"],
            &r["failed_files"],
            &r["unmeasured_files"]
        ),
        (
            &serde_json::json!("unmeasured"),
            &serde_json::json!(false),
            &serde_json::json!(0),
            &serde_json::json!(1)
        ),
        "{args:?}"
    );
    assert_eq!(r["allow_unmeasured"], false);

    let mut allowed = args.to_vec();
    allowed.push("--allow-unmeasured");
    let (code, r) = check_json(&allowed);
    assert_eq!(code, 0, "{allowed:?}: {r}");
    // Accepted, still not passed.
    assert_eq!(r["files"][0]["budgets"][0]["status"], "unmeasured");
    assert_eq!(r["passed"], false);
    assert_eq!(r["allow_unmeasured"], true);

    let (_, out, _) = check(args);
    let line = format!("  unmeasured {budget}: {reason}; --allow-unmeasured to accept\n");
    assert!(out.contains(&line), "{args:?}: expected {line:?} in\n{out}");
    assert!(out.starts_with("UNMEASURED "), "{out}");
    assert!(!out.contains("ok   ") && !out.contains("PASS"), "{out}");
    assert!(
        out.ends_with(
            "0 of 1 file(s) broke a budget; 1 with a budget not measured (--allow-unmeasured to accept)\n"
        ),
        "{out}"
    );
    let (code, out, _) = check(&allowed);
    assert_eq!(code, 0);
    assert!(
        out.contains(&format!(
            "  unmeasured {budget}: {reason}; accepted by --allow-unmeasured\n"
        )),
        "{out}"
    );

    let mut md = args.to_vec();
    md.extend(["--format", "md"]);
    let (code, out, _) = check(&md);
    assert_eq!(code, 1);
    assert!(
        out.starts_with(
            "## memlens check: ⚠️ 1 of 1 file(s) with a budget not measured (--allow-unmeasured to accept)"
        ),
        "{out}"
    );
    assert!(out.contains(&format!("| ⚠️ | {budget} |")), "{out}");
    assert!(!out.contains('✅'), "{out}");

    let mut junit = args.to_vec();
    junit.extend(["--format", "junit"]);
    let (code, out, _) = check(&junit);
    assert_eq!(code, 1);
    let elements = xml_elements(&out);
    assert_eq!(
        elements.iter().filter(|e| *e == "skipped").count(),
        1,
        "{out}"
    );
    assert!(!elements.iter().any(|e| e == "failure"), "{out}");
    assert!(
        out.contains(r#"tests="1" failures="0" errors="0" skipped="1""#),
        "{out}"
    );
    assert!(
        out.contains(&format!(r#"name="{budget}">"#)),
        "a skipped case is not self-closing: {out}"
    );
    assert!(out.contains("<skipped message=\""), "{out}");
}

/// GIVEN a bare segment list (no trace), WHEN --max-peak, THEN the peak is unmeasured: the
/// final state is no peak; at `end` it is the moment, so measured.
#[test]
fn max_peak_unmeasured_without_a_trace() {
    assert_unmeasured(
        &["samples/bare_list.pickle", "--max-peak", "1GiB"],
        "max_peak",
        "no trace on device 0: the peak was not recorded",
    );
    // PyTorch 2.0's one-entry trace (a `snapshot` marker) records no peak either.
    assert_unmeasured(
        &["samples/legacy_2_0.pickle", "--max-peak", "1GiB"],
        "max_peak",
        "the trace of device 0 records no allocation or free (1 entry): the peak was not recorded",
    );
    // Other moments than `end` are not in a file without a trace.
    assert_unmeasured(
        &[
            "samples/bare_list.pickle",
            "--max-peak",
            "1GiB",
            "--at",
            "start",
        ],
        "max_peak",
        "no trace on device 0: the moment start was not recorded",
    );
    // At `end` the final state is what the budget reads: 27779488 requested bytes
    // (samples/README.md).
    let (code, r) = check_json(&[
        "samples/bare_list.pickle",
        "--max-peak",
        "1GiB",
        "--at",
        "end",
    ]);
    assert_eq!(code, 0, "{r}");
    let b = &r["files"][0]["budgets"][0];
    assert_eq!(
        (&b["status"], &b["actual_bytes"]),
        (&"pass".into(), &27779488.into())
    );
}

/// GIVEN a file without a trace whose final state already exceeds the budget, WHEN
/// --max-peak (even with --allow-unmeasured), THEN it fails: the peak is at least that.
#[test]
fn a_lower_bound_over_the_limit_fails() {
    for extra in [&[][..], &["--allow-unmeasured"][..]] {
        let mut args = vec!["samples/bare_list.pickle", "--max-peak", "10MiB"];
        args.extend_from_slice(extra);
        let (code, r) = check_json(&args);
        assert_eq!(code, 1, "{args:?}");
        let b = &r["files"][0]["budgets"][0];
        assert_eq!(b["status"], "fail");
        assert_eq!(b["lower_bound"], true);
        assert_eq!(b["actual_bytes"], 27779488);
        assert_eq!(b["over_bytes"], 27779488 - 10 * 1024 * 1024);
        assert!(b.get("reason").is_none(), "{b}");
        assert_eq!(
            (&r["failed_files"], &r["unmeasured_files"]),
            (&1.into(), &0.into())
        );
        assert!(r["files"][0]["notes"].as_array().unwrap().contains(
            &"no trace on device 0: the peak was not recorded: its final state is a lower bound"
                .into()
        ));
    }
    let (_, out, _) = check(&["samples/bare_list.pickle", "--max-peak", "10MiB"]);
    assert!(
        out.contains("FAIL max_peak: peak at least 26.49 MiB on device 0 exceeds 10.00 MiB by at least 16.49 MiB (+164.9%)"),
        "{out}"
    );
}

/// GIVEN no trace, WHEN --max-leaked, THEN unmeasured (the old answer: "ok leaked 0 B").
#[test]
fn max_leaked_unmeasured_without_a_trace() {
    assert_unmeasured(
        &["samples/bare_list.pickle", "--max-leaked", "1GiB"],
        "max_leaked",
        "no trace on device 0: nothing says what was freed",
    );
}

/// GIVEN traces without steps or with fewer than the leaks analysis needs, WHEN --max-leaked,
/// THEN unmeasured, saying which.
#[test]
fn max_leaked_unmeasured_without_enough_steps() {
    assert_unmeasured(
        &[CAND, "--max-leaked", "1MiB"],
        "max_leaked",
        "the trace of device 0 is too short: 1 step found, at least 4 needed (1 warm-up + 3) to tell growth from noise",
    );
    assert_unmeasured(
        &["samples/adam_loop.pickle", "--max-leaked", "1MiB"],
        "max_leaked",
        "the trace of device 0 is too short: 3 steps found, at least 4 needed (1 warm-up + 3) to tell growth from noise",
    );
    let no_steps = "(no ProfilerStep annotations, user_defined markers, optimizer steps, periodic structure or repeating loop lines)";
    assert_unmeasured(
        &["samples/capacity_oom.pickle", "--max-leaked", "1MiB"],
        "max_leaked",
        &format!("no steps found in the trace of device 0 {no_steps}"),
    );
    assert_unmeasured(
        &["samples/expandable_multi.pickle", "--max-leaked", "1MiB"],
        "max_leaked",
        &format!("no steps found in the trace of devices 0 and 1 {no_steps}"),
    );
    // The leaks analysis's own "too few steps" remark is the reason now, not a note.
    let (_, r) = check_json(&[CAND, "--max-leaked", "1MiB"]);
    assert_eq!(r["files"][0]["notes"], serde_json::json!([]));
}

/// GIVEN a file without a trace, WHEN --max-reserved or --max-frag, THEN measured from the
/// final segments; GIVEN a file with neither segments nor a trace, THEN unmeasured; GIVEN a
/// moment without segments, THEN --max-frag is unmeasured and --max-reserved still measured.
#[test]
fn max_reserved_and_max_frag_need_segments() {
    let (code, r) = check_json(&[
        "samples/bare_list.pickle",
        "--max-reserved",
        "1GiB",
        "--max-frag",
        "30%",
    ]);
    assert_eq!(code, 0, "{r}");
    let b = &r["files"][0]["budgets"];
    assert_eq!(
        (&b[0]["status"], &b[0]["actual_bytes"]),
        (&"pass".into(), &557842432.into())
    );
    assert_eq!(b[1]["status"], "pass");
    assert!(
        (b[1]["actual_ratio"].as_f64().unwrap() - 0.225).abs() < 0.001,
        "{b}"
    );

    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, r#"{"segments": [], "device_traces": [[]]}"#).unwrap();
    let empty = empty.to_str().unwrap();
    let nothing = "no device has segments or a trace: nothing to measure";
    for (flag, value, budget) in [
        ("--max-reserved", "1GiB", "max_reserved"),
        ("--max-frag", "30%", "max_frag"),
        ("--max-peak", "1GiB", "max_peak"),
        ("--max-leaked", "1GiB", "max_leaked"),
    ] {
        assert_unmeasured(&[empty, flag, value], budget, nothing);
    }
    // train_small reserves every segment inside its trace: nothing is held before event 0.
    assert_unmeasured(
        &[
            "samples/train_small.pickle",
            "--max-frag",
            "30%",
            "--at",
            "start",
        ],
        "max_frag",
        "no device holds segments at the moment (start): nothing to measure",
    );
    let (code, r) = check_json(&[
        "samples/train_small.pickle",
        "--max-reserved",
        "1GiB",
        "--at",
        "start",
    ]);
    assert_eq!(code, 0);
    assert_eq!(r["files"][0]["budgets"][0]["actual_bytes"], 180355072);
}

/// GIVEN a baseline or a file without a trace, WHEN --baseline, THEN unmeasured naming the
/// side; at `end` both sides are measured.
#[test]
fn baseline_unmeasured_when_either_peak_is() {
    assert_unmeasured(
        &[CAND, "--baseline", "samples/bare_list.pickle"],
        "baseline",
        "the baseline's peak is not measured: no trace on device 0: the peak was not recorded",
    );
    assert_unmeasured(
        &["samples/bare_list.pickle", "--baseline", BASE],
        "baseline",
        "the file's peak is not measured: no trace on device 0: the peak was not recorded",
    );
    let (code, r) = check_json(&[
        "samples/bare_list.pickle",
        "--baseline",
        "samples/bare_list.pickle",
        "--at",
        "end",
    ]);
    assert_eq!(code, 0, "{r}");
    let b = &r["files"][0]["budgets"][0];
    assert_eq!(
        (&b["status"], &b["over_bytes"]),
        (&"pass".into(), &0.into())
    );
}

/// A snapshot whose device 0 has a 6-step trace leaking 1 MiB per step (6 MiB live at the
/// end) and whose device 1 holds one 20 MiB block and no trace.
fn mixed_devices(dir: &std::path::Path) -> String {
    const MIB: u64 = 1 << 20;
    let base: u64 = 0x7f00_0000_0000;
    let frames =
        serde_json::json!([{"name": "infer_loop", "filename": "/home/u/serve.py", "line": 42}]);
    let (mut trace, mut ann, mut blocks) = (Vec::new(), Vec::new(), Vec::new());
    for step in 0..6u64 {
        let t0 = 1000 * step + 1;
        let addr = base + step * MIB;
        ann.push(serde_json::json!({"name": format!("ProfilerStep#{step}"), "stage": "START", "device": 0, "time_us": t0}));
        trace.push(serde_json::json!({"action": "alloc", "addr": addr, "size": MIB, "stream": 0, "time_us": t0 + 1, "frames": frames}));
        ann.push(serde_json::json!({"name": format!("ProfilerStep#{step}"), "stage": "END", "device": 0, "time_us": t0 + 3}));
        blocks.push(serde_json::json!({"address": addr, "size": MIB, "requested_size": MIB, "state": "active_allocated", "frames": frames}));
    }
    blocks.push(serde_json::json!({"address": base + 6 * MIB, "size": 2 * MIB, "requested_size": 0, "state": "inactive", "frames": []}));
    let segment = |device: u32, address: u64, total: u64, used: u64, blocks: serde_json::Value| {
        serde_json::json!({"device": device, "address": address, "total_size": total,
            "allocated_size": used, "active_size": used, "requested_size": used, "stream": 0,
            "segment_type": "large", "segment_pool_id": [0, 0], "is_expandable": false,
            "frames": [], "blocks": blocks})
    };
    let b1: u64 = 0x7f10_0000_0000;
    let doc = serde_json::json!({
        "segments": [
            segment(0, base, 8 * MIB, 6 * MIB, blocks.into()),
            segment(1, b1, 20 * MIB, 20 * MIB, serde_json::json!([{"address": b1, "size": 20 * MIB,
                "requested_size": 20 * MIB, "state": "active_allocated",
                "frames": [{"name": "load", "filename": "/home/u/serve.py", "line": 7}]}])),
        ],
        "device_traces": [trace, []],
        "external_annotations": ann,
    });
    let path = dir.join("mixed.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

/// GIVEN one device measured and one without a trace, WHEN the measured part is within the
/// budget, THEN unmeasured (naming the device); WHEN what was measured already exceeds it,
/// THEN it fails, --allow-unmeasured or not.
#[test]
fn partly_measured_budgets() {
    let dir = tempfile::tempdir().unwrap();
    let f = mixed_devices(dir.path());
    assert_unmeasured(
        &[&f, "--max-leaked", "1GiB"],
        "max_leaked",
        "no trace on device 1: nothing says what was freed",
    );
    assert_unmeasured(
        &[&f, "--max-peak", "1GiB"],
        "max_peak",
        "no trace on device 1: the peak was not recorded",
    );
    let (code, r) = check_json(&[&f, "--max-leaked", "1MiB", "--allow-unmeasured"]);
    assert_eq!(code, 1, "{r}");
    let b = &r["files"][0]["budgets"][0];
    assert_eq!(
        (&b["status"], &b["actual_bytes"], &b["lower_bound"]),
        (&"fail".into(), &(6u64 << 20).into(), &true.into())
    );
    assert_eq!(b["top_sites"][0]["site"], "serve.py:42:infer_loop");
    assert!(r["files"][0]["notes"]
        .as_array()
        .unwrap()
        .contains(&"no trace on device 1: nothing says what was freed".into()));
    // Device 0's recorded peak (6 MiB) over the limit; device 1's 20 MiB final state is a
    // lower bound of its peak, the biggest: it decides.
    let (code, r) = check_json(&[&f, "--max-peak", "5MiB", "--allow-unmeasured"]);
    assert_eq!(code, 1);
    let b = &r["files"][0]["budgets"][0];
    assert_eq!(
        (
            &b["status"],
            &b["device"],
            &b["actual_bytes"],
            &b["lower_bound"]
        ),
        (
            &"fail".into(),
            &1.into(),
            &(20u64 << 20).into(),
            &true.into()
        )
    );
    // Reserved and fragmentation read both devices.
    let (code, r) = check_json(&[&f, "--max-reserved", "1GiB", "--max-frag", "50%"]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["files"][0]["budgets"][0]["actual_bytes"], 20u64 << 20);
}

/// GIVEN several files, THEN the exit status is 1 when any budget failed, or any is unmeasured
/// without --allow-unmeasured; the summary line counts both.
#[test]
fn exit_status_over_several_files() {
    let pass_and_unmeasured = [
        "samples/list_leak.pickle",
        "samples/bare_list.pickle",
        "--max-leaked",
        "1GiB",
    ];
    let (code, out, _) = check(&pass_and_unmeasured);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("PASS samples/list_leak.pickle\n"), "{out}");
    assert!(
        out.contains("\nUNMEASURED samples/bare_list.pickle\n"),
        "{out}"
    );
    let mut allowed = pass_and_unmeasured.to_vec();
    allowed.push("--allow-unmeasured");
    assert_eq!(check(&allowed).0, 0);
    // A failure is never accepted.
    let (code, out, _) = check(&[
        "samples/list_leak.pickle",
        "samples/bare_list.pickle",
        "--max-leaked",
        "10MiB",
        "--allow-unmeasured",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.ends_with("1 of 2 file(s) broke a budget; 1 with a budget not measured (accepted by --allow-unmeasured)\n"),
        "{out}"
    );
    let (_, out, _) = check(&[
        "samples/list_leak.pickle",
        "samples/bare_list.pickle",
        "--max-leaked",
        "10MiB",
        "--format",
        "md",
    ]);
    assert!(
        out.starts_with("## memlens check: ❌ 1 of 2 file(s) over budget; ⚠️ 1 of 2 file(s) with a budget not measured (--allow-unmeasured to accept)\n"),
        "{out}"
    );
    let (_, out, _) = check(&[
        "samples/list_leak.pickle",
        "samples/bare_list.pickle",
        "--max-leaked",
        "10MiB",
        "--format",
        "junit",
    ]);
    assert!(
        out.contains(r#"tests="2" failures="1" errors="0" skipped="1""#),
        "{out}"
    );
}

/// GIVEN budgets that are all measured, THEN statuses are pass/fail, no reason, and
/// --allow-unmeasured changes nothing but the `allow_unmeasured` field.
#[test]
fn measured_budgets_are_unchanged() {
    let args = [
        CAND,
        "--max-peak",
        "1GiB",
        "--max-reserved",
        "2GiB",
        "--max-frag",
        "30%",
        "--baseline",
        BASE,
    ];
    let (code, r) = check_json(&args);
    assert_eq!(code, 1);
    let statuses: Vec<&str> = r["files"][0]["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            assert!(
                b.get("reason").is_none() && b.get("lower_bound").is_none(),
                "{b}"
            );
            assert_eq!(b["passed"], b["status"] == "pass");
            b["status"].as_str().unwrap()
        })
        .collect();
    assert_eq!(statuses, ["fail", "pass", "pass", "fail"]);
    assert_eq!(r["files"][0]["budgets"][0]["actual_bytes"], 1375805444u64);
    assert_eq!(
        (&r["status"], &r["unmeasured_files"]),
        (&"fail".into(), &0.into())
    );
    let mut allowed = args.to_vec();
    allowed.push("--allow-unmeasured");
    let (code, mut r2) = check_json(&allowed);
    assert_eq!(code, 1);
    assert_eq!(r2["allow_unmeasured"], true);
    r2["allow_unmeasured"] = false.into();
    assert_eq!(r, r2);
    for format in ["text", "md", "junit"] {
        let mut a = args.to_vec();
        a.extend(["--format", format]);
        let plain = check(&a).1;
        a.push("--allow-unmeasured");
        assert_eq!(plain, check(&a).1, "{format}");
        assert!(
            !plain.contains("unmeasured") && !plain.contains("skipped=\"1"),
            "{plain}"
        );
    }
}
