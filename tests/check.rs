//! `memlens check`: budgets, exit codes, Markdown and JUnit output.

mod common;
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
