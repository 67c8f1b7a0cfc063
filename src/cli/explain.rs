//! `memlens explain "MESSAGE"` (or `--message-file F`, or standard input: `-`, or no argument
//! with the message piped in).

use super::args::{CapacityArgs, OutputArgs};
use super::{output, Outcome};
use crate::analyze::explain;
use crate::Error;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};

/// Arguments of `memlens explain`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The OOM message (quoted, or as several words); a whole traceback or log works too.
    /// `-` (or nothing, with standard input not a terminal) reads it from standard input.
    message: Vec<String>,
    /// Read the message from this file (`-` for standard input) instead.
    #[arg(long, value_name = "FILE", conflicts_with = "message")]
    message_file: Option<PathBuf>,
    /// The GPU's capacity, when the message lacks it.
    #[command(flatten)]
    capacity: CapacityArgs,
    #[command(flatten)]
    out: OutputArgs,
}

impl Args {
    /// Whether the message is to be read from standard input (`-`, `--message-file -`, or no
    /// message at all): `memlens session` refuses that, its standard input being its requests.
    pub fn reads_standard_input(&self) -> bool {
        self.message == ["-"]
            || (self.message.is_empty()
                && self
                    .message_file
                    .as_ref()
                    .map_or(true, |p| p.as_os_str() == "-"))
    }
}

/// The longest message read (from standard input or `--message-file`): an OOM message with
/// its traceback is a few KiB; more is refused rather than read without end (`/dev/zero`).
const MAX_MESSAGE: u64 = 1 << 20;

/// Reads at most [`MAX_MESSAGE`] bytes of `r` (`path` names it in errors); invalid UTF-8
/// becomes U+FFFD, the same wherever the message comes from.
fn read_message(path: &Path, r: impl Read) -> Result<String, Error> {
    let mut bytes = Vec::new();
    r.take(MAX_MESSAGE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, &e))?;
    if bytes.len() as u64 > MAX_MESSAGE {
        return Err(Error::Input {
            path: path.to_path_buf(),
            location: format!("byte {MAX_MESSAGE}"),
            message: "the message is longer than 1 MiB; give the OOM message or the end of the log (tail -c 100k LOG)".into(),
            truncated: false,
        });
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn read_input(args: &Args) -> Result<String, Error> {
    if !args.message.is_empty() && args.message != ["-"] {
        return Ok(args.message.join(" "));
    }
    let read_stdin = || read_message(Path::new("<stdin>"), std::io::stdin().lock());
    if args.message == ["-"] {
        return read_stdin();
    }
    match &args.message_file {
        Some(p) if p.as_os_str() == "-" => read_stdin(),
        Some(p) => read_message(p, std::fs::File::open(p).map_err(|e| Error::io(p, &e))?),
        None if std::io::stdin().is_terminal() => Err(Error::Usage(
            "explain: expected the OOM message as an argument, with --message-file FILE, or on standard input".into(),
        )),
        None => read_stdin(),
    }
}

/// Runs the command (it reads no snapshot, so takes no `--device`).
pub fn run(args: Args) -> Result<Outcome, Error> {
    let mut opts = explain::Options::default();
    if let Some((bytes, source)) = args.capacity.resolve()? {
        opts.capacity_bytes = Some(bytes);
        opts.capacity_source = Some(source);
    }
    let text = read_input(&args)?;
    let report = explain::run(&text, &opts)?;
    output::report(&args.out, &report, "", None)?;
    Ok(Outcome::Ok)
}
