//! `memlens session`: command lines read from standard input, one JSON object per line
//! (`{"id": 7, "argv": ["top", "snap.pickle", "--at", "end", "--format", "json"]}`), each
//! answered with one line on standard output (`{"id": 7, "exit": 0, "stdout": "...",
//! "error": null, "decodes": 1, "evicted": []}`): what the command would print, its exit
//! status, its one-line error, and the models dropped meanwhile. The id comes back as it came
//! (the same JSON text). Each file is decoded once per version, within `--max-memory`
//! ([`super::pipeline::cache_decodes`], [`super::models`]): the notebook API
//! (`memlens.open`) keeps one session per handle, the MCP server one for its life. Commands
//! that serve, read standard input (under any name) or print beside their report are refused,
//! and so are FIFOs, devices and sockets ([`super::session_files`]); a line that is not UTF-8
//! or not a request is answered with an error, and the session goes on.

use super::models::{Evicted, DEFAULT_BUDGET};
use super::output;
use super::session_files;
use super::Outcome;
use crate::Error;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// Arguments of `memlens session`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Memory for the decoded models kept (e.g. 8GiB; default 4GiB): past it the least
    /// recently used go, each said in the answer (`evicted`); the newest always stays.
    #[arg(long, value_name = "SIZE")]
    max_memory: Option<String>,
}

/// The commands a session answers: every report that prints one document.
const ANSWERED: &[&str] = &[
    "summary",
    "top",
    "lines",
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
struct Request<'a> {
    #[serde(borrow)]
    id: &'a RawValue,
    argv: Vec<String>,
    /// Files the client opened: a snapshot named NAME is read from PATH (`/proc/PID/fd/N`).
    #[serde(default)]
    opened: HashMap<PathBuf, PathBuf>,
}

#[derive(serde::Serialize)]
struct Answer<'a> {
    id: Option<&'a RawValue>,
    exit: i32,
    stdout: String,
    error: Option<String>,
    decodes: u64,
    evicted: Vec<Evicted>,
}

/// Answers lines until standard input ends.
pub fn run(args: Args) -> Result<Outcome, Error> {
    let budget = match &args.max_memory {
        Some(s) => super::size::parse_size(s).map_err(|e| match e {
            Error::Usage(m) => Error::Usage(format!("session: --max-memory: {m}")),
            e => e,
        })?,
        None => DEFAULT_BUDGET,
    };
    super::pipeline::cache_decodes(budget);
    let proto = session_files::protect_stdio()
        .map_err(|e| Error::Usage(format!("session: standard input: {e}")))?;
    let mut input = std::io::BufReader::new(proto);
    let mut out = std::io::stdout().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = input
            .read_until(b'\n', &mut line)
            .map_err(|e| Error::Usage(format!("session: standard input: {e}")))?;
        if n == 0 {
            break;
        }
        let Some(mut text) = answer_line(&line) else {
            continue;
        };
        text.push(b'\n');
        out.write_all(&text)
            .and_then(|_| out.flush())
            .map_err(|e| Error::Usage(format!("session: standard output: {e}")))?;
    }
    Ok(Outcome::Ok)
}

/// The answer to one line (none to a blank one).
fn answer_line(bytes: &[u8]) -> Option<Vec<u8>> {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            return Some(refusal(format!(
                "memlens: session: the line is not UTF-8 (byte {}): expected {{\"id\": ..., \"argv\": [...]}}",
                e.valid_up_to()
            )))
        }
    };
    if text.trim().is_empty() {
        return None;
    }
    Some(match serde_json::from_str::<Request>(text) {
        Ok(rq) => answer(rq),
        Err(e) => refusal(format!(
            "memlens: session: expected {{\"id\": ..., \"argv\": [...]}}: {e}"
        )),
    })
}

/// The answer to a line that is no request (its id unknown: null).
fn refusal(error: String) -> Vec<u8> {
    encode(&Answer {
        id: None,
        exit: 2,
        stdout: String::new(),
        error: Some(error),
        decodes: super::pipeline::decodes(),
        evicted: super::pipeline::evicted(),
    })
}

fn encode(a: &Answer) -> Vec<u8> {
    serde_json::to_vec(a).unwrap_or_default()
}

fn answer(rq: Request) -> Vec<u8> {
    session_files::set_opened(Some(rq.opened));
    let (exit, stdout, error) = run_one(&rq.argv);
    session_files::set_opened(None);
    encode(&Answer {
        id: Some(rq.id),
        exit,
        stdout,
        error,
        decodes: super::pipeline::decodes(),
        evicted: super::pipeline::evicted(),
    })
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
    if let Err(m) = session_files::check_argv(argv) {
        return refuse(m);
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
    if let super::Command::Explain(a) = &cli.command {
        if a.reads_standard_input() {
            return refuse(
                "session: explain reads the message from standard input, the session's own: give the message or --message-file FILE".into(),
            );
        }
    }
    let (result, printed) = output::captured(|| super::execute(cli));
    // A session answers on standard output only: what a command wrote is not said.
    drop(output::take_written());
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
                crate::render::visible::visible(&e.to_string())
            )),
        ),
    }
}
