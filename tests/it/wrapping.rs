//! Text keeps code whole (issue 52, item 5): at 80 and 100 columns every command's text fits
//! the width and never splits what users copy: an identifier, a call
//! (`zero_grad(set_to_none=True)`), a setting (`expandable_segments:True`), a path.
//!
//! What counts as code is a precise rule ([`code_tokens`]): a maximal run of
//! `[A-Za-z0-9_.:=/\-()\[\]'"]` longer than 3 characters holding one of `_ . : = / (`. Every
//! such run of a command's unfitted text (`--width 0`) must appear in its fitted text at least
//! as often, whole on one line (of a table, within one cell): a run cut across two lines is
//! missing there (and its halves are new runs). The one exemption is a run wider than the
//! width less 4 columns (a table's borders and padding), which no layout can keep whole.

use crate::common;
use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The widths every command is checked at.
const WIDTHS: [usize; 2] = [80, 100];

/// The characters of a code run.
fn code_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.:=/-()[]'\"".contains(c)
}

/// The code runs of `text` with how often each appears (see the module).
fn code_tokens(text: &str) -> BTreeMap<&str, usize> {
    let mut out = BTreeMap::new();
    for run in text.split(|c: char| !code_char(c)) {
        if run.len() > 3 && run.contains(['_', '.', ':', '=', '/', '(']) {
            *out.entry(run).or_insert(0) += 1;
        }
    }
    out
}

/// What is wrong with `narrow` (the text fitted to `width`) beside `wide` (the same text
/// unfitted): its lines wider than the width, and the code runs of `wide` it splits.
fn defects(wide: &str, narrow: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for line in narrow.lines().filter(|l| l.chars().count() > width) {
        out.push(format!("{} columns: {line}", line.chars().count()));
    }
    let have = code_tokens(narrow);
    for (run, n) in code_tokens(wide) {
        if run.len() + 4 <= width && have.get(run).copied().unwrap_or(0) < n {
            out.push(format!("split: {run}"));
        }
    }
    out
}

#[test]
fn the_check_sees_the_splits_of_issue_52() {
    let wide = "│ 1 ┆ free ┆ call optimizer.zero_grad(set_to_none=True) before │\n\
                set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True";
    let split = "│ 1 ┆ free ┆ call optimizer.zero_grad(set_to_non │\n\
                 │   ┆      ┆ e=True) before                      │\n\
                 set PYTORCH_CUDA_ALLOC_CONF=expanda\nble_segments:True";
    assert_eq!(
        defects(wide, split, 80),
        vec![
            "split: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            "split: optimizer.zero_grad(set_to_none=True)",
        ]
    );
    // A break between runs (a space, a comma) splits nothing; a line too wide is a defect.
    let kept =
        "│ call                                  │\n│ optimizer.zero_grad(set_to_none=True) │";
    assert!(defects(wide.lines().next().unwrap(), kept, 80).is_empty());
    assert_eq!(
        defects("ab_c,cd_e", "ab_c,\ncd_e", 80),
        Vec::<String>::new()
    );
    assert_eq!(defects("", &"x".repeat(81), 80).len(), 1);
    // A run no line can hold is exempt.
    let long = format!("/{}", "p".repeat(80));
    assert!(defects(&long, &format!("{}\n{}", &long[..40], &long[40..]), 80).is_empty());
}

/// Every command line whose text is checked: each snapshot's reports, `diff` of each pair of
/// related real files (same author, consecutive in name order) and of the sample pairs,
/// `explain` of every message in tests/data/oom_messages.
fn commands(real: &[PathBuf]) -> Vec<Vec<String>> {
    let per_file: &[&[&str]] = &[
        &["summary"],
        &["top"],
        &["lines"],
        &["frag"],
        &["categories"],
        &["leaks"],
        &["oom"],
        &["fit"],
        &["whatif", "--suggest"],
        &["check", "--max-peak", "1GiB"],
    ];
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let mut files: Vec<PathBuf> = real.to_vec();
    files.extend(samples());
    let mut out = Vec::new();
    for f in &files {
        for cmd in per_file {
            let mut args: Vec<String> = cmd.iter().map(|a| a.to_string()).collect();
            args.push(s(f));
            out.push(args);
        }
    }
    let author = |p: &PathBuf| {
        let name = p.file_name().unwrap().to_string_lossy();
        name.split("__").next().unwrap().to_string()
    };
    for pair in real.windows(2).filter(|w| author(&w[0]) == author(&w[1])) {
        out.push(vec!["diff".into(), s(&pair[0]), s(&pair[1])]);
    }
    for cand in ["diff_cand.pickle", "diff_shifted.pickle"] {
        out.push(vec![
            "diff".into(),
            s(&sample("diff_base.pickle")),
            s(&sample(cand)),
        ]);
    }
    let mut messages: Vec<PathBuf> = std::fs::read_dir(root().join("tests/data/oom_messages"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    messages.sort();
    assert!(messages.len() >= 10, "{messages:?}");
    for m in messages {
        out.push(vec!["explain".into(), "--message-file".into(), s(&m)]);
    }
    out
}

/// `memlens ARGS --width W` (0: no limit), which must exit 0 or 1 (a finding).
fn text(args: &[String], width: usize) -> Result<String, String> {
    let o = memlens_in_root(
        args.iter()
            .map(String::as_str)
            .chain(["--width", &width.to_string()]),
    );
    match o.status.code() {
        Some(0 | 1) => String::from_utf8(o.stdout).map_err(|e| e.to_string()),
        code => Err(format!(
            "exit {code:?}: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .take(3)
                .collect::<Vec<_>>()
                .join(" / ")
        )),
    }
}

#[test]
fn every_command_keeps_code_whole_at_80_and_100_columns() {
    // Outside CI without the real files, the samples alone (require_shared says so).
    let real = require_shared().unwrap_or_default();
    let jobs = commands(&real);
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get() * 2);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(args) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let mut found = Vec::new();
                    match text(args, 0) {
                        Err(e) => found.push(format!("{args:?}: {e}")),
                        Ok(wide) => {
                            for w in WIDTHS {
                                match text(args, w) {
                                    Err(e) => found.push(format!("{args:?} at {w}: {e}")),
                                    Ok(narrow) => found.extend(
                                        defects(&wide, &narrow, w)
                                            .into_iter()
                                            .map(|d| format!("{args:?} at {w}: {d}")),
                                    ),
                                }
                            }
                        }
                    }
                    failures.lock().unwrap().extend(found);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} defects in {} commands, the first:\n{}",
        failures.len(),
        jobs.len(),
        failures
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn timeline_has_no_text_to_fit() {
    // The one command of the list without text: its formats are CSV, JSON and SVG.
    let o = memlens_in_root(["timeline", "--format", "text", "samples/train_small.pickle"]);
    assert_eq!(o.status.code(), Some(2));
}
