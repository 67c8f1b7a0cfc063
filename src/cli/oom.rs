//! `memlens oom FILE`

use super::{load, output, Format, Outcome};
use memlens::analyze::oom::{self, OomOptions};
use memlens::{render, replay, Error};
use std::path::PathBuf;

/// Arguments of `memlens oom`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file.
    file: PathBuf,
    #[command(flatten)]
    capacity: super::args::CapacityArgs,
    /// Call sites listed per OOM.
    #[arg(short = 'n', long, default_value_t = 10)]
    sites: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    #[command(flatten)]
    out: super::args::OutputArgs,
}

/// Runs the command.
pub fn run(args: Args) -> Result<Outcome, Error> {
    let mut opts = OomOptions {
        sites: args.sites,
        ..OomOptions::default()
    };
    if let Some((bytes, source)) = args.capacity.resolve()? {
        opts.capacity_bytes = Some(bytes);
        opts.capacity_source = Some(source);
    }
    let snap = load(&args.file)?;
    let replays = replay::replay(&snap);
    let report = oom::run(&snap, &replays, &opts)
        .map_err(|m| Error::Usage(format!("{}: {m}", memlens::error::quoted_path(&args.file))))?;
    output::emit(
        args.out.output.as_deref(),
        args.out.force,
        |out| match args.format {
            Format::Json => render::json::write(out, &report),
            Format::Text => render::oom::text(out, &args.file.display().to_string(), &report),
        },
    )?;
    Ok(Outcome::Ok)
}
