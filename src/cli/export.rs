//! `memlens export FILE --format perfetto`: the snapshot as a Chrome trace-event file for
//! Perfetto UI and `chrome://tracing` (see `analyze::export::perfetto`).

use super::args::{DeviceArg, OutputArgs, ScopeArgs};
use super::pipeline::{self, GlobalOptions};
use super::report::ExportFormat;
use super::Outcome;
use crate::analyze::export::perfetto::{self, PerfettoOptions};
use crate::error::quoted_path;
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens export`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    /// Most counter samples per device (0 = one per event); every series' maximum is kept.
    #[arg(long, default_value_t = 20_000)]
    points: usize,
    /// The largest allocations drawn as spans named by their site (0 = none).
    #[arg(long, default_value_t = 20, value_name = "N")]
    largest: usize,
    /// Count timestamps from this many ns since the epoch: the `baseTimeNanoseconds` of a
    /// torch.profiler trace of the same run (its `ts` count from it), so the two line up.
    #[arg(long, value_name = "NS", default_value_t = 0)]
    base_ns: i64,
    #[command(flatten)]
    scope: ScopeArgs,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs<ExportFormat>,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let opts = PerfettoOptions {
        points: args.points,
        largest: args.largest,
        window: args.scope.window(),
        base_ns: args.base_ns,
    };
    let export = pipeline::report(&args.file, g, args.device, &args.out, |l| {
        if let (Some(d), true) = (args.device.device, l.replays().is_empty()) {
            return Err(format!("device {d} has no trace"));
        }
        perfetto::run(&l.snap, l.replays(), &opts)
    })?;
    // The trace has room for notes only in `otherData`: say them where a person sees them.
    for n in &export.notes {
        eprintln!(
            "memlens: {}: note: {}",
            quoted_path(&args.file),
            crate::render::visible::visible(n)
        );
    }
    Ok(Outcome::Ok)
}
