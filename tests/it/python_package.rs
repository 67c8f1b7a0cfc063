//! The Python package's tests (`tests/python`: the API against the CLI's JSON on every
//! sample, `record` and its OOM hook with the stand-in torch, the pytest plugin) run from the
//! source tree (`PYTHONPATH=python`, this build's binary), so `cargo test` runs every test.
//! `scripts/test` runs those marked `installed` again against the installed wheel in a fresh venv,
//! with the checks of the wheel's own layout. pytest follows the CI rule: `.ci/run` installs it.

use crate::common;
use common::*;
use std::process::Command;

#[test]
fn python_package_tests_pass() {
    if !require_pytest() {
        return;
    }
    let o = Command::new(python3())
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/python",
        ])
        .current_dir(root())
        .env("PYTHONPATH", root().join("python"))
        .env("MEMLENS_BIN", env!("CARGO_BIN_EXE_memlens"))
        .env("MEMLENS_TEST_SOURCE", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("MEMLENS_TEST_INSTALLED")
        .output()
        .expect("run pytest");
    let out = String::from_utf8_lossy(&o.stdout);
    let tail: Vec<&str> = out.lines().rev().take(40).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    assert!(
        o.status.success(),
        "pytest tests/python failed ({:?}):\n{}\n{}",
        o.status.code(),
        tail.join("\n"),
        String::from_utf8_lossy(&o.stderr)
    );
    let last = tail.last().copied().unwrap_or("");
    assert!(last.contains(" passed"), "pytest ran no test: {last}");
    eprintln!("tests/python: {last}");
}
