//! Issue 36, items 3 and 5: `batch --format parquet` reads each input once, through the input
//! layer every command uses (streams as streams); a stream or a decompressor is read only as
//! far as the pickle goes (its `STOP`) and refused at its first byte that is no opcode, so a
//! bomb with a valid start costs a few MiB; `explain` reads a bounded message. Memory is
//! asserted as peak RSS (`MEMLENS_PEAK_RSS`), under an address-space cap where it matters;
//! every run that could hang goes through `timeout 60`, so a hang fails.

use super::common::*;
use sha2::Digest;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_memlens");
const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// memlens `args` with `--threads threads`, under an address-space cap (`RLIMIT_AS`) of
/// `cap` bytes, killed after 60 s; its output and peak RSS.
fn capped(cap: u64, threads: usize, args: &[&std::ffi::OsStr]) -> (Output, u64) {
    let mut cmd = Command::new("timeout");
    cmd.arg("60")
        .arg(BIN)
        .env("MEMLENS_PEAK_RSS", "1")
        .arg("--threads")
        .arg(threads.to_string())
        .args(args);
    cap_address_space(&mut cmd, cap);
    split_peak_rss(cmd.output().unwrap())
}

/// A bash script (the binary is `$M`), with peak RSS reporting; its output and peak RSS.
fn bash(script: &str) -> (Output, u64) {
    let o = Command::new("bash")
        .arg("-c")
        .arg(script)
        .env("M", BIN)
        .env("MEMLENS_PEAK_RSS", "1")
        .output()
        .unwrap();
    split_peak_rss(o)
}

/// Exit code 2 and exactly one line on stderr that contains `needle`.
fn assert_one_line(o: &Output, needle: &str, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: one line expected: {err}");
    assert!(err.starts_with("memlens: "), "{what}: {err}");
    assert!(err.contains(needle), "{what}: {needle:?} not in {err}");
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `len` bytes into `enc` as they are made: `prefix`, then `fill` repeated.
fn fill_into<W: Write>(mut enc: W, prefix: &[u8], fill: u8, len: u64) -> W {
    enc.write_all(prefix).unwrap();
    let chunk = vec![fill; 1 << 20];
    let mut left = len - prefix.len() as u64;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        enc.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    enc
}

/// A zstd file (level 19, as `zstd -19`) and a gzip file of `len` bytes: `prefix`, then
/// `fill` repeated; both compressed as they are made, nothing of `len` held.
fn bombs(dir: &Path, name: &str, prefix: &[u8], fill: u8, len: u64) -> [PathBuf; 2] {
    let zst = dir.join(format!("{name}.zst"));
    let enc = zstd::stream::write::Encoder::new(std::fs::File::create(&zst).unwrap(), 19).unwrap();
    fill_into(enc, prefix, fill, len).finish().unwrap();
    let gz = dir.join(format!("{name}.gz"));
    let enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    fill_into(enc, prefix, fill, len).finish().unwrap();
    [zst, gz]
}

/// Every part file under `dir`, by its path below `dir`, with its bytes.
fn parts(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push((
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

// ---- item 3: batch --format parquet reads each input once -------------------------------

#[test]
fn batch_parquet_reads_a_fifo_a_pipe_and_dev_zero_as_streams_in_one_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let src = sample("frag_oom.pickle");
    let bytes = std::fs::read(&src).unwrap();
    let sha = sha256_hex(&bytes);
    std::fs::create_dir(tmp.path().join("run")).unwrap();
    let file = tmp.path().join("run/snap.pickle");
    std::fs::write(&file, &bytes).unwrap();
    let batch = |out: &str, input: &Path| {
        Command::new("timeout")
            .arg("60")
            .arg(BIN)
            .args(["batch", "--format", "parquet", "-o"])
            .arg(tmp.path().join(out))
            .arg(input)
            .output()
            .unwrap()
    };

    // The regular file: the hash of its bytes, as before.
    let o = batch("regular", &file);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let line = text(&o.stdout);
    assert!(line.ends_with(": 1 file written (77 rows)\n"), "{line}");
    let regular = parts(&tmp.path().join("regular"));
    assert_eq!(regular.len(), 6, "a part per table");
    let files = regular
        .iter()
        .find(|(p, _)| p.starts_with("table=files"))
        .unwrap();
    assert!(contains(&files.1, sha.as_bytes()), "sha256 of the file");

    // The same path as a FIFO with a writer: the same dataset, byte for byte (the same name,
    // rows and hash). Once, the hash pass read the FIFO and the decode waited for ever.
    std::fs::remove_file(&file).unwrap();
    let status = Command::new("mkfifo").arg(&file).status().unwrap();
    assert!(status.success());
    let writer = {
        let (file, bytes) = (file.clone(), bytes.clone());
        std::thread::spawn(move || std::fs::write(file, bytes).unwrap())
    };
    let o = batch("fifo", &file);
    writer.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).split(": ").nth(1), line.split(": ").nth(1));
    let fifo = parts(&tmp.path().join("fifo"));
    assert_eq!(fifo, regular, "the FIFO's dataset is the file's");

    // Process substitution: once "file is empty (0 bytes)" (the hash pass had read the pipe).
    let ds = tmp.path().join("pipe");
    let (o, _) = bash(&format!(
        "timeout 60 \"$M\" batch --format parquet -o '{}' <(cat '{}')",
        ds.display(),
        src.display()
    ));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).ends_with(": 1 file written (77 rows)\n"));
    let pipe = parts(&ds);
    assert_eq!(pipe.len(), 6);
    let files = pipe
        .iter()
        .find(|(p, _)| p.starts_with("table=files"))
        .unwrap();
    assert!(
        contains(&files.1, sha.as_bytes()),
        "sha256 of the bytes read"
    );

    // /dev/zero: refused from its first bytes (once hashed for ever, with no message).
    let o = batch("zero", Path::new("/dev/zero"));
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[0],
        "memlens: /dev/zero: byte 0: expected a snapshot (a pickle, gzip, zstd or JSON), found 0x00: not a snapshot"
    );
    // Then what was written: its `files` row, which says why, and the other tables' parts.
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[1].starts_with("memlens: wrote ") && lines[1].contains(" files, "),
        "{err}"
    );
    assert!(text(&o.stdout).contains("1 of them unreadable"));
}

// ---- item 5: bombs with a valid start, endless streams after a snapshot ------------------

/// A protocol 4 header whose `FRAME` announces 1 GiB, a dict and a MARK: the 64 bytes the
/// input layer checks first all look right; byte 14 is the first that is no opcode.
fn valid_start() -> Vec<u8> {
    let mut h = vec![0x80, 4, 0x95];
    h.extend_from_slice(&GIB.to_le_bytes());
    h.extend_from_slice(b"}\x94(");
    h
}

#[test]
fn a_bomb_with_a_valid_start_is_refused_at_its_first_bad_byte_in_a_few_mib() {
    let tmp = tempfile::tempdir().unwrap();
    // 1 GiB: the valid start, then zeros (a 33 KB zstd, once 2 GB of memory; `diff` of two
    // 3.4 GB).
    let [zst, gz] = bombs(tmp.path(), "zeros", &valid_start(), 0, GIB);
    assert!(std::fs::metadata(&zst).unwrap().len() < 64 << 10);
    let needle = "decompressed byte 14: byte 0x00 is not a pickle opcode";
    for threads in [1, 2] {
        for f in [&zst, &gz] {
            let what = format!("{} threads={threads}", f.display());
            let (o, rss) = capped(4 * GIB, threads, &["summary".as_ref(), f.as_os_str()]);
            assert_one_line(&o, needle, &what);
            assert!(rss > 0 && rss < 64 * MIB, "{what}: peak RSS {rss}");
            let args = ["diff".as_ref(), f.as_os_str(), f.as_os_str()];
            let (o, rss) = capped(4 * GIB, threads, &args);
            assert_one_line(&o, needle, &format!("diff {what}"));
            assert!(rss > 0 && rss < 64 * MIB, "diff {what}: peak RSS {rss}");
        }
        // Through a pipe: the same, named `-`.
        let (o, rss) = bash(&format!(
            "cat '{}' | timeout 60 \"$M\" --threads {threads} summary -",
            zst.display()
        ));
        assert_one_line(&o, &format!("memlens: -: {needle}"), "zstd on a pipe");
        assert!(rss > 0 && rss < 64 * MIB, "pipe: peak RSS {rss}");
    }
    // A raw pickle on a pipe, the valid start then /dev/zero for ever: byte 14, not memory.
    let head: String = valid_start()
        .iter()
        .map(|b| format!("\\x{b:02x}"))
        .collect();
    let (o, rss) = bash(&format!(
        "(printf '{head}'; cat /dev/zero) | timeout 60 \"$M\" summary -"
    ));
    assert_one_line(
        &o,
        "memlens: -: byte 14: byte 0x00 is not a pickle opcode",
        "raw on a pipe",
    );
    assert!(rss > 0 && rss < 64 * MIB, "raw pipe: peak RSS {rss}");
}

#[test]
fn a_snapshot_followed_by_endless_bytes_is_read_to_its_stop_only() {
    let src = sample("frag_oom.pickle");
    let bytes = std::fs::read(&src).unwrap();
    let want = memlens(["summary".as_ref(), src.as_os_str()]);
    assert_eq!(want.status.code(), Some(0));
    // The report less its first line (which names the file).
    let body = |o: &Output| {
        text(&o.stdout)
            .lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n")
    };
    for tail in ["cat /dev/zero", "yes", "cat /dev/urandom"] {
        let (o, rss) = bash(&format!(
            "(cat '{}'; {tail}) | timeout 60 \"$M\" summary -",
            src.display()
        ));
        assert_eq!(o.status.code(), Some(0), "{tail}: {}", text(&o.stderr));
        assert_eq!(text(&o.stderr), "", "{tail}: nothing on stderr");
        assert_eq!(body(&o), body(&want), "{tail}: the snapshot's report");
        assert!(rss > 0 && rss < 64 * MIB, "{tail}: peak RSS {rss}");
    }
    // Compressed: the snapshot then 1 GiB of zeros inside one zstd or gzip stream.
    let tmp = tempfile::tempdir().unwrap();
    for f in bombs(tmp.path(), "after", &bytes, 0, GIB) {
        let (o, rss) = capped(4 * GIB, 2, &["summary".as_ref(), f.as_os_str()]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert_eq!(body(&o), body(&want), "{}", f.display());
        assert!(rss > 0 && rss < 64 * MIB, "{}: peak RSS {rss}", f.display());
    }
}

#[test]
fn an_endless_stream_of_valid_opcodes_ends_with_memory_in_one_line() {
    // `N` (None) for ever inside an open list: every byte is a valid opcode, so nothing but
    // memory ends it; under a 512 MiB cap it is one line and exit 2, never an abort.
    let (o, _) = bash(
        "ulimit -v 524288; (printf '\\x80\\x04]('; tr '\\0' N < /dev/zero) | timeout 60 \"$M\" summary -",
    );
    assert_one_line(&o, "memlens: -: ", "endless None");
    let err = text(&o.stderr);
    assert!(err.contains("out of memory"), "{err}");
}

// ---- explain reads a bounded message, invalid UTF-8 alike from everywhere ----------------

#[test]
fn explain_reads_at_most_1_mib_and_invalid_utf8_the_same_from_stdin_and_a_file() {
    for args in [
        &["explain", "-"][..],
        &["explain", "--message-file", "/dev/zero"],
    ] {
        let mut cmd = Command::new("timeout");
        cmd.arg("60")
            .arg(BIN)
            .args(args)
            .env("MEMLENS_PEAK_RSS", "1")
            .stdin(Stdio::from(std::fs::File::open("/dev/zero").unwrap()));
        let (o, rss) = split_peak_rss(cmd.output().unwrap());
        let what = args.join(" ");
        assert_one_line(&o, "byte 1048576: the message is longer than 1 MiB", &what);
        assert!(rss > 0 && rss < 64 * MIB, "{what}: peak RSS {rss}");
    }
    // One byte that is not UTF-8 in a real message: both read it (once stdin refused it).
    let tmp = tempfile::tempdir().unwrap();
    let msg = tmp.path().join("oom.txt");
    std::fs::write(
        &msg,
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.50 GiB is free. \xff\n",
    )
    .unwrap();
    let from_file = memlens([
        "explain".as_ref(),
        "--message-file".as_ref(),
        msg.as_os_str(),
    ]);
    assert_eq!(
        from_file.status.code(),
        Some(0),
        "{}",
        text(&from_file.stderr)
    );
    let from_stdin = Command::new(BIN)
        .args(["explain", "-"])
        .stdin(Stdio::from(std::fs::File::open(&msg).unwrap()))
        .output()
        .unwrap();
    assert_eq!(
        from_stdin.status.code(),
        Some(0),
        "{}",
        text(&from_stdin.stderr)
    );
    assert_eq!(text(&from_stdin.stdout), text(&from_file.stdout));
    assert!(text(&from_file.stdout).contains("2.00 GiB"));
    // Exactly 1 MiB is still read.
    let big = tmp.path().join("big.txt");
    let mut body = std::fs::read(&msg).unwrap();
    body.resize(MIB as usize, b' ');
    std::fs::write(&big, &body).unwrap();
    let o = memlens([
        "explain".as_ref(),
        "--message-file".as_ref(),
        big.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}
