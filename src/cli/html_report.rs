//! `memlens report FILE -o report.html`

use super::args::{AtPeak, CapacityArgs, DeviceArg, OutputArgs, ScopeArgs, AT_HELP};
use super::pipeline::{self, GlobalOptions};
use super::report::ReportFormat;
use super::Outcome;
use memlens::analyze::page::{self, bands::BandOptions, PageOptions};
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
    capacity: CapacityArgs,
    /// Most allocations drawn as bands of their own in the timeline (the rest is one band).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    bands: usize,
    /// Site rows per moment in the top table.
    #[arg(short = 'n', long, default_value_t = 200)]
    sites: usize,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs<ReportFormat>,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let mut opts = PageOptions {
        at: args.at,
        window: args.scope.window(),
        bands: BandOptions {
            bands: args.bands,
            ..BandOptions::default()
        },
        sites: args.sites,
        ..PageOptions::default()
    };
    if let Some((bytes, source)) = args.capacity.resolve()? {
        opts.oom.capacity_bytes = Some(bytes);
        opts.oom.capacity_source = Some(source);
    }
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        page::run(&l.snap, l.replays(), &opts)
    })?;
    Ok(Outcome::Ok)
}
