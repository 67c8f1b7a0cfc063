//! Arguments shared by several commands.

use memlens::analyze::{gpus, top::Cost};
use memlens::Error;
use std::path::PathBuf;

/// Where a report goes.
#[derive(clap::Args, Debug)]
pub struct OutputArgs {
    /// Write the report to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Replace the output file if it exists.
    #[arg(long)]
    pub force: bool,
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
            let bytes = gpus::parse_size(c).map_err(|e| match e {
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
