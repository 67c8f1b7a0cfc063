//! `memlens report FILE -o report.html`; `memlens report BASE CAND` (the compare page) and
//! `memlens report R0 R1 ... RN` (the runs page).

use super::args::{stdin_once, AtPeak, DeviceArg, OutputArgs, PageArgs, ScopeArgs, AT_HELP};
use super::output;
use super::pipeline::{self, GlobalOptions, Loaded};
use super::report::ReportFormat;
use super::Outcome;
use crate::compose::page;
use crate::replay::MomentSpec;
use crate::Error;
use rayon::prelude::*;
use std::path::PathBuf;

/// Arguments of `memlens report`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input). Two files: the
    /// compare page (the first is the base); more: one line per run, the outlier marked.
    #[arg(required = true)]
    files: Vec<PathBuf>,
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
    if let [file] = args.files.as_slice() {
        let opts = args.page.options(args.at, args.scope.window())?;
        pipeline::report(file, g, args.device, &args.out, |l| {
            page::run(&l.snap, l.replays(), &opts)
        })?;
        return Ok(Outcome::Ok);
    }
    if args.at.is_some() || args.scope.is_set() {
        return Err(Error::Usage(
            "--at, --window, --step and --phase apply to the page of one file; the page of \
             several runs shows each at its peak, aligned by event, time and step"
                .into(),
        ));
    }
    stdin_once(args.files.iter().map(PathBuf::as_path))?;
    let loaded = args
        .files
        .par_iter()
        .map(|f| Loaded::open(f, g, args.device))
        .collect::<Result<Vec<Loaded>, Error>>()?;
    let names: Vec<String> = loaded.iter().map(Loaded::title).collect();
    let page = pipeline::runs_page(&loaded, &names)?;
    output::report(&args.out, &page, &crate::serve::runs_title(&names), None)?;
    Ok(Outcome::Ok)
}
