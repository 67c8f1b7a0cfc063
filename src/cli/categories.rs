//! `memlens categories FILE`

use super::{load, output, Format, Outcome};
use memlens::analyze::categories::{self, CategoryOptions};
use memlens::replay::{self, MomentSpec};
use memlens::{render, Error};
use std::path::PathBuf;

/// Arguments of `memlens categories`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot file.
    file: PathBuf,
    /// Moment: peak (default), end, oom, an event index, or a time_us.
    #[arg(long, default_value = "peak", value_parser = |s: &str| s.parse::<MomentSpec>())]
    at: MomentSpec,
    /// Extra rules, tried first: one `category: regex` per line, matched on `filename:line:name`.
    #[arg(long)]
    rules: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    #[command(flatten)]
    out: super::args::OutputArgs,
}

/// Runs the command.
pub fn run(args: Args) -> Result<Outcome, Error> {
    let mut opts = CategoryOptions {
        at: args.at,
        ..CategoryOptions::default()
    };
    if let Some(p) = &args.rules {
        let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, &e))?;
        opts.rules = categories::parse_rules(&text)
            .map_err(|m| Error::Usage(format!("{}: {m}", memlens::error::quoted_path(p))))?;
    }
    let snap = load(&args.file)?;
    let replays = replay::replay(&snap);
    let report = categories::run(&snap, &replays, &opts)
        .map_err(|m| Error::Usage(format!("{}: {m}", memlens::error::quoted_path(&args.file))))?;
    output::emit(
        args.out.output.as_deref(),
        args.out.force,
        |out| match args.format {
            Format::Json => render::json::write(out, &report),
            Format::Text => {
                render::categories::text(out, &args.file.display().to_string(), &report)
            }
        },
    )?;
    Ok(Outcome::Ok)
}
