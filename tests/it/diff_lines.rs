//! `memlens diff BASE CAND --by line`: `diff_base` against `diff_shifted` (the same run after 7
//! lines were inserted at the top of `train.py`) shows no change, matched by line numbers or by
//! the text of a source tree written here; `diff_base` against `diff_cand` gives the site
//! deltas of `samples/truth/diff.json` as line deltas; bad input is one line and exit 2.

use crate::common;
use common::*;
use serde_json::Value;
use std::path::Path;

const BASE: &str = "samples/diff_base.pickle";
const CAND: &str = "samples/diff_cand.pickle";
const SHIFTED: &str = "samples/diff_shifted.pickle";
const TRAIN: &str = "/home/user/proj/train.py";
const MIB: i64 = 1 << 20;

fn truth() -> Value {
    serde_json::from_slice(&std::fs::read(sample("truth/diff.json")).unwrap()).unwrap()
}

/// `diff BASE CAND --by line --format json ARGS`, exit 0.
fn by_line(base: &str, cand: &str, args: &[&str]) -> Value {
    let mut a = vec!["diff", base, cand, "--by", "line", "--format", "json"];
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

fn rows(r: &Value) -> &Vec<Value> {
    r["lines"].as_array().unwrap()
}

/// The row of candidate line `line` of train.py.
fn row(r: &Value, line: i64) -> &Value {
    rows(r)
        .iter()
        .find(|l| l["file"] == TRAIN && l["line"] == line)
        .unwrap_or_else(|| panic!("no train.py:{line} in {r:#}"))
}

/// The hot lines of the base revision of train.py (the lines `diff_base`'s and `diff_cand`'s
/// frames name, in their functions), as Python a reader can take functions from by
/// indentation; every other line of a function a filler statement of its own, every line
/// outside one a comment.
fn train_py() -> Vec<String> {
    let hot: &[(usize, &str)] = &[
        (19, "class Block(nn.Module):"),
        (20, "    def forward(self, x):"),
        (24, "        h = self.fc1(x)"),
        (25, "        return self.act(h)"),
        (32, "class Model(nn.Module):"),
        (33, "    def forward(self, x):"),
        (38, "        x = self.blocks(x)"),
        (39, "        return self.head(x)"),
        (42, "def build_rope_cache(n):"),
        (44, "    return torch.randn(n, 64, device='cuda')"),
        (46, "def setup_prefetch():"),
        (47, "    return torch.empty(PREFETCH, device='cuda')"),
        (55, "def train_step(model, opt, batch):"),
        (59, "    logits = model(batch)"),
        (60, "    loss = logits.sum()"),
        (61, "    loss.backward()"),
        (62, "    opt.step()"),
        (63, "    opt.zero_grad()"),
        (64, "    return loss"),
        (90, "def main():"),
        (96, "    rope = build_rope_cache(1024)"),
        (100, "    buf = setup_prefetch()"),
        (104, "    model = Model().cuda()"),
        (118, "    train_step(model, opt, batch)"),
        (140, "main()"),
    ];
    // The body indentation of each line: inside a def (to its last body line), or none.
    let body = |i: usize| match i {
        21..=31 | 34..=40 => "        ",
        43..=44 | 47 | 56..=64 | 91..=120 => "    ",
        _ => "",
    };
    (1..=150)
        .map(|i| match hot.iter().find(|(l, _)| *l == i) {
            Some((_, s)) => s.to_string(),
            None if body(i).is_empty() => format!("# line {i}"),
            None => format!("{}v{i} = {i}", body(i)),
        })
        .collect()
}

/// Writes `lines` as `DIR/proj/train.py`.
fn write_tree(dir: &Path, lines: &[String]) {
    std::fs::create_dir_all(dir.join("proj")).unwrap();
    std::fs::write(dir.join("proj/train.py"), lines.join("\n") + "\n").unwrap();
}

/// The base revision and the shifted one (7 lines inserted at the top), in two trees.
fn two_revisions() -> (tempfile::TempDir, tempfile::TempDir) {
    let base = train_py();
    let shifted: Vec<String> = (1..=7)
        .map(|i| format!("# inserted {i}"))
        .chain(base.iter().cloned())
        .collect();
    let (b, s) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_tree(b.path(), &base);
    write_tree(s.path(), &shifted);
    (b, s)
}

/// The lines of `diff_base` (as `memlens lines` reads them at the peak): the shift moves each
/// by 7 and changes nothing else.
const BASE_LINES: [(i64, &str); 13] = [
    (24, "forward"),
    (25, "forward"),
    (38, "forward"),
    (39, "forward"),
    (44, "build_rope_cache"),
    (59, "train_step"),
    (60, "train_step"),
    (61, "train_step"),
    (62, "train_step"),
    (96, "main"),
    (104, "main"),
    (118, "main"),
    (140, "<module>"),
];

/// Every line of the shifted run matched to its base line, nothing changed.
fn assert_no_change(r: &Value, keyed_by: &str) {
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["by"], "line");
    let c = &r["counts"];
    for k in ["new", "removed", "grown", "shrunk"] {
        assert_eq!(c[k], 0, "{k}: {r:#}");
    }
    assert_eq!(c["unchanged"], 13);
    assert_eq!(c["moved"], 13);
    assert_eq!(r["counted"]["delta_bytes"], 0);
    assert_eq!(r["files"].as_array().unwrap().len(), 1);
    assert_eq!(r["files"][0]["keyed_by"], keyed_by, "{:#}", r["files"]);
    assert_eq!(rows(r).len(), 13, "--all lists every line");
    for (line, function) in BASE_LINES {
        let l = row(r, line + 7);
        assert_eq!(l["function"], function);
        assert_eq!(l["status"], "unchanged");
        assert_eq!(l["moved_from"], line);
        for k in ["self", "total"] {
            assert_eq!(l[k]["delta_bytes"], 0);
            assert_eq!(l[k]["base"], l[k]["cand"]);
        }
        assert_eq!(l["base_allocations"], l["cand_allocations"]);
    }
    // The figures are the lines', not zeros: the training loop's line holds every framed byte.
    assert_eq!(row(r, 147)["total"]["base"], r["framed"]["base"]);
    assert!(r["framed"]["base"].as_u64().unwrap() > 700 << 20);
}

#[test]
fn shifted_lines_match_by_number_without_source() {
    let r = by_line(BASE, SHIFTED, &["--all"]);
    assert_no_change(&r, "line_number");
    assert!(row(&r, 31).get("text").is_none());
    // Without --all nothing is listed: nothing changed.
    let r = by_line(BASE, SHIFTED, &[]);
    assert!(rows(&r).is_empty(), "{r:#}");
    assert_eq!(r["counts"]["unchanged"], 13);
}

#[test]
fn shifted_lines_match_by_text_with_both_revisions() {
    let (b, s) = two_revisions();
    let (b, s) = (b.path().to_str().unwrap(), s.path().to_str().unwrap());
    let r = by_line(
        BASE,
        SHIFTED,
        &["--all", "--source-root", s, "--base-source-root", b],
    );
    assert_no_change(&r, "text");
    let f = &r["files"][0];
    assert_eq!(f["cand_source"], format!("{s}/proj/train.py"));
    assert_eq!(f["base_source"], format!("{b}/proj/train.py"));
    assert!(f.get("note").is_none(), "{f:#}");
    assert_eq!(row(&r, 31)["text"], "h = self.fc1(x)");
    assert_eq!(row(&r, 125)["text"], "train_step(model, opt, batch)");
    assert_eq!(row(&r, 147)["text"], "main()");
}

/// The candidate's source alone: the base's lines read there fall outside their functions
/// (base line 24 is a comment of the shifted file), so the file is matched by line numbers,
/// with the reason, and still nothing changed.
#[test]
fn shifted_lines_fall_back_when_the_source_is_not_the_base_revision() {
    let (_b, s) = two_revisions();
    let s = s.path().to_str().unwrap();
    let r = by_line(BASE, SHIFTED, &["--all", "--source-root", s]);
    assert_no_change(&r, "line_number");
    let note = r["files"][0]["note"].as_str().unwrap();
    assert!(
        note.contains("line 24 of the base is not code of forward"),
        "{note}"
    );
    assert!(note.contains("not the revision the base ran"), "{note}");
}

/// `diff_base` against `diff_cand` by line: the site deltas of the truth are the self deltas
/// of their lines, the lines that call them carry them in their totals, and nothing else
/// moved. Expected figures come from the truth file alone.
fn assert_truth_deltas(r: &Value) {
    let t = truth();
    let u = |v: &Value| v.as_i64().unwrap();
    assert_eq!(r["counted"]["base"], t["peak_base"]["peak_bytes"]);
    assert_eq!(r["counted"]["cand"], t["peak_cand"]["peak_bytes"]);
    let deltas = t["site_deltas_at_peak"].as_array().unwrap();
    // Each truth site is `/home/user/proj/train.py:LINE:function`.
    let at = |d: &Value| -> (i64, String) {
        let s = d["site"].as_str().unwrap();
        let rest = s.strip_prefix(&format!("{TRAIN}:")).unwrap();
        let (line, function) = rest.split_once(':').unwrap();
        (line.parse().unwrap(), function.to_string())
    };
    let site = |d: &Value| -> (i64, String, i64) {
        let (line, function) = at(d);
        (line, function, u(&d["delta_bytes"]))
    };
    let sum: i64 = deltas.iter().map(|d| u(&d["delta_bytes"])).sum();
    assert_eq!(r["framed"]["delta_bytes"], sum);
    assert_eq!(r["unattributed"]["delta_bytes"], 0);
    // Lines whose self bytes changed: exactly the truth's sites, by the same amount.
    let changed_self: Vec<(i64, String, i64)> = rows(r)
        .iter()
        .filter(|l| l["self"]["delta_bytes"] != 0)
        .map(|l| {
            (
                u(&l["line"]),
                l["function"].as_str().unwrap().to_string(),
                u(&l["self"]["delta_bytes"]),
            )
        })
        .collect();
    let mut want: Vec<(i64, String, i64)> = deltas.iter().map(site).collect();
    let mut got = changed_self.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    for d in deltas {
        let (line, _, delta) = site(d);
        let l = row(r, line);
        assert_eq!(u(&l["total"]["delta_bytes"]), delta);
        assert_eq!(l["self"]["base"], d["base_bytes"]);
        assert_eq!(l["self"]["cand"], d["cand_bytes"]);
        let status = if u(&d["base_count"]) == 0 {
            "new"
        } else {
            "grown"
        };
        assert_eq!(l["status"], status);
    }
    // The new line is the truth's new site: its total is the site's bytes.
    let (new_line, _) = at(&t["new_site"]);
    let new = row(r, new_line);
    assert_eq!(new["status"], "new");
    assert_eq!(new["total"]["cand"], t["new_site"]["bytes"]);
    assert_eq!(new["cand_allocations"], t["new_site"]["count"]);
    // Its caller in main is new too, with the same total and no self bytes.
    let caller = row(r, 100);
    assert_eq!(caller["status"], "new");
    assert_eq!(caller["function"], "main");
    assert_eq!(caller["total"]["cand"], t["new_site"]["bytes"]);
    assert_eq!(caller["self"]["cand"], 0);
    // The module line holds the whole framed change; main's call of the rope cache its growth.
    assert_eq!(u(&row(r, 140)["total"]["delta_bytes"]), sum);
    assert_eq!(
        row(r, 96)["total"]["delta_bytes"],
        t["grown_site"]["delta_bytes"]
    );
    let c = &r["counts"];
    assert_eq!(
        (c["new"].as_u64(), c["removed"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(
        (c["grown"].as_u64(), c["shrunk"].as_u64()),
        (Some(3), Some(0))
    );
    assert_eq!(c["unchanged"], 10);
    assert_eq!(c["moved"], 0);
    // By |total change|: the module line first (+320 MiB), the two new lines (+256 MiB).
    let order: Vec<i64> = rows(r).iter().map(|l| u(&l["line"])).collect();
    assert_eq!(order, vec![140, 47, 100, 44, 96]);
    assert_eq!(u(&rows(r)[0]["total"]["delta_bytes"]), 320 * MIB);
}

#[test]
fn candidate_deltas_are_the_truth_sites() {
    let r = by_line(BASE, CAND, &[]);
    assert_eq!(r["files"][0]["keyed_by"], "line_number");
    assert_truth_deltas(&r);
}

/// One revision for both runs (they ran the same file): keyed by text, the same deltas.
#[test]
fn candidate_deltas_keyed_by_text() {
    let b = tempfile::tempdir().unwrap();
    write_tree(b.path(), &train_py());
    let r = by_line(BASE, CAND, &["--source-root", b.path().to_str().unwrap()]);
    assert_eq!(r["files"][0]["keyed_by"], "text", "{:#}", r["files"]);
    assert_truth_deltas(&r);
    assert_eq!(
        row(&r, 47)["text"],
        "return torch.empty(PREFETCH, device='cuda')"
    );
}

#[test]
fn the_growth_gate_exits_as_diff() {
    let base = |extra: &[&str]| {
        let mut a = vec!["diff", BASE, CAND, "--by", "line"];
        a.extend_from_slice(extra);
        memlens_in_root(&a).status.code()
    };
    // +320 MiB on 992 MiB: +32%.
    assert_eq!(base(&["--fail-on-growth", "30%"]), Some(1));
    assert_eq!(base(&["--fail-on-growth", "33%"]), Some(0));
    assert_eq!(
        base(&["--fail-on-growth", "1%", "--min-abs", "321MiB"]),
        Some(0)
    );
}

#[test]
fn the_text_names_the_biggest_changes() {
    let o = memlens_in_root(["diff", BASE, CAND, "--by", "line", "--width", "100"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("compared by line: live at peak"), "{text}");
    assert!(text.contains("train.py: matched by line number"), "{text}");
    assert!(
        text.contains("Lines: 2 new, 0 removed, 3 grown, 0 shrunk, 10 unchanged"),
        "{text}"
    );
    let first = text
        .lines()
        .find(|l| l.contains("setup_prefetch"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        first.contains("new") && first.contains("+256.00 MiB"),
        "{first}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    let o = memlens_in_root(["diff", BASE, SHIFTED, "--by", "line", "--all", "-n", "1"]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("13 only moved"), "{text}");
    assert!(text.contains("train.py:31 (was :24)"), "{text}");
    assert!(text.contains("... 12 more lines"), "{text}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let one_line = |args: &[&str], says: &str| {
        let o = memlens_in_root(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
        assert!(o.stdout.is_empty());
    };
    let file = tempfile::NamedTempFile::new().unwrap();
    let not_dir = file.path().to_str().unwrap();
    one_line(
        &[
            "diff",
            BASE,
            CAND,
            "--by",
            "line",
            "--source-root",
            "/no/such/dir",
        ],
        "--source-root /no/such/dir: not a directory",
    );
    one_line(
        &[
            "diff",
            BASE,
            CAND,
            "--by",
            "line",
            "--base-source-root",
            not_dir,
        ],
        "not a directory",
    );
    one_line(
        &["diff", BASE, CAND, "--cost", "allocated"],
        "--cost needs --by line",
    );
    one_line(
        &["diff", BASE, CAND, "--source-root", "."],
        "--source-root needs --by line",
    );
    one_line(
        &["diff", BASE, CAND, "--by", "line", "--ignore-lines"],
        "not with --by line",
    );
    one_line(
        &["diff", BASE, CAND, "--by", "line", "--format", "md"],
        "not with --by line",
    );
}
