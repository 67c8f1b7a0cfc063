//! Every `-o`: each command that writes a file ends with one line on standard error naming
//! the path and its size in IEC units (`memlens: wrote PATH (2.31 MiB)`), the size that of the
//! file on disk; standard output keeps only what the command prints without `-o` (nothing, or
//! `slice`'s report and the dataset's summary line); nothing is said when nothing is written.

use crate::common;
use common::*;
use std::path::Path;

/// The size as the line writes it, computed here on its own: bytes below 1 KiB, else two
/// decimals of the largest IEC unit that keeps the figure, as printed, at least 1 (1 MiB less
/// a byte reads `1.00 MiB`, not `1024.00 KiB`).
fn iec_here(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let units = ["KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64 / 1024.0;
    let mut u = 0;
    while (v >= 1024.0 || format!("{v:.2}") == "1024.00") && u < units.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", units[u])
}

/// Every line of `o`'s standard error but the progress bars' (none on a pipe).
fn stderr_lines(o: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Runs `memlens ARGS -o PATH` in the repository root; checks the exit status, that the last
/// line of standard error says what was written with the file's size, that it is said once;
/// returns standard output.
fn writes(args: &[&str], path: &Path, exit: i32) -> String {
    let mut a: Vec<&str> = args.to_vec();
    let p = path.to_str().unwrap();
    a.extend(["-o", p]);
    let o = memlens_in_root(&a);
    let err = stderr_lines(&o);
    assert_eq!(o.status.code(), Some(exit), "{args:?}: {err:?}");
    let size = std::fs::metadata(path).unwrap().len();
    assert!(size > 0, "{args:?} wrote an empty file");
    let want = format!("memlens: wrote {p} ({})", iec_here(size));
    assert_eq!(err.last(), Some(&want), "{args:?}: {err:?}");
    assert_eq!(
        err.iter().filter(|l| l.contains(" wrote ")).count(),
        1,
        "{args:?}: {err:?}"
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn every_output_file_is_named_with_its_size() {
    let dir = tempfile::tempdir().unwrap();
    let msg = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of \
               79.15 GiB of which 1.02 GiB is free. Of the allocated memory 70.11 GiB is \
               allocated by PyTorch, and 6.30 GiB is reserved by PyTorch but unallocated.";
    let (train, frag) = ("samples/train_small.pickle", "samples/frag_oom.pickle");
    let (base, cand) = ("samples/diff_base.pickle", "samples/diff_cand.pickle");
    // (the command line, the file's name, the exit status: 1 where a check or leaks finds
    // something)
    let cases: Vec<(Vec<&str>, &str, i32)> = vec![
        (vec!["summary", train], "summary.txt", 0),
        (
            vec!["summary", train, "--format", "json"],
            "summary.json",
            0,
        ),
        (vec!["top", train], "top.txt", 0),
        (vec!["timeline", train], "timeline.csv", 0),
        (
            vec!["timeline", train, "--format", "svg"],
            "timeline.svg",
            0,
        ),
        (vec!["flame", train], "flame.svg", 0),
        (
            vec!["flame", train, "--format", "folded"],
            "flame.folded",
            0,
        ),
        (vec!["explain", msg], "explain.txt", 0),
        (vec!["frag", frag], "frag.txt", 0),
        (vec!["oom", frag], "oom.txt", 0),
        (
            vec!["leaks", "samples/retained_graph.pickle"],
            "leaks.txt",
            1,
        ),
        (
            vec!["categories", "samples/adam_loop.pickle"],
            "categories.txt",
            0,
        ),
        (vec!["fit", frag], "fit.txt", 0),
        (
            vec!["whatif", frag, "--set", "expandable_segments:True"],
            "whatif.txt",
            0,
        ),
        (vec!["diff", base, cand, "--format", "md"], "diff.md", 0),
        (vec!["check", train, "--max-peak", "1KiB"], "check.txt", 1),
        (
            vec!["batch", train, frag, "--format", "csv"],
            "batch.csv",
            0,
        ),
        (vec!["export", train], "trace.json", 0),
        (vec!["report", train], "report.html", 0),
        (vec!["report", base, cand], "compare.html", 0),
    ];
    for (args, name, exit) in &cases {
        let out = writes(args, &dir.path().join(name), *exit);
        assert_eq!(out, "", "{args:?}: standard output stays empty");
    }
    // slice prints its report on standard output; the line still ends standard error.
    let out = writes(&["slice", train], &dir.path().join("slice.pickle"), 0);
    assert!(out.contains("slice.pickle"), "{out}");
}

#[test]
fn a_dataset_is_named_with_its_files_and_their_total_size() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let p = ds.to_str().unwrap();
    let o = memlens_in_root([
        "batch",
        "samples/train_small.pickle",
        "samples/frag_oom.pickle",
        "--format",
        "parquet",
        "-o",
        p,
    ]);
    let err = stderr_lines(&o);
    assert_eq!(o.status.code(), Some(0), "{err:?}");
    // Every file under the directory, counted and summed here.
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut stack = vec![ds.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                files += 1;
                bytes += m.len();
            }
        }
    }
    assert!(files >= 2, "{files}");
    assert_eq!(
        err.last().map(String::as_str),
        Some(format!("memlens: wrote {p} ({files} files, {})", iec_here(bytes)).as_str()),
        "{err:?}"
    );
    // Standard output keeps its own summary line, as before.
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.starts_with(&format!("{p}: 2 files written (")), "{out}");
}

#[test]
fn nothing_written_nothing_said() {
    let dir = tempfile::tempdir().unwrap();
    // To standard output: no line.
    let o = memlens_in_root(["summary", "samples/train_small.pickle"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("wrote"));
    assert!(!o.stdout.is_empty());
    // A file that exists, without --force: refused, and not said to be written.
    let taken = dir.path().join("taken.txt");
    std::fs::write(&taken, "mine").unwrap();
    let o = memlens_in_root([
        "summary",
        "samples/train_small.pickle",
        "-o",
        taken.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("wrote"), "{err}");
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "mine");
    // With --force it is replaced and said, with the new size.
    let o = memlens_in_root([
        "summary",
        "samples/train_small.pickle",
        "-o",
        taken.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let size = std::fs::metadata(&taken).unwrap().len();
    assert_ne!(size, 4);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim_end(),
        format!(
            "memlens: wrote {} ({})",
            taken.to_str().unwrap(),
            iec_here(size)
        )
    );
}

#[test]
fn the_size_is_written_in_iec_units() {
    // The helper above agrees with the library's formatter where units change.
    for b in [0, 1023, 1024, 1536, 1048575, 1048576, 2_422_210, 5 << 30] {
        assert_eq!(iec_here(b), memlens::units::iec(b), "{b}");
    }
    assert_eq!(iec_here(2_422_210), "2.31 MiB");
}

/// An object-storage URL that cannot be reached is one line and exit 2 as an input and as a
/// dataset's `-o`; as any other `-o`, one line saying how to copy the output out; `-o s3://…`
/// never becomes a local directory named `s3:` (issue 55's report).
#[test]
fn an_object_store_url_is_one_line_and_exit_2_never_a_local_directory() {
    let dir = tempfile::tempdir().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/frag_oom.pickle");
    // The tests' build reads object storage (`cloud`): a store that does not answer (a closed
    // loopback port) is one line naming the URL, as input and as a dataset's -o; every other
    // -o is local only. (Without `cloud`, url.rs's own test checks the copy-or-pipe line.)
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_memlens"))
            .args(args)
            .current_dir(dir.path())
            .env("AWS_ENDPOINT_URL", &endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "x")
            .env("AWS_SECRET_ACCESS_KEY", "x")
            .output()
            .unwrap()
    };
    let s = sample.to_str().unwrap();
    for (args, url) in [
        (
            vec!["summary", "s3://bucket/job/rank0.pickle"],
            "s3://bucket/job/rank0.pickle",
        ),
        (
            vec!["batch", "--format", "parquet", "-o", "s3://bucket/out/", s],
            "s3://bucket/out/",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let lines = stderr_lines(&o);
        assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
        assert!(
            lines[0].starts_with(&format!("memlens: {url}"))
                && lines[0].contains(&format!("cannot reach {endpoint}: the connection failed")),
            "{lines:?}"
        );
    }
    let o = run(&["report", s, "-o", "gs://bucket/page.html"]);
    assert_eq!(o.status.code(), Some(2));
    let lines = stderr_lines(&o);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(": a URL; -o writes local files only"),
        "{lines:?}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing is written: {left:?}");
}
