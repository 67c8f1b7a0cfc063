//! `memlens timeline FILE`

use super::{load, output, Outcome};
use memlens::analyze::timeline::{self, TimelineOptions};
use memlens::replay::{self, WindowSpec};
use memlens::{render, Error};
use std::path::PathBuf;

/// Arguments of `memlens timeline`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file.
    file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = TimelineFormat::Csv)]
    format: TimelineFormat,
    /// Most points per device (0 = every event); each bucket's maximum is kept exactly.
    #[arg(long, default_value_t = 2000)]
    points: usize,
    /// Only events A:B (indices or time_us; either side may be empty).
    #[arg(long, value_parser = |s: &str| s.parse::<WindowSpec>())]
    window: Option<WindowSpec>,
    /// Only step N (1-based) of the loop (ProfilerStep annotations, optimizer steps, ...).
    #[arg(long)]
    step: Option<usize>,
    /// Only the span of this annotation, e.g. `ProfilerStep#3` or `Optimizer.step#AdamW.step`.
    #[arg(long)]
    phase: Option<String>,
    /// Only this device.
    #[arg(long)]
    device: Option<u32>,
    #[command(flatten)]
    out: super::args::OutputArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum TimelineFormat {
    Csv,
    Json,
    Svg,
}

/// Runs the command.
pub fn run(args: Args) -> Result<Outcome, Error> {
    let snap = load(&args.file)?;
    let mut replays = replay::replay(&snap);
    if let Some(d) = args.device {
        replays.retain(|r| r.device == d);
        if replays.is_empty() {
            return Err(Error::Usage(format!(
                "{}: device {d} has no trace",
                memlens::error::quoted_path(&args.file)
            )));
        }
    }
    let opts = TimelineOptions {
        points: args.points,
        window: memlens::replay::WindowSpec {
            step: args.step,
            phase: args.phase.clone(),
            ..args.window.unwrap_or_default()
        },
    };
    let report = timeline::run(&snap, &replays, &opts)
        .map_err(|m| Error::Usage(format!("{}: {m}", memlens::error::quoted_path(&args.file))))?;
    output::emit(
        args.out.output.as_deref(),
        args.out.force,
        |out| match args.format {
            TimelineFormat::Csv => render::timeline::csv(out, &report),
            TimelineFormat::Json => render::json::write(out, &report),
            TimelineFormat::Svg => {
                render::timeline::svg(out, &args.file.display().to_string(), &report)
            }
        },
    )?;
    Ok(Outcome::Ok)
}
