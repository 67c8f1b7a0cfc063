//! `memlens mcp [--allow DIR]...`: the MCP server for coding agents. It is written in Python on
//! the official MCP SDK (`python/memlens/mcp_server.py`, the package's `mcp` extra); this
//! command starts it with the Python installed beside this binary (a wheel's venv) or
//! `python3` on `PATH`, pointing it at this binary, and becomes that process on Unix.
//!
//! Python starts isolated (`-I`): neither the working directory nor `PYTHON*` variables shape
//! what it imports, so `mcp/` or `memlens/` folders where the agent runs are never imported;
//! [`BOOT`] then puts back the absolute entries of `PYTHONPATH` (a source checkout) and, outside
//! a virtual environment, the user's site-packages (`pip install --user`).

use super::Outcome;
use crate::Error;
use std::path::PathBuf;
use std::process::Command;

/// Arguments of `memlens mcp`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A directory whose files the tools may read (repeat; default: the current directory).
    #[arg(long, value_name = "DIR")]
    allow: Vec<PathBuf>,
}

/// The Pythons to try: the one beside this binary (a wheel installs both in one `bin/`),
/// then `python3` and `python` on `PATH`.
fn pythons() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(PathBuf::from))
    {
        out.push(dir.join("python3"));
        out.push(dir.join("python"));
    }
    out.push(PathBuf::from("python3"));
    out.push(PathBuf::from("python"));
    out
}

/// The start of every Python program this command runs under `-I`: the absolute entries of
/// `PYTHONPATH` first (relative ones would name the working directory), the user's
/// site-packages outside a virtual environment, `PYTHONDONTWRITEBYTECODE` honoured.
const BOOT: &str = "import os, site, sys\n\
sys.path[:0] = [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if os.path.isabs(p)]\n\
if sys.prefix == sys.base_prefix and not os.environ.get('PYTHONNOUSERSITE'):\n    site.addsitedir(site.getusersitepackages())\n\
sys.dont_write_bytecode = sys.dont_write_bytecode or bool(os.environ.get('PYTHONDONTWRITEBYTECODE'))\n";

/// `python -I -c PROGRAM`, [`BOOT`] first.
fn isolated(python: &PathBuf, program: &str) -> Command {
    let mut cmd = Command::new(python);
    cmd.args(["-I", "-c", &format!("{BOOT}{program}")]);
    cmd
}

/// Whether `python` imports the server and the SDK.
fn serves(python: &PathBuf) -> bool {
    isolated(python, "import memlens.mcp_server, mcp")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs the server until the client closes it (its exit status is this command's).
pub fn run(args: Args) -> Result<Outcome, Error> {
    let Some(python) = pythons().into_iter().find(serves) else {
        return Err(Error::Usage(
            "mcp: the MCP server is the Python package's: pip install 'memlens[mcp]' (Python \
             3.10+), then `memlens mcp` or `python -m memlens mcp`"
                .into(),
        ));
    };
    let mut cmd = isolated(
        &python,
        "from memlens.mcp_server import main\nsys.exit(main(sys.argv[1:]))",
    );
    for d in &args.allow {
        cmd.arg("--allow").arg(d);
    }
    if let Ok(me) = std::env::current_exe() {
        cmd.env("MEMLENS_BIN", me);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let e = cmd.exec();
        Err(Error::Usage(format!(
            "mcp: cannot start {}: {e}",
            python.display()
        )))
    }
    #[cfg(not(unix))]
    {
        let status = cmd
            .status()
            .map_err(|e| Error::Usage(format!("mcp: cannot start {}: {e}", python.display())))?;
        Ok(if status.success() {
            Outcome::Ok
        } else {
            Outcome::InputErrors
        })
    }
}
