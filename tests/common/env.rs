//! The environment switches of the tests: `CI` and `MEMLENS_BLESS`, and what a test does when
//! something it needs from outside the repository is missing.
//!
//! The CI rule: a test that needs `../shared/samples/real` (the real snapshots) or `python3`
//! (the oracles, the capture self-test) and does not find it prints `skipped: ...` and passes
//! on a developer's machine, but fails under `CI`, where both are expected: a checkout that
//! lost them must not be green.

use super::ci::{ci, env_flag, unavailable_under};
use std::path::PathBuf;
use std::process::Command;

/// True when `MEMLENS_BLESS` asks the golden files to be rewritten.
pub fn bless() -> bool {
    env_flag("MEMLENS_BLESS")
}

fn unavailable<T>(expected: &str, why: &str) -> Option<T> {
    unavailable_under(ci(), expected, why)
}

/// The interpreter `python3` on PATH runs (its `sys.executable`), found once per test process:
/// the tests start it directly. Where `python3` is a launcher script (pyenv's shim: a bash
/// script that runs `pyenv exec`), each start through it cost about 0.1 s more, and the tests
/// start Python hundreds of times. `python3` itself when that cannot be asked, so that
/// [`require_python`] reports why under the CI rule.
pub fn python3() -> &'static std::path::Path {
    static PYTHON3: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON3.get_or_init(|| {
        let o = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output();
        match o {
            Ok(o) if o.status.success() => {
                let path = String::from_utf8_lossy(&o.stdout).trim().to_string();
                if path.is_empty() {
                    PathBuf::from("python3")
                } else {
                    PathBuf::from(path)
                }
            }
            _ => PathBuf::from("python3"),
        }
    })
}

/// `../shared/samples/real`, beside the repository.
pub fn shared_real_dir() -> PathBuf {
    super::root().join("../shared/samples/real")
}

const SHARED: &str = "../shared/samples/real";

/// The real snapshots of `../shared/samples/real` (`*.pickle`, `*.pkl`), sorted; when the
/// directory is absent or empty, a skip outside CI and a failure under it.
pub fn require_shared() -> Option<Vec<PathBuf>> {
    let dir = shared_real_dir();
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) => return unavailable(SHARED, &format!("{}: {e}", dir.display())),
    };
    let mut v: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("pickle") | Some("pkl")
            )
        })
        .collect();
    v.sort();
    if v.is_empty() {
        return unavailable(SHARED, &format!("no snapshots in {}", dir.display()));
    }
    Some(v)
}

/// The real snapshot `../shared/samples/real/NAME`, under the same rule as [`require_shared`]
/// (a file the test names must be there when the others are).
pub fn require_real(name: &str) -> Option<PathBuf> {
    let files = require_shared()?;
    match files.into_iter().find(|p| p.ends_with(name)) {
        Some(p) => Some(p),
        None => unavailable(&format!("{SHARED}/{name}"), "not among the real snapshots"),
    }
}

/// True when `python3` runs (with `pickle` and `json`); when it does not, a skip (`false`)
/// outside CI and a failure under it.
pub fn require_python() -> bool {
    let run = Command::new(python3())
        .arg("-c")
        .arg("import pickle, json")
        .output();
    let why = match run {
        Ok(o) if o.status.success() => return true,
        Ok(o) => format!(
            "`python3 -c 'import pickle, json'` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("python3 does not run: {e}"),
    };
    unavailable::<()>("python3 (the oracles)", &why).is_some()
}

/// What the browser tests run: `node` with `tests/browser/check_report.mjs`, which drives
/// headless Chromium through playwright-core.
pub struct Browser {
    /// The check script.
    pub script: PathBuf,
}

/// Node, Chromium (`/usr/bin/chromium`, or `$CHROMIUM`) and playwright-core
/// (`tests/browser/node_modules`, from `npm ci --prefix tests/browser`), under the CI rule:
/// `.ci/run` installs all three, so under CI a missing one fails.
pub fn require_browser() -> Option<Browser> {
    let root = super::root();
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        return unavailable("node (the browser tests)", "`node --version` does not run");
    }
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if !chromium.exists() {
        return unavailable(
            "chromium (the browser tests)",
            &format!(
                "{} is absent (apt-get install -y chromium)",
                chromium.display()
            ),
        );
    }
    let driver = root.join("tests/browser/node_modules/playwright-core");
    if !driver.exists() {
        return unavailable(
            "playwright-core (the browser tests)",
            &format!(
                "{} is absent (npm ci --prefix tests/browser)",
                driver.display()
            ),
        );
    }
    Some(Browser {
        script: root.join("tests/browser/check_report.mjs"),
    })
}

/// pytest for the Python package's tests, under the CI rule (`.ci/run` installs it).
pub fn require_pytest() -> bool {
    let run = Command::new(python3())
        .args(["-m", "pytest", "--version"])
        .output();
    let why = match run {
        Ok(o) if o.status.success() => return true,
        Ok(o) => format!(
            "`python3 -m pytest --version` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("python3 does not run: {e}"),
    };
    unavailable::<()>("pytest (the Python package's tests)", &why).is_some()
}

/// Python modules `names` (e.g. `duckdb`, `dask`: the dataset and fleet-recipe tests), under
/// the CI rule (`.ci/run` installs them with pip).
pub fn require_python_modules(names: &[&str]) -> bool {
    let run = Command::new(python3())
        .arg("-c")
        .arg(format!("import {}", names.join(", ")))
        .output();
    let why = match run {
        Ok(o) if o.status.success() => return true,
        Ok(o) => format!(
            "`python3 -c 'import {}'` failed: {} (python3 -m pip install {})",
            names.join(", "),
            String::from_utf8_lossy(&o.stderr)
                .trim()
                .lines()
                .last()
                .unwrap_or(""),
            names.join(" ")
        ),
        Err(e) => format!("python3 does not run: {e}"),
    };
    unavailable::<()>(&format!("python modules {}", names.join(", ")), &why).is_some()
}
