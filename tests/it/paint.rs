//! The page paints every live byte: in headless Chromium, the pixels of `#timeline-plot`
//! against the live bytes of every event (`memlens timeline --points 0`, not the page's own
//! data), column by column, on every sample and real snapshot with a trace, and on a generated
//! trace of a million events, whole in the static page and zoomed through `memlens serve` down
//! to single events, each alloc event of such a window hovered and named
//! (tests/browser/check_paint.mjs reads the pixels; this file asserts).

use crate::common;
use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The live bytes of every event of `file` as CSV, written to `out`; false when the file has
/// no timeline (the CSV holds no row once devices of a one-entry trace are left out).
fn timeline_csv(file: &Path, out: &Path) -> bool {
    let o = memlens([
        "timeline",
        file.to_str().unwrap(),
        "--points",
        "0",
        "-o",
        out.to_str().unwrap(),
        "--force",
    ]);
    assert!(
        o.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    // A device whose trace holds one entry has no timeline (the summary's warning says so, and
    // the page draws none: report:: holds that): its rows leave the CSV.
    let summary: Value = serde_json::from_slice(
        &memlens(["summary", file.to_str().unwrap(), "--format", "json"]).stdout,
    )
    .unwrap();
    let single: Vec<String> = summary["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == "single_entry_trace")
        .map(|w| w["device"].to_string())
        .collect();
    let text = std::fs::read_to_string(out).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .enumerate()
        .filter(|(i, l)| *i == 0 || !single.iter().any(|d| l.split(',').next() == Some(d)))
        .map(|(_, l)| l)
        .collect();
    std::fs::write(out, kept.join("\n") + "\n").unwrap();
    kept.len() > 1
}

/// Runs check_paint.mjs over `manifest`; one result per entry.
fn check_paint(browser: &Browser, dir: &Path, manifest: &Value) -> Vec<Value> {
    let path = dir.join("manifest.json");
    std::fs::write(&path, serde_json::to_vec(manifest).unwrap()).unwrap();
    let script = browser.script.with_file_name("check_paint.mjs");
    let run = Command::new("node")
        .arg(script)
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "the driver failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let out: Vec<Value> = String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(out.len(), manifest.as_array().unwrap().len());
    out
}

/// Every window of `r` painted its live bytes in every column it checked.
fn assert_painted(r: &Value) {
    let name = &r["name"];
    assert_eq!(r["ready"], true, "{name}: {r}");
    assert_eq!(r["errors"], json!([]), "{name}");
    let windows = r["windows"].as_array().unwrap();
    assert!(!windows.is_empty(), "{name}: no window checked");
    for w in windows {
        assert!(w["checked"].as_u64().unwrap() > 100, "{name}: {w}");
        assert_eq!(
            w["bad"], 0,
            "{name}: columns not painted to their live bytes: {w}"
        );
    }
}

/// Every sample (top level and `captured/`) and every real snapshot.
fn files_with_traces(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut files = samples();
    files.extend(captured());
    files.extend(require_shared().unwrap_or_default());
    let mut out = Vec::new();
    for (k, f) in files.into_iter().enumerate() {
        let csv = dir.join(format!("{k}.csv"));
        if timeline_csv(&f, &csv) {
            out.push((f, csv));
        }
    }
    out
}

#[test]
fn every_live_byte_is_painted_on_every_file_with_a_trace() {
    let Some(browser) = require_browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let files = files_with_traces(dir.path());
    assert!(files.len() >= 20, "{} files with a trace", files.len());
    let mut manifest = Vec::new();
    for (k, (f, csv)) in files.iter().enumerate() {
        let html = dir.path().join(format!("{k}.html"));
        let o = memlens(["report", f.to_str().unwrap(), "-o", html.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        manifest.push(json!({
            "name": f.file_name().unwrap().to_string_lossy(),
            "url": format!("file://{}", html.display()),
            "csv": csv,
        }));
    }
    for r in check_paint(&browser, dir.path(), &json!(manifest)) {
        assert_painted(&r);
    }
}

/// `memlens serve FILE --port 0`, and the URL of its startup line.
fn serve(file: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(["serve", file.to_str().unwrap(), "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("memlens serving ")
        .unwrap_or_else(|| panic!("startup line: {line:?}"))
        .to_string();
    (child, url)
}

/// A generated trace of a million events (the benchmark generator's shared layout).
fn million_events(dir: &Path) -> Option<PathBuf> {
    if !require_python() {
        return None;
    }
    let out = dir.join("million.pickle");
    let o = Command::new(python3())
        .arg(root().join("samples/gen/gen_samples.py"))
        .args(["big", "--entries", "1000000", "--layout", "shared", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some(out)
}

#[test]
fn a_million_events_are_painted_whole_and_zoomed_to_single_events_through_serve() {
    let Some(browser) = require_browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(file) = million_events(dir.path()) else {
        return;
    };
    let csv = dir.path().join("million.csv");
    assert!(timeline_csv(&file, &csv));
    let html = dir.path().join("million.html");
    let o = memlens([
        "report",
        file.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let events = std::fs::read_to_string(&csv).unwrap().lines().count() as i64 - 2;
    assert!(events >= 1_000_000, "{events} events");
    let (mut server, url) = serve(&file);
    // Three windows: a wide one (per-column extremes), a narrow one still holding more events
    // than columns, and one of fewer events than columns (every event; each alloc hovered).
    let mid = events / 2;
    let manifest = json!([
        {"name": "million (static)", "url": format!("file://{}", html.display()), "csv": csv},
        {"name": "million (served)", "url": url, "csv": csv, "whole": false, "hover": true,
         "zooms": [[events / 5, events * 7 / 10], [mid, mid + 9_999], [mid + 20_000, mid + 20_599]]},
    ]);
    let results = check_paint(&browser, dir.path(), &manifest);
    let (a, b) = (mid + 20_000, mid + 20_599);
    let served = Command::new("node")
        .arg(browser.script.with_file_name("check_served.mjs"))
        .args([&url, &a.to_string(), &b.to_string()])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        served.status.success(),
        "check_served: {}",
        String::from_utf8_lossy(&served.stderr)
    );
    let served: Value = serde_json::from_slice(&served.stdout).unwrap();
    check_served(&served, &csv, a, b);
    for r in &results {
        assert_painted(r);
    }
    let served = results[1]["windows"].as_array().unwrap();
    assert_eq!(served.len(), 3);
    for (w, asked) in served.iter().zip([
        [events / 5, events * 7 / 10],
        [mid, mid + 9_999],
        [mid + 20_000, mid + 20_599],
    ]) {
        assert_eq!(w["first"], asked[0], "{w}");
        assert_eq!(w["last"], asked[1], "{w}");
    }
    let hover = &served[2]["hover"];
    assert!(hover["checked"].as_u64().unwrap() > 50, "{hover}");
    assert_eq!(
        hover["failed"], 0,
        "alloc events not named on hover: {hover}"
    );
    assert!(
        served[0]["hover"].is_null(),
        "a window of many events lists none"
    );
}

/// What check_served.mjs saw on a page opened at `#window=A-B`: opened there, the moment
/// sections followed to the window's peak (its event and bytes from the CSV), the pinned
/// allocation survived a zoom, and a reset dropped the window's moment and the hash.
fn check_served(s: &Value, csv: &Path, a: i64, b: i64) {
    assert_eq!(s["errors"], json!([]), "{s}");
    assert_eq!(s["opened"]["first_event"], a, "{s}");
    assert_eq!(s["opened"]["last_event"], b, "{s}");
    let live: Vec<(i64, u64)> = std::fs::read_to_string(csv)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1].parse().unwrap(), f[3].parse().unwrap())
        })
        .filter(|&(e, _)| a <= e && e <= b)
        .collect();
    let max = live.iter().map(|&(_, v)| v).max().unwrap();
    let at = live.iter().find(|&&(_, v)| v == max).unwrap().0;
    assert_eq!(s["moment"]["name"], "window peak", "{s}");
    assert_eq!(s["moment"]["event_index"], at, "{s}");
    assert_eq!(s["moment"]["live_bytes"], max, "{s}");
    assert_eq!(s["moment_select"], "window peak", "{s}");
    assert!(
        s["flame_heading"]
            .as_str()
            .unwrap()
            .contains("Peak of the window shown"),
        "{s}"
    );
    assert!(!s["pinned"].is_null(), "a band was pinned: {s}");
    assert_eq!(
        s["pinned_after"], s["pinned"],
        "the pin survives the zoom: {s}"
    );
    assert!(
        s["zoomed"]["hash"]
            .as_str()
            .unwrap()
            .starts_with("#window="),
        "{s}"
    );
    assert_eq!(s["reset"]["hash"], "", "{s}");
    assert_ne!(s["reset"]["moment"], "window peak", "{s}");
    assert!(
        !s["reset"]["options"]
            .as_array()
            .unwrap()
            .contains(&json!("window peak")),
        "{s}"
    );
}
