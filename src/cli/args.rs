//! Argument groups shared by the commands, flattened into each one's `Args` with
//! `#[command(flatten)]`: one parser and one help text per flag, whatever the command.

use super::report::Format;
use super::size;
use crate::analyze::top::Cost;
use crate::compose::page::{bands::BandOptions, lines::SourceOptions, PageOptions};
use crate::replay::{MomentSpec, WindowSpec};
use crate::vocab::gpus;
use crate::vocab::sites::{FrameFilter, SiteOptions};
use crate::Error;
use std::marker::PhantomData;
use std::path::PathBuf;

/// `--format`, `-o`, `--force` and `--width`: how a report is written and where. `F` is the
/// command's format enum (see `report.rs`); its `#[default]` variant is the default.
#[derive(clap::Args, Debug)]
pub struct OutputArgs<F = Format>
where
    F: clap::ValueEnum + Default + Clone + Send + Sync + 'static,
{
    /// Output format.
    #[arg(long, value_enum, default_value = default_name::<F>())]
    pub format: F,
    /// Write the report to this file instead of standard output (through a temporary file
    /// renamed into place).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Replace the output file if it exists.
    #[arg(long, short)]
    pub force: bool,
    /// Fit text tables and prose to N columns (0: no limit). Default: the terminal's width
    /// when standard output is a terminal; no limit when it is piped or written with -o.
    #[arg(long, value_name = "N")]
    pub width: Option<usize>,
}

/// The name of `F`'s default value. (clap's `default_value_t` keeps its text in one static
/// for every instance of a generic struct, so the first command's default would be all.)
fn default_name<F: clap::ValueEnum + Default>() -> &'static str {
    let name = F::default()
        .to_possible_value()
        .map_or(String::new(), |v| v.get_name().to_owned());
    // Once per command line parsed: a few bytes.
    Box::leak(name.into_boxed_str())
}

/// `--device N`.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct DeviceArg {
    /// Only device N: the snapshot is read as if it held that device alone. A device the
    /// snapshot does not have is an error (exit 2).
    #[arg(long, value_name = "N")]
    pub device: Option<u32>,
}

/// What `--at` means for a command: its default, and whether it compares files.
pub trait MomentKind: std::fmt::Debug + Clone + Send + Sync + 'static {
    /// The moment taken without `--at`.
    const DEFAULT: &'static str;
    /// Two files are compared: only moments every file has (`peak`, `end`, `start`, `oom`,
    /// `oom:K`), since event indices and times mean nothing across files.
    const ACROSS_FILES: bool;
}

/// `--at` defaults to the peak.
#[derive(Debug, Clone)]
pub struct AtPeak;
impl MomentKind for AtPeak {
    const DEFAULT: &'static str = "peak";
    const ACROSS_FILES: bool = false;
}

/// `--at` defaults to the end of the trace (the final state).
#[derive(Debug, Clone)]
pub struct AtEnd;
impl MomentKind for AtEnd {
    const DEFAULT: &'static str = "end";
    const ACROSS_FILES: bool = false;
}

/// `--at` defaults to the peak and takes only moments that mean the same in every file.
#[derive(Debug, Clone)]
pub struct AtCompared;
impl MomentKind for AtCompared {
    const DEFAULT: &'static str = "peak";
    const ACROSS_FILES: bool = true;
}

/// The help of `--at`, the same for every command.
pub const AT_HELP: &str = "Moment: peak (each device's highest live bytes), end, start, oom (the \
first OOM), oom:K (the K-th), step:N (the peak of step N), time:12.5s (time since the first \
event), an event index, or a time_us (indices and time_us only where one file is read: not in \
diff or check)";

/// `--at MOMENT`, parsed by [`parse_moment`].
#[derive(clap::Args, Debug)]
pub struct MomentArgs<K: MomentKind> {
    #[arg(long, value_name = "MOMENT", help = AT_HELP, default_value = K::DEFAULT,
          value_parser = parse_moment::<K>)]
    pub at: MomentSpec,
    #[arg(skip)]
    kind: PhantomData<K>,
}

/// The one parser of `--at`.
pub fn parse_moment<K: MomentKind>(s: &str) -> Result<MomentSpec, String> {
    let m = s.parse::<MomentSpec>()?;
    let named = matches!(
        m,
        MomentSpec::Peak
            | MomentSpec::End
            | MomentSpec::Start
            | MomentSpec::Oom(_)
            | MomentSpec::Step(_)
            | MomentSpec::Since(_)
    );
    if K::ACROSS_FILES && !named {
        return Err(format!(
            "moment {s:?}: expected peak, end, start, oom, oom:K, step:N or time:SECONDSs (time since the first event, e.g. time:12.5s)"
        ));
    }
    Ok(m)
}

/// `--window A:B`, `--step N`, `--phase NAME`: the part of the trace a cost counts.
#[derive(clap::Args, Debug)]
pub struct ScopeArgs {
    /// Only events A:B (event indices or time_us; either side may be empty).
    #[arg(long, value_name = "A:B", value_parser = |s: &str| s.parse::<WindowSpec>())]
    pub window: Option<WindowSpec>,
    /// Only step N (1-based) of the loop (ProfilerStep annotations, optimizer steps, ...).
    #[arg(long, value_name = "N")]
    pub step: Option<usize>,
    /// Only the span of this annotation, e.g. `ProfilerStep#3` or `Optimizer.step#AdamW.step`.
    #[arg(long, value_name = "NAME")]
    pub phase: Option<String>,
}

impl ScopeArgs {
    /// The three flags as one window.
    /// Whether any of `--window`, `--step`, `--phase` was given.
    pub fn is_set(&self) -> bool {
        self.window.is_some() || self.step.is_some() || self.phase.is_some()
    }

    pub fn window(&self) -> WindowSpec {
        WindowSpec {
            step: self.step,
            phase: self.phase.clone(),
            ..self.window.clone().unwrap_or_default()
        }
    }
}

/// What the page shows beyond its data (`report` and `serve`): the capacity its OOM verdicts
/// weigh against, how many allocations get bands of their own, how many site rows.
#[derive(clap::Args, Debug)]
pub struct PageArgs {
    #[command(flatten)]
    capacity: CapacityArgs,
    /// Most allocations drawn as bands of their own in the timeline (the rest is one band;
    /// a window `serve` zooms to chooses its own).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    bands: usize,
    /// Site rows per moment in the top table.
    #[arg(short = 'n', long, default_value_t = 200)]
    sites: usize,
    /// Directory holding the program's source: the lines panel shows the hottest files around
    /// their hot lines at each moment, embedded in the page (without it, the recorded paths
    /// are read where they exist). Source is only read.
    #[arg(long, value_name = "DIR")]
    source_root: Option<PathBuf>,
}

impl PageArgs {
    /// The page's options, with `at` and `window` as given.
    pub fn options(
        &self,
        at: Option<MomentSpec>,
        window: WindowSpec,
    ) -> Result<PageOptions, Error> {
        let mut opts = PageOptions {
            at,
            window,
            bands: BandOptions {
                bands: self.bands,
                ..BandOptions::default()
            },
            sites: self.sites,
            source: SourceOptions {
                root: self.source_root.clone(),
                read: Some(super::source::read_source),
            },
            ..PageOptions::default()
        };
        super::source::source_dir("--source-root", self.source_root.as_deref())?;
        if let Some((bytes, source)) = self.capacity.resolve()? {
            opts.oom.capacity_bytes = Some(bytes);
            opts.oom.capacity_source = Some(source);
        }
        Ok(opts)
    }
}

/// The GPU's capacity, which snapshots do not record.
#[derive(clap::Args, Debug)]
pub struct CapacityArgs {
    /// GPU capacity, e.g. 80GiB, 81920MiB, or bytes.
    #[arg(long, value_name = "SIZE", conflicts_with = "gpu")]
    pub capacity: Option<String>,
    /// GPU model instead of --capacity, e.g. h100, a100-80, l4, rtx4090.
    #[arg(long, value_name = "NAME")]
    pub gpu: Option<String>,
}

impl CapacityArgs {
    /// The capacity in bytes and where it came from (`--capacity 80GiB`, `--gpu H100 ...`).
    pub fn resolve(&self) -> Result<Option<(u64, String)>, Error> {
        if let Some(c) = &self.capacity {
            let bytes = size::parse_size(c).map_err(|e| match e {
                Error::Usage(m) => Error::Usage(format!("--capacity: {m}")),
                other => other,
            })?;
            return Ok(Some((bytes, format!("--capacity {c}"))));
        }
        if let Some(name) = &self.gpu {
            let g = gpus::lookup(name)?;
            return Ok(Some((g.capacity_bytes, format!("--gpu {}", g.name))));
        }
        Ok(None)
    }
}

/// What `top` and `flame` count.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum CostArg {
    /// Requested bytes live at the moment.
    Live,
    /// Bytes allocated during the window.
    Allocated,
    /// Bytes × lifetime inside the window.
    Lifetime,
    /// Bytes allocated in the window and never freed.
    NeverFreed,
}

impl From<CostArg> for Cost {
    fn from(c: CostArg) -> Cost {
        match c {
            CostArg::Live => Cost::Live,
            CostArg::Allocated => Cost::Allocated,
            CostArg::Lifetime => Cost::Lifetime,
            CostArg::NeverFreed => Cost::NeverFreed,
        }
    }
}

/// `--fail-on-growth` as a fraction.
pub fn growth_arg(s: &str) -> Result<f64, Error> {
    size::parse_percent(s).map_err(|e| prefixed("--fail-on-growth", e))
}

/// `--min-abs` (and other size flags) as bytes.
pub fn size_arg(flag: &str, s: &str) -> Result<u64, Error> {
    size::parse_size(s).map_err(|e| prefixed(flag, e))
}

/// Standard input can be read once: `-` given twice (`diff - -`) is a usage error, rather than
/// an empty second file.
pub fn stdin_once<'a>(paths: impl IntoIterator<Item = &'a std::path::Path>) -> Result<(), Error> {
    if paths.into_iter().filter(|p| p.as_os_str() == "-").count() > 1 {
        return Err(Error::Usage(
            "-: standard input is given more than once; it can be read only once (save it to a file)".into(),
        ));
    }
    Ok(())
}

/// Prefixes a usage error with the flag it came from.
pub fn prefixed(flag: &str, e: Error) -> Error {
    match e {
        Error::Usage(m) => Error::Usage(format!("{flag}: {m}")),
        other => other,
    }
}

/// `--frames python|cpp|all` and `--keep torch|libraries`: which frames name sites and fill
/// shown stacks.
#[derive(clap::Args, Debug)]
pub struct SiteArgs {
    /// Frames sites and stacks use: python (Python frames only), cpp (C++ frames only:
    /// autograd nodes, C++ functions, ATen operators), or all (the innermost user Python
    /// frame, else the C++ site; stacks interleave both).
    #[arg(long, value_enum, default_value_t = FramesArg::All)]
    pub frames: FramesArg,
    /// Let frames inside these packages be sites: torch, or libraries (installed packages
    /// and the standard library, shown beside the user's line otherwise).
    #[arg(long, value_parser = ["torch", "libraries"])]
    pub keep: Vec<String>,
}

impl SiteArgs {
    /// The flags as site options.
    pub fn options(&self) -> SiteOptions {
        SiteOptions {
            keep_torch: self.keep.iter().any(|k| k == "torch"),
            keep_libraries: self.keep.iter().any(|k| k == "libraries"),
            frames: self.frames.into(),
        }
    }
}

/// The values of `--frames`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum FramesArg {
    /// Python frames only.
    Python,
    /// C++ frames only.
    Cpp,
    /// Both.
    All,
}

impl From<FramesArg> for FrameFilter {
    fn from(f: FramesArg) -> FrameFilter {
        match f {
            FramesArg::Python => FrameFilter::Python,
            FramesArg::Cpp => FrameFilter::Cpp,
            FramesArg::All => FrameFilter::All,
        }
    }
}
