//! `memlens diff BASE CAND --by line`: the `lines` of both snapshots compared line by line
//! (`analyze::diff::lines`).

use super::args::{DeviceArg, OutputArgs};
use super::lines::CostArg;
use super::pipeline::{GlobalOptions, Loaded};
use super::report::{DiffFormat, LinesDiffView};
use super::source::{read_source, source_dir};
use super::{output, Outcome};
use crate::analyze::diff::{lines as by_line, DiffOptions};
use crate::analyze::lines::{self, LinesOptions};
use crate::replay::MomentSpec;
use crate::Error;
use std::path::{Path, PathBuf};

/// The arguments of `diff` that only `--by line` takes.
#[derive(clap::Args, Debug)]
pub struct LineArgs {
    /// With --by line: what to count per line, as `memlens lines --cost` (default live).
    #[arg(long, value_enum)]
    cost: Option<CostArg>,
    /// With --by line: the directory holding the candidate's source. Lines are then matched
    /// by their file, function and text, not their numbers (without it, the recorded paths
    /// are read where they exist). Source is only read.
    #[arg(long, value_name = "DIR")]
    source_root: Option<PathBuf>,
    /// With --by line: the base's source, when it is another revision than the candidate's
    /// (without it, the base's lines are read in the candidate's source and checked).
    #[arg(long, value_name = "DIR")]
    base_source_root: Option<PathBuf>,
}

impl LineArgs {
    /// A usage error when one of these flags is given without `--by line`.
    pub fn only_by_line(&self) -> Result<(), Error> {
        let given = [
            (self.cost.is_some(), "--cost"),
            (self.source_root.is_some(), "--source-root"),
            (self.base_source_root.is_some(), "--base-source-root"),
        ];
        match given.iter().find(|g| g.0) {
            Some((_, flag)) => Err(Error::Usage(format!("{flag} needs --by line"))),
            None => Ok(()),
        }
    }
}

/// The files compared and what the text shows.
pub struct Files<'a> {
    /// The base snapshot.
    pub base: &'a Path,
    /// The candidate snapshot.
    pub cand: &'a Path,
    /// `--device N`.
    pub device: DeviceArg,
    /// Rows shown in text (`-n`).
    pub limit: usize,
    /// List unchanged lines too.
    pub all: bool,
}

/// Runs `diff --by line`: exit 1 when the growth gate fails, as `diff`.
pub fn run(
    files: Files,
    args: &LineArgs,
    at: MomentSpec,
    opts: &DiffOptions,
    out: &OutputArgs<DiffFormat>,
    g: &GlobalOptions,
) -> Result<Outcome, Error> {
    source_dir("--source-root", args.source_root.as_deref())?;
    source_dir("--base-source-root", args.base_source_root.as_deref())?;
    if out.format == DiffFormat::Md {
        return Err(Error::Usage(
            "--format md: not with --by line (text or json)".into(),
        ));
    }
    let lopts = LinesOptions {
        at,
        cost: args.cost.unwrap_or(CostArg::Live).cost(),
        top: files.limit,
    };
    let (base, cand) = rayon::join(
        || Loaded::open(files.base, g, files.device),
        || Loaded::open(files.cand, g, files.device),
    );
    let (base, cand) = (base?, cand?);
    let (lb, lc) = rayon::join(
        || lines::run(&base.snap, base.replays(), &lopts).map_err(|m| base.failed(m)),
        || lines::run(&cand.snap, cand.replays(), &lopts).map_err(|m| cand.failed(m)),
    );
    let gate = (opts.fail_on_growth.is_some() || opts.min_abs_bytes.is_some()).then(|| {
        (
            opts.fail_on_growth.unwrap_or(0.0),
            opts.min_abs_bytes.unwrap_or(0),
        )
    });
    let sources = by_line::Sources {
        root: args.source_root.as_deref(),
        base_root: args.base_source_root.as_deref(),
        read: &read_source,
    };
    let report = by_line::run(&lb?, &lc?, sources, files.all, gate);
    let view = LinesDiffView {
        report,
        base: files.base.display().to_string(),
        cand: files.cand.display().to_string(),
        limit: files.limit,
    };
    output::report(out, &view, "", cand.root().or_else(|| base.root()))?;
    Ok(if view.report.gate.as_ref().is_some_and(|g| g.failed) {
        Outcome::Findings
    } else {
        Outcome::Ok
    })
}
