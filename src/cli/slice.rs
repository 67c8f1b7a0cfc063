//! `memlens slice FILE --window A:B -o OUT.pickle`: the window as a snapshot of its own
//! (`analyze::export::slice`), then one line per device saying what it holds.

use super::args::{DeviceArg, ScopeArgs};
use super::pipeline::{GlobalOptions, Loaded};
use super::{output, Outcome};
use crate::analyze::export::slice::{self, SliceReport};
use crate::replay::MomentSpec;
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens slice`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    #[command(flatten)]
    scope: ScopeArgs,
    /// Start of the window as a moment (peak, start, oom, oom:K, an event index, a time_us);
    /// overrides the start of --window.
    #[arg(long, value_name = "MOMENT")]
    from: Option<MomentSpec>,
    /// End of the window as a moment (peak, end, oom, oom:K, an event index, a time_us): the
    /// slice's segments and blocks are the allocator state there. Overrides the end of
    /// --window.
    #[arg(long, value_name = "MOMENT")]
    to: Option<MomentSpec>,
    #[command(flatten)]
    device: DeviceArg,
    /// The snapshot to write (a protocol-4 pickle; through a temporary file renamed into
    /// place).
    #[arg(long, short, value_name = "OUT.pickle")]
    output: PathBuf,
    /// Replace the output file if it exists.
    #[arg(long, short)]
    force: bool,
    /// What the slice holds: `text` (one line per device) or `json`, on standard output.
    #[arg(long, value_enum, default_value = "text")]
    format: super::report::Format,
    /// Fit the text to N columns (0: no limit).
    #[arg(long, value_name = "N")]
    width: Option<usize>,
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    let mut window = args.scope.window();
    if args.from.is_some() {
        window.from = args.from;
    }
    if args.to.is_some() {
        window.to = args.to;
    }
    let l = Loaded::open(&args.file, g, args.device)?;
    let plan = slice::plan(&l.snap, l.replays(), &window).map_err(|m| l.failed(m))?;
    output::emit(Some(&args.output), args.force, |out| {
        slice::write(&l.snap, &plan, out).map(|_| ())
    })?;
    for n in &plan.notes {
        eprintln!(
            "memlens: {}: note: {}",
            crate::error::quoted_path(&args.file),
            crate::render::visible::visible(n)
        );
    }
    let report = SliceReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        file: l.title(),
        output: args.output.display().to_string(),
        devices: plan.summary,
        notes: plan.notes,
    };
    let out = super::args::OutputArgs::<super::report::Format> {
        format: args.format,
        output: None,
        force: false,
        width: args.width,
    };
    output::report(&out, &report, &l.title(), None)?;
    Ok(Outcome::Ok)
}
