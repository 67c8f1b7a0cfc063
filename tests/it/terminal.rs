//! Text that fits (issue 19, item 5): on a terminal, tables and prose fit its width; piped or
//! written with `-o`, every line stays whole; `--width N` asks for a width anywhere. Paths of
//! sites are shortened the same way in every text report (as `diff` shortens them), and stay
//! as recorded in JSON.
//!
//! The terminal is a real one: a pseudo-terminal of 80 columns (`openpty`), whose window size
//! memlens reads as it would from any terminal emulator.

use crate::common;
use common::*;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::process::{Command, Stdio};

/// Runs memlens with its standard output on a pseudo-terminal `cols` wide; returns what it
/// wrote there (line ends as written, without the terminal's `\r`) and the exit code.
fn on_terminal(cols: u16, args: &[&str]) -> (String, Option<i32>) {
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize {
        ws_row: 50,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty fills two descriptors this test then owns.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    let (mut master, slave) = unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .current_dir(root())
        .args(args)
        .env_remove("COLUMNS")
        .stdin(Stdio::null())
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    drop(slave);
    // Read until the child closes its end (EIO on Linux once no one holds the slave).
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match master.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    let status = child.wait().unwrap();
    (
        String::from_utf8_lossy(&out).replace('\r', ""),
        status.code(),
    )
}

fn widest(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

fn piped(args: &[&str]) -> String {
    let o = memlens_in_root(args);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The commands whose text was wider than 80 columns on the samples (top 208, frag 221,
/// oom 213 columns on this build's predecessor), with a sample that shows it.
const WIDE: &[(&[&str], &str)] = &[
    (&["top"], "expandable_multi.pickle"),
    (&["top", "--by", "stack", "-n", "3"], "train_small.pickle"),
    (&["frag"], "adam_loop.pickle"),
    (&["frag"], "bare_list.pickle"),
    (&["oom"], "frag_oom.pickle"),
    (&["oom", "--capacity", "24GiB"], "capacity_oom.pickle"),
    (&["summary"], "expandable_multi.pickle"),
    (&["leaks"], "retained_graph.pickle"),
    (&["categories"], "adam_loop.pickle"),
];

#[test]
fn text_fits_an_80_column_terminal_and_pipes_keep_whole_lines() {
    for (cmd, name) in WIDE {
        let file = format!("samples/{name}");
        let mut args: Vec<&str> = cmd.to_vec();
        args.push(&file);
        let whole = piped(&args);
        let (tty, code) = on_terminal(80, &args);
        assert!(matches!(code, Some(0 | 1)), "{args:?}");
        assert!(
            widest(&tty) <= 80,
            "{args:?}: {} columns on an 80-column terminal:\n{tty}",
            widest(&tty)
        );
        assert!(
            widest(&whole) > 80,
            "{args:?}: piped output should keep its full width ({})",
            widest(&whole)
        );
        // Nothing is lost by fitting: every figure of the piped text is on the terminal.
        for word in whole
            .split_whitespace()
            .filter(|w| w.ends_with("MiB") || w.ends_with('%'))
        {
            assert!(
                tty.contains(word.trim_end_matches([',', ';', ')'])),
                "{args:?}: {word} lost"
            );
        }
        // --width gives the same fit without a terminal; -o writes whole lines.
        let mut narrow = args.clone();
        narrow.extend(["--width", "80"]);
        assert_eq!(piped(&narrow), tty, "{args:?} --width 80");
    }
}

#[test]
fn comparisons_fit_the_terminal_too() {
    let diff = [
        "diff",
        "samples/diff_base.pickle",
        "samples/diff_cand.pickle",
    ];
    let mut check = vec!["check", "--max-peak", "100MiB"];
    let all: Vec<String> = samples()
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pickle"))
        .map(|p| format!("samples/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    check.extend(all.iter().map(String::as_str));
    let batch = ["batch", "samples/ranks"];
    for args in [&diff[..], &check, &batch] {
        let (tty, code) = on_terminal(80, args);
        assert!(matches!(code, Some(0 | 1)), "{args:?}");
        assert!(widest(&tty) <= 80, "{args:?}:\n{tty}");
        assert!(widest(&piped(args)) > 80, "{args:?}");
    }
}

#[test]
fn explain_fits_the_terminal_too() {
    let msg = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.64 GiB of which 1.68 GiB is free. Including non-PyTorch memory, this process has 21.95 GiB memory in use. Of the allocated memory 16.12 GiB is allocated by PyTorch, and 5.36 GiB is reserved by PyTorch but unallocated.";
    let (tty, code) = on_terminal(80, &["explain", msg]);
    assert_eq!(code, Some(0));
    assert!(widest(&tty) <= 80, "{tty}");
    assert!(widest(&piped(&["explain", msg])) > 80);
}

#[test]
fn real_snapshots_fit_an_80_column_terminal() {
    let Some(files) = require_shared() else {
        return;
    };
    for f in files.iter().step_by(3) {
        let file = f.to_str().unwrap();
        for cmd in ["top", "frag", "oom"] {
            let (tty, code) = on_terminal(80, &[cmd, file]);
            assert!(matches!(code, Some(0 | 1)), "{cmd} {file}");
            assert!(widest(&tty) <= 80, "{cmd} {file}:\n{tty}");
        }
    }
    let dir = shared_real_dir();
    let (tty, _) = on_terminal(80, &["batch", dir.to_str().unwrap()]);
    assert!(widest(&tty) <= 80, "batch:\n{tty}");
}

#[test]
fn a_narrow_terminal_gets_the_narrowest_layout_not_a_column_per_letter() {
    let (tty, code) = on_terminal(20, &["summary", "samples/expandable_multi.pickle"]);
    assert_eq!(code, Some(0));
    // Fitted to the 40-column minimum: readable, if wider than this terminal.
    assert!(widest(&tty) <= 40, "{tty}");
    assert!(tty.contains("largest free"));
}

#[test]
fn sites_are_shortened_in_every_text_report_and_whole_in_json() {
    // top and oom printed /home/user/proj/model.py:60:forward where diff, check and batch
    // print model.py:60:forward.
    let top = piped(&["top", "samples/frag_oom.pickle"]);
    assert!(top.contains("┆ model.py:40:forward"), "{top}");
    let oom = piped(&["oom", "samples/frag_oom.pickle"]);
    assert!(oom.contains("┆ model.py:60:forward"), "{oom}");
    for text in [&top, &oom] {
        assert!(!text.contains("/home/user/proj/"), "{text}");
    }
    let leaks = piped(&["leaks", "samples/retained_graph.pickle"]);
    assert!(leaks.contains("model.py:48:forward"), "{leaks}");
    assert!(!leaks.contains("/home/"), "{leaks}");
    let stack = piped(&["top", "--by", "stack", "samples/train_small.pickle"]);
    assert!(!stack.contains("/home/user/proj/"), "{stack}");
    // The same label diff gives the site.
    let diff = piped(&[
        "diff",
        "samples/diff_base.pickle",
        "samples/diff_cand.pickle",
    ]);
    assert!(diff.contains("train.py:47:setup_prefetch"));
    let top = piped(&["top", "samples/diff_cand.pickle", "-n", "30"]);
    assert!(top.contains("┆ train.py:47:setup_prefetch"), "{top}");
    // JSON keeps the paths as recorded.
    let json: serde_json::Value = serde_json::from_str(&piped(&[
        "top",
        "--format",
        "json",
        "samples/frag_oom.pickle",
    ]))
    .unwrap();
    let site = json["devices"][0]["sites"][0]["site"].as_str().unwrap();
    assert!(site.starts_with("/home/user/proj/"), "{site}");
}

#[test]
fn library_paths_lose_their_package_prefix() {
    let Some(f) = require_real("volcengine__verl__mem.pickle") else {
        return;
    };
    let text = piped(&["top", f.to_str().unwrap()]);
    assert!(text.contains("vllm/worker/cache_engine.py:83:_allocate_kv_cache"));
    assert!(!text.contains("dist-packages"), "{text}");
}

#[test]
fn output_files_keep_whole_lines_unless_asked() {
    let dir = tempdir();
    let out = dir.join("top.txt");
    let out = out.to_str().unwrap();
    let o = memlens_in_root(["top", "samples/expandable_multi.pickle", "-o", out]);
    assert_eq!(o.status.code(), Some(0));
    assert!(widest(&std::fs::read_to_string(out).unwrap()) > 80);
    let o = memlens_in_root([
        "top",
        "samples/expandable_multi.pickle",
        "-o",
        out,
        "-f",
        "--width",
        "80",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(widest(&std::fs::read_to_string(out).unwrap()) <= 80);
    // --width 0 turns fitting off, even on a terminal.
    let (tty, _) = on_terminal(
        80,
        &["top", "samples/expandable_multi.pickle", "--width", "0"],
    );
    assert!(widest(&tty) > 80);
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "memlens-terminal-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}
