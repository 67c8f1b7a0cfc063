//! Command line: one args struct and one `run` per subcommand, built from the shared argument
//! groups (`args.rs`), the pipeline that loads and replays a file once (`pipeline.rs`) and
//! the format dispatch (`report.rs`). Only this layer knows clap, files and terminals.
//!
//! Exit codes: 0 ok, 1 findings or a broken budget (commands that check one), 2 usage or input.

mod args;
mod batch;
mod categories;
mod check;
mod dataset;
mod diff;
mod diff_lines;
mod explain;
mod export;
mod fit;
mod flame;
mod frag;
mod html_report;
mod leaks;
mod lines;
mod mcp;
mod models;
mod oom;
mod output;
mod pipeline;
mod progress;
mod report;
mod serve;
mod session;
mod session_files;
mod size;
mod slice;
mod source;
mod summary;
mod timeline;
mod timings;
mod top;
mod whatif;

use crate::Error;
use clap::{Parser, Subcommand};
use pipeline::GlobalOptions;

/// Read PyTorch CUDA memory snapshots: where GPU memory went and why it ran out.
#[derive(Parser, Debug)]
#[command(name = "memlens", version, about, long_about = None)]
pub struct Cli {
    /// Keep what was complete before a truncation or corruption (a dump that died) instead of
    /// failing; a `salvaged` warning names the offset.
    #[arg(long, global = true)]
    salvage: bool,
    /// Decoder threads (default: one per core on 6 cores or more for files of 16 MiB and up,
    /// else 1; at most the cores, or 2; 1 = the sequential decoder).
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,
    /// Print to stderr, once the command is done, what each phase cost: per file read, its
    /// read, decode (with MiB/s and the decoder that ran), model and replay; then the
    /// analysis, the output, and the total with the peak memory.
    #[arg(long, global = true)]
    timings: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One self-contained HTML page: timeline, allocator state, top sites, flamegraph, OOMs.
    Report(html_report::Args),
    /// The page of one or more snapshots from a local HTTP server (token-protected, loopback
    /// by default), which zooms into any window at full detail.
    Serve(serve::Args),
    /// Per-device totals, pools, trace statistics, settings and data-quality warnings.
    Summary(summary::Args),
    /// What was live at the peak (or another moment), by call site, biggest first.
    Top(top::Args),
    /// Memory per user source line (self and everything beneath it), every user file at
    /// once; the hottest files' source beside its bytes.
    Lines(lines::Args),
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
    /// What the memory is made of at the OOM (or peak), and the fixes that make it fit,
    /// cheapest first, each with the bytes it saves.
    Fit(fit::Args),
    /// Explain a CUDA out-of-memory error message: the numbers, the cause, fixes cheapest first.
    Explain(explain::Args),
    /// Compare two snapshots by normalized call site: new, removed, grown and shrunk sites.
    Diff(diff::Args),
    /// Budgets on snapshots (peak, reserved, fragmentation, leaked, growth over a baseline).
    Check(check::Args),
    /// Many snapshots in parallel: one row each, and the imbalance of a rank set.
    Batch(batch::Args),
    /// Hand a snapshot to other tools: a Chrome trace-event file for Perfetto UI.
    Export(export::Args),
    /// A window of a snapshot as a snapshot of its own, for PyTorch's viewer (pytorch.org/memory_viz).
    Slice(slice::Args),
    /// Replay the recorded requests through the caching allocator under other settings
    /// (expandable segments, max_split_size_mb, ...): peak reserved, OOMs avoided.
    Whatif(whatif::Args),
    /// Serve the analyses to coding agents over the Model Context Protocol (stdio; the Python
    /// package's server: pip install 'memlens[mcp]').
    Mcp(mcp::Args),
    /// Answer command lines read from standard input, one JSON object per line, decoding each
    /// file once (the notebook API's child process; docs/python.md).
    Session(session::Args),
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
    let started = std::time::Instant::now();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    if cli.timings {
        timings::start(started);
    }
    let command = std::time::Instant::now();
    let result = execute(cli);
    let command = command.elapsed();
    // What the command wrote with -o, said once it is in place (before any error).
    output::say_written();
    let code = exit_code(result);
    // After the output and any error: what each phase cost (`--timings`).
    timings::print(command);
    // Tests and benchmarks read this process's own peak memory here (a child's rusage also
    // counts what its parent had mapped when it forked).
    if std::env::var_os("MEMLENS_PEAK_RSS").is_some() {
        if let Some(bytes) = timings::peak_rss_bytes() {
            eprintln!("peak_rss_bytes {bytes}");
        }
    }
    code
}

/// Runs one parsed command line.
fn execute(cli: Cli) -> Result<Outcome, Error> {
    if cli.threads == Some(0) {
        return Err(Error::Usage("--threads must be at least 1".into()));
    }
    let g = GlobalOptions::new(cli.threads, cli.salvage);
    match cli.command {
        Command::Summary(a) => summary::run(a, &g),
        Command::Report(a) => html_report::run(a, &g),
        Command::Serve(a) => serve::run(a, &g),
        Command::Top(a) => top::run(a, &g),
        Command::Lines(a) => lines::run(a, &g),
        Command::Timeline(a) => timeline::run(a, &g),
        Command::Flame(a) => flame::run(a, &g),
        Command::Explain(a) => explain::run(a),
        Command::Frag(a) => frag::run(a, &g),
        Command::Oom(a) => oom::run(a, &g),
        Command::Diff(a) => diff::run(a, &g),
        Command::Check(a) => check::run(a, &g),
        Command::Batch(a) => batch::run(a, &g),
        Command::Export(a) => export::run(a, &g),
        Command::Slice(a) => slice::run(a, &g),
        Command::Leaks(a) => leaks::run(a, &g),
        Command::Categories(a) => categories::run(a, &g),
        Command::Fit(a) => fit::run(a, &g),
        Command::Whatif(a) => whatif::run(a, &g),
        Command::Mcp(a) => mcp::run(a),
        Command::Session(a) => session::run(a),
    }
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
            // An error may quote snapshot content: shown escaped, on one line.
            eprintln!(
                "memlens: {}",
                crate::render::visible::visible(&e.to_string())
            );
            2
        }
    }
}

fn is_broken_pipe(e: &Error) -> bool {
    matches!(e, Error::Io { message, .. } if message.contains("Broken pipe"))
}
