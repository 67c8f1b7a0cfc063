//! Hostile and broken inputs: every refusal is exit 2 with one line, never a panic.

use crate::common;
use common::*;
use std::path::Path;

/// Peak RSS of `memlens summary FILE` in bytes, via GNU time (None when it is absent).
fn peak_rss(path: &Path) -> Option<u64> {
    let o = std::process::Command::new("/usr/bin/time")
        .args(["-f", "%M"])
        .arg(env!("CARGO_BIN_EXE_memlens"))
        .arg("summary")
        .arg(path)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&o.stderr);
    text.lines()
        .last()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(|kb| kb * 1024)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn assert_refused(path: &Path, needle: &str) {
    assert_refused_within(path, needle, 0);
}

/// [`assert_refused`] for an input that inflates: peak RSS may also hold `inflated` bytes (a
/// compressed input's decompression buffer).
fn assert_refused_within(path: &Path, needle: &str, inflated: u64) {
    let start = std::time::Instant::now();
    let o = memlens(["summary".as_ref(), path.as_os_str()]);
    let took = start.elapsed();
    let size = std::fs::metadata(path).unwrap().len();
    assert!(
        // Generous for a loaded CI machine: the refusals this guards against took 6-45 s.
        took.as_secs_f64() < 4.0 + size as f64 / 50e6,
        "{}: took {took:?}",
        path.display()
    );
    if let Some(rss) = peak_rss(path) {
        assert!(
            rss < 8 * size + inflated + (48 << 20),
            "{}: peak RSS {rss} for a {size}-byte input",
            path.display()
        );
    }
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}: {err}", path.display());
    assert_eq!(err.lines().count(), 1, "one line expected: {err}");
    assert!(err.contains(needle), "{needle:?} not in {err}");
    assert!(err.contains(&path.display().to_string()));
}

#[test]
fn code_naming_opcodes_are_refused_by_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[u8])] = &[
        (
            "GLOBAL",
            b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03.",
        ),
        (
            "STACK_GLOBAL",
            b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x02id\x85R.",
        ),
        ("REDUCE", b"\x80\x04N)R."),
        ("INST", b"(S'id'\nios\nsystem\n."),
        ("OBJ", b"(N)o."),
        ("NEWOBJ", b"\x80\x04N)\x81."),
        ("BUILD", b"\x80\x04}}b."),
        ("PERSID", b"Pid\n."),
        ("BINPERSID", b"\x80\x04NQ."),
    ];
    for (name, bytes) in cases {
        let p = write(dir.path(), &format!("{name}.pickle"), bytes);
        assert_refused(&p, name);
    }
}

#[test]
fn structural_attacks_are_refused_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let mut nested = vec![0x80, 4];
    nested.extend(std::iter::repeat(b"](").take(1_000_000).flatten());
    assert_refused(
        &write(dir.path(), "nested.pickle", &nested),
        "nested deeper",
    );
    let mut long = vec![0x80, 4, 0x8b];
    long.extend_from_slice(&i32::MAX.to_le_bytes());
    assert_refused(&write(dir.path(), "long4.pickle", &long), "exceeds");
    let mut s8 = vec![0x80, 4, 0x8d];
    s8.extend_from_slice(&(1u64 << 60).to_le_bytes());
    assert_refused(&write(dir.path(), "unicode8.pickle", &s8), "exceeds");
    assert_refused(
        &write(dir.path(), "memo.pickle", b"\x80\x04j\xff\xff\x00\x00."),
        "memo reference",
    );
    assert_refused(
        &write(dir.path(), "mark.pickle", b"\x80\x04](K\x01."),
        "STOP",
    );
    let mut frame = vec![0x80, 4, 0x95];
    frame.extend_from_slice(&(1u64 << 50).to_le_bytes());
    assert_refused(&write(dir.path(), "frame.pickle", &frame), "FRAME");
    assert_refused(
        &write(dir.path(), "int.pickle", b"\x80\x04K\x05."),
        "expected a snapshot dict",
    );
    assert_refused(
        &write(
            dir.path(),
            "intseg.pickle",
            b"\x80\x04}(\x8c\x08segments](K\x01eu.",
        ),
        "segments[0]",
    );
    let run = vec![b'N'; 80 << 20];
    let start = std::time::Instant::now();
    assert_refused(
        &write(dir.path(), "run.pickle", &run),
        "values without content",
    );
    assert!(start.elapsed().as_secs() < 5);
}

#[test]
fn wrong_types_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str)] = &[
        (r#"{"segments": 5}"#, "key segments: expected a list"),
        (
            r#"{"device_traces": [[{"action": 5}]]}"#,
            "key 'action': expected a string",
        ),
        (
            r#"{"device_traces": [[{"action": "alloc", "size": "big"}]]}"#,
            "key 'size'",
        ),
        (
            r#"{"device_traces": [[{"action": "alloc", "size": -4}]]}"#,
            "expected a size",
        ),
        (
            r#"{"device_traces": [[7]]}"#,
            "key device_traces[0][0]: expected a dict",
        ),
        (r#"{"device_traces": 3}"#, "key device_traces"),
        (
            r#"{"segments": [{"total_size": 512, "blocks": [{"size": 512, "state": "weird"}]}]}"#,
            "key 'state'",
        ),
        (
            r#"{"segments": [{"total_size": 512}]}"#,
            "without key 'blocks'",
        ),
        (
            r#"{"segments": [{"total_size": 512, "blocks": 4}]}"#,
            "key 'blocks'",
        ),
        (
            r#"{"segments": [{"device": -1, "total_size": 0, "blocks": []}]}"#,
            "key 'device'",
        ),
        (
            r#"{"device_traces": [[{"action": "alloc", "frames": [1, 2]}]]}"#,
            "key 'frames'",
        ),
        (r#"[1, 2]"#, "expected a dict"),
        (r#"{"segments": [}"#, "invalid JSON"),
        (
            r#"{"segments": [{"total_size": 512, "blocks": [5]}]}"#,
            "blocks[0]: expected a block dict",
        ),
        (
            r#"{"segments": [{"total_size": 512, "frames": 5, "blocks": []}]}"#,
            "key 'frames'",
        ),
        (
            r#"{"segments": [{"total_size": 512, "blocks": [{"size": 512, "state": "inactive", "frames": [5]}]}]}"#,
            "key 'frames'",
        ),
        (
            r#"{"segments": [{"total_size": 512, "blocks": [{"size": 512, "state": "inactive", "frames": 5}]}]}"#,
            "key 'frames'",
        ),
        (
            r#"{"segments": [{"total_size": 512, "segment_pool_id": 5, "blocks": []}]}"#,
            "segment_pool_id",
        ),
        (
            r#"{"device_traces": [5]}"#,
            "device_traces[0]: expected a list",
        ),
        (
            r#"{"device_traces": [[{"action": "alloc", "frames": [{"filename": 5}]}]]}"#,
            "key 'filename'",
        ),
        (
            r#"{"device_traces": [[{"action": "alloc", "frames": [{"filename": "a", "line": "x"}]}]]}"#,
            "key 'line'",
        ),
        (
            r#"{"device_traces": [[{"action": "alloc", "addr": [1]}]]}"#,
            "key 'addr'",
        ),
        (
            r#"{"device_traces": [[{"action": "alloc", "time_us": "now"}]]}"#,
            "key 'time_us'",
        ),
        (
            r#"{"external_annotations": 5}"#,
            "key external_annotations: expected a list",
        ),
        (
            r#"{"external_annotations": [5]}"#,
            "external_annotations[0]: expected a dict",
        ),
    ];
    for (i, (json, needle)) in cases.iter().enumerate() {
        let p = write(dir.path(), &format!("case{i}.json"), json.as_bytes());
        assert_refused(&p, needle);
    }
}

/// A small valid snapshot as pickle bytes.
fn small_pickle() -> Vec<u8> {
    let json = br#"{"segments": [{"device": 0, "address": 1048576, "total_size": 2097152,
        "allocated_size": 1024, "active_size": 1024, "requested_size": 1000, "stream": 0,
        "segment_type": "small", "segment_pool_id": [0, 0], "is_expandable": false, "frames": [],
        "blocks": [{"address": 1048576, "size": 1024, "requested_size": 1000, "state": "active_allocated",
                    "frames": [{"name": "f", "filename": "a.py", "line": 3}]},
                   {"address": 1049600, "size": 2096128, "requested_size": 0, "state": "inactive", "frames": []}]}],
        "device_traces": [[{"action": "segment_alloc", "addr": 1048576, "size": 2097152, "stream": 0, "time_us": 10, "frames": []},
                           {"action": "alloc", "addr": 1048576, "size": 1000, "stream": 0, "time_us": 11,
                            "frames": [{"name": "f", "filename": "a.py", "line": 3}]}]]}"#;
    memlens::input::json_to_pickle(json).unwrap()
}

#[test]
fn truncation_at_every_offset_is_an_error_never_a_panic() {
    let mut files = vec![small_pickle()];
    for name in [
        "train_small.pickle",
        "legacy_2_0.pickle",
        "cpp_proto2.pickle",
    ] {
        if let Ok(b) = std::fs::read(sample(name)) {
            files.push(b);
        }
    }
    for bytes in &files {
        assert!(memlens::model::build(bytes, Default::default()).is_ok());
        let step = (bytes.len() / 4000).max(1);
        for cut in (0..bytes.len()).step_by(step) {
            match memlens::model::build(&bytes[..cut], Default::default()) {
                Ok(_) => panic!("truncated at {cut} of {} still parsed", bytes.len()),
                Err(memlens::model::BuildError::Decode(e)) => {
                    assert!(
                        e.offset as usize <= cut,
                        "offset {} past cut {cut}",
                        e.offset
                    )
                }
                Err(e) => panic!("truncation at {cut} gave a shape error: {e}"),
            }
        }
    }
}

#[test]
fn truncated_files_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(sample("train_small.pickle")).unwrap_or_else(|_| small_pickle());
    for i in 0..20 {
        let cut = bytes.len() * i / 20;
        let p = write(dir.path(), &format!("cut{i}.pickle"), &bytes[..cut]);
        let o = memlens(["summary".as_ref(), p.as_os_str()]);
        assert_eq!(o.status.code(), Some(2), "cut {cut}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        if cut > 0 {
            assert!(err.contains("truncated"), "{err}");
        }
    }
}

/// Issue 53: pickles of nothing but values without content — `None`s (DUPed or not), bools,
/// empty dicts, lists or tuples, appended in batches — compressed to a few KB, decoded to
/// gigabytes (a `None` took 16 bytes for one byte of input, an empty dict 320) in 6-45 s
/// before the model refused the shape. Each is refused as it is read: at most one such value
/// per 4 bytes past the first 65,536 (snapshots have one per 16 bytes or fewer).
#[test]
fn bombs_of_values_without_content_are_refused_early() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let units: [(&str, &[u8]); 6] = [
        ("none_dup", b"N2222222222222222222222222222222"),
        ("none", b"N"),
        ("false", b"\x89"),
        ("dict", b"}"),
        ("list", b"]"),
        ("tuple", b")"),
    ];
    for (name, unit) in units {
        // 64 MiB of input: batches of 1,000 items appended to one top-level list.
        let mut body = b"\x80\x04]\x94".to_vec();
        let batch: Vec<u8> = unit.iter().copied().cycle().take(1000).collect();
        while body.len() < 64 << 20 {
            body.push(b'(');
            body.extend_from_slice(&batch);
            body.push(b'e');
        }
        body.push(b'.');
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&body).unwrap();
        let p = write(
            dir.path(),
            &format!("{name}.pickle.gz"),
            &gz.finish().unwrap(),
        );
        // Refused near its start; what is held is at most the 64 MiB it inflates to.
        assert_refused_within(&p, "values without content", 64 << 20);
    }
}

/// A snapshot rewritten while memlens reads it (PyTorch's `_dump_snapshot` opens its file with
/// truncation): the file is cut to 1,000 bytes a few milliseconds into `memlens summary`, at
/// growing delays. Each run ends in one of three ways, never a signal: it finished first (exit
/// 0), it opened the cut file (exit 2, a truncated pickle), or the file shrank under the map
/// (exit 2 and exactly the line that says so). At least one run must be of the third kind.
/// A file that grows while it is read is read as it was when opened.
#[test]
fn a_file_rewritten_while_it_is_read_is_one_line_not_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes = deep_stack_snapshot(
        40,
        &[DeepSite {
            count: 400_000,
            size: 1024,
        }],
    );
    let whole = write(tmp.path(), "whole.pickle", &bytes);
    let want = memlens(["summary".as_ref(), whole.as_os_str()]);
    assert_eq!(want.status.code(), Some(0));
    let path = tmp.path().join("live.pickle");
    let mut shrank = 0;
    for delay_ms in [2u64, 5, 10, 20, 30, 45, 60, 80, 100, 130] {
        std::fs::write(&path, &bytes).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_memlens"))
            .args(["summary", "--threads", "1"])
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(1000)
            .unwrap();
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        match o.status.code() {
            Some(0) => {}
            Some(2) if err.contains("the file shrank while it was being read") => {
                assert_eq!(
                    err,
                    format!(
                        "memlens: {}: the file shrank while it was being read (it was {} bytes; rewritten during the run?): read it again once it is written\n",
                        path.display(),
                        bytes.len()
                    )
                );
                shrank += 1;
            }
            Some(2) => assert!(err.contains("truncated"), "{delay_ms} ms: {err}"),
            other => panic!("{delay_ms} ms: exit {other:?} (a signal?): {err}"),
        }
    }
    assert!(
        shrank > 0,
        "no run was caught reading while the file shrank"
    );
    // Grown while it is read (a writer appending): read as it was, whatever follows its end.
    std::fs::write(&path, &bytes).unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(["summary", "--threads", "1"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, &vec![0x55u8; 1 << 20]).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).replace("live.pickle", "whole.pickle"),
        String::from_utf8_lossy(&want.stdout)
    );
}
