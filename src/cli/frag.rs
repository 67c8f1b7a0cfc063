//! `memlens frag FILE`

use super::{load, output, Format, Outcome};
use memlens::analyze::frag::{self, FragOptions};
use memlens::replay::{self, MomentSpec};
use memlens::{render, Error};
use std::path::PathBuf;

/// Arguments of `memlens frag`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file.
    file: PathBuf,
    /// Moment: end (default), peak, oom, oom:K, start, an event index, or a time_us.
    #[arg(long, default_value = "end", value_parser = |s: &str| s.parse::<MomentSpec>())]
    at: MomentSpec,
    /// Worst segments listed per device.
    #[arg(long, default_value_t = 5)]
    worst: usize,
    /// Only this device.
    #[arg(long)]
    device: Option<u32>,
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
    let opts = FragOptions {
        at: args.at,
        worst: args.worst,
        ..FragOptions::default()
    };
    let mut report = frag::run(&snap, &replays, &opts)
        .map_err(|m| Error::Usage(format!("{}: {m}", memlens::error::quoted_path(&args.file))))?;
    if let Some(d) = args.device {
        report.devices.retain(|x| x.device == d);
    }
    output::emit(
        args.out.output.as_deref(),
        args.out.force,
        |out| match args.format {
            Format::Json => render::json::write(out, &report),
            Format::Text => render::frag::text(out, &args.file.display().to_string(), &report),
        },
    )?;
    Ok(Outcome::Ok)
}
