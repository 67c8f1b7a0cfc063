//! `--timings`: what each phase of the command cost, printed to stderr once the command is
//! done (after its output is written, and also when it failed), so that a user with a slow
//! file can say where the time went. Per file read: `read`, `decode`, `model`, `replay`;
//! then the command's `analysis` (its own work less those), `output`, and the `total` wall
//! with the peak RSS. The format is documented in docs/performance.md ("Say what costs what").
//!
//! The decode and model times are the model builder's ([`crate::timings`]); this module
//! names them by file and adds what only the command line sees.

use crate::input::{Container, Input};
use crate::units;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What one file's read cost.
struct FileTimes {
    path: String,
    /// Bytes on disk.
    stored: u64,
    /// Bytes decoded (the pickle, decompressed or transcoded).
    decoded: u64,
    container: Container,
    /// Decompressed by a thread of its own while the decoder followed.
    alongside: bool,
    read: Duration,
    built: crate::timings::Recorded,
    /// `None`: no analysis asked for the replay.
    replay: Option<Duration>,
    /// The decode ended in an error (the file's; said above the timings).
    failed: bool,
}

/// Everything recorded; `None` until [`start`] (without `--timings`).
struct State {
    started: Instant,
    files: Vec<FileTimes>,
    output: Duration,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn with<T>(f: impl FnOnce(&mut State) -> T) -> Option<T> {
    let mut s = STATE.lock().unwrap_or_else(|e| e.into_inner());
    s.as_mut().map(f)
}

/// Turns `--timings` on: the process started at `started`.
pub fn start(started: Instant) {
    crate::timings::enable();
    *STATE.lock().unwrap_or_else(|e| e.into_inner()) = Some(State {
        started,
        files: Vec::new(),
        output: Duration::ZERO,
    });
}

fn on() -> bool {
    crate::timings::enabled() && with(|_| ()).is_some()
}

/// Runs `build` (the decode of `input`, read from `path` in `read`) and records what the
/// read, the decode and the model cost.
pub fn decoded<T, E>(
    path: &Path,
    input: &Input,
    read: Duration,
    build: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    if !on() {
        return build();
    }
    // Whatever an earlier decode on this thread left unclaimed is not this file's.
    crate::timings::take();
    let alongside = input.arriving().is_some();
    let built = build();
    let decoded = match (&built, input.arriving()) {
        (Ok(_), _) | (_, None) => input.bytes().len(),
        (Err(_), Some(_)) => input.len_hint(),
    } as u64;
    let f = FileTimes {
        path: path.display().to_string(),
        stored: input.file_len,
        decoded,
        container: input.container,
        alongside,
        read,
        built: crate::timings::take(),
        replay: None,
        failed: built.is_err(),
    };
    with(|s| s.files.push(f));
    built
}

/// Runs `replay` (the first replay of the file at `path`) and records its time.
pub fn replay<T>(path: &Path, replay: impl FnOnce() -> T) -> T {
    if !on() {
        return replay();
    }
    let t = Instant::now();
    let out = replay();
    let d = t.elapsed();
    let name = path.display().to_string();
    with(|s| {
        if let Some(f) = s.files.iter_mut().rev().find(|f| f.path == name) {
            *f.replay.get_or_insert(Duration::ZERO) += d;
        }
    });
    out
}

/// Runs `write` (a report rendered and written) and adds its time to `output`.
pub fn output<T>(write: impl FnOnce() -> T) -> T {
    if !on() {
        return write();
    }
    let t = Instant::now();
    let out = write();
    let d = t.elapsed();
    with(|s| s.output += d);
    out
}

/// This process's peak resident memory (`VmHWM` of /proc/self/status), where there is one.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

/// Prints the timings to stderr (nothing without `--timings`); `command` is how long the
/// command itself ran.
pub fn print(command: Duration) {
    let Some(text) = with(|s| render(s, command, peak_rss_bytes())) else {
        return;
    };
    eprint!("{text}");
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// `bytes` in IEC units with the exact count: what a report of a slow file needs.
fn size(bytes: u64) -> String {
    if bytes < 1024 {
        return units::plural(bytes, "byte");
    }
    format!("{} ({} bytes)", units::iec(bytes), units::grouped(bytes))
}

/// MiB per second.
fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// One line: the phase's name, its seconds, and what follows.
fn line(out: &mut String, phase: &str, d: Duration, rest: &str) {
    let _ = writeln!(out, "  {phase:<9}{:>9.3} s{rest}", secs(d));
}

fn render(s: &State, command: Duration, peak: Option<u64>) -> String {
    let mut out = String::from("timings:\n");
    let mut spent = s.output;
    for f in &s.files {
        let packed = match f.container {
            Container::Pickle => String::new(),
            Container::Gzip | Container::Zstd => format!(
                " ({}, {} decompressed{})",
                if f.container == Container::Gzip {
                    "gzip"
                } else {
                    "zstd"
                },
                units::iec(f.decoded),
                if f.alongside {
                    ", decompressing alongside"
                } else {
                    ""
                }
            ),
            Container::Json => format!(" (JSON, {} transcoded)", units::iec(f.decoded)),
        };
        let _ = writeln!(out, "  file     {}, {}{packed}", f.path, size(f.stored));
        line(&mut out, "read", f.read, "");
        let b = &f.built;
        let rate = mib(f.decoded) / secs(b.decode).max(1e-9);
        let decoder = b.decoder.as_deref().unwrap_or("not run");
        let waits = match (f.failed, f.alongside) {
            (true, _) => "; failed: the file's error is said above",
            (false, true) => "; includes waiting on the decompression",
            (false, false) => "",
        };
        line(
            &mut out,
            "decode",
            b.decode,
            &format!(", {rate:.0} MiB/s ({decoder}{waits})"),
        );
        line(&mut out, "model", b.model, "");
        match f.replay {
            Some(r) => line(&mut out, "replay", r, ""),
            None => line(&mut out, "replay", Duration::ZERO, " (none: not needed)"),
        }
        spent += f.read + b.decode + b.model + f.replay.unwrap_or_default();
    }
    // Files read side by side (`diff`, `serve`) overlap: their sum can pass the wall.
    line(&mut out, "analysis", command.saturating_sub(spent), "");
    line(&mut out, "output", s.output, "");
    let rss = peak.map_or(String::new(), |b| format!(", peak RSS {}", units::iec(b)));
    line(&mut out, "total", s.started.elapsed(), &rss);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_has_its_line() {
        let started = Instant::now() - Duration::from_millis(50);
        let s = State {
            started,
            files: vec![FileTimes {
                path: "a.pickle.gz".into(),
                stored: 2 << 20,
                decoded: 10 << 20,
                container: Container::Gzip,
                alongside: true,
                read: Duration::from_millis(1),
                built: crate::timings::Recorded {
                    decode: Duration::from_millis(20),
                    model: Duration::from_millis(2),
                    decoder: Some("sequential, 1 thread".into()),
                },
                replay: None,
                failed: false,
            }],
            output: Duration::from_millis(3),
        };
        let text = render(&s, Duration::from_millis(40), Some(50 << 20));
        let want = [
            "timings:",
            "  file     a.pickle.gz, 2.00 MiB (2,097,152 bytes) (gzip, 10.00 MiB decompressed, decompressing alongside)",
            "  read         0.001 s",
            "  decode       0.020 s, 500 MiB/s (sequential, 1 thread; includes waiting on the decompression)",
            "  model        0.002 s",
            "  replay       0.000 s (none: not needed)",
            "  analysis     0.014 s",
            "  output       0.003 s",
        ];
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(&lines[..want.len()], want);
        assert!(lines[want.len()].starts_with("  total "));
        assert!(lines[want.len()].ends_with("s, peak RSS 50.00 MiB"));
    }

    #[test]
    fn a_file_that_failed_to_decode_says_so_and_a_tiny_one_counts_bytes() {
        let s = State {
            started: Instant::now(),
            files: vec![FileTimes {
                path: "bad.pickle".into(),
                stored: 3,
                decoded: 3,
                container: Container::Pickle,
                alongside: false,
                read: Duration::ZERO,
                built: crate::timings::Recorded {
                    decode: Duration::from_millis(1),
                    model: Duration::ZERO,
                    decoder: Some("sequential, 1 thread".into()),
                },
                replay: None,
                failed: true,
            }],
            output: Duration::ZERO,
        };
        let text = render(&s, Duration::from_millis(2), None);
        assert!(text.contains("  file     bad.pickle, 3 bytes\n"), "{text}");
        assert!(
            text.contains("(sequential, 1 thread; failed: the file's error is said above)"),
            "{text}"
        );
    }
}
