//! `memlens timeline FILE`

use super::args::{DeviceArg, OutputArgs, ScopeArgs};
use super::pipeline::{self, GlobalOptions};
use super::report::TimelineFormat;
use super::Outcome;
use crate::analyze::timeline::{self, TimelineOptions};
use crate::error::quoted_path;
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens timeline`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    /// Most points per device (0 = every event); each bucket's maximum is kept exactly.
    #[arg(long, default_value_t = 2000)]
    points: usize,
    #[command(flatten)]
    scope: ScopeArgs,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs<TimelineFormat>,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let opts = TimelineOptions {
        points: args.points,
        window: args.scope.window(),
    };
    let report = pipeline::report(&args.file, g, args.device, &args.out, |l| {
        // The device is there (the device rule), but only its final state is.
        if let (Some(d), true) = (args.device.device, l.replays().is_empty()) {
            return Err(format!("device {d} has no trace"));
        }
        timeline::run(&l.snap, l.replays(), &opts)
    })?;
    // CSV has no room for a note: what is absent goes to stderr (JSON and SVG carry it).
    if args.out.format == TimelineFormat::Csv {
        for a in &report.absent {
            eprintln!(
                "memlens: {}: note: {}",
                quoted_path(&args.file),
                crate::render::visible::visible(&a.message)
            );
        }
    }
    Ok(Outcome::Ok)
}
