//! `--timings`: every phase has its line with a number, the phases add up to no more than the
//! total, and without the flag nothing is said; `MEMLENS_FLOOR=1` walks and stops.

use crate::common;
use common::*;
use std::io::Write;
use std::process::Command;

/// The seconds of each phase line (`  NAME   S s...`), in order.
fn phases(stderr: &str) -> Vec<(String, f64)> {
    stderr
        .lines()
        .filter_map(|l| {
            let l = l.strip_prefix("  ")?;
            let (name, rest) = l.split_once(' ').filter(|(n, _)| *n != "file")?;
            let secs = rest.trim_start().split_once(" s")?.0.parse().ok()?;
            Some((name.to_string(), secs))
        })
        .collect()
}

fn checked(args: &[&std::ffi::OsStr]) -> (std::process::Output, String, Vec<(String, f64)>) {
    let o = memlens(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let p = phases(&err);
    (o, err, p)
}

/// The phases are those of one file read, in order; their sum is at most the total.
fn assert_phases(err: &str, p: &[(String, f64)]) {
    let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["read", "decode", "model", "replay", "analysis", "output", "total"],
        "{err}"
    );
    let total = p.last().unwrap().1;
    let sum: f64 = p[..p.len() - 1].iter().map(|(_, s)| s).sum();
    // Each figure is rounded to the millisecond.
    assert!(sum <= total + 0.004, "phases {sum} > total {total}:\n{err}");
    assert!(err.starts_with("timings:\n"), "{err}");
    assert!(err.contains(" MiB/s (sequential, 1 thread"), "{err}");
    assert!(err.contains(", peak RSS "), "{err}");
}

#[test]
fn summary_says_what_each_phase_cost() {
    let file = sample("train_small.pickle");
    let (o, err, p) = checked(&["--timings".as_ref(), "summary".as_ref(), file.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_phases(&err, &p);
    assert!(
        err.contains(&format!("  file     {}, ", file.display())),
        "{err}"
    );
    assert!(err.contains("(none: not needed)"), "{err}");
    // The report is the same as without the flag, which says nothing on stderr.
    let plain = memlens(["summary".as_ref(), file.as_os_str()]);
    assert_eq!(plain.stdout, o.stdout);
    assert!(
        plain.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
}

#[test]
fn a_compressed_file_decompresses_alongside_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("train_small.pickle.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&std::fs::read(sample("train_small.pickle")).unwrap())
        .unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let (o, err, p) = checked(&["--timings".as_ref(), "top".as_ref(), gz.as_os_str()]);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_phases(&err, &p);
    assert!(err.contains("(gzip, "), "{err}");
    assert!(err.contains("decompressing alongside)"), "{err}");
    assert!(
        err.contains("includes waiting on the decompression)"),
        "{err}"
    );
    assert!(!err.contains("not needed"), "top replays:\n{err}");
}

#[test]
fn a_command_that_fails_after_loading_still_says() {
    // A moment past the trace: refused once the file is read and replayed.
    let file = sample("train_small.pickle");
    let (o, err, p) = checked(&[
        "--timings".as_ref(),
        "top".as_ref(),
        "--at".as_ref(),
        "999999999".as_ref(),
        file.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("memlens: "),
        "the error comes first:\n{err}"
    );
    let at = err.find("timings:\n").expect("timings after the error");
    assert_phases(&err[at..], &p);
}

#[test]
fn the_floor_walks_the_opcodes_and_stops() {
    let o = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(["summary".as_ref(), sample("train_small.pickle").as_os_str()])
        .env("MEMLENS_FLOOR", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(o.stdout.is_empty());
    let rest = err.strip_prefix("floor: ").expect("a floor line");
    let (secs, n) = rest.trim_end().split_once(" s, ").unwrap();
    assert!(secs.parse::<f64>().is_ok(), "{err}");
    let n: u64 = n.strip_suffix(" opcodes").unwrap().parse().unwrap();
    assert!(n > 100, "{err}");
}
