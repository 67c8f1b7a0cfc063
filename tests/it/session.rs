//! `memlens session` (the notebook API's child process): each answer's `stdout` is, byte for
//! byte, what the same command line prints alone; every file is decoded once per session (a
//! file changed on disk once more); refusals are one line with exit 2, and the session goes on.

use crate::common;
use common::*;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

/// Runs a session over `lines` and returns its answers.
fn session(lines: &[String]) -> Vec<Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .current_dir(root())
        .arg("session")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn request(id: u32, argv: &[&str]) -> String {
    serde_json::json!({"id": id, "argv": argv}).to_string()
}

#[test]
fn answers_are_the_commands_output_from_one_decode() {
    let runs: Vec<Vec<&str>> = vec![
        vec!["top", "samples/frag_oom.pickle", "--format", "json"],
        vec!["oom", "samples/frag_oom.pickle"],
        vec!["leaks", "samples/retained_graph.pickle", "--format", "json"],
        vec!["timeline", "samples/frag_oom.pickle", "--points", "0"],
        vec!["fit", "samples/frag_oom.pickle", "--format", "json"],
        vec![
            "diff",
            "samples/diff_base.pickle",
            "samples/diff_cand.pickle",
            "--format",
            "md",
        ],
    ];
    let lines: Vec<String> = runs
        .iter()
        .enumerate()
        .map(|(i, a)| request(i as u32, a))
        .collect();
    let answers = session(&lines);
    assert_eq!(answers.len(), runs.len());
    for (i, (a, argv)) in answers.iter().zip(&runs).enumerate() {
        let alone = memlens_in_root(argv);
        assert_eq!(a["id"], i);
        assert_eq!(a["exit"], alone.status.code().unwrap(), "{argv:?}");
        assert_eq!(
            a["stdout"].as_str().unwrap().as_bytes(),
            alone.stdout.as_slice(),
            "{argv:?}"
        );
        assert_eq!(a["error"], Value::Null);
    }
    // frag_oom once, then retained_graph, then diff's two files.
    let decodes: Vec<u64> = answers
        .iter()
        .map(|a| a["decodes"].as_u64().unwrap())
        .collect();
    assert_eq!(decodes, [1, 1, 2, 2, 2, 4]);
}

#[test]
fn refusals_are_one_line_and_the_session_goes_on() {
    let lines = vec![
        request(1, &["serve", "samples/frag_oom.pickle"]),
        request(2, &["summary", "-"]),
        request(3, &["top", "samples/no_such.pickle"]),
        request(4, &["top", "--bogus", "samples/frag_oom.pickle"]),
        "not json".to_string(),
        request(5, &[]),
        request(
            6,
            &["summary", "samples/frag_oom.pickle", "--format", "json"],
        ),
    ];
    let answers = session(&lines);
    assert_eq!(answers.len(), lines.len());
    for a in &answers[..6] {
        assert_eq!(a["exit"], 2, "{a}");
        let e = a["error"].as_str().unwrap();
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(
            e.starts_with("memlens: ") || e.starts_with("error: "),
            "{e}"
        );
    }
    assert!(answers[0]["error"]
        .as_str()
        .unwrap()
        .contains("not answered here"));
    assert!(answers[1]["error"]
        .as_str()
        .unwrap()
        .contains("standard input"));
    assert!(answers[2]["error"]
        .as_str()
        .unwrap()
        .contains("no_such.pickle"));
    assert_eq!(answers[4]["id"], Value::Null);
    assert_eq!(answers[6]["exit"], 0);
    let alone = memlens_in_root(["summary", "samples/frag_oom.pickle", "--format", "json"]);
    assert_eq!(
        answers[6]["stdout"].as_str().unwrap().as_bytes(),
        alone.stdout.as_slice()
    );
}

/// A session driven one request at a time (the answer read before the next line is sent),
/// with every wait bounded: a session that hangs fails the test instead of wedging it.
struct Live {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    answers: std::sync::mpsc::Receiver<String>,
}

impl Live {
    fn start(extra: &[&str]) -> Live {
        let mut child = Command::new(env!("CARGO_BIN_EXE_memlens"))
            .current_dir(root())
            .arg("session")
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = child.stdout.take().unwrap();
        let (tx, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Live {
            child,
            stdin,
            answers,
        }
    }

    /// Sends `line` (raw bytes, a newline added) and returns the answer's text.
    fn send(&mut self, line: &[u8]) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        match self
            .answers
            .recv_timeout(std::time::Duration::from_secs(60))
        {
            Ok(a) => a,
            Err(e) => {
                let _ = self.child.kill();
                panic!(
                    "no answer to {:?} within 60 s ({e})",
                    String::from_utf8_lossy(line)
                );
            }
        }
    }

    fn ask(&mut self, id: u32, argv: &[&str]) -> Value {
        serde_json::from_str(&self.send(request(id, argv).as_bytes())).unwrap()
    }

    /// The session's resident memory (Linux), in bytes.
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .unwrap()
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .unwrap();
        kb * 1024
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
    }
}

fn error_of(a: &Value) -> &str {
    assert_eq!(a["exit"], 2, "{a}");
    let e = a["error"].as_str().unwrap();
    assert_eq!(e.lines().count(), 1, "{e}");
    e
}

#[test]
fn every_name_of_its_own_standard_input_is_refused_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("stdin.pickle");
    std::os::unix::fs::symlink("/proc/self/fd/0", &link).unwrap();
    let link_to_dev = dir.path().join("dev_stdin");
    std::os::unix::fs::symlink("/dev/stdin", &link_to_dev).unwrap();
    let link = link.to_str().unwrap();
    let link_to_dev = link_to_dev.to_str().unwrap();
    let mut s = Live::start(&[]);
    let stdin_names: Vec<Vec<&str>> = vec![
        vec!["summary", "-"],
        vec!["summary", "/dev/stdin"],
        vec!["summary", "/dev/fd/0"],
        vec!["summary", "/proc/self/fd/0"],
        vec!["summary", link],
        vec!["top", link_to_dev, "--format", "json"],
        vec!["diff", "samples/diff_base.pickle", "/dev/stdin"],
        vec!["explain"],
        vec!["explain", "-"],
        vec!["explain", "--capacity", "80GiB"],
        vec!["explain", "--message-file", "/dev/stdin"],
        vec!["explain", "--message-file=/proc/self/fd/0"],
    ];
    for (i, argv) in stdin_names.iter().enumerate() {
        let a = s.ask(i as u32, argv);
        assert_eq!(a["id"], i, "{a}");
        let e = error_of(&a);
        assert!(e.contains("standard input"), "{argv:?}: {e}");
    }
    // Its standard output under another name is refused too (the answers would be broken).
    let a = s.ask(
        90,
        &["report", "-o", "/dev/stdout", "samples/frag_oom.pickle"],
    );
    assert!(error_of(&a).contains("standard output"), "{a}");
    // The requests after them were not swallowed: the next one is answered as alone.
    let a = s.ask(
        99,
        &["summary", "samples/frag_oom.pickle", "--format", "json"],
    );
    assert_eq!(a["exit"], 0, "{a}");
    let alone = memlens_in_root(["summary", "samples/frag_oom.pickle", "--format", "json"]);
    assert_eq!(a["stdout"].as_str().unwrap().as_bytes(), alone.stdout);
}

#[test]
fn fifos_and_devices_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("snap.pickle");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let fifo = fifo.to_str().unwrap();
    let mut s = Live::start(&[]);
    let t0 = std::time::Instant::now();
    for (i, argv) in [
        vec!["summary", fifo],
        vec!["top", "/dev/zero"],
        vec!["categories", "samples/frag_oom.pickle", "--rules", fifo],
        vec!["explain", "--message-file", fifo],
    ]
    .iter()
    .enumerate()
    {
        let a = s.ask(i as u32, argv);
        let e = error_of(&a);
        assert!(e.contains("not a regular file"), "{argv:?}: {e}");
    }
    assert!(t0.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(s.ask(9, &["summary", "samples/frag_oom.pickle"])["exit"], 0);
}

#[test]
fn a_line_that_is_not_utf8_gets_one_error_and_the_session_goes_on() {
    let mut s = Live::start(&[]);
    let a: Value =
        serde_json::from_str(&s.send(b"{\"id\": 1, \"argv\": [\"summary\", \"\xff\xfe.pickle\"]}"))
            .unwrap();
    assert_eq!(a["id"], Value::Null);
    assert!(error_of(&a).contains("not UTF-8"), "{a}");
    let a = s.ask(2, &["summary", "samples/frag_oom.pickle"]);
    assert_eq!((a["id"].as_u64(), a["exit"].as_i64()), (Some(2), Some(0)));
}

#[test]
fn ids_come_back_as_they_came() {
    let mut s = Live::start(&[]);
    for raw in [
        "9007199254740993",
        "18446744073709551617",
        "123456789012345678901234567890",
        "-9007199254740993",
        "1.50",
        "1e400",
        "\"seven\"",
        "{\"n\": [1, 2]}",
        "null",
    ] {
        let line =
            format!("{{\"id\": {raw}, \"argv\": [\"summary\", \"samples/frag_oom.pickle\"]}}");
        let answer = s.send(line.as_bytes());
        let want = format!("{{\"id\":{raw},\"exit\":0,");
        assert!(answer.starts_with(&want), "{raw}: {answer:.80}");
    }
}

/// `memlens top --format json` of `file`, alone.
fn top_alone(file: &std::path::Path) -> Vec<u8> {
    let f = file.to_str().unwrap();
    memlens_in_root(["top", f, "--format", "json"]).stdout
}

#[test]
fn a_same_size_same_mtime_rewrite_is_answered_from_the_new_bytes() {
    let old = std::fs::read(root().join("samples/train_small.pickle")).unwrap();
    // The same snapshot with one site's file renamed in place (same length).
    let at = old
        .windows(8)
        .position(|w| w == b"train.py")
        .expect("a frame of train.py");
    let mut new = old.clone();
    new[at..at + 8].copy_from_slice(b"tr4in.py");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snap.pickle");
    let (old_copy, new_copy) = (dir.path().join("old.pickle"), dir.path().join("new.pickle"));
    std::fs::write(&old_copy, &old).unwrap();
    std::fs::write(&new_copy, &new).unwrap();
    let (want_old, want_new) = (top_alone(&old_copy), top_alone(&new_copy));
    assert_ne!(want_old, want_new);
    std::fs::write(&file, &old).unwrap();
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    let f = file.to_str().unwrap().to_string();
    let mut s = Live::start(&[]);
    let argv = ["top", f.as_str(), "--format", "json"];
    let a = s.ask(1, &argv);
    assert_eq!(
        a["stdout"].as_str().unwrap().as_bytes(),
        file_named(&want_old, &old_copy, &f)
    );
    // Rewritten in place with as many bytes, its modification time put back.
    std::fs::write(&file, &new).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), mtime);
    let a = s.ask(2, &argv);
    assert_eq!(
        a["stdout"].as_str().unwrap().as_bytes(),
        file_named(&want_new, &new_copy, &f)
    );
    assert_eq!(a["decodes"], 2);
    assert_eq!(a["evicted"][0]["why"], "replaced", "{a}");
    assert_eq!(a["evicted"][0]["file"], f.as_str());
    // Asked again, the same bytes: no decode.
    assert_eq!(s.ask(3, &argv)["decodes"], 2);
}

/// A report of `from` as it reads when made of `to` (the `file` field names it).
fn file_named(report: &[u8], from: &std::path::Path, to: &str) -> Vec<u8> {
    let quote = |p: &str| serde_json::to_string(p).unwrap();
    String::from_utf8_lossy(report)
        .replace(&quote(from.to_str().unwrap()), &quote(to))
        .into_bytes()
}

#[test]
fn memory_stays_bounded_over_150_versions_of_a_retouched_file() {
    let Some(real) = require_real("ZidongLiu__DeComFL__memory.pickle") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snap.pickle");
    std::fs::copy(&real, &file).unwrap();
    let f = file.to_str().unwrap().to_string();
    let mut s = Live::start(&[]);
    let base = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    // The model's size, as the binary measures it (`MEMLENS_TIMING`'s `model: N bytes`).
    let timing = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(["summary", &f])
        .env("MEMLENS_TIMING", "1")
        .output()
        .unwrap();
    let model_bytes: u64 = String::from_utf8_lossy(&timing.stderr)
        .lines()
        .find_map(|l| {
            l.strip_prefix("model: ")?
                .strip_suffix(" bytes")?
                .parse()
                .ok()
        })
        .expect("a model size line");
    assert!(model_bytes > 500_000, "{model_bytes}");
    let mut rss_at_10 = 0;
    let mut evicted = Vec::new();
    for v in 1..=150u32 {
        // A new version: the same bytes, touched to another modification time.
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(base + std::time::Duration::from_secs(u64::from(v)))
            .unwrap();
        let a = s.ask(v, &["summary", &f, "--format", "json"]);
        assert_eq!(a["exit"], 0, "{a}");
        assert_eq!(a["decodes"], v);
        evicted.push(a["evicted"].clone());
        if v == 10 {
            rss_at_10 = s.rss();
        }
    }
    let grown = s.rss().saturating_sub(rss_at_10);
    // 140 more versions kept would be 140 models; one kept, a few models' worth of slack.
    assert!(
        grown < 8 * model_bytes + (8 << 20),
        "grew {grown} bytes over 140 versions of a {model_bytes}-byte model"
    );
    // Each older version's model went, and the answer that replaced it says so.
    assert_eq!(evicted[0], serde_json::json!([]));
    for e in &evicted[1..] {
        let want = serde_json::json!([{"file": f, "bytes": model_bytes, "why": "replaced"}]);
        assert_eq!(*e, want);
    }
}

#[test]
fn past_the_budget_the_least_recently_used_model_goes() {
    // Models of about 9 KiB (a), 27 KiB (b) and 43 KiB (loop_freed): a and b fit in 60 KiB,
    // all three do not, a and loop_freed do.
    let mut s = Live::start(&["--max-memory", "60KiB"]);
    let (a, b) = ("samples/frag_oom.pickle", "samples/train_small.pickle");
    assert_eq!(s.ask(1, &["summary", a])["evicted"], serde_json::json!([]));
    // Two small models fit: both kept.
    let r = s.ask(2, &["summary", b]);
    assert_eq!(r["evicted"], serde_json::json!([]), "{r}");
    assert_eq!(s.ask(3, &["summary", a])["decodes"], 2);
    // A third, larger one passes the budget: b, the least recently used, goes.
    let r = s.ask(4, &["summary", "samples/loop_freed.pickle"]);
    let gone: Vec<&str> = r["evicted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["file"].as_str().unwrap())
        .collect();
    assert_eq!(gone, [b], "{r}");
    assert!(r["evicted"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["why"] == "budget" && e["bytes"].as_u64().unwrap() > 0));
    assert_eq!(r["decodes"], 3);
    assert_eq!(s.ask(5, &["summary", b])["decodes"], 4);
    let r = s.ask(6, &["summary", "x", "--bogus"]);
    assert_eq!(r["exit"], 2);
    let bad = memlens_in_root(["session", "--max-memory", "lots"]);
    assert_eq!(bad.status.code(), Some(2));
    let e = String::from_utf8_lossy(&bad.stderr);
    assert!(
        e.starts_with("memlens: session: --max-memory: size \"lots\""),
        "{e}"
    );
}
