//! `memlens report FILE -o report.html`

use super::args::{AtPeak, DeviceArg, OutputArgs, PageArgs, ScopeArgs, AT_HELP};
use super::pipeline::{self, GlobalOptions};
use super::report::ReportFormat;
use super::Outcome;
use memlens::compose::page;
use memlens::replay::MomentSpec;
use memlens::Error;
use std::path::PathBuf;

/// Arguments of `memlens report`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    /// A moment shown besides the peak, the OOMs and the end.
    #[arg(long, value_name = "MOMENT", help = AT_HELP,
          value_parser = super::args::parse_moment::<AtPeak>)]
    at: Option<MomentSpec>,
    #[command(flatten)]
    scope: ScopeArgs,
    #[command(flatten)]
    page: PageArgs,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs<ReportFormat>,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let opts = args.page.options(args.at, args.scope.window())?;
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        page::run(&l.snap, l.replays(), &opts)
    })?;
    Ok(Outcome::Ok)
}
