//! `memlens serve FILE... [--port N] [--bind ADDR]`: bind first (a busy port fails before any
//! decoding), decode and report every file once, print the URL line (and on standard error
//! how to stop it), serve until SIGINT or SIGTERM (exit 0).

use super::args::{stdin_once, DeviceArg, PageArgs};
use super::pipeline::{GlobalOptions, Loaded};
use super::Outcome;
use crate::compose::page;
use crate::compose::page::window::WindowIndex;
use crate::replay::WindowSpec;
use crate::serve::{self, ServedFile, Server, State};
use crate::Error;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// Arguments of `memlens serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot files (pickle, gzip, zstd or JSON; `-` reads standard input), each served as
    /// a page of its own (`?file=K`, K from 0 in this order); with several, `/runs` serves
    /// the page of all of them together (the compare page of two, the first the base).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Port to listen on (0: one the system picks; the URL line names it).
    #[arg(long, value_name = "N", default_value_t = 0)]
    port: u16,
    /// Address to listen on. Anything but a loopback address (127.0.0.1, ::1,
    /// ::ffff:127.0.0.1) makes the server reachable from the network, protected by the token
    /// alone.
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
    let loaded = args
        .files
        .iter()
        .map(|path| Loaded::open(path, g, args.device))
        .collect::<Result<Vec<Loaded>, Error>>()?;
    let mut pages = Vec::with_capacity(loaded.len());
    for l in &loaded {
        // The page and the windows' index side by side: the server waits for both.
        let (report, index) = rayon::join(
            || page::run(&l.snap, l.replays(), &opts),
            || WindowIndex::new(&l.snap, l.replays()),
        );
        pages.push((report.map_err(|m| l.failed(m))?, index));
    }
    // Several files: the page of all of them together too (`/runs`).
    let names: Vec<String> = loaded.iter().map(Loaded::title).collect();
    let runs_page = if loaded.len() > 1 {
        Some(super::pipeline::runs_page(&loaded, &names)?)
    } else {
        None
    };
    let mut files = Vec::with_capacity(loaded.len());
    for ((l, (report, index)), name) in loaded.into_iter().zip(pages).zip(names) {
        let (snap, replays) = l.into_parts();
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
    // Both lines in one write: a reader that takes the URL line and closes the pipe must not
    // make a second write fail (and the server exit with it).
    let mut lines = format!("memlens serving {}\n", server.url());
    if runs_page.is_some() {
        let runs_url = server.url().replacen("/?", "/runs?", 1);
        lines.push_str(&format!("memlens the files together: {runs_url}\n"));
    }
    let mut out = std::io::stdout().lock();
    out.write_all(lines.as_bytes()).map_err(stdout_error)?;
    out.flush().map_err(stdout_error)?;
    drop(out);
    // Beside the URL for the person who started it; standard output keeps the URL lines only.
    eprintln!("memlens: press Ctrl-C to stop the server");
    let mut state = State::new(files, opts);
    if let Some(r) = runs_page {
        state = state.with_runs(r);
    }
    server.serve(&state, stop, serve::WORKERS);
    Ok(Outcome::Ok)
}
