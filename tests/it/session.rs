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
