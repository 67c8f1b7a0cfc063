//! Command line: one args struct and one `run` per subcommand. Only this layer knows clap,
//! files and terminals.
//!
//! Exit codes: 0 ok, 1 findings or a broken budget (commands that check one), 2 usage or input.

mod args;
mod batch;
mod categories;
mod check;
mod diff;
mod explain;
mod flame;
mod frag;
mod leaks;
mod oom;
mod output;
mod progress;
mod summary;
mod timeline;
mod top;

use clap::{Parser, Subcommand, ValueEnum};
use memlens::Error;

/// Read PyTorch CUDA memory snapshots: where GPU memory went and why it ran out.
#[derive(Parser, Debug)]
#[command(name = "memlens", version, about, long_about = None)]
pub struct Cli {
    /// Keep what was complete before a truncation or corruption (a dump that died) instead of
    /// failing; a `salvaged` warning names the offset.
    #[arg(long, global = true)]
    salvage: bool,
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
    /// What was live at the peak (or another moment), by call site, biggest first.
    Top(top::Args),
    /// Live, allocated and reserved bytes over the trace (CSV, JSON or an SVG plot).
    Timeline(timeline::Args),
    /// A flamegraph of what was live (SVG drawn in-process, folded lines, or speedscope JSON).
    Flame(flame::Args),
    /// Fragmentation of the caching allocator at a moment: per pool, stream and segment.
    Frag(frag::Args),
    /// Every OOM in a snapshot: the four numbers, the cause, and what to change first.
    Oom(oom::Args),
    /// Memory that grows step after step: leaks and retained autograd graphs (exit 1 if any).
    Leaks(leaks::Args),
    /// Live memory by kind: parameters, optimizer state, gradients, activations, temporaries...
    Categories(categories::Args),
    /// Explain a CUDA out-of-memory error message: the numbers, the cause, fixes cheapest first.
    Explain(explain::Args),
    /// Compare two snapshots by normalized call site: new, removed, grown and shrunk sites.
    Diff(diff::Args),
    /// Budgets on snapshots (peak, reserved, fragmentation, leaked, growth over a baseline).
    Check(check::Args),
    /// Many snapshots in parallel: one row each, and the imbalance of a rank set.
    Batch(batch::Args),
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
    Findings,
    /// Exit 2 after the report: some inputs could not be read (each already said why).
    InputErrors,
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
    SALVAGE.store(cli.salvage, std::sync::atomic::Ordering::Relaxed);
    if let Some(n) = cli.threads {
        if n == 0 {
            eprintln!("memlens: --threads must be at least 1");
            return 2;
        }
        memlens::model::set_default_threads(n);
    }
    let result = match cli.command {
        Command::Summary(a) => summary::run(a),
        Command::Top(a) => top::run(a),
        Command::Timeline(a) => timeline::run(a),
        Command::Flame(a) => flame::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Frag(a) => frag::run(a),
        Command::Oom(a) => oom::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Check(a) => check::run(a),
        Command::Batch(a) => batch::run(a),
        Command::Leaks(a) => leaks::run(a),
        Command::Categories(a) => categories::run(a),
    };
    let code = exit_code(result);
    // Tests and benchmarks read this process's own peak memory here (a child's rusage also
    // counts what its parent had mapped when it forked).
    if std::env::var_os("MEMLENS_PEAK_RSS").is_some() {
        if let Some(kb) = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:").map(str::to_owned))
            })
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            eprintln!("peak_rss_bytes {}", kb * 1024);
        }
    }
    code
}

fn exit_code(result: Result<Outcome, Error>) -> i32 {
    match result {
        Ok(Outcome::Ok) => 0,
        Ok(Outcome::Findings) => 1,
        Ok(Outcome::InputErrors) => 2,
        Err(e) => {
            if is_broken_pipe(&e) {
                return 0;
            }
            eprintln!("memlens: {e}");
            2
        }
    }
}

/// `--salvage`, set once from the command line.
static SALVAGE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Loads one snapshot, with a progress bar when it is large.
pub fn load(path: &std::path::Path) -> Result<memlens::model::Snapshot, Error> {
    let salvage = SALVAGE.load(std::sync::atomic::Ordering::Relaxed);
    // Running out of memory from here on is one line naming this file.
    let _oom_names = memlens::alloc_guard::reading(path);
    let t0 = std::time::Instant::now();
    let inp = if salvage {
        memlens::input::read_with(path, true)?
    } else {
        memlens::input::read_streaming(path)?
    };
    if std::env::var_os("MEMLENS_TIMING").is_some() {
        eprintln!("input: {:.3} s", t0.elapsed().as_secs_f64());
    }
    let bar = progress::bytes_bar(inp.len_hint() as u64, &path.display().to_string());
    let snap =
        memlens::input::build_input_with(path, &inp, &mut |pos| bar.set_position(pos), salvage);
    bar.finish_and_clear();
    // Benchmarks (scripts/bench) read the model's size from here.
    if let (Ok(s), Some(_)) = (&snap, std::env::var_os("MEMLENS_TIMING")) {
        eprintln!("model: {} bytes", s.heap_bytes());
    }
    snap
}

fn is_broken_pipe(e: &Error) -> bool {
    matches!(e, Error::Io { message, .. } if message.contains("Broken pipe"))
}
