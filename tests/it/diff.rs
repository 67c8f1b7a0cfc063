//! `memlens diff` on the sample pair with known differences (`samples/truth/diff.json`), and
//! on generated pairs whose entries share deep stacks.

use crate::common;
use common::*;
use serde_json::Value;

const BASE: &str = "samples/diff_base.pickle";
const CAND: &str = "samples/diff_cand.pickle";

fn truth() -> Value {
    serde_json::from_slice(&std::fs::read(sample("truth/diff.json")).unwrap()).unwrap()
}

fn diff_json(args: &[&str]) -> (i32, Value) {
    let mut a = vec!["diff", BASE, CAND, "--format", "json"];
    a.extend_from_slice(args);
    let o = memlens_in_root(&a);
    let code = o.status.code().unwrap();
    assert!(
        code == 0 || code == 1,
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    (code, serde_json::from_slice(&o.stdout).unwrap())
}

fn site<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"] == name)
        .unwrap_or_else(|| panic!("no site {name} in {r:#}"))
}

#[test]
fn pair_matches_truth() {
    let t = truth();
    let (code, r) = diff_json(&[]);
    assert_eq!(code, 0);
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["peak"]["base"], t["peak_base"]["peak_bytes"]);
    assert_eq!(r["peak"]["cand"], t["peak_cand"]["peak_bytes"]);
    assert_eq!(r["peak"]["delta_bytes"], t["peak_delta_bytes"]);
    // Paths lose the checkout root; the truth keeps it.
    let root = r["roots"]["base"].as_str().unwrap();
    assert_eq!(root, "/home/user/proj/");
    assert_eq!(r["roots"]["cand"], root);
    let strip = |s: &Value| s.as_str().unwrap().strip_prefix(root).unwrap().to_string();

    let new = site(&r, &strip(&t["new_site"]["site"]));
    assert_eq!(new["status"], "new");
    assert_eq!(new["base_bytes"], 0);
    assert_eq!(new["cand_bytes"], t["new_site"]["bytes"]);
    assert_eq!(new["delta_bytes"], 256 << 20);
    assert_eq!(new["cand_count"], t["new_site"]["count"]);

    let grown = site(&r, &strip(&t["grown_site"]["site"]));
    assert_eq!(grown["status"], "grown");
    assert_eq!(grown["base_bytes"], 64 << 20);
    assert_eq!(grown["cand_bytes"], 128 << 20);
    assert_eq!(grown["delta_bytes"], t["grown_site"]["delta_bytes"]);

    // Every truth delta, and nothing else (unchanged sites are omitted).
    let deltas = t["site_deltas_at_peak"].as_array().unwrap();
    assert_eq!(r["sites"].as_array().unwrap().len(), deltas.len());
    for d in deltas {
        let s = site(&r, &strip(&d["site"]));
        for k in [
            "base_bytes",
            "cand_bytes",
            "delta_bytes",
            "base_count",
            "cand_count",
        ] {
            assert_eq!(s[k], d[k], "{k} of {}", d["site"]);
        }
    }
    assert_eq!(r["counts"]["new"], 1);
    assert_eq!(r["counts"]["grown"], 1);
    // Categories (memlens::analyze::categories) account for the whole change of the peak.
    let cats = r["categories"].as_array().expect("categories");
    let sum: i64 = cats
        .iter()
        .map(|c| c["delta_bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(sum, t["peak_delta_bytes"].as_i64().unwrap());
    for w in cats.windows(2) {
        assert!(
            w[0]["delta_bytes"].as_i64().unwrap().abs()
                >= w[1]["delta_bytes"].as_i64().unwrap().abs()
        );
    }
}

fn assert_sorted(r: &Value) {
    let sites = r["sites"].as_array().unwrap();
    for w in sites.windows(2) {
        let (a, b) = (
            w[0]["delta_bytes"].as_i64().unwrap().abs(),
            w[1]["delta_bytes"].as_i64().unwrap().abs(),
        );
        assert!(
            a > b || (a == b && w[0]["site"].as_str() <= w[1]["site"].as_str()),
            "not sorted by |delta|: {:#}",
            r["sites"]
        );
    }
}

#[test]
fn sorted_by_absolute_change_and_all_lists_unchanged() {
    let (_, r) = diff_json(&[]);
    assert_sorted(&r);
    assert_eq!(r["sites"][0]["status"], "new");
    let (_, all) = diff_json(&["--all"]);
    assert_sorted(&all);
    let sites = all["sites"].as_array().unwrap();
    let unchanged = sites.iter().filter(|s| s["status"] == "unchanged").count();
    assert!(unchanged > 0);
    assert_eq!(all["counts"]["unchanged"], unchanged);
    for s in sites {
        let st = s["status"].as_str().unwrap();
        assert!(
            ["new", "removed", "grown", "shrunk", "unchanged"].contains(&st),
            "{st}"
        );
    }
}

#[test]
fn swapped_pair_is_removed_and_shrunk() {
    let o = memlens_in_root(["diff", CAND, BASE, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["peak"]["delta_bytes"], -335544320);
    assert_eq!(site(&r, "train.py:47:setup_prefetch")["status"], "removed");
    let s = site(&r, "train.py:44:build_rope_cache");
    assert_eq!(s["status"], "shrunk");
    assert_eq!(s["delta_bytes"], -(64 << 20));
    assert_sorted(&r);
}

#[test]
fn same_file_has_no_changes() {
    let o = memlens_in_root([
        "diff",
        BASE,
        BASE,
        "--format",
        "json",
        "--fail-on-growth",
        "0%",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["sites"].as_array().unwrap().len(), 0);
    assert_eq!(r["peak"]["delta_bytes"], 0);
    assert_eq!(r["gate"]["failed"], false);
}

#[test]
fn ignore_lines_drops_line_numbers() {
    let (_, r) = diff_json(&["--ignore-lines"]);
    assert_eq!(r["ignore_lines"], true);
    site(&r, "train.py:setup_prefetch");
    assert_eq!(site(&r, "train.py:build_rope_cache")["status"], "grown");
    for s in r["sites"].as_array().unwrap() {
        let name = s["site"].as_str().unwrap();
        assert_eq!(name.matches(':').count(), 1, "{name}");
    }
    let (_, st) = diff_json(&["--by", "stack", "--ignore-lines"]);
    let first = st["sites"][0]["site"].as_str().unwrap();
    assert!(first.starts_with("train.py:setup_prefetch < "), "{first}");
}

#[test]
fn growth_gate_needs_both_thresholds() {
    // Peak +320 MiB, +32.3%.
    for (pct, abs, want) in [
        ("5%", "256MiB", 1),
        ("5%", "1GiB", 0),
        ("50%", "256MiB", 0),
        ("50%", "1GiB", 0),
    ] {
        let (code, r) = diff_json(&["--fail-on-growth", pct, "--min-abs", abs]);
        assert_eq!(code, want, "--fail-on-growth {pct} --min-abs {abs}");
        assert_eq!(r["gate"]["failed"], want == 1);
    }
    assert_eq!(diff_json(&["--fail-on-growth", "5%"]).0, 1);
    assert_eq!(diff_json(&["--min-abs", "256MiB"]).0, 1);
    assert_eq!(diff_json(&[]).0, 0);
}

#[test]
fn bad_usage_and_unreadable_input_exit_2() {
    for args in [
        vec!["diff", BASE, CAND, "--fail-on-growth", "lots"],
        vec!["diff", BASE, CAND, "--min-abs", "5parsecs"],
        vec!["diff", BASE, CAND, "--at", "17"],
        vec!["diff", BASE, "samples/nope.pickle"],
        vec!["diff", BASE, "samples/README.md"],
    ] {
        let o = memlens_in_root(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.starts_with("memlens: ") || err.contains("error"),
            "{err}"
        );
    }
}

#[test]
fn golden_text() {
    let o = memlens_in_root(["diff", BASE, CAND]);
    assert_eq!(o.status.code(), Some(0));
    golden("diff_pair.txt", &o.stdout);
}

/// `--format md`: the PR comment, golden; its heading carries the gate's verdict, and every
/// site row of the JSON (within `-n`) is one table row with its change.
#[test]
fn golden_markdown() {
    let args = ["diff", BASE, CAND, "--fail-on-growth", "5%"];
    let o = memlens_in_root([&args[..], &["--format", "md"]].concat());
    assert_eq!(
        o.status.code(),
        Some(1),
        "the gate fails: exit 1 in every format"
    );
    golden("diff_pair.md", &o.stdout);
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(
        md.starts_with("## ❌ memlens diff: peak +320.00 MiB (+32.3%)"),
        "{md}"
    );
    let j = memlens_in_root([&args[..], &["--format", "json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    for s in v["sites"].as_array().unwrap() {
        let name = s["site"].as_str().unwrap();
        let row = md
            .lines()
            .find(|l| l.ends_with(&format!("| `{name}` |")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{md}"));
        let delta = memlens::units::signed_iec(s["delta_bytes"].as_i64().unwrap());
        assert!(row.contains(&format!("| {delta} |")), "{row}");
    }
}

/// 200,000 entries that share one 1,000-frame stack: the keys, categories and steps of
/// `diff` cost per distinct stack, not per entry (issue #16; it took minutes when each
/// allocation walked its frames). Totals checked against arithmetic on the inputs.
#[test]
fn deep_shared_stacks_diff_per_stack() {
    let (n, extra) = (200_000u64, 1_000u64);
    let base_sites = [DeepSite {
        count: n,
        size: 4096,
    }];
    let cand_sites = [
        DeepSite {
            count: n,
            size: 6000,
        },
        DeepSite {
            count: extra,
            size: 1000,
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    let (base, cand) = (
        dir.path().join("base.pickle"),
        dir.path().join("cand.pickle"),
    );
    std::fs::write(&base, deep_stack_snapshot(1000, &base_sites)).unwrap();
    std::fs::write(&cand, deep_stack_snapshot(1000, &cand_sites)).unwrap();
    let (base, cand) = (base.to_str().unwrap(), cand.to_str().unwrap());
    let diff = |args: &[&str]| -> Value {
        let o = memlens([&["diff", base, cand, "--format", "json"], args].concat());
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let r = diff(&[]);

    let (base_live, cand_live) = (n * 4096, n * 6000 + extra * 1000);
    assert_eq!(r["peak"]["base"], base_live);
    assert_eq!(r["peak"]["cand"], cand_live);
    assert_eq!(r["peak"]["delta_bytes"], cand_live - base_live);
    let (base_res, cand_res) = (
        deep_stack_reserved(&base_sites),
        deep_stack_reserved(&cand_sites),
    );
    // Blocks of 4096 and 6144 (+512 for the 1000-byte ones) bytes in 2 MiB segments.
    assert_eq!(base_res, (n * 4096).div_ceil(2 << 20) * (2 << 20));
    assert_eq!(
        cand_res,
        (n * 6144 + extra * 1024).div_ceil(2 << 20) * (2 << 20)
    );
    assert_eq!(r["reserved"]["base"], base_res);
    assert_eq!(r["reserved"]["cand"], cand_res);
    assert_eq!(r["roots"]["base"], DEEP_USER);
    assert_eq!(r["roots"]["cand"], DEEP_USER);

    let grown = site(&r, "train.py:10:site0");
    assert_eq!(grown["status"], "grown");
    assert_eq!(grown["base_bytes"], n * 4096);
    assert_eq!(grown["cand_bytes"], n * 6000);
    assert_eq!(grown["delta_bytes"], n * (6000 - 4096));
    assert_eq!(grown["base_count"], n);
    assert_eq!(grown["cand_count"], n);
    let new = site(&r, "train.py:11:site1");
    assert_eq!(new["status"], "new");
    assert_eq!(new["base_bytes"], 0);
    assert_eq!(new["cand_bytes"], extra * 1000);
    assert_eq!(new["cand_count"], extra);
    assert_eq!(r["sites"].as_array().unwrap().len(), 2);
    assert_eq!(r["counts"]["grown"], 1);
    assert_eq!(r["counts"]["new"], 1);
    // Every allocation is in one category or another.
    let cats = r["categories"].as_array().expect("categories");
    let sum: i64 = cats
        .iter()
        .map(|c| c["delta_bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(sum, (cand_live - base_live) as i64);
    let count: u64 = cats.iter().map(|c| c["cand_count"].as_u64().unwrap()).sum();
    assert_eq!(count, n + extra);

    // By whole stack: the 999 torch frames and the site, normalized, in one key.
    let r = diff(&["--by", "stack"]);
    let stack = r["sites"][0]["site"].as_str().unwrap();
    assert_eq!(stack.split(" < ").count(), 1000);
    assert!(
        stack.starts_with("torch/_refs/mod0.py:1:op_0 < "),
        "{stack:.80}"
    );
    assert!(stack.ends_with(" < train.py:10:site0"));
    assert_eq!(r["sites"][0]["delta_bytes"], n * (6000 - 4096));
}

/// `memlens diff BASE CAND --format json [ARGS]` on two samples, from the repository root.
fn diff_of(base: &str, cand: &str, args: &[&str]) -> Value {
    let mut a = vec!["diff", base, cand, "--format", "json"];
    a.extend_from_slice(args);
    let o = memlens_in_root(&a);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// GIVEN samples whose memory older than the trace has no stack (serve_kv: weights loaded
/// before the recording; late_grads: gradients of the autograd thread older than the ring
/// buffer) WHEN diffed THEN that memory compares as rows labelled by their likely kind, with
/// the truths' bytes, never as `<no frames>`; against itself, one unchanged row.
#[test]
fn memory_older_than_the_trace_compares_by_its_likely_kind() {
    let serve =
        serde_json::from_slice::<Value>(&std::fs::read(sample("truth/serve_kv.json")).unwrap())
            .unwrap();
    let grads =
        serde_json::from_slice::<Value>(&std::fs::read(sample("truth/late_grads.json")).unwrap())
            .unwrap();
    let same = diff_of(
        "samples/serve_kv.pickle",
        "samples/serve_kv.pickle",
        &["--all"],
    );
    let row = site(&same, "<before trace, no stack> likely parameters");
    assert_eq!(row["status"], "unchanged");
    assert_eq!(row["predates_trace"], true);
    assert_eq!(row["likely_kind"], "parameters");
    assert_eq!(row["base_bytes"], serve["parameter_bytes"]);
    assert_eq!(row["cand_bytes"], serve["parameter_bytes"]);
    assert!(row["evidence"].as_str().unwrap().contains("never freed"));

    let r = diff_of("samples/serve_kv.pickle", "samples/late_grads.pickle", &[]);
    let params = site(&r, "<before trace, no stack> likely parameters");
    assert_eq!(params["status"], "removed");
    assert_eq!(params["base_bytes"], serve["parameter_bytes"]);
    let g = site(&r, "<before trace, no stack> likely gradients");
    assert_eq!(g["status"], "new");
    assert_eq!(g["likely_kind"], "gradients");
    assert_eq!(g["cand_bytes"], grads["gradient_bytes"]);
    // What late_grads made without frames during the trace stays `<no frames>`, unlabelled.
    let during = site(&r, "<no frames>");
    assert_eq!(during["cand_bytes"], 16 << 20);
    assert!(during.get("predates_trace").is_none());
    // The text table names them too.
    let o = memlens_in_root([
        "diff",
        "samples/serve_kv.pickle",
        "samples/late_grads.pickle",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("<before trace, no stack> likely gradients"),
        "{text}"
    );
}
