//! `memlens top FILE`

use super::{load, output, Format, Outcome};
use memlens::analyze::sites::SiteOptions;
use memlens::analyze::top::{self, GroupBy, TopOptions};
use memlens::replay::{self, MomentSpec, WindowSpec};
use memlens::{render, Error};
use std::path::PathBuf;

/// Arguments of `memlens top`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file.
    file: PathBuf,
    /// Moment: peak, end, start, oom, oom:K, an event index, or a time_us.
    #[arg(long, default_value = "peak", value_parser = parse_moment)]
    at: MomentSpec,
    /// Limit every cost to events A:B (indices or time_us; either side may be empty).
    #[arg(long, value_parser = parse_window)]
    window: Option<WindowSpec>,
    /// Only step N (1-based) of the loop (ProfilerStep annotations, optimizer steps, ...).
    #[arg(long)]
    step: Option<usize>,
    /// Only the span of this annotation, e.g. `ProfilerStep#3` or `Optimizer.step#AdamW.step`.
    #[arg(long)]
    phase: Option<String>,
    /// Group by call site, whole stack, file or function.
    #[arg(long, value_enum, default_value_t = By::Site)]
    by: By,
    /// What to count: live at the moment, allocated in the window, bytes × lifetime, or never freed.
    #[arg(long, value_enum, default_value_t = super::args::CostArg::Live)]
    cost: super::args::CostArg,
    /// Rows per device.
    #[arg(short = 'n', long, default_value_t = 20)]
    limit: usize,
    /// Show each group's biggest stack.
    #[arg(long)]
    full_stacks: bool,
    /// Let frames inside these packages be sites (only `torch` is known).
    #[arg(long, value_parser = ["torch"])]
    keep: Vec<String>,
    /// Only this device.
    #[arg(long)]
    device: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    #[command(flatten)]
    out: super::args::OutputArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum By {
    Site,
    Stack,
    File,
    Function,
}

fn parse_moment(s: &str) -> Result<MomentSpec, String> {
    s.parse()
}

fn parse_window(s: &str) -> Result<WindowSpec, String> {
    s.parse()
}

/// Runs the command.
pub fn run(args: Args) -> Result<Outcome, Error> {
    let snap = load(&args.file)?;
    let mut replays = replay::replay(&snap);
    if let Some(d) = args.device {
        if snap.device(d).is_none() {
            return Err(Error::Usage(format!(
                "{}: no device {d} in the snapshot",
                memlens::error::quoted_path(&args.file)
            )));
        }
        replays.retain(|r| r.device == d);
    }
    let opts = TopOptions {
        at: args.at,
        window: memlens::replay::WindowSpec {
            step: args.step,
            phase: args.phase.clone(),
            ..args.window.unwrap_or_default()
        },
        by: match args.by {
            By::Site => GroupBy::Site,
            By::Stack => GroupBy::Stack,
            By::File => GroupBy::File,
            By::Function => GroupBy::Function,
        },
        cost: args.cost.into(),
        limit: args.limit,
        sites: SiteOptions {
            keep_torch: args.keep.iter().any(|k| k == "torch"),
        },
        full_stacks: args.full_stacks,
    };
    let mut report = top::run(&snap, &replays, &opts)
        .map_err(|m| Error::Usage(format!("{}: {m}", memlens::error::quoted_path(&args.file))))?;
    if let Some(d) = args.device {
        report.final_state_devices.retain(|x| x.device == d);
    }
    output::emit(
        args.out.output.as_deref(),
        args.out.force,
        |out| match args.format {
            Format::Json => render::json::write(out, &report),
            Format::Text => render::top::text(out, &args.file.display().to_string(), &report),
        },
    )?;
    Ok(Outcome::Ok)
}
