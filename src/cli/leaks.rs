//! `memlens leaks FILE`: exit 1 when memory grows step after step.

use super::{load, output, Format, Outcome};
use memlens::analyze::leaks::{self, LeaksOptions};
use memlens::{render, replay, Error};
use std::path::PathBuf;

/// Arguments of `memlens leaks`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file.
    file: PathBuf,
    /// Steps skipped before growth is measured.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Smallest growth per step worth reporting, in bytes.
    #[arg(long, default_value_t = 64 << 10)]
    min_bytes_per_step: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    #[command(flatten)]
    out: super::args::OutputArgs,
}

/// Runs the command.
pub fn run(args: Args) -> Result<Outcome, Error> {
    let snap = load(&args.file)?;
    let replays = replay::replay(&snap);
    let opts = LeaksOptions {
        warmup: args.warmup,
        min_bytes_per_step: args.min_bytes_per_step,
        ..LeaksOptions::default()
    };
    let report = leaks::run(&snap, &replays, &opts);
    output::emit(
        args.out.output.as_deref(),
        args.out.force,
        |out| match args.format {
            Format::Json => render::json::write(out, &report),
            Format::Text => render::leaks::text(out, &args.file.display().to_string(), &report),
        },
    )?;
    Ok(if report.findings.is_empty() {
        Outcome::Ok
    } else {
        Outcome::Findings
    })
}
