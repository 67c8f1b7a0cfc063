//! `memlens frag FILE`

use super::args::{AtEnd, DeviceArg, MomentArgs, OutputArgs};
use super::pipeline::{self, GlobalOptions};
use super::Outcome;
use memlens::analyze::frag::{self, FragOptions};
use memlens::Error;
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
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let opts = FragOptions {
        at: args.moment.at,
        worst: args.worst,
        ..FragOptions::default()
    };
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        frag::run(&l.snap, l.replays(), &opts)
    })?;
    Ok(Outcome::Ok)
}
