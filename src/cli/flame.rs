//! `memlens flame FILE`

use super::{load, output, Outcome};
use memlens::analyze::flame;
use memlens::analyze::sites::SiteOptions;
use memlens::analyze::top::TopOptions;
use memlens::replay::{self, MomentSpec, WindowSpec};
use memlens::{render, Error};
use std::path::PathBuf;

/// Arguments of `memlens flame`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file.
    file: PathBuf,
    /// Moment: peak, end, start, oom, oom:K, an event index, or a time_us.
    #[arg(long, default_value = "peak", value_parser = |s: &str| s.parse::<MomentSpec>())]
    at: MomentSpec,
    /// Limit the cost to events A:B.
    #[arg(long, value_parser = |s: &str| s.parse::<WindowSpec>())]
    window: Option<WindowSpec>,
    /// Only step N (1-based) of the loop (ProfilerStep annotations, optimizer steps, ...).
    #[arg(long)]
    step: Option<usize>,
    /// Only the span of this annotation, e.g. `ProfilerStep#3` or `Optimizer.step#AdamW.step`.
    #[arg(long)]
    phase: Option<String>,
    /// What to weigh stacks by.
    #[arg(long, value_enum, default_value_t = super::args::CostArg::Live)]
    cost: super::args::CostArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FlameFormat::Svg)]
    format: FlameFormat,
    /// Only this device.
    #[arg(long)]
    device: Option<u32>,
    #[command(flatten)]
    out: super::args::OutputArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum FlameFormat {
    Svg,
    Folded,
    Speedscope,
}

/// Runs the command.
pub fn run(args: Args) -> Result<Outcome, Error> {
    let snap = load(&args.file)?;
    let mut replays = replay::replay(&snap);
    if let Some(d) = args.device {
        replays.retain(|r| r.device == d);
    }
    let opts = TopOptions {
        at: args.at,
        window: memlens::replay::WindowSpec {
            step: args.step,
            phase: args.phase.clone(),
            ..args.window.unwrap_or_default()
        },
        cost: args.cost.into(),
        sites: SiteOptions::default(),
        ..TopOptions::default()
    };
    let mut report = flame::run(&snap, &replays, &opts)
        .map_err(|m| Error::Usage(format!("{}: {m}", memlens::error::quoted_path(&args.file))))?;
    if let Some(d) = args.device {
        report.devices.retain(|x| x.device == d);
    }
    let title = args.file.display().to_string();
    output::emit(
        args.out.output.as_deref(),
        args.out.force,
        |out| match args.format {
            FlameFormat::Svg => render::flame::svg(out, &title, &report),
            FlameFormat::Folded => render::flame::folded(out, &report),
            FlameFormat::Speedscope => render::flame::speedscope(out, &title, &report),
        },
    )?;
    Ok(Outcome::Ok)
}
