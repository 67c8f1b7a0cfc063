//! Issue 36: smaller (see tests/it/surfaces.rs).
//!
//! `batch -j` is capped at the files and the cores; Parquet part names stay within the 255
//! bytes a file name may hold; Perfetto spans and `summary`'s trace span clamp instead of
//! wrapping with `time_us` near ±2^63; `whatif` leaves a capacity it cannot infer consistently
//! unknown instead of replaying against 0 B.

use crate::common::{memlens, sample};
use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn ev(action: &str, addr: u64, size: u64, t: i64) -> Value {
    json!({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
        "frames": [{"filename": "/w/train.py", "line": 7, "name": "step"}]})
}

fn write(dir: &Path, name: &str, doc: Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, doc.to_string()).unwrap();
    p
}

fn text(o: &std::process::Output) -> (i32, String, String) {
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// GIVEN one file, WHEN `batch -j 100000`, THEN it runs (one worker) and prints what `-j 1`
/// prints (main started 100,000 threads: 30+ s, or a panic where memory ran short).
#[test]
fn batch_jobs_beyond_the_files_are_capped() {
    let f = sample("bare_list.pickle");
    let f = f.to_str().unwrap();
    let (code, many, err) = text(&memlens(["batch", "-j", "100000", "--format", "json", f]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(err, "");
    let (code, one, _) = text(&memlens(["batch", "-j", "1", "--format", "json", f]));
    assert_eq!(code, 0);
    assert_eq!(many, one);
    let r: Value = serde_json::from_str(&many).unwrap();
    assert_eq!(r["files"].as_array().unwrap().len(), 1, "{many}");
}

/// The `file` column of every row of the Parquet files under `dir`.
fn file_column(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let r = SerializedFileReader::new(std::fs::File::open(&p).unwrap()).unwrap();
        for row in r.get_row_iter(None).unwrap() {
            let row = row.unwrap();
            let (_, v) = row
                .get_column_iter()
                .find(|(name, _)| name.as_str() == "file")
                .expect("a file column");
            out.push(v.to_string().trim_matches('"').to_string());
        }
    }
    out.sort();
    out
}

/// GIVEN legal input names whose part names would pass 255 bytes (239 bytes; two sharing
/// their first 231; 80 spaces, which percent-encoding makes 240), WHEN `batch --format
/// parquet`, THEN every part name is at most 255 bytes, each table has a part per input and
/// the `files` table names every input (main: "File name too long", exit 2, an input dropped).
#[test]
fn parquet_part_names_stay_within_255_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let src = std::fs::read(sample("bare_list.pickle")).unwrap();
    let names = [
        format!("{}.pickle", "a".repeat(232)),
        format!("{}b.pickle", "a".repeat(231)),
        format!("{}.pickle", " ".repeat(80)),
    ];
    let inputs: Vec<PathBuf> = names
        .iter()
        .map(|n| {
            assert!(n.len() < 255);
            let p = tmp.path().join(n);
            std::fs::write(&p, &src).unwrap();
            p
        })
        .collect();
    let ds = tmp.path().join("ds");
    let mut args: Vec<&std::ffi::OsStr> = ["batch", "--format", "parquet", "-o"]
        .iter()
        .map(|s| s.as_ref())
        .collect();
    args.push(ds.as_os_str());
    args.extend(inputs.iter().map(|p| p.as_os_str()));
    let (code, _, err) = text(&memlens(&args));
    assert_eq!(code, 0, "{err}");
    let tables: Vec<PathBuf> = std::fs::read_dir(&ds)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(tables.len() >= 5, "{tables:?}");
    for t in &tables {
        let parts: Vec<String> = std::fs::read_dir(t)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(parts.len(), 3, "{t:?}: {parts:?}");
        for p in &parts {
            assert!(p.len() <= 255, "{} bytes: {p}", p.len());
            assert!(p.starts_with("part-") && p.ends_with(".parquet"), "{p}");
        }
    }
    let mut want: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
    want.sort();
    assert_eq!(file_column(&ds.join("table=files")), want);
}

/// GIVEN a trace whose `time_us` run from -2^63 + 1000 to 2^63 - 1000 with an annotation
/// across it, THEN the Perfetto span's `dur` is clamped at i64::MAX (main: 1, the wrapped
/// difference floored) and `summary` says the trace spans i64::MAX µs (main: "over 0 µs").
#[test]
fn times_near_2_pow_63_clamp_instead_of_wrapping() {
    let tmp = tempfile::tempdir().unwrap();
    let (lo, hi) = (i64::MIN + 1000, i64::MAX - 1000);
    let f = write(
        tmp.path(),
        "times.json",
        json!({"segments": [], "device_traces": [[
            ev("alloc", 4096, 512, lo), ev("alloc", 8192, 1024, lo + 5),
            ev("free_completed", 8192, 1024, hi - 5), ev("free_completed", 4096, 512, hi)]],
            "external_annotations": [
                {"name": "fwd", "stage": "START", "device": 0, "time_us": lo},
                {"name": "fwd", "stage": "END", "device": 0, "time_us": hi}]}),
    );
    let out = tmp.path().join("trace.json");
    let (code, _, err) = text(&memlens([
        "export".as_ref(),
        f.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]));
    assert_eq!(code, 0, "{err}");
    let t: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let events = t["traceEvents"].as_array().unwrap();
    let spans: Vec<(i64, i64)> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| (e["ts"].as_i64().unwrap(), e["dur"].as_i64().unwrap()))
        .collect();
    assert_eq!(spans, vec![(lo, i64::MAX)]);
    let mut ends: Vec<(String, i64)> = events
        .iter()
        .filter(|e| e["cat"] == "allocation")
        .map(|e| {
            (
                e["ph"].as_str().unwrap().to_string(),
                e["ts"].as_i64().unwrap(),
            )
        })
        .collect();
    ends.sort();
    assert_eq!(
        ends,
        vec![
            ("b".to_string(), lo),
            ("b".to_string(), lo + 5),
            ("e".to_string(), hi - 5),
            ("e".to_string(), hi)
        ]
    );
    let (code, s, _) = text(&memlens(["summary".as_ref(), f.as_os_str()]));
    assert_eq!(code, 0);
    let secs = i64::MAX / 1_000_000;
    let span = format!("over {} min {} s", secs / 60, secs % 60);
    assert!(s.contains(&span), "{span}: {s}");
}

/// GIVEN a trace whose OOM saw 0 B reserved + 0 B free while 512 bytes were allocated (an
/// absurd trace), THEN `whatif` says the capacity is unknown and why, and judges no OOM
/// against it (main: "capacity: 0 B (inferred ...)", 2 OOMs replayed against 0 B).
#[test]
fn whatif_leaves_an_inconsistent_capacity_unknown() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(
        tmp.path(),
        "oom0.json",
        json!({"segments": [], "device_traces": [[
            ev("alloc", 4096, 512, 1), ev("oom", 0, 1 << 30, 2)]]}),
    );
    let source = "unknown: the trace is inconsistent (its OOM saw 0 bytes reserved + free, below the 512 bytes it shows in use), so no capacity can be inferred: pass --capacity or --gpu";
    let (code, out, err) = text(&memlens([
        "whatif".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        f.as_os_str(),
    ]));
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    let d = &r["devices"][0];
    assert_eq!(d["capacity"]["bytes"], Value::Null);
    assert_eq!(d["capacity"]["source"], source);
    assert_eq!(
        d["verdict"],
        "the capacity is unknown: pass --capacity or --gpu to judge the OOM"
    );
    assert_eq!(d["scenarios"][0]["ooms"], 0, "{}", d["scenarios"][0]);
    let (code, out, _) = text(&memlens(["whatif".as_ref(), f.as_os_str()]));
    assert_eq!(code, 0);
    assert!(out.contains(&format!("  capacity: {source}\n")), "{out}");
    // Given the capacity, it replays against it.
    let (code, out, _) = text(&memlens([
        "whatif".as_ref(),
        "--capacity".as_ref(),
        "80GiB".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        f.as_os_str(),
    ]));
    assert_eq!(code, 0);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["devices"][0]["capacity"]["bytes"], 80u64 << 30);
}
