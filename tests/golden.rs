//! Golden outputs of every command on every sample in `samples/`.
//!
//! A missing golden file is created; `MEMLENS_BLESS=1 cargo test` rewrites them all. Review
//! the diff of a blessed file like code.

mod common;
use common::*;
use std::path::Path;

fn check(golden: &Path, actual: &[u8]) {
    let bless = std::env::var_os("MEMLENS_BLESS").is_some();
    if bless || !golden.exists() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(golden, actual).unwrap();
        return;
    }
    let expected = std::fs::read(golden).unwrap();
    if expected != actual {
        panic!(
            "{} differs (MEMLENS_BLESS=1 to accept):\n--- expected\n{}\n--- actual\n{}",
            golden.display(),
            String::from_utf8_lossy(&expected),
            String::from_utf8_lossy(actual)
        );
    }
}

fn run_golden(command: &[&str], suffix: &str) {
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
        assert_eq!(
            o.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let golden = root().join("tests/golden").join(format!("{name}.{suffix}"));
        check(&golden, &o.stdout);
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
