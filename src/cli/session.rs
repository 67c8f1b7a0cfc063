//! `memlens session`: command lines read from standard input, one JSON object per line
//! (`{"id": 7, "argv": ["top", "snap.pickle", "--at", "end", "--format", "json"]}`), each
//! answered with one line on standard output (`{"id": 7, "exit": 0, "stdout": "...",
//! "error": null, "decodes": 1}`): what the command would print, its exit status, its one-line
//! error. Each file is decoded once per session ([`super::pipeline::cache_decodes`]): the
//! notebook API (`memlens.open`) keeps one session per handle. Commands that serve, read
//! standard input or print beside their report are refused.

use super::output;
use super::Outcome;
use memlens::Error;
use std::io::{BufRead, Write};

/// Arguments of `memlens session` (none).
#[derive(clap::Args, Debug)]
pub struct Args {}

/// The commands a session answers: every report that prints one document.
const ANSWERED: &[&str] = &[
    "summary",
    "top",
    "timeline",
    "frag",
    "oom",
    "leaks",
    "categories",
    "fit",
    "explain",
    "diff",
    "check",
    "whatif",
    "report",
    "flame",
];

#[derive(serde::Deserialize)]
struct Request {
    id: serde_json::Value,
    argv: Vec<String>,
}

#[derive(serde::Serialize)]
struct Answer<'a> {
    id: &'a serde_json::Value,
    exit: i32,
    stdout: String,
    error: Option<String>,
    decodes: u64,
}

/// Answers lines until standard input ends.
pub fn run(_: Args) -> Result<Outcome, Error> {
    super::pipeline::cache_decodes();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| Error::Usage(format!("session: standard input: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = match serde_json::from_str::<Request>(&line) {
            Ok(rq) => answer(rq),
            Err(e) => serde_json::json!({
                "id": null,
                "exit": 2,
                "stdout": "",
                "error": format!("memlens: session: expected {{\"id\": ..., \"argv\": [...]}}: {e}"),
                "decodes": super::pipeline::decodes(),
            }),
        };
        let mut text = serde_json::to_vec(&answer).unwrap_or_default();
        text.push(b'\n');
        out.write_all(&text)
            .and_then(|_| out.flush())
            .map_err(|e| Error::Usage(format!("session: standard output: {e}")))?;
    }
    Ok(Outcome::Ok)
}

fn answer(rq: Request) -> serde_json::Value {
    let (exit, stdout, error) = run_one(&rq.argv);
    serde_json::to_value(Answer {
        id: &rq.id,
        exit,
        stdout,
        error,
        decodes: super::pipeline::decodes(),
    })
    .unwrap_or(serde_json::Value::Null)
}

/// Runs one command line with its report captured: (exit status, what it printed, its error).
fn run_one(argv: &[String]) -> (i32, String, Option<String>) {
    let refuse = |m: String| (2, String::new(), Some(format!("memlens: {m}")));
    let Some(command) = argv.first() else {
        return refuse("session: an empty command line".into());
    };
    if !ANSWERED.contains(&command.as_str()) {
        return refuse(format!(
            "session: {command:?} is not answered here (only {})",
            ANSWERED.join(", ")
        ));
    }
    if argv.iter().any(|a| a == "-") {
        return refuse("session: standard input is the session's own: name files".into());
    }
    let cli = match <super::Cli as clap::Parser>::try_parse_from(
        std::iter::once("memlens".to_string()).chain(argv.iter().cloned()),
    ) {
        Ok(c) => c,
        Err(e) => {
            let text = e.to_string();
            let line = text
                .lines()
                .next()
                .unwrap_or("invalid arguments")
                .to_string();
            return (2, String::new(), Some(line));
        }
    };
    let (result, printed) = output::captured(|| super::execute(cli));
    let stdout = String::from_utf8_lossy(&printed).into_owned();
    match result {
        Ok(Outcome::Ok) => (0, stdout, None),
        Ok(Outcome::Findings) => (1, stdout, None),
        Ok(Outcome::InputErrors) => (2, stdout, None),
        Err(e) => (
            2,
            stdout,
            Some(format!(
                "memlens: {}",
                memlens::render::visible::visible(&e.to_string())
            )),
        ),
    }
}
