//! The command line's smaller promises (issue 19, item 6): `-` is standard input in every
//! command (`explain -` too), output files get the mode the umask gives any new file, `-f` is
//! `--force`, counts read as English ("1 block"), no "after event -1" or "(from none found)",
//! and sizes never read "1024.00 MiB".

use crate::common;
use common::*;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};

fn with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .current_dir(root())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command may refuse before reading all of it: a broken pipe is its answer.
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "memlens-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_dash_reads_standard_input_in_every_command() {
    let bytes = std::fs::read(sample("train_small.pickle")).unwrap();
    let file = "samples/train_small.pickle";
    // Each command gives the same answer from `-` as from the file (the title aside).
    for cmd in [
        &["summary", "--format", "json"][..],
        &["top", "--format", "json"],
        &["timeline"],
        &["flame", "--format", "folded"],
        &["frag", "--format", "json"],
        &["oom", "--format", "json"],
        &["leaks", "--format", "json"],
        &["categories", "--format", "json"],
        &["check", "--max-peak", "1GiB", "--format", "json"],
        &["batch", "--format", "csv"],
    ] {
        let mut from_file: Vec<&str> = cmd.to_vec();
        from_file.push(file);
        let mut from_stdin: Vec<&str> = cmd.to_vec();
        from_stdin.push("-");
        let want = memlens_in_root(&from_file);
        let got = with_stdin(&from_stdin, &bytes);
        assert_eq!(
            got.status.code(),
            want.status.code(),
            "{cmd:?}: {}",
            stderr(&got)
        );
        assert_eq!(
            text(&got).replace("\"-\"", "FILE").replace("-,", "FILE,"),
            text(&want)
                .replace(&format!("\"{file}\""), "FILE")
                .replace(&format!("{file},"), "FILE,"),
            "{cmd:?}"
        );
    }
    let o = with_stdin(&["diff", "-", file], &bytes);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(text(&o).contains("Sites: 0 new, 0 removed, 0 grown, 0 shrunk"));
    let o = with_stdin(&["report", "-", "--format", "json"], &bytes);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn standard_input_given_twice_is_one_usage_line() {
    let bytes = std::fs::read(sample("train_small.pickle")).unwrap();
    for args in [
        &["diff", "-", "-"][..],
        &["summary", "-", "-"],
        &["check", "-", "-", "--max-peak", "1GiB"],
        &["check", "-", "--baseline", "-", "--max-peak", "1GiB"],
        &["batch", "-", "-"],
    ] {
        let o = with_stdin(args, &bytes);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
        assert!(e.contains("standard input is given more than once"), "{e}");
    }
}

#[test]
fn explain_dash_reads_the_message_from_standard_input() {
    let msg = b"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB of which 1.68 GiB is free.";
    let o = with_stdin(&["explain", "-"], msg);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(text(&o).contains("23.64 GiB"), "{}", text(&o));
    let by_arg = memlens_in_root(["explain", std::str::from_utf8(msg).unwrap()]);
    assert_eq!(text(&o), text(&by_arg));
    // --message-file - still works, and a `-` among words is a word.
    let o = with_stdin(&["explain", "--message-file", "-"], msg);
    assert_eq!(text(&o), text(&by_arg));
}

#[test]
fn output_files_get_the_mode_the_umask_gives() {
    let dir = tempdir("mode");
    for (umask, mode) in [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)] {
        let out = dir.join(format!("top-{umask:o}.txt"));
        let o = unsafe {
            Command::new(env!("CARGO_BIN_EXE_memlens"))
                .current_dir(root())
                .args(["top", "samples/train_small.pickle", "-o"])
                .arg(&out)
                .pre_exec(move || {
                    libc::umask(umask);
                    Ok(())
                })
                .output()
                .unwrap()
        };
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let got = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(got, mode, "umask {umask:o}: mode {got:o}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn dash_f_is_force() {
    let dir = tempdir("force");
    let out = dir.join("r.json");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "summary",
            "samples/train_small.pickle",
            "--format",
            "json",
            "-o",
        ];
        args.push(out.to_str().unwrap());
        args.extend(extra);
        memlens_in_root(&args)
    };
    assert_eq!(run(&[]).status.code(), Some(0));
    let again = run(&[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("--force"));
    assert_eq!(run(&["-f"]).status.code(), Some(0));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn counts_and_moments_read_as_english() {
    // "1 blocks"
    let frag = text(&memlens_in_root(["frag", "samples/bare_list.pickle"]));
    assert!(
        frag.contains("2.00 MiB–20.00 MiB: 1 block, 12.42 MiB"),
        "{frag}"
    );
    assert!(!frag.contains(" 1 blocks"), "{frag}");
    // "after event -1"
    let cats = text(&memlens_in_root([
        "categories",
        "samples/legacy_2_0.pickle",
    ]));
    assert!(!cats.contains("event -1"), "{cats}");
    // Its one-entry trace records no allocation: the final state, said so.
    assert!(
        cats.contains("Device 0 — final state (no allocation recorded):"),
        "{cats}"
    );
    // "(from none found)"
    let leaks = text(&memlens_in_root(["leaks", "samples/legacy_2_0.pickle"]));
    assert!(!leaks.contains("none found"), "{leaks}");
    assert!(leaks.contains("Device 0\n"), "{leaks}");
    let summary = text(&memlens_in_root(["summary", "samples/legacy_2_0.pickle"]));
    assert!(summary.contains("Trace: 1 entry ("), "{summary}");
    for out in [&frag, &cats, &leaks, &summary] {
        for bad in [
            " 1 blocks",
            " 1 segments",
            " 1 entries",
            " 1 steps",
            " 1 files",
        ] {
            assert!(!out.contains(bad), "{bad}: {out}");
        }
    }
}

#[test]
fn no_size_reads_1024_of_a_unit() {
    // 1 GiB less 512 bytes: PyTorch prints 1024.00 MiB.
    let msg = "CUDA out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total capacity of 23.64 GiB of which 1023.99 MiB is free. Of the allocated memory 1073741312 bytes is allocated by PyTorch, and 1048575 bytes is reserved by PyTorch but unallocated.";
    let o = memlens_in_root(["explain", msg]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = text(&o);
    assert!(!out.contains("1024.00"), "{out}");
    assert!(out.contains("1.00 GiB"), "{out}");
    assert!(out.contains("1.00 MiB"), "{out}");
}
