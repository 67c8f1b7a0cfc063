//! `memlens summary FILE...`

use super::{load, output, Format, Outcome};
use memlens::analyze::summary::{self, SummaryReport};
use memlens::{render, Error};
use serde::Serialize;
use std::path::PathBuf;

/// Arguments of `memlens summary`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot files (pickle, gzip, zstd or JSON; `-` reads standard input).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    #[command(flatten)]
    out: super::args::OutputArgs,
}

#[derive(Serialize)]
struct FileSummary<'a> {
    file: String,
    #[serde(flatten)]
    report: &'a SummaryReport,
}

#[derive(Serialize)]
struct ManyFiles<'a> {
    schema_version: u32,
    files: Vec<FileSummary<'a>>,
}

/// Runs the command.
pub fn run(args: Args) -> Result<Outcome, Error> {
    let mut reports = Vec::new();
    let mut first_error = None;
    for f in &args.files {
        match load(f) {
            Ok(snap) => reports.push((f, summary::run(&snap))),
            Err(e) => {
                if args.files.len() == 1 {
                    return Err(e);
                }
                eprintln!("memlens: {e}");
                first_error.get_or_insert(e);
            }
        }
    }
    output::emit(
        args.out.output.as_deref(),
        args.out.force,
        |out| match args.format {
            Format::Json if args.files.len() == 1 => render::json::write(
                out,
                &FileSummary {
                    file: args.files[0].display().to_string(),
                    report: &reports[0].1,
                },
            ),
            Format::Json => render::json::write(
                out,
                &ManyFiles {
                    schema_version: memlens::analyze::SCHEMA_VERSION,
                    files: reports
                        .iter()
                        .map(|(f, r)| FileSummary {
                            file: f.display().to_string(),
                            report: r,
                        })
                        .collect(),
                },
            ),
            Format::Text => {
                for (i, (f, r)) in reports.iter().enumerate() {
                    if i > 0 {
                        writeln!(out)?;
                    }
                    render::summary::text(out, &f.display().to_string(), r)?;
                }
                Ok(())
            }
        },
    )?;
    match first_error {
        Some(e) => Err(Error::Usage(format!(
            "{} of {} files could not be read (first: {e})",
            args.files.len() - reports.len(),
            args.files.len()
        ))),
        None => Ok(Outcome::Ok),
    }
}
