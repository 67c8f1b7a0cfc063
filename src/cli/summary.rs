//! `memlens summary FILE...`

use super::args::{DeviceArg, OutputArgs};
use super::pipeline::{GlobalOptions, Loaded};
use super::report::Summaries;
use super::{output, Outcome};
use crate::analyze::summary;
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens summary`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot files (pickle, gzip, zstd or JSON; `-` reads standard input).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs,
}

/// Runs the command. With several files, one that cannot be read (or lacks `--device`) is
/// one line on stderr; the others are reported, then exit 2.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    super::args::stdin_once(args.files.iter().map(|p| p.as_path()))?;
    let mut files = Vec::new();
    let mut first_error = None;
    for f in &args.files {
        match Loaded::open(f, g, args.device) {
            Ok(l) => files.push((l.title(), summary::run(&l.snap))),
            Err(e) => {
                if args.files.len() == 1 {
                    return Err(e);
                }
                eprintln!(
                    "memlens: {}",
                    crate::render::visible::visible(&e.to_string())
                );
                first_error.get_or_insert(e);
            }
        }
    }
    let read = files.len();
    let report = Summaries {
        many: args.files.len() > 1,
        files,
    };
    output::report(&args.out, &report, "", None)?;
    match first_error {
        Some(e) => Err(Error::Usage(format!(
            "{} of {} files could not be read (first: {e})",
            args.files.len() - read,
            args.files.len()
        ))),
        None => Ok(Outcome::Ok),
    }
}
