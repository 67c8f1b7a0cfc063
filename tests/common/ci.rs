//! The one definition of "under CI" of the Rust tests, and the CI rule. This file stands
//! alone (no `super::`): the integration tests have it as `common::ci`, and the library's unit
//! tests as `crate::test_ci` (src/lib.rs, `#[path]`), so both read `CI` the same way. The
//! Python tests follow the same rule (`tests/python/conftest.py`, `flag_on`).
//!
//! The CI rule: a test that needs something from outside the repository (`../shared`, a tool)
//! and does not find it prints a visible `skipped: ...` line on a developer's machine, and
//! fails under CI, where everything is expected: a checkout that lost it must not be green.

use std::path::Path;

/// Whether a switch's value turns it on: unset, empty, `0`, `false`, `no` or `off` (any case,
/// spaces around ignored) is off; anything else (`1`, `true`, `yes`, ...) is on. The Python
/// tests read `CI` by the same rule (`tests/python/conftest.py`, `flag_on`).
pub fn flag_value(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "" | "0" | "false" | "no" | "off"
        )
    })
}

/// True when the environment variable `name` is on ([`flag_value`]).
pub fn env_flag(name: &str) -> bool {
    flag_value(std::env::var(name).ok().as_deref())
}

/// True under CI: `CI` on ([`flag_value`]: `CI=1`, `true`, `yes`; not `CI=0`, `false` or
/// empty), as every CI service sets it. The one definition of the Rust tests.
pub fn ci() -> bool {
    env_flag("CI")
}

/// What a test does without something it needs: under CI (`ci`), panic naming what is
/// expected and why it is missing; otherwise print `skipped: ...`, log it ([`log_skip`]) and
/// return `None`.
pub fn unavailable_under<T>(ci: bool, expected: &str, why: &str) -> Option<T> {
    let log = std::env::var_os("MEMLENS_SKIP_LOG");
    unavailable_logged(ci, expected, why, log.as_deref().map(Path::new))
}

/// [`unavailable_under`] with the skip log given: `log`, when some, gets the skip's line.
/// (A test of the rule passes its own file, so the run's log counts only real skips.)
pub fn unavailable_logged<T>(ci: bool, expected: &str, why: &str, log: Option<&Path>) -> Option<T> {
    if ci {
        panic!("CI expects {expected}: {why} (unset CI to skip this test instead)");
    }
    eprintln!("skipped: {expected}: {why}");
    if let Some(log) = log {
        log_skip_to(log, &format!("{expected}: {why}"));
    }
    None
}

/// Appends `line` to the file `MEMLENS_SKIP_LOG` names, when set: `scripts/test` counts the
/// lines on its last line ("skipped: N"), so a skip outside CI is never hidden behind "ok".
pub fn log_skip(line: &str) {
    if let Some(path) = std::env::var_os("MEMLENS_SKIP_LOG") {
        log_skip_to(Path::new(&path), line);
    }
}

/// Appends `rust: LINE` (newlines made spaces) to the skip log `path`.
pub fn log_skip_to(path: &Path, line: &str) {
    use std::io::Write;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut f) = file {
        // One write per line: lines of tests running in parallel do not interleave.
        let _ = f.write_all(format!("rust: {}\n", line.replace('\n', " ")).as_bytes());
    }
}

/// The entries of directory `dir`, under the CI rule when it cannot be read (a `skipped:`
/// line and `None` outside CI, a panic under it): what the unit tests that walk
/// `../shared/samples/real` beside the samples use instead of a silent `continue`.
pub fn read_dir_or_skip(dir: &Path) -> Option<std::fs::ReadDir> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Some(entries),
        Err(e) => unavailable_under(ci(), &dir.display().to_string(), &e.to_string()),
    }
}
