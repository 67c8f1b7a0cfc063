//! `memlens lines FILE`

use super::args::{AtPeak, DeviceArg, MomentArgs, OutputArgs};
use super::pipeline::{self, GlobalOptions};
use super::Outcome;
use crate::analyze::lines::{self, LineCost, LinesOptions};
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens lines`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    #[command(flatten)]
    moment: MomentArgs<AtPeak>,
    /// What to count per line: live at the moment, allocated over the trace, or bytes ×
    /// microseconds alive (lifetime).
    #[arg(long, value_enum, default_value_t = CostArg::Live)]
    cost: CostArg,
    /// Lines shown per device in text (JSON has every line).
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,
    /// Directory holding the program's source: the hottest files are shown around their hot
    /// lines, each line beside its bytes (without it, the recorded paths are read where they
    /// exist). Source is only read.
    #[arg(long, value_name = "DIR")]
    source_root: Option<PathBuf>,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs,
}

/// The costs of `lines`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum CostArg {
    /// Requested bytes live at the moment.
    Live,
    /// Bytes of every allocation of the trace.
    Allocated,
    /// Bytes × microseconds alive (needs time_us).
    Lifetime,
}

impl CostArg {
    /// The cost counted.
    pub fn cost(self) -> LineCost {
        match self {
            CostArg::Live => LineCost::Live,
            CostArg::Allocated => LineCost::Allocated,
            CostArg::Lifetime => LineCost::Lifetime,
        }
    }
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    super::source::source_dir("--source-root", args.source_root.as_deref())?;
    let opts = LinesOptions {
        at: args.moment.at,
        cost: args.cost.cost(),
        top: args.top,
    };
    let root = args.source_root.as_deref();
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        let mut r = lines::run(&l.snap, l.replays(), &opts)?;
        lines::annotate(&mut r, root, &super::source::read_source);
        Ok(r)
    })?;
    Ok(Outcome::Ok)
}
