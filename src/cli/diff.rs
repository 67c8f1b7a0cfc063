//! `memlens diff BASE CAND`

use super::args::{growth_arg, size_arg, AtCompared, DeviceArg, MomentArgs, OutputArgs};
use super::pipeline::{GlobalOptions, Loaded};
use super::report::{DiffFormat, DiffView};
use super::{output, Outcome};
use crate::analyze::diff::{self, DiffOptions};
use crate::analyze::profile::{self, ProfileOptions, SiteKey};
use crate::vocab::sites::SiteOptions;
use crate::Error;
use std::path::{Path, PathBuf};

/// Arguments of `memlens diff`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The base snapshot (before the change; `-` reads standard input).
    base: PathBuf,
    /// The candidate snapshot (after the change; `-` reads standard input).
    cand: PathBuf,
    #[command(flatten)]
    moment: MomentArgs<AtCompared>,
    /// Key allocations by call site or by whole stack, or compare `lines` line by line
    /// (`line`: self and total bytes per user source line, matched by text or moved lines).
    #[arg(long, value_enum, default_value_t = By::Site)]
    by: By,
    #[command(flatten)]
    line: super::diff_lines::LineArgs,
    /// Drop line numbers from sites (functions that merely moved are not changes).
    #[arg(long)]
    ignore_lines: bool,
    /// Key each site with this many of its callers too (`model.py:48:forward <
    /// train.py:39:main`): the same line reached from two places is two rows.
    #[arg(long, value_name = "N", default_value_t = 0)]
    frame_depth: usize,
    /// List unchanged sites too.
    #[arg(long)]
    all: bool,
    /// Exit 1 when the peak grows by at least this much, e.g. 5% (with --min-abs: both must hold).
    #[arg(long, value_name = "PCT")]
    fail_on_growth: Option<String>,
    /// Exit 1 only when the peak also grows by at least this many bytes, e.g. 256MiB.
    #[arg(long, value_name = "SIZE")]
    min_abs: Option<String>,
    /// Site rows shown in text output.
    #[arg(short = 'n', long, default_value_t = 20)]
    limit: usize,
    /// Let frames inside these packages be sites (only `torch` is known).
    #[arg(long, value_parser = ["torch"])]
    keep: Vec<String>,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs<DiffFormat>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum By {
    Site,
    Stack,
    Line,
}

/// Loads, replays and profiles one snapshot (the device rule applied).
pub fn profile_file(
    path: &Path,
    g: &GlobalOptions,
    device: DeviceArg,
    opts: &ProfileOptions,
) -> Result<profile::Profile, Error> {
    let l = Loaded::open(path, g, device)?;
    profile::profile(&l.snap, l.replays(), opts).map_err(|m| l.failed(m))
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    super::args::stdin_once([args.base.as_path(), args.cand.as_path()])?;
    if args.by != By::Line {
        args.line.only_by_line()?;
    }
    let opts = DiffOptions {
        all: args.all,
        fail_on_growth: args.fail_on_growth.as_deref().map(growth_arg).transpose()?,
        min_abs_bytes: args
            .min_abs
            .as_deref()
            .map(|s| size_arg("--min-abs", s))
            .transpose()?,
    };
    if args.by == By::Line {
        if args.ignore_lines || args.frame_depth > 0 || !args.keep.is_empty() {
            return Err(Error::Usage(
                "--ignore-lines, --frame-depth and --keep key sites: not with --by line".into(),
            ));
        }
        let files = super::diff_lines::Files {
            base: &args.base,
            cand: &args.cand,
            device: args.device,
            limit: args.limit,
            all: args.all,
        };
        return super::diff_lines::run(files, &args.line, args.moment.at, &opts, &args.out, g);
    }
    let popts = ProfileOptions {
        at: args.moment.at,
        key: match args.by {
            By::Site | By::Line => SiteKey::Site,
            By::Stack => SiteKey::Stack,
        },
        ignore_lines: args.ignore_lines,
        sites: SiteOptions {
            keep_torch: args.keep.iter().any(|k| k == "torch"),
            ..SiteOptions::default()
        },
        categories: true,
        frame_depth: args.frame_depth,
    };
    let (base, cand) = rayon::join(
        || Loaded::open(&args.base, g, args.device),
        || Loaded::open(&args.cand, g, args.device),
    );
    let (base, cand) = (base?, cand?);
    let (pb, pc) = rayon::join(
        || profile::profile(&base.snap, base.replays(), &popts).map_err(|m| base.failed(m)),
        || profile::profile(&cand.snap, cand.replays(), &popts).map_err(|m| cand.failed(m)),
    );
    let mut report = diff::run(&pb?, &pc?, popts.key, popts.ignore_lines, &opts);
    diff::runs::explain(
        &mut report,
        diff::runs::Run {
            snap: &base.snap,
            replays: base.replays(),
        },
        diff::runs::Run {
            snap: &cand.snap,
            replays: cand.replays(),
        },
        &popts,
    );
    let view = DiffView {
        report,
        base: args.base.display().to_string(),
        cand: args.cand.display().to_string(),
        limit: args.limit,
    };
    output::report(&args.out, &view, "", None)?;
    Ok(if view.report.gate.as_ref().is_some_and(|g| g.failed) {
        Outcome::Findings
    } else {
        Outcome::Ok
    })
}
