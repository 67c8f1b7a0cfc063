//! `memlens oom FILE`

use super::{load, output, Format, Outcome};
use memlens::analyze::gpus;
use memlens::analyze::oom::{self, OomOptions};
use memlens::{render, replay, Error};
use std::path::PathBuf;

/// Arguments of `memlens oom`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file.
    file: PathBuf,
    /// GPU capacity, e.g. 80GiB, 81920MiB (snapshots do not record it).
    #[arg(long, value_name = "SIZE", conflicts_with = "gpu")]
    capacity: Option<String>,
    /// GPU model instead of --capacity, e.g. h100, a100-80, l4, rtx4090.
    #[arg(long, value_name = "NAME")]
    gpu: Option<String>,
    /// Call sites listed per OOM.
    #[arg(short = 'n', long, default_value_t = 10)]
    sites: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Write to this file instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Replace the output file if it exists.
    #[arg(long)]
    force: bool,
}

/// Runs the command.
pub fn run(args: Args) -> Result<Outcome, Error> {
    let mut opts = OomOptions {
        sites: args.sites,
        ..OomOptions::default()
    };
    if let Some(c) = &args.capacity {
        opts.capacity_bytes = Some(gpus::parse_size(c).map_err(|e| match e {
            Error::Usage(m) => Error::Usage(format!("--capacity: {m}")),
            other => other,
        })?);
        opts.capacity_source = Some(format!("--capacity {c}"));
    }
    if let Some(name) = &args.gpu {
        let g = gpus::lookup(name)?;
        opts.capacity_bytes = Some(g.capacity_bytes);
        opts.capacity_source = Some(format!("--gpu {}", g.name));
    }
    let snap = load(&args.file)?;
    let replays = replay::replay(&snap);
    let report = oom::run(&snap, &replays, &opts)
        .map_err(|m| Error::Usage(format!("{}: {m}", args.file.display())))?;
    output::emit(args.output.as_deref(), args.force, |out| {
        match args.format {
            Format::Json => render::json::write(out, &report),
            Format::Text => render::oom::text(out, &args.file.display().to_string(), &report),
        }
    })?;
    Ok(Outcome::Ok)
}
