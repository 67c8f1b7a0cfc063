//! `memlens check FILE... [--max-peak SIZE|PCT] [--max-reserved ...] [--max-frag PCT]
//! [--max-leaked ...] [--baseline FILE] [--allow-unmeasured]`
//!
//! Exit status: 1 when a budget broke, or when one could not be measured (the file lacks what
//! it reads, see [`crate::compose::check`]) and `--allow-unmeasured` was not given; 0
//! otherwise; 2 for usage and input errors.

use super::args::{
    growth_arg, prefixed, size_arg, AtCompared, CapacityArgs, DeviceArg, MomentArgs, OutputArgs,
};
use super::pipeline::{GlobalOptions, Loaded};
use super::report::CheckFormat;
use super::size;
use super::{output, Outcome};
use crate::analyze::diff::{self, DiffOptions};
use crate::analyze::profile::{self, ProfileOptions};
use crate::compose::check::{self, Budget, BudgetKind, Limit};
use crate::units::iec;
use crate::Error;
use std::path::PathBuf;

/// Arguments of `memlens check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot files (`-` reads standard input).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Budget on live requested bytes at the peak of any device: a size (40GiB) or a
    /// percentage of the capacity (90%, needs --capacity or --gpu).
    #[arg(long, value_name = "SIZE|PCT")]
    max_peak: Option<String>,
    /// Budget on the highest reserved bytes of any device: a size or a percentage of the
    /// capacity.
    #[arg(long, value_name = "SIZE|PCT")]
    max_reserved: Option<String>,
    /// Budget on the fragmentation index (1 − largest free block / free) at the moment, e.g. 30%.
    #[arg(long, value_name = "PCT")]
    max_frag: Option<String>,
    /// Budget on leaked bytes (live at the end in sites that grow every step, as `memlens
    /// leaks` finds them): a size or a percentage of the capacity.
    #[arg(long, value_name = "SIZE|PCT")]
    max_leaked: Option<String>,
    /// Compare each FILE's peak with this snapshot's (see --fail-on-growth, --min-abs).
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// With --baseline: a peak growth of at least this much breaks the budget...
    #[arg(long, value_name = "PCT", default_value = "5%")]
    fail_on_growth: String,
    /// ...when it is also at least this many bytes.
    #[arg(long, value_name = "SIZE", default_value = "0")]
    min_abs: String,
    /// Exit 0 even when a budget could not be measured because the file lacks what it reads
    /// (a trace for the peak and leaks, steps for leaks, segments for fragmentation); without
    /// it such a budget exits 1. It is reported as unmeasured either way, never as passed.
    #[arg(long)]
    allow_unmeasured: bool,
    /// The GPU's capacity, for percentages.
    #[command(flatten)]
    capacity: CapacityArgs,
    #[command(flatten)]
    moment: MomentArgs<AtCompared>,
    /// Drop line numbers from sites.
    #[arg(long)]
    ignore_lines: bool,
    /// Sites listed behind a broken budget.
    #[arg(short = 'n', long, default_value_t = 5)]
    sites: usize,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs<CheckFormat>,
}

/// A byte budget: a size, or a percentage of the capacity.
fn byte_limit(flag: &str, s: &str, capacity: Option<(u64, &str)>) -> Result<(u64, String), Error> {
    if s.trim().ends_with('%') {
        let f = size::parse_percent(s).map_err(|e| prefixed(flag, e))?;
        let Some((cap, source)) = capacity else {
            return Err(Error::Usage(format!(
                "{flag} {s}: a percentage needs the capacity: pass --capacity SIZE or --gpu NAME"
            )));
        };
        let bytes = (cap as f64 * f).round() as u64;
        return Ok((
            bytes,
            format!("{} ({s} of {} {source})", iec(bytes), iec(cap)),
        ));
    }
    let bytes = size_arg(flag, s)?;
    Ok((bytes, iec(bytes)))
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    super::args::stdin_once(args.files.iter().chain(&args.baseline).map(|p| p.as_path()))?;
    let capacity = args.capacity.resolve()?;
    let cap = capacity.as_ref().map(|(c, s)| (*c, s.as_str()));
    let mut budgets = Vec::new();
    for (kind, flag, value) in [
        (BudgetKind::MaxPeak, "--max-peak", &args.max_peak),
        (
            BudgetKind::MaxReserved,
            "--max-reserved",
            &args.max_reserved,
        ),
        (BudgetKind::MaxLeaked, "--max-leaked", &args.max_leaked),
    ] {
        if let Some(v) = value {
            let (bytes, label) = byte_limit(flag, v, cap)?;
            budgets.push(Budget {
                kind,
                limit: Limit::Bytes(bytes),
                label,
            });
        }
    }
    if let Some(v) = &args.max_frag {
        let f = size::parse_percent(v).map_err(|e| prefixed("--max-frag", e))?;
        budgets.push(Budget {
            kind: BudgetKind::MaxFrag,
            limit: Limit::Ratio(f),
            label: format!("{:.1}%", f * 100.0),
        });
    }
    budgets.sort_by_key(|b| b.kind);
    let growth = growth_arg(&args.fail_on_growth)?;
    let min_abs = if args.min_abs.trim() == "0" {
        0
    } else {
        size_arg("--min-abs", &args.min_abs)?
    };
    if args.baseline.is_some() {
        budgets.push(Budget {
            kind: BudgetKind::Baseline,
            limit: Limit::Growth(growth, min_abs),
            label: format!("+{:.1}%", growth * 100.0),
        });
    }
    if budgets.is_empty() {
        return Err(Error::Usage(
            "check: no budget given; pass --max-peak, --max-reserved, --max-frag, --max-leaked or --baseline".into(),
        ));
    }
    let popts = ProfileOptions {
        at: args.moment.at,
        ignore_lines: args.ignore_lines,
        ..ProfileOptions::default()
    };
    let want_leaks = budgets.iter().any(|b| b.kind == BudgetKind::MaxLeaked);
    let base = match &args.baseline {
        Some(p) => Some(super::diff::profile_file(p, g, args.device, &popts)?),
        None => None,
    };
    let mut files = Vec::new();
    for path in &args.files {
        let l = Loaded::open(path, g, args.device)?;
        let p = profile::profile(&l.snap, l.replays(), &popts).map_err(|m| l.failed(m))?;
        let leaked = if want_leaks {
            check::leaked(&l.snap, l.replays(), &popts)
        } else {
            check::Leaked::default()
        };
        let d = base.as_ref().map(|b| {
            diff::run(
                b,
                &p,
                popts.key,
                popts.ignore_lines,
                &DiffOptions::default(),
            )
        });
        files.push(check::evaluate(
            &path.display().to_string(),
            &p,
            &leaked,
            base.as_ref()
                .zip(d.as_ref())
                .map(|(profile, diff)| check::Baseline { profile, diff }),
            &budgets,
            args.sites,
        ));
    }
    let report = check::report(
        &args.moment.at.to_string(),
        capacity.map(|c| c.0),
        args.baseline.as_ref().map(|b| b.display().to_string()),
        files,
        args.allow_unmeasured,
    );
    output::report(&args.out, &report, "", None)?;
    Ok(if report.succeeded() {
        Outcome::Ok
    } else {
        Outcome::Findings
    })
}
