//! `memlens diff BASE CAND`

use super::{load, output, Format, Outcome};
use memlens::analyze::diff::{self, DiffOptions};
use memlens::analyze::gpus;
use memlens::analyze::profile::{self, ProfileOptions, SiteKey};
use memlens::analyze::sites::SiteOptions;
use memlens::replay::{self, MomentSpec};
use memlens::{render, Error};
use std::path::{Path, PathBuf};

/// Arguments of `memlens diff`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The base snapshot (before the change).
    base: PathBuf,
    /// The candidate snapshot (after the change).
    cand: PathBuf,
    /// Moment compared on each side: peak (each device's own), end, oom, oom:K.
    #[arg(long, default_value = "peak", value_parser = parse_moment)]
    at: MomentSpec,
    /// Key allocations by call site or by whole stack.
    #[arg(long, value_enum, default_value_t = By::Site)]
    by: By,
    /// Drop line numbers from sites (functions that merely moved are not changes).
    #[arg(long)]
    ignore_lines: bool,
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
}

/// peak, end, start, oom, oom:K (event indices and times mean nothing across two files).
pub fn parse_moment(s: &str) -> Result<MomentSpec, String> {
    match s.parse::<MomentSpec>()? {
        m @ (MomentSpec::Peak | MomentSpec::End | MomentSpec::Start | MomentSpec::Oom(_)) => Ok(m),
        _ => Err(format!(
            "moment {s:?}: expected peak, end, start, oom or oom:K"
        )),
    }
}

/// `--fail-on-growth` as a fraction.
pub fn growth_arg(s: &str) -> Result<f64, Error> {
    gpus::parse_percent(s).map_err(|e| prefixed("--fail-on-growth", e))
}

/// `--min-abs` (and other size flags) as bytes.
pub fn size_arg(flag: &str, s: &str) -> Result<u64, Error> {
    gpus::parse_size(s).map_err(|e| prefixed(flag, e))
}

/// Prefixes a usage error with the flag it came from.
pub fn prefixed(flag: &str, e: Error) -> Error {
    match e {
        Error::Usage(m) => Error::Usage(format!("{flag}: {m}")),
        other => other,
    }
}

/// Loads, replays and profiles one snapshot.
pub fn profile_file(path: &Path, opts: &ProfileOptions) -> Result<profile::Profile, Error> {
    let snap = load(path)?;
    let replays = replay::replay(&snap);
    profile::profile(&snap, &replays, opts)
        .map_err(|m| Error::Usage(format!("{}: {m}", memlens::error::quoted_path(path))))
}

/// Runs the command.
pub fn run(args: Args) -> Result<Outcome, Error> {
    let opts = DiffOptions {
        all: args.all,
        fail_on_growth: args.fail_on_growth.as_deref().map(growth_arg).transpose()?,
        min_abs_bytes: args
            .min_abs
            .as_deref()
            .map(|s| size_arg("--min-abs", s))
            .transpose()?,
    };
    let popts = ProfileOptions {
        at: args.at,
        key: match args.by {
            By::Site => SiteKey::Site,
            By::Stack => SiteKey::Stack,
        },
        ignore_lines: args.ignore_lines,
        sites: SiteOptions {
            keep_torch: args.keep.iter().any(|k| k == "torch"),
        },
        categories: true,
    };
    let (base, cand) = rayon::join(
        || profile_file(&args.base, &popts),
        || profile_file(&args.cand, &popts),
    );
    let report = diff::run(&base?, &cand?, popts.key, popts.ignore_lines, &opts);
    output::emit(
        args.out.output.as_deref(),
        args.out.force,
        |out| match args.format {
            Format::Json => render::json::write(out, &report),
            Format::Text => render::diff::text(
                out,
                &args.base.display().to_string(),
                &args.cand.display().to_string(),
                &report,
                args.limit,
            ),
        },
    )?;
    Ok(if report.gate.as_ref().is_some_and(|g| g.failed) {
        Outcome::Findings
    } else {
        Outcome::Ok
    })
}
