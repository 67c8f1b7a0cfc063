//! The promises of issue 16, each through the binary: no wrapped totals, no aborts under a
//! memory cap, no blow-ups on compressed bombs or huge sparse files, streams read as streams,
//! outputs never replace what is not a regular file, and every error on one line.

use crate::common;
use common::*;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_memlens");

/// Runs memlens with an address-space limit of `cap` bytes (`RLIMIT_AS`, as `ulimit -v`) and
/// the given decoder threads; returns its output (without the peak line) and its peak RSS in
/// bytes (`MEMLENS_PEAK_RSS`; 0 when it died before printing it).
fn capped(cap: Option<u64>, threads: usize, args: &[&std::ffi::OsStr]) -> (Output, u64) {
    let mut cmd = Command::new(BIN);
    cmd.env("MEMLENS_PEAK_RSS", "1")
        .arg("--threads")
        .arg(threads.to_string())
        .args(args);
    if let Some(cap) = cap {
        cap_address_space(&mut cmd, cap);
    }
    split_peak_rss(cmd.output().unwrap())
}

/// Exit code 2 and exactly one line on stderr that contains `needle`.
fn assert_one_line(o: &Output, needle: &str, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: one line expected: {err}");
    assert!(err.starts_with("memlens: "), "{what}: {err}");
    assert!(err.contains(needle), "{what}: {needle:?} not in {err}");
}

/// Runs memlens with `args` and `--format json`, expects exit 0, and parses its report.
fn ok_json(args: &[&std::ffi::OsStr]) -> serde_json::Value {
    let mut all: Vec<&std::ffi::OsStr> = args.to_vec();
    all.extend([
        std::ffi::OsStr::new("--format"),
        std::ffi::OsStr::new("json"),
    ]);
    let o = memlens(&all);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    serde_json::from_slice(&o.stdout).unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

const GIB: u64 = 1 << 30;

// ---- 1. totals never wrap ----------------------------------------------------------------

fn segment(address: u64, size: u64, blocks: &str) -> String {
    format!(
        r#"{{"device": 0, "address": {address}, "total_size": {size}, "stream": 0, "segment_type": "large", "allocated_size": 0, "active_size": 0, "requested_size": 0, "blocks": [{blocks}]}}"#
    )
}

fn alloc(addr: u64, size: u64, time: u64) -> String {
    format!(
        r#"{{"action": "alloc", "addr": {addr}, "size": {size}, "stream": 0, "time_us": {time}, "frames": [{{"filename": "/w/train.py", "line": 7, "name": "step"}}]}}"#
    )
}

fn snapshot(segments: &[String], trace: &[String]) -> Vec<u8> {
    format!(
        r#"{{"segments": [{}], "device_traces": [[{}]]}}"#,
        segments.join(", "),
        trace.join(", ")
    )
    .into_bytes()
}

#[test]
fn sizes_that_cannot_be_added_in_64_bits_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let half = 1u64 << 63;
    let two_segments = write(
        dir.path(),
        "two_segments.json",
        &snapshot(&[segment(0, half, ""), segment(half, half, "")], &[]),
    );
    for args in [
        vec!["summary"],
        vec!["check", "--max-reserved", "1GiB"],
        vec!["frag"],
        vec!["batch"],
    ] {
        let mut a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
        a.push(two_segments.as_os_str());
        let o = memlens(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("PASS"),
            "{args:?}"
        );
        assert!(
            err.contains("key segments[0]: key 'total_size'"),
            "{args:?}: {err}"
        );
    }
    // Three allocations of 2^63: once a peak of 0 that passed --max-peak.
    let allocs = write(
        dir.path(),
        "allocs.json",
        &snapshot(
            &[],
            &[alloc(0, half, 1), alloc(half, half, 2), alloc(1, half, 3)],
        ),
    );
    let o = memlens([
        "check".as_ref(),
        "--max-peak".as_ref(),
        "1GiB".as_ref(),
        allocs.as_os_str(),
    ]);
    assert_one_line(&o, "key device_traces[0][0]: key 'size'", "allocs");
    // A segment of size 0 whose two blocks of 2^63 summed to 0 and raised no tiling warning.
    let block = |addr: u64| {
        format!(
            r#"{{"address": {addr}, "size": {half}, "requested_size": 0, "state": "inactive"}}"#
        )
    };
    let blocks = write(
        dir.path(),
        "blocks.json",
        &snapshot(
            &[segment(0, 0, &format!("{}, {}", block(0), block(half)))],
            &[],
        ),
    );
    let o = memlens(["summary".as_ref(), blocks.as_os_str()]);
    assert_one_line(&o, "key segments[0].blocks[0]: key 'size'", "blocks");
    // An address range past 2^64.
    let top = write(
        dir.path(),
        "top.json",
        &snapshot(&[segment(u64::MAX - 4095, 8192, "")], &[]),
    );
    let o = memlens(["summary".as_ref(), top.as_os_str()]);
    assert_one_line(
        &o,
        "run past the end of the 64-bit address space",
        "address",
    );
}

#[test]
fn sizes_up_to_the_bound_add_up_exactly() {
    // 2^59 + 2^59 = 2^60: the largest total a file may have, reported exactly.
    let dir = tempfile::tempdir().unwrap();
    let quarter = 1u64 << 59;
    let f = write(
        dir.path(),
        "bound.json",
        &snapshot(
            &[segment(0, quarter, ""), segment(quarter, quarter, "")],
            &[],
        ),
    );
    let v = ok_json(&["summary".as_ref(), f.as_os_str()]);
    let reserved = v["devices"][0]["reserved_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("no reserved_bytes in {v}"));
    assert_eq!(reserved as u128, 2 * quarter as u128);
    // And `check` holds a budget against that exact figure.
    let o = memlens([
        "check".as_ref(),
        "--max-reserved".as_ref(),
        (2 * quarter - 1).to_string().as_ref(),
        f.as_os_str(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn a_lifetime_cost_past_2_pow_64_is_saturated_with_a_warning() {
    // 2^58 bytes live for 2^40 µs: 2^98 byte-µs, far past what a u64 holds.
    let dir = tempfile::tempdir().unwrap();
    let size = 1u64 << 58;
    let free = format!(
        r#"{{"action": "free_completed", "addr": 4096, "size": {size}, "stream": 0, "time_us": {}}}"#,
        1u64 << 40
    );
    let f = write(
        dir.path(),
        "long.json",
        &snapshot(
            &[],
            &[alloc(4096, size, 0), alloc(size + 8192, size, 1), free],
        ),
    );
    let v = ok_json(&[
        "top".as_ref(),
        "--cost".as_ref(),
        "lifetime".as_ref(),
        f.as_os_str(),
    ]);
    let dev = &v["devices"][0];
    assert_eq!(dev["total"].as_u64(), Some(u64::MAX), "{dev}");
    assert_eq!(dev["warnings"][0]["code"], "cost_overflow", "{dev}");
    let text = memlens([
        "top".as_ref(),
        "--cost".as_ref(),
        "lifetime".as_ref(),
        f.as_os_str(),
    ]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("warning [cost_overflow]"));
}

// ---- 2, 3, 7. bombs, huge files and allocation failures under a memory cap ---------------

/// Writes `len` bytes into `enc`: `prefix`, then `fill` repeated, then `suffix`.
fn fill_into<W: Write>(mut enc: W, prefix: &[u8], fill: u8, len: u64, suffix: &[u8]) -> W {
    enc.write_all(prefix).unwrap();
    let chunk = vec![fill; 1 << 20];
    let mut left = len - prefix.len() as u64 - suffix.len() as u64;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        enc.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    enc.write_all(suffix).unwrap();
    enc
}

/// A gzip stream of `len` bytes: `prefix`, then `fill` repeated, then `suffix`.
fn gzip_of(prefix: &[u8], fill: u8, len: u64, suffix: &[u8]) -> Vec<u8> {
    let enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    fill_into(enc, prefix, fill, len, suffix).finish().unwrap()
}

/// The same as a zstd stream.
fn zstd_of(prefix: &[u8], fill: u8, len: u64, suffix: &[u8]) -> Vec<u8> {
    let enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    fill_into(enc, prefix, fill, len, suffix).finish().unwrap()
}

#[test]
fn compressed_bombs_under_a_4_gib_cap_are_one_line_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    // 1 GiB of zero bytes: refused from its first decompressed byte, nothing inflated.
    let zeros_gz = write(dir.path(), "zeros.gz", &gzip_of(b"", 0, GIB, b""));
    let zeros_zst = write(dir.path(), "zeros.zst", &zstd_of(b"", 0, GIB, b""));
    // A 1 GiB list of None in one APPENDS batch (a ~1 MB gzip): once an abort in pass 1.
    let nones = gzip_of(b"\x80\x04](", b'N', GIB, b"e.");
    assert!(nones.len() < 16 << 20, "{}", nones.len());
    let nones_gz = write(dir.path(), "nones.gz", &nones);
    let nones_zst = write(
        dir.path(),
        "nones.zst",
        &zstd_of(b"\x80\x04](", b'N', GIB, b"e."),
    );
    for threads in [1, 2] {
        for f in [&zeros_gz, &zeros_zst] {
            let (o, rss) = capped(Some(4 * GIB), threads, &["summary".as_ref(), f.as_os_str()]);
            let what = format!("{} threads={threads}", f.display());
            assert_one_line(&o, "decompressed byte 0: expected a pickle", &what);
            assert!(
                rss < 64 << 20,
                "{what}: peak RSS {rss}: inflated before refusing"
            );
        }
        for f in [&nones_gz, &nones_zst] {
            let (o, rss) = capped(Some(4 * GIB), threads, &["summary".as_ref(), f.as_os_str()]);
            let what = format!("{} threads={threads}", f.display());
            // Refused as it is read: a list of nothing but `None`s is denser in values without
            // content than any snapshot (issue 53).
            assert_one_line(&o, "values without content", &what);
            // The decompressed GiB plus the decoder's bounded stack (input/16 values).
            assert!(rss < 3 * GIB, "{what}: peak RSS {rss}");
        }
    }
}

#[test]
fn a_sparse_50_gb_file_is_refused_cleanly_with_and_without_a_cap() {
    let dir = tempfile::tempdir().unwrap();
    let len = 50_000_000_000u64;
    for (name, head) in [
        ("zeros.pickle", &b""[..]),
        ("list.pickle", &b"\x80\x04]("[..]),
    ] {
        let p = dir.path().join(name);
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(len).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, head, 0).unwrap();
        drop(f);
        for threads in [1, 2] {
            for cap in [None, Some(4 * GIB)] {
                let (o, rss) = capped(cap, threads, &["summary".as_ref(), p.as_os_str()]);
                let what = format!("{name} threads={threads} cap={cap:?}");
                let needle = if cap.is_some() {
                    "cannot map the file"
                } else {
                    "is not a pickle opcode"
                };
                assert_one_line(&o, needle, &what);
                assert!(rss < 64 << 20, "{what}: peak RSS {rss}");
            }
        }
    }
}

#[test]
fn a_refused_allocation_is_one_line_naming_the_file() {
    // 256 MiB of small ints (`K\x01`, two bytes each: values with content, so the density
    // bound on `None`s does not refuse them first) on the stack: the decoder's stack (16 bytes
    // a value) cannot grow under a 600 MiB cap. The sequential decoder has no fallback: one
    // line, exit 2, no backtrace.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ints.pickle");
    let mut body = b"\x80\x04](".to_vec();
    while body.len() < 256 << 20 {
        body.extend_from_slice(b"K\x01");
    }
    body.extend_from_slice(b"e.");
    std::fs::write(&p, &body).unwrap();
    drop(body);
    for threads in [1, 2] {
        let (o, _) = capped(
            Some(600 << 20),
            threads,
            &["summary".as_ref(), p.as_os_str()],
        );
        let what = format!("threads={threads}");
        assert_one_line(&o, "out of memory: the system refused", &what);
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("ints.pickle"),
            "{what}"
        );
    }
}

// ---- 5. pipes, FIFOs and devices are streams ---------------------------------------------

fn first_summary_line(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[test]
fn pipes_process_substitution_and_dev_stdin_are_read_as_streams() {
    let sample = sample("train_small.pickle");
    let want = String::from_utf8_lossy(&memlens(["summary".as_ref(), sample.as_os_str()]).stdout)
        .lines()
        .skip(1)
        .collect::<Vec<_>>()
        .join("\n");
    let gz = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        gz.path(),
        gzip_of(&std::fs::read(&sample).unwrap(), 0, 29424, b""),
    )
    .unwrap();
    for (how, script) in [
        (
            "process substitution",
            format!("{BIN} summary <(cat '{}')", sample.display()),
        ),
        (
            "gzip through a pipe",
            format!("{BIN} summary <(cat '{}')", gz.path().display()),
        ),
        (
            "/dev/stdin from a pipe",
            format!("cat '{}' | {BIN} summary /dev/stdin", sample.display()),
        ),
        (
            "- from a pipe",
            format!("cat '{}' | {BIN} summary -", sample.display()),
        ),
    ] {
        let o = Command::new("bash")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{how}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let got = String::from_utf8_lossy(&o.stdout)
            .lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(got, want, "{how}");
        assert!(!first_summary_line(&o).is_empty(), "{how}");
    }
    // An endless device is refused from its first bytes.
    let o = memlens(["summary", "/dev/zero"]);
    assert_one_line(&o, "/dev/zero: byte 0: expected a snapshot", "/dev/zero");
}

#[test]
fn a_fifo_without_a_writer_says_it_waits_then_reads_what_comes() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("snapshot.fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut child = Command::new(BIN)
        .arg("summary")
        .arg(&fifo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(
        line.contains("waiting for a writer to open this FIFO"),
        "{line}"
    );
    assert!(line.contains("snapshot.fifo"), "{line}");
    // Now a writer comes: the snapshot is read and summarized.
    std::fs::write(&fifo, std::fs::read(sample("train_small.pickle")).unwrap()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Device 0"));
}

// ---- 6. outputs --------------------------------------------------------------------------

#[test]
fn force_never_replaces_what_is_not_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let sample = sample("train_small.pickle");
    let mut targets = Vec::new();
    // A symlink to a character device (what `-o /dev/full --force` once replaced).
    let link = dir.path().join("full");
    std::os::unix::fs::symlink("/dev/full", &link).unwrap();
    targets.push(link.clone());
    // A character device node of our own where mknod is allowed (root, as in CI).
    let node = dir.path().join("null-node");
    let c = std::ffi::CString::new(node.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path; makedev(1, 3) is /dev/null's device number.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) } == 0 {
        targets.push(node);
    }
    let fifo = dir.path().join("fifo");
    let cf = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(cf.as_ptr(), 0o600) }, 0);
    targets.push(fifo);
    targets.push(dir.path().to_path_buf());
    for t in &targets {
        let before = std::fs::metadata(t).unwrap().file_type();
        let o = memlens([
            "summary".as_ref(),
            sample.as_os_str(),
            "-o".as_ref(),
            t.as_os_str(),
            "--force".as_ref(),
        ]);
        assert_one_line(
            &o,
            "-o writes a report to a regular file only",
            &t.display().to_string(),
        );
        let after = std::fs::symlink_metadata(t).unwrap().file_type();
        assert!(
            after == before || (t == &link && after.is_symlink()),
            "{} changed",
            t.display()
        );
    }
    assert!(std::fs::metadata("/dev/full")
        .unwrap()
        .file_type()
        .is_char_device_like());
    // A regular file is still replaced with --force.
    let reg = write(dir.path(), "report.txt", b"old");
    let o = memlens([
        "summary".as_ref(),
        sample.as_os_str(),
        "-o".as_ref(),
        reg.as_os_str(),
        "--force".as_ref(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(std::fs::read_to_string(&reg).unwrap().contains("Device 0"));
}

trait CharDeviceLike {
    fn is_char_device_like(&self) -> bool;
}

impl CharDeviceLike for std::fs::FileType {
    fn is_char_device_like(&self) -> bool {
        std::os::unix::fs::FileTypeExt::is_char_device(self)
    }
}

// ---- 7. one line, and containers ordinary tools write ------------------------------------

#[test]
fn a_path_with_a_newline_stays_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "bad\nname.pickle", b"\x80\x04\x00");
    let o = memlens(["summary".as_ref(), p.as_os_str()]);
    assert_one_line(&o, "bad\\nname.pickle\"", "newline");
    let o = memlens([
        "summary".as_ref(),
        p.as_os_str(),
        "-o".as_ref(),
        p.as_os_str(),
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
}

#[test]
fn every_zstd_frame_kind_and_long_windows_are_read() {
    let sample = sample("train_small.pickle");
    let body = std::fs::read(&sample).unwrap();
    let want = summary_json(&sample);
    let dir = tempfile::tempdir().unwrap();
    let frame = |b: &[u8]| zstd::stream::encode_all(b, 3).unwrap();
    let skippable = |n: u8| {
        let mut v = vec![0x50 | n, 0x2a, 0x4d, 0x18];
        v.extend_from_slice(&7u32.to_le_bytes());
        v.extend_from_slice(b"seekabl");
        v
    };
    // pzstd's layout: a skippable frame before each zstd frame; two frames of one stream.
    let mut multi = skippable(0);
    multi.extend(frame(&body[..1000]));
    multi.extend(skippable(15));
    multi.extend(frame(&body[1000..]));
    // A frame with a 2 GiB window and no content size, as `zstd --long=31` writes to a pipe.
    let mut long = Vec::new();
    {
        let mut enc = zstd::stream::write::Encoder::new(&mut long, 3).unwrap();
        enc.window_log(31).unwrap();
        enc.long_distance_matching(true).unwrap();
        enc.include_contentsize(false).unwrap();
        enc.write_all(&body).unwrap();
        enc.finish().unwrap();
    }
    assert!(matches!(
        zstd::zstd_safe::get_frame_content_size(&long),
        Ok(None)
    ));
    assert!(
        want["devices"].as_array().is_some_and(|d| !d.is_empty()),
        "{want}"
    );
    for (name, bytes) in [("multi.zst", multi), ("long.zst", long)] {
        let p = write(dir.path(), name, &bytes);
        for threads in ["1", "2"] {
            let got = ok_json(&[
                "--threads".as_ref(),
                threads.as_ref(),
                "summary".as_ref(),
                p.as_os_str(),
            ]);
            assert_eq!(got["devices"], want["devices"], "{name}");
        }
    }
}

#[test]
fn json_as_other_writers_spell_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let json = std::fs::read(sample("snapshot.json")).unwrap();
    let want = summary_json(&sample("snapshot.json"))["devices"].clone();
    assert!(want.as_array().is_some_and(|d| !d.is_empty()), "{want}");
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend_from_slice(&json);
    let gz = gzip_of(&json, b' ', json.len() as u64 + 3, b"\n\n\n");
    let zst = zstd::stream::encode_all(&json[..], 3).unwrap();
    for (name, bytes) in [
        ("bom.json", bom),
        ("snapshot.json.gz", gz),
        ("snapshot.json.zst", zst),
    ] {
        let p = write(dir.path(), name, &bytes);
        let got = summary_json(&p);
        assert_eq!(got["devices"], want, "{name}");
    }
    // A lone surrogate (Python's json for a name that was not UTF-8) and whole numbers
    // written as floats.
    let odd = write(
        dir.path(),
        "odd.json",
        br#"{"segments": [], "device_traces": [[{"action": "alloc", "addr": 4096.0, "size": 5.12e2, "stream": 0, "frames": [{"filename": "/w/\udc80x.py", "line": 3.0, "name": "f"}]}]]}"#,
    );
    let v = ok_json(&["top".as_ref(), odd.as_os_str()]);
    assert_eq!(v["devices"][0]["total"], 512);
    assert_eq!(v["devices"][0]["sites"][0]["site"], "/w/\u{fffd}x.py:3:f");
}

#[test]
fn other_containers_are_named_not_blamed_on_an_opcode() {
    let dir = tempfile::tempdir().unwrap();
    for (name, head, needle) in [
        ("s.xz", &b"\xfd7zXZ\x00\x00\x04"[..], "an xz stream"),
        ("s.bz2", &b"BZh91AY&SY"[..], "a bzip2 stream"),
        ("s.lz4", &b"\x04\x22\x4d\x18\x64\x40"[..], "an lz4 frame"),
        (
            "model.pt",
            &b"PK\x03\x04\x00\x00"[..],
            "a zip archive (what torch.save writes)",
        ),
    ] {
        let p = write(dir.path(), name, head);
        let o = memlens(["summary".as_ref(), p.as_os_str()]);
        assert_one_line(&o, &format!("byte 0: {needle}, not a snapshot"), name);
    }
}
