//! The command line: exit codes, output files, several inputs, error lines.

use crate::common;
use common::*;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn summary_prints_a_table_and_exits_0() {
    let o = memlens(["summary".as_ref(), sample("train_small.pickle").as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("Device 0"));
    assert!(text.contains("MiB") || text.contains("KiB"));
}

#[test]
fn json_output_has_schema_version_and_integer_sizes() {
    let o = memlens([
        "summary".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        sample("train_small.pickle").as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema_version"], 1);
    let d = &v["devices"][0];
    for k in [
        "reserved_bytes",
        "allocated_bytes",
        "requested_bytes",
        "trace_entries",
    ] {
        assert!(d[k].is_u64(), "{k} is {:?}", d[k]);
    }
    assert!(v["warnings"].is_array());
}

#[test]
fn several_files_give_one_json_document() {
    let o = memlens([
        "summary".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        sample("train_small.pickle").as_os_str(),
        sample("bare_list.pickle").as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["files"].as_array().unwrap().len(), 2);
    assert!(v["files"][1]["file"]
        .as_str()
        .unwrap()
        .ends_with("bare_list.pickle"));
}

#[test]
fn a_bad_file_among_several_is_reported_and_exit_is_2() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pickle");
    std::fs::write(&empty, b"").unwrap();
    let o = memlens([
        "summary".as_ref(),
        sample("train_small.pickle").as_os_str(),
        empty.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Device 0"));
    assert!(stderr(&o).contains("empty.pickle: byte 0: file is empty"));
}

#[test]
fn missing_file_and_bad_usage_exit_2() {
    let o = memlens(["summary", "/nonexistent/x.pickle"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("memlens: /nonexistent/x.pickle: "));
    let o = memlens(["summary"]);
    assert_eq!(o.status.code(), Some(2));
    let o = memlens(["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    let o = memlens(["--help"]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn output_file_is_written_atomically_and_never_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.json");
    let args = |force: bool| {
        let mut a: Vec<std::ffi::OsString> = vec![
            "summary".into(),
            "--format".into(),
            "json".into(),
            sample("train_small.pickle").into(),
            "-o".into(),
            out.clone().into(),
        ];
        if force {
            a.push("--force".into());
        }
        a
    };
    let o = memlens(args(false));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let first = std::fs::read(&out).unwrap();
    assert!(serde_json::from_slice::<serde_json::Value>(&first).is_ok());
    std::fs::write(&out, b"keep me").unwrap();
    let o = memlens(args(false));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--force"));
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
    let o = memlens(args(true));
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::read(&out).unwrap(), first);
    // No temporary files left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1);
}

#[test]
fn standard_input_is_read_with_a_dash() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let bytes = std::fs::read(sample("train_small.pickle")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(["summary", "--format", "json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["devices"],
        summary_json(&sample("train_small.pickle"))["devices"]
    );
}

#[test]
fn timing_reports_the_model_size() {
    // MEMLENS_TIMING (read by scripts/bench) prints the decoded model's heap bytes: at least
    // the events and blocks it holds, and well under the file for this sample.
    let path = sample("train_small.pickle");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(["summary", path.to_str().unwrap()])
        .env("MEMLENS_TIMING", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = stderr(&out);
    let bytes: usize = err
        .lines()
        .find_map(|l| {
            l.strip_prefix("model: ")?
                .strip_suffix(" bytes")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no model line in {err}"));
    let input = memlens::input::read(&path).unwrap();
    let snap = memlens::load::build_input(&path, &input, &mut |_| {}).unwrap();
    let floor = snap.events.len() * std::mem::size_of::<memlens::model::TraceEvent>()
        + snap.blocks.len() * std::mem::size_of::<memlens::model::Block>();
    assert!(bytes >= floor, "{bytes} < {floor}");
    assert_eq!(bytes, snap.heap_bytes());
}

/// Runs `memlens ARGS...`, where `{}` in ARGS stands for `file`.
fn run_on(args: &[&str], file: &std::path::Path) -> std::process::Output {
    let argv: Vec<std::ffi::OsString> = args
        .iter()
        .map(|a| {
            if *a == "{}" {
                file.as_os_str().to_owned()
            } else {
                a.into()
            }
        })
        .collect();
    memlens(argv)
}

/// Every command that reads a snapshot, with what it needs besides the file (`{}`).
const SNAPSHOT_COMMANDS: &[&[&str]] = &[
    &["summary", "{}"],
    &["top", "{}"],
    &["timeline", "{}"],
    &["flame", "{}"],
    &["frag", "{}"],
    &["oom", "{}"],
    &["leaks", "{}"],
    &["categories", "{}"],
    &["check", "{}", "--max-peak", "1TiB"],
    &["diff", "{}", "{}"],
    &["batch", "{}"],
];

#[test]
fn an_absent_device_is_one_line_and_exit_2_in_every_command() {
    for (file, devices) in [
        (sample("train_small.pickle"), "0"),
        (sample("expandable_multi.pickle"), "0, 1"),
    ] {
        for cmd in SNAPSHOT_COMMANDS {
            let mut args = cmd.to_vec();
            args.extend(["--device", "7"]);
            let o = run_on(&args, &file);
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
            let want = format!(
                "memlens: {}: no device 7 in the snapshot (devices: {devices})",
                file.display()
            );
            // batch reports the file's row, then the same line; every other command the line
            // alone, and nothing on stdout.
            if cmd[0] == "batch" {
                assert_eq!(e.trim_end(), want, "{args:?}");
                let out = String::from_utf8_lossy(&o.stdout);
                assert!(out.contains("no device 7"), "{args:?}: {out}");
                assert!(out.contains("1 failed"), "{args:?}: {out}");
            } else {
                // diff reads both files (in parallel): the same line for each.
                let lines: Vec<&str> = e.lines().collect();
                assert!(
                    !lines.is_empty() && lines.iter().all(|l| *l == want),
                    "{args:?}: {e}"
                );
                assert_eq!(lines.len(), 1, "{args:?}: {e}");
                assert!(o.stdout.is_empty(), "{args:?}");
            }
        }
    }
}

#[test]
fn device_0_of_a_one_device_snapshot_changes_nothing() {
    for cmd in ["summary", "oom", "leaks", "top", "frag", "categories"] {
        for file in [sample("train_small.pickle"), sample("list_leak.pickle")] {
            let plain = run_on(&[cmd, "--format", "json", "{}"], &file);
            let device = run_on(&[cmd, "--format", "json", "--device", "0", "{}"], &file);
            assert_eq!(plain.status.code(), device.status.code(), "{cmd}");
            assert!(!plain.stdout.is_empty(), "{cmd}");
            assert_eq!(plain.stdout, device.stdout, "{cmd} {}", file.display());
        }
    }
}

#[test]
fn device_keeps_only_that_device_of_a_two_device_snapshot() {
    let file = sample("expandable_multi.pickle");
    let json = |args: &[&str]| -> serde_json::Value {
        let o = run_on(args, &file);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let all = json(&["summary", "--format", "json", "{}"]);
    let one = json(&["summary", "--format", "json", "--device", "1", "{}"]);
    assert_eq!(all["devices"].as_array().unwrap().len(), 2);
    assert_eq!(one["devices"].as_array().unwrap().len(), 1);
    assert_eq!(one["devices"][0], all["devices"][1]);
    assert_eq!(one["devices"][0]["trace_entries"], 24);
    let oom = json(&["oom", "--format", "json", "--device", "1", "{}"]);
    let devices: Vec<u64> = oom["headroom"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["device"].as_u64().unwrap())
        .collect();
    assert_eq!(devices, [1]);
}

#[test]
fn a_device_without_a_trace_keeps_the_timeline_message() {
    let file = sample("bare_list.pickle");
    let o = run_on(&["timeline", "{}", "--device", "0"], &file);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o).trim_end(),
        format!("memlens: {}: device 0 has no trace", file.display())
    );
}

#[test]
fn diff_and_check_refuse_event_indices_for_at() {
    for args in [
        vec!["diff", "{}", "{}", "--at", "5"],
        vec!["check", "{}", "--max-peak", "1GiB", "--at", "5"],
    ] {
        let o = run_on(&args, &sample("train_small.pickle"));
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&o).contains(
                "moment \"5\": expected peak, end, start, oom, oom:K, step:N or time:SECONDSs"
            ),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    // One file: an event index is a moment.
    let o = run_on(&["top", "{}", "--at", "5"], &sample("train_small.pickle"));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
