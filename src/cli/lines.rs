//! `memlens lines FILE`

use super::args::{AtPeak, DeviceArg, MomentArgs, OutputArgs};
use super::pipeline::{self, GlobalOptions};
use super::Outcome;
use crate::analyze::lines::{self, LineCost, LinesOptions};
use crate::Error;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Arguments of `memlens lines`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file (pickle, gzip, zstd or JSON; `-` reads standard input).
    file: PathBuf,
    #[command(flatten)]
    moment: MomentArgs<AtPeak>,
    /// What to count per line: live at the moment, allocated over the trace, or bytes ×
    /// microseconds alive (lifetime).
    #[arg(long, value_enum, default_value_t = CostArg::Live)]
    cost: CostArg,
    /// Lines shown per device in text (JSON has every line).
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,
    /// Directory holding the program's source: the hottest files are shown around their hot
    /// lines, each line beside its bytes (without it, the recorded paths are read where they
    /// exist). Source is only read.
    #[arg(long, value_name = "DIR")]
    source_root: Option<PathBuf>,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs,
}

/// The costs of `lines`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum CostArg {
    /// Requested bytes live at the moment.
    Live,
    /// Bytes of every allocation of the trace.
    Allocated,
    /// Bytes × microseconds alive (needs time_us).
    Lifetime,
}

impl CostArg {
    /// The cost counted.
    pub fn cost(self) -> LineCost {
        match self {
            CostArg::Live => LineCost::Live,
            CostArg::Allocated => LineCost::Allocated,
            CostArg::Lifetime => LineCost::Lifetime,
        }
    }
}

/// `--source-root DIR` as a usage error when it is not a directory.
pub fn source_dir(flag: &str, dir: Option<&Path>) -> Result<(), Error> {
    match dir {
        Some(d) if !d.is_dir() => Err(Error::Usage(format!(
            "{flag} {}: not a directory",
            d.display()
        ))),
        _ => Ok(()),
    }
}

/// The most bytes of one source file read: a larger one is not source.
const MAX_SOURCE_BYTES: u64 = 8 << 20;

/// Reads one source file for the annotated view: a regular file of at most
/// [`MAX_SOURCE_BYTES`], its text taken as UTF-8 (invalid bytes replaced).
pub fn read_source(path: &Path) -> std::io::Result<String> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "not a regular file",
        ));
    }
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} (not read)",
            crate::units::iec(MAX_SOURCE_BYTES)
        )));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_SOURCE_BYTES)
        .read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    source_dir("--source-root", args.source_root.as_deref())?;
    let opts = LinesOptions {
        at: args.moment.at,
        cost: args.cost.cost(),
        top: args.top,
    };
    let root = args.source_root.as_deref();
    pipeline::report(&args.file, g, args.device, &args.out, |l| {
        let mut r = lines::run(&l.snap, l.replays(), &opts)?;
        lines::annotate(&mut r, root, &read_source);
        Ok(r)
    })?;
    Ok(Outcome::Ok)
}
