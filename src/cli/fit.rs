//! `memlens fit FILE`

use super::args::{parse_moment, AtPeak, CapacityArgs, DeviceArg, OutputArgs};
use super::pipeline::{self, GlobalOptions};
use super::Outcome;
use crate::analyze::fit::{self, FitOptions};
use crate::replay::MomentSpec;
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens fit`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    /// Moment: oom (the first OOM), peak, end, oom:K, an event index or a time_us. Default:
    /// each device's first OOM, else its peak.
    #[arg(long, value_name = "MOMENT", value_parser = parse_moment::<AtPeak>)]
    at: Option<MomentSpec>,
    #[command(flatten)]
    capacity: CapacityArgs,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let mut opts = FitOptions {
        at: args.at,
        ..FitOptions::default()
    };
    if let Some((bytes, source)) = args.capacity.resolve()? {
        opts.capacity_bytes = Some(bytes);
        opts.capacity_source = Some(source);
    }
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        fit::run(&l.snap, l.replays(), &opts)
    })?;
    Ok(Outcome::Ok)
}
