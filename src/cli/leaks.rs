//! `memlens leaks FILE`: exit 1 when memory grows step after step.

use super::args::{DeviceArg, OutputArgs};
use super::pipeline::{self, GlobalOptions};
use super::report::LeaksView;
use super::Outcome;
use crate::analyze::leaks::{self, LeaksOptions};
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens leaks`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    /// Steps skipped before growth is measured.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Smallest growth per step worth reporting, in bytes.
    #[arg(long, default_value_t = 64 << 10)]
    min_bytes_per_step: u64,
    /// List every step in text (by default the steps are summarized in two lines).
    #[arg(long)]
    steps: bool,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let opts = LeaksOptions {
        warmup: args.warmup,
        min_bytes_per_step: args.min_bytes_per_step,
        ..LeaksOptions::default()
    };
    let view = pipeline::report(&args.file, g, args.device, &args.out, |l| {
        Ok(LeaksView {
            report: leaks::run(&l.snap, l.replays(), &opts),
            all_steps: args.steps,
        })
    })?;
    Ok(if view.report.findings.is_empty() {
        Outcome::Ok
    } else {
        Outcome::Findings
    })
}
