//! `memlens categories FILE`

use super::args::{AtPeak, DeviceArg, MomentArgs, OutputArgs};
use super::pipeline::{self, GlobalOptions};
use super::Outcome;
use crate::analyze::categories::{self, CategoryOptions};
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens categories`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    #[command(flatten)]
    moment: MomentArgs<AtPeak>,
    /// Extra rules, tried first: one `category: regex` per line, matched on `filename:line:name`.
    #[arg(long)]
    rules: Option<PathBuf>,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let mut opts = CategoryOptions {
        at: args.moment.at,
        ..CategoryOptions::default()
    };
    if let Some(p) = &args.rules {
        let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, &e))?;
        opts.rules = categories::parse_rules(&text)
            .map_err(|m| Error::Usage(format!("{}: {m}", crate::error::quoted_path(p))))?;
    }
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        categories::run(&l.snap, l.replays(), &opts)
    })?;
    Ok(Outcome::Ok)
}
