//! `memlens whatif FILE [--set KEY:VALUE[,KEY:VALUE]]... [--suggest]`

use super::args::{CapacityArgs, DeviceArg, OutputArgs};
use super::pipeline::{self, GlobalOptions};
use super::Outcome;
use crate::allocator::settings::Settings;
use crate::analyze::whatif::{self, WhatifOptions};
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens whatif`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    /// A scenario: allocator settings as PYTORCH_CUDA_ALLOC_CONF writes them, over the file's
    /// own (repeat for more scenarios; several keys in one with commas), e.g.
    /// `--set expandable_segments:True,max_split_size_mb:512`.
    #[arg(long = "set", value_name = "KEY:VALUE")]
    set: Vec<String>,
    /// Also try the standard settings (expandable segments, max_split_size_mb,
    /// roundup_power2_divisions, garbage_collection_threshold) and rank them.
    #[arg(long)]
    suggest: bool,
    #[command(flatten)]
    capacity: CapacityArgs,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let opts = WhatifOptions {
        scenarios: args.set,
        suggest: args.suggest,
        capacity: args.capacity.resolve()?,
        only_device: None,
    };
    // A bad --set is a usage error before the file is read.
    whatif::scenarios(&opts, &Settings::default())?;
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        whatif::run(&l.snap, l.replays(), &opts).map_err(|e| e.to_string())
    })?;
    Ok(Outcome::Ok)
}
