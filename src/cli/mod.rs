//! Command line: one args struct and one `run` per subcommand. Only this layer knows clap,
//! files and terminals.
//!
//! Exit codes: 0 ok, 1 findings or a broken budget (commands that check one), 2 usage or input.

mod output;
mod progress;
mod summary;

use clap::{Parser, Subcommand, ValueEnum};
use memlens::Error;

/// Read PyTorch CUDA memory snapshots: where GPU memory went and why it ran out.
#[derive(Parser, Debug)]
#[command(name = "memlens", version, about, long_about = None)]
pub struct Cli {
    /// Decoder threads (default: number of cores; 1 = the sequential decoder).
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Per-device totals, pools, trace statistics, settings and data-quality warnings.
    Summary(summary::Args),
}

/// Output format shared by the report commands.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Tables for people.
    #[default]
    Text,
    /// JSON for machines (has `schema_version`).
    Json,
}

/// What a command ended with.
pub enum Outcome {
    /// Exit 0.
    Ok,
    /// Exit 1: findings or a broken budget.
    #[allow(dead_code)]
    Findings,
}

/// Runs the command line and returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    if let Some(n) = cli.threads {
        if n == 0 {
            eprintln!("memlens: --threads must be at least 1");
            return 2;
        }
        memlens::model::set_default_threads(n);
    }
    let result = match cli.command {
        Command::Summary(a) => summary::run(a),
    };
    match result {
        Ok(Outcome::Ok) => 0,
        Ok(Outcome::Findings) => 1,
        Err(e) => {
            if is_broken_pipe(&e) {
                return 0;
            }
            eprintln!("memlens: {e}");
            2
        }
    }
}

fn is_broken_pipe(e: &Error) -> bool {
    matches!(e, Error::Io { message, .. } if message.contains("Broken pipe"))
}
