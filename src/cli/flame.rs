//! `memlens flame FILE`

use super::args::{AtPeak, CostArg, DeviceArg, MomentArgs, OutputArgs, ScopeArgs, SiteArgs};
use super::pipeline::{self, GlobalOptions};
use super::report::FlameFormat;
use super::Outcome;
use crate::analyze::flame;
use crate::analyze::top::TopOptions;
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens flame`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    #[command(flatten)]
    moment: MomentArgs<AtPeak>,
    #[command(flatten)]
    scope: ScopeArgs,
    /// What to weigh stacks by.
    #[arg(long, value_enum, default_value_t = CostArg::Live)]
    cost: CostArg,
    #[command(flatten)]
    sites: SiteArgs,
    /// Keep the caching allocator's own C++ frames (and the tensor-creation frames under an
    /// operator); without, they are folded into the frame that called them.
    #[arg(long)]
    allocator_frames: bool,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs<FlameFormat>,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let opts = TopOptions {
        at: args.moment.at,
        window: args.scope.window(),
        cost: args.cost.into(),
        sites: args.sites.options(),
        allocator_frames: args.allocator_frames,
        ..TopOptions::default()
    };
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        flame::run(&l.snap, l.replays(), &opts)
    })?;
    Ok(Outcome::Ok)
}
