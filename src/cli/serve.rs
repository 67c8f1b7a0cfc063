//! `memlens serve FILE... [--port N] [--bind ADDR]`: bind first (a busy port fails before any
//! decoding), decode and report every file once, print the URL line, serve until SIGINT or
//! SIGTERM (exit 0).

use super::args::{stdin_once, DeviceArg, PageArgs};
use super::pipeline::{GlobalOptions, Loaded};
use super::Outcome;
use memlens::compose::page;
use memlens::compose::page::window::WindowIndex;
use memlens::replay::WindowSpec;
use memlens::serve::{self, ServedFile, Server, State};
use memlens::Error;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// Arguments of `memlens serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot files (pickle, gzip, zstd or JSON; `-` reads standard input), each served as
    /// a page of its own (`?file=K`, K from 0 in this order).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Port to listen on (0: one the system picks; the URL line names it).
    #[arg(long, value_name = "N", default_value_t = 0)]
    port: u16,
    /// Address to listen on. Anything but a loopback address (127.0.0.1, ::1) makes the
    /// server reachable from the network, protected by the token alone.
    #[arg(long, value_name = "ADDR", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
    #[command(flatten)]
    page: PageArgs,
    #[command(flatten)]
    device: DeviceArg,
}

/// Runs the command: returns when a signal stopped the server (exit 0), or with the one-line
/// error of a port that cannot be bound or a file that cannot be read (exit 2).
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    stdin_once(args.files.iter().map(PathBuf::as_path))?;
    let opts = args.page.options(None, WindowSpec::default())?;
    let addr = SocketAddr::new(args.bind, args.port);
    let server =
        Server::bind(addr).map_err(|e| Error::Usage(format!("cannot bind {addr}: {e}")))?;
    let mut files = Vec::with_capacity(args.files.len());
    for path in &args.files {
        let loaded = Loaded::open(path, g, args.device)?;
        // The page and the windows' index side by side: the server waits for both.
        let (report, index) = rayon::join(
            || page::run(&loaded.snap, loaded.replays(), &opts),
            || WindowIndex::new(&loaded.snap, loaded.replays()),
        );
        let report = report.map_err(|m| loaded.failed(m))?;
        let name = loaded.title();
        let (snap, replays) = loaded.into_parts();
        files.push(ServedFile {
            name,
            snap,
            replays,
            report,
            index,
        });
    }
    if serve::is_exposed(args.bind) {
        eprintln!(
            "memlens: warning: listening on {}: reachable from the network, protected only by \
             the token",
            server.addr()
        );
    }
    let stop = serve::stop_on_signals()
        .map_err(|e| Error::Usage(format!("cannot handle SIGINT/SIGTERM: {e}")))?;
    let stdout_error = |e: std::io::Error| Error::io(Path::new("standard output"), &e);
    let mut out = std::io::stdout().lock();
    writeln!(out, "memlens serving {}", server.url()).map_err(stdout_error)?;
    out.flush().map_err(stdout_error)?;
    drop(out);
    let state = State::new(files, opts);
    let bound = server.addr();
    server
        .serve(&state, stop, serve::WORKERS)
        .map_err(|e| Error::Usage(format!("serving {bound}: {e}")))?;
    Ok(Outcome::Ok)
}
