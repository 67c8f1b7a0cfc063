//! `memlens frag FILE`

use super::args::{AtEnd, DeviceArg, MomentArgs, OutputArgs};
use super::pipeline::{self, GlobalOptions};
use super::Outcome;
use crate::analyze::frag::FragOptions;
use crate::analyze::pinners;
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens frag`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    #[command(flatten)]
    moment: MomentArgs<AtEnd>,
    /// Worst segments listed per device.
    #[arg(long, default_value_t = 5)]
    worst: usize,
    /// `pool`: reserved vs active bytes over the trace per (pool, stream), peaks, and the
    /// ghost blocks (live at the dump, never allocated in the trace).
    #[arg(long, value_enum)]
    by: Option<FragBy>,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs,
}

/// What `--by` groups.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragBy {
    /// Private pool and stream, over the whole trace.
    Pool,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let opts = FragOptions {
        at: args.moment.at,
        worst: args.worst,
        by_pool: args.by == Some(FragBy::Pool),
        ..FragOptions::default()
    };
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        pinners::frag_report(&l.snap, l.replays(), &opts)
    })?;
    Ok(Outcome::Ok)
}
