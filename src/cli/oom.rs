//! `memlens oom FILE`

use super::args::{CapacityArgs, DeviceArg, OutputArgs};
use super::pipeline::{self, GlobalOptions};
use super::Outcome;
use crate::analyze::oom::OomOptions;
use crate::compose::oom;
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens oom`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    #[command(flatten)]
    capacity: CapacityArgs,
    /// Call sites listed per OOM.
    #[arg(short = 'n', long, default_value_t = 10)]
    sites: usize,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let mut opts = OomOptions {
        sites: args.sites,
        ..OomOptions::default()
    };
    if let Some((bytes, source)) = args.capacity.resolve()? {
        opts.capacity_bytes = Some(bytes);
        opts.capacity_source = Some(source);
    }
    let capacity = opts.capacity_bytes.zip(opts.capacity_source.clone());
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        let mut r = oom::run(&l.snap, l.replays(), &opts)?;
        oom::attach_fit(&l.snap, l.replays(), &mut r, capacity.clone())?;
        Ok(r)
    })?;
    Ok(Outcome::Ok)
}
