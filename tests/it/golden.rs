//! Golden outputs of every command on every sample in `samples/`.
//!
//! `MEMLENS_BLESS=1 cargo test` rewrites them all (review the diff of a blessed file like
//! code); a missing golden file fails (see tests/common/golden.rs).

use crate::common;
use common::*;

fn run_golden(command: &[&str], suffix: &str) {
    run_golden_exits(command, suffix, &[0]);
}

/// [`run_golden`] for a command whose findings exit 1 (`leaks`).
fn run_golden_exits(command: &[&str], suffix: &str, exits: &[i32]) {
    let samples = samples();
    assert!(!samples.is_empty(), "no samples in samples/");
    for s in samples {
        let name = s.file_name().unwrap().to_string_lossy().to_string();
        let rel = format!("samples/{name}");
        let mut args: Vec<&str> = command.to_vec();
        args.push(&rel);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_memlens"))
            .current_dir(root())
            .args(&args)
            .output()
            .unwrap();
        assert!(
            o.status.code().is_some_and(|c| exits.contains(&c)),
            "{name}: {:?} {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        );
        golden(&format!("{name}.{suffix}"), &o.stdout);
    }
}

#[test]
fn summary_text() {
    run_golden(&["summary"], "summary.txt");
}

#[test]
fn summary_json() {
    run_golden(&["summary", "--format", "json"], "summary.json");
}

#[test]
fn top_text() {
    run_golden(&["top", "-n", "8"], "top.txt");
}

#[test]
fn top_json() {
    run_golden(&["top", "--format", "json"], "top.json");
}

#[test]
fn top_by_file_allocated_text() {
    run_golden(
        &["top", "--by", "file", "--cost", "allocated"],
        "top_file_allocated.txt",
    );
}

/// `lines`: the hottest user lines (the lines sample is under `samples/lines/`, with its
/// golden beside the others').
#[test]
fn lines_text() {
    run_golden(&["lines", "--top", "8"], "lines.txt");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_memlens"))
        .current_dir(root())
        .args(["lines", "samples/lines/nested_lines.pickle"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    golden("nested_lines.pickle.lines.txt", &o.stdout);
}

#[test]
fn timeline_csv() {
    run_golden(&["timeline", "--points", "50"], "timeline.csv");
}

#[test]
fn flame_folded() {
    run_golden(&["flame", "--format", "folded"], "flame.folded");
}

#[test]
fn frag_text() {
    run_golden(&["frag"], "frag.txt");
}

#[test]
fn oom_text() {
    run_golden(&["oom", "--capacity", "24GiB"], "oom.txt");
}

/// `leaks`: the steps in a few lines and one finding per cause (issue 19).
#[test]
fn leaks_text() {
    run_golden_exits(&["leaks"], "leaks.txt", &[0, 1]);
}

#[test]
fn categories_text() {
    run_golden(&["categories"], "categories.txt");
}

#[test]
fn categories_at_end_json() {
    run_golden(
        &["categories", "--at", "end", "--format", "json"],
        "categories_end.json",
    );
}

#[test]
fn flame_cpp_folded() {
    run_golden(
        &["flame", "--format", "folded", "--frames", "cpp"],
        "flame_cpp.folded",
    );
}

#[test]
fn whatif_text() {
    run_golden(&["whatif", "--suggest"], "whatif.txt");
}
