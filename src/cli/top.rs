//! `memlens top FILE`

use super::args::{AtPeak, CostArg, DeviceArg, MomentArgs, OutputArgs, ScopeArgs, SiteArgs};
use super::pipeline::{self, GlobalOptions};
use super::Outcome;
use crate::analyze::top::{self, GroupBy, TopOptions};
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens top`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    #[command(flatten)]
    moment: MomentArgs<AtPeak>,
    #[command(flatten)]
    scope: ScopeArgs,
    /// Group by call site, whole stack, file or function (site, stack, file, function), or by
    /// the user metadata of each allocation (`metadata`: the whole string; `metadata:KEY`: the
    /// value of KEY in its JSON).
    #[arg(long, value_parser = parse_by, default_value = "site")]
    by: (By, Option<String>),
    /// What to count: live at the moment, allocated in the window, bytes × lifetime, or never freed.
    #[arg(long, value_enum, default_value_t = CostArg::Live)]
    cost: CostArg,
    /// Rows per device.
    #[arg(short = 'n', long, default_value_t = 20)]
    limit: usize,
    /// Show each group's biggest stack.
    #[arg(long)]
    full_stacks: bool,
    #[command(flatten)]
    sites: SiteArgs,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Clone, Copy, Debug)]
enum By {
    Site,
    Stack,
    File,
    Function,
    Metadata,
}

fn parse_by(s: &str) -> Result<(By, Option<String>), String> {
    Ok(match s {
        "site" => (By::Site, None),
        "stack" => (By::Stack, None),
        "file" => (By::File, None),
        "function" => (By::Function, None),
        "metadata" => (By::Metadata, None),
        _ => match s.strip_prefix("metadata:") {
            Some(k) if !k.is_empty() => (By::Metadata, Some(k.to_string())),
            _ => {
                return Err(format!(
                    "`{s}`: expected site, stack, file, function, metadata or metadata:KEY"
                ))
            }
        },
    })
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let opts = TopOptions {
        at: args.moment.at,
        window: args.scope.window(),
        by: match args.by.0 {
            By::Site => GroupBy::Site,
            By::Stack => GroupBy::Stack,
            By::File => GroupBy::File,
            By::Function => GroupBy::Function,
            By::Metadata => GroupBy::Metadata,
        },
        metadata_key: args.by.1.clone(),
        cost: args.cost.into(),
        limit: args.limit,
        sites: args.sites.options(),
        full_stacks: args.full_stacks,
        allocator_frames: false,
        stack_ends: None,
    };
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        top::run(&l.snap, l.replays(), &opts)
    })?;
    Ok(Outcome::Ok)
}
