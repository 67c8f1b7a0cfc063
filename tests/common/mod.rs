//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A file under `samples/`.
pub fn sample(name: &str) -> PathBuf {
    root().join("samples").join(name)
}

/// All committed sample snapshots (pickles and JSON), sorted.
pub fn samples() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("samples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("pickle") | Some("json")
            )
        })
        .collect();
    v.sort();
    v
}

/// The real snapshots captured on a GPU (`samples/captured/*.pickle`, see
/// samples/capture/README.md), sorted.
pub fn captured() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("samples/captured"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pickle"))
        .collect();
    v.sort();
    v
}

/// The real snapshots in `../shared/samples/real`, or `None` (with a message) when absent.
pub fn real_snapshots() -> Option<Vec<PathBuf>> {
    let dir = root()
        .join("..")
        .join("shared")
        .join("samples")
        .join("real");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: {} is absent", dir.display());
        return None;
    };
    let mut v: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("pickle") | Some("pkl")
            )
        })
        .collect();
    v.sort();
    if v.is_empty() {
        eprintln!("skipped: no snapshots in {}", dir.display());
        return None;
    }
    Some(v)
}

/// True when `python3` runs; tests that need the oracle skip otherwise.
pub fn have_python() -> bool {
    let ok = Command::new("python3")
        .arg("-c")
        .arg("import pickle, json")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("skipped: python3 is not available for the oracle");
    }
    ok
}

/// Runs the memlens binary.
pub fn memlens<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(args)
        .output()
        .expect("run memlens")
}

/// Runs the Python oracle `tests/oracle/snapshot_oracle.py CMD FILE` and parses its JSON.
pub fn oracle(cmd: &str, file: &Path) -> serde_json::Value {
    let out = Command::new("python3")
        .arg(root().join("tests/oracle/snapshot_oracle.py"))
        .arg(cmd)
        .arg(file)
        .output()
        .expect("run oracle");
    assert!(
        out.status.success(),
        "oracle failed on {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("oracle JSON")
}

/// Loads a snapshot through the library.
pub fn load(path: &Path) -> memlens::model::Snapshot {
    memlens::load(path, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

/// The summary of `path` as JSON, through the library.
pub fn summary_json(path: &Path) -> serde_json::Value {
    serde_json::to_value(memlens::analyze::summary::run(&load(path))).unwrap()
}

/// Warning codes that mean an invariant of the format is broken (not a data-quality note).
pub const INVARIANT_CODES: &[&str] = &[
    "segment_total_mismatch",
    "segment_sum_mismatch",
    "blocks_not_contiguous",
    "block_size_unaligned",
    "segments_overlap",
    "requested_exceeds_size",
    "segments_unsorted",
];

/// Compares `actual` with the golden file `tests/golden/NAME`; a missing file is created and
/// `MEMLENS_BLESS=1` rewrites it.
pub fn golden(name: &str, actual: &[u8]) {
    let path = root().join("tests/golden").join(name);
    if std::env::var_os("MEMLENS_BLESS").is_some() || !path.exists() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read(&path).unwrap();
    assert!(
        expected == actual,
        "{} differs (MEMLENS_BLESS=1 to accept):\n--- expected\n{}\n--- actual\n{}",
        path.display(),
        String::from_utf8_lossy(&expected),
        String::from_utf8_lossy(actual)
    );
}

/// Runs the memlens binary in the repository root (relative sample paths, stable output).
pub fn memlens_in_root<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_memlens"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("run memlens")
}
