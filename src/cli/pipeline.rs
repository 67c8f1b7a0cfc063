//! The command pipeline: a snapshot is loaded once (with the global options), held to
//! `--device` by the one device rule, replayed once (when an analysis asks), and the same [`Loaded`] is handed to
//! one or several analyses; [`report`] then writes the result through `--format`.

use super::args::{DeviceArg, OutputArgs};
use super::models::{Evicted, Key, Models};
use super::progress;
use super::report::Formats;
use super::session_files::Opened;
use super::timings;
use crate::error::quoted_path;
use crate::model::{Snapshot, Strategy};
use crate::replay::{self, DeviceReplay};
use crate::{Error, LoadOptions};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What the global flags say about reading any snapshot (`--threads`, `--salvage`, and the
/// benchmark knobs `MEMLENS_FLAT=0`, `MEMLENS_STRATEGY`, `MEMLENS_SPLIT_REGIONS`,
/// `MEMLENS_PRESCAN`, `MEMLENS_TIMING`, `MEMLENS_FLOOR`, read once here: the library reads no
/// environment).
#[derive(Clone, Copy, Debug, Default)]
pub struct GlobalOptions {
    /// How every snapshot is read and decoded.
    pub load: LoadOptions,
    /// Benchmarks only (`MEMLENS_FLOOR=1`): once the first input is read, walk its opcodes
    /// without decoding them ([`crate::pickle::scan::floor_walk`]), print
    /// `floor: S s, N opcodes` to stderr and exit 0 without output.
    pub floor: bool,
}

impl GlobalOptions {
    /// From the global flags and the environment.
    pub fn new(threads: Option<usize>, salvage: bool) -> GlobalOptions {
        GlobalOptions {
            load: LoadOptions {
                threads: threads.unwrap_or(0),
                salvage,
                no_fast_entries: std::env::var_os("MEMLENS_FLAT").is_some_and(|v| v == "0"),
                // MEMLENS_STRATEGY=parallel|sequential: one path, even with one thread.
                strategy: match std::env::var("MEMLENS_STRATEGY").as_deref() {
                    Ok("parallel") => Strategy::Parallel,
                    Ok("sequential") => Strategy::Sequential,
                    _ => Strategy::Auto,
                },
                // MEMLENS_SPLIT_REGIONS=N: pass 1 in N regions (1 = no split).
                split_regions: std::env::var("MEMLENS_SPLIT_REGIONS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
                prescan: std::env::var_os("MEMLENS_PRESCAN").is_some(),
                timing: std::env::var_os("MEMLENS_TIMING").is_some(),
            },
            floor: std::env::var_os("MEMLENS_FLOOR").is_some_and(|v| v == "1"),
        }
    }
}

/// One snapshot, read and replayed: what every analysis of a file starts from.
pub struct Loaded {
    /// The file as given.
    pub path: PathBuf,
    /// The snapshot; with `--device N`, as if it held device N alone ([`only_device`]).
    pub snap: Snapshot,
    /// The replay of every device with a trace, made on first use (a summary needs none).
    replays: OnceLock<Vec<DeviceReplay>>,
}

impl Loaded {
    /// Loads `path` (progress bar when large), applies the device rule and replays.
    pub fn open(path: &Path, g: &GlobalOptions, device: DeviceArg) -> Result<Loaded, Error> {
        Self::with(path, load(path, g)?, device)
    }

    /// Like [`Loaded::open`], without a progress bar or timing lines (for files read in
    /// parallel), with `load` in place of the global options' load options.
    pub fn quiet(path: &Path, load: &LoadOptions, device: DeviceArg) -> Result<Loaded, Error> {
        let t0 = std::time::Instant::now();
        let inp = crate::load::read(path, load)?;
        let snap = timings::decoded(path, &inp, t0.elapsed(), || {
            crate::load::build(path, &inp, load, &mut |_| {})
        })?;
        Self::with(path, snap, device)
    }

    /// A snapshot already built from `path`, with the device rule applied.
    pub fn with(path: &Path, mut snap: Snapshot, device: DeviceArg) -> Result<Loaded, Error> {
        only_device(path, &mut snap, device.device)?;
        Ok(Loaded {
            path: path.to_path_buf(),
            snap,
            replays: OnceLock::new(),
        })
    }

    /// The replay of every device with a trace (one forward pass each, the first time).
    pub fn replays(&self) -> &[DeviceReplay] {
        self.replays
            .get_or_init(|| timings::replay(&self.path, || replay::replay(&self.snap)))
    }

    /// The snapshot and the replay of its devices (made now if no analysis asked for it),
    /// for a command that keeps them after the file's reports are made (`serve`).
    pub fn into_parts(self) -> (Snapshot, Vec<DeviceReplay>) {
        let replays = self
            .replays
            .into_inner()
            .unwrap_or_else(|| timings::replay(&self.path, || replay::replay(&self.snap)));
        (self.snap, replays)
    }

    /// The file's name as reports print it.
    pub fn title(&self) -> String {
        self.path.display().to_string()
    }

    /// The common directory of the snapshot's user files, which text output strips from the
    /// paths of sites (`diff`, `check` and `batch` strip the same).
    pub fn root(&self) -> Option<String> {
        crate::analyze::profile::snapshot_root(&self.snap)
    }

    /// An analysis's refusal (`no oom event`, a bad moment) as one line naming the file.
    pub fn failed(&self, message: String) -> Error {
        Error::Usage(format!("{}: {message}", quoted_path(&self.path)))
    }
}

/// The one device rule: without `device`, nothing; with a device the snapshot has, the
/// snapshot is cut down to it (its other devices and their warnings dropped, so every
/// analysis, total and note is about that device); with one it lacks, one line, exit 2:
/// `FILE: no device N in the snapshot (devices: 0, 1)`.
pub fn only_device(path: &Path, snap: &mut Snapshot, device: Option<u32>) -> Result<(), Error> {
    let Some(d) = device else {
        return Ok(());
    };
    if snap.device(d).is_none() {
        let ids: Vec<String> = snap.devices.iter().map(|x| x.id.to_string()).collect();
        return Err(Error::Usage(format!(
            "{}: no device {d} in the snapshot (devices: {})",
            quoted_path(path),
            if ids.is_empty() {
                "none".to_string()
            } else {
                ids.join(", ")
            }
        )));
    }
    snap.devices.retain(|x| x.id == d);
    snap.warnings
        .retain(|w| !matches!(w.device, Some(x) if x != d));
    // Pinned host memory is on no device.
    snap.host = None;
    Ok(())
}

/// Loads one snapshot, with a progress bar when it is large; an out-of-memory line names
/// the file meanwhile. `MEMLENS_TIMING` prints the input and model sizes (scripts/bench).
/// In a session ([`cache_decodes`]) the file is opened once and a model already decoded from
/// the same bytes is handed out instead ([`super::models`]).
pub fn load(path: &Path, g: &GlobalOptions) -> Result<Snapshot, Error> {
    if !SESSION.lock().is_ok_and(|m| m.is_some()) {
        let snap = decode(path, g, None)?;
        DECODES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return Ok(snap);
    }
    let opened = super::session_files::open(path)?;
    let key = Key::of(&opened, g.load.salvage).map_err(|e| Error::io(path, &e))?;
    if let Some(s) = with_models(|m| m.get(&key)).flatten() {
        return Ok(s);
    }
    let snap = decode(path, g, Some(&opened))?;
    DECODES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = path.display().to_string();
    let copy = snap.clone();
    // The model as decoded is kept (its size is the one `MEMLENS_TIMING` prints).
    with_models(|m| m.insert(opened.real, name, key, snap));
    Ok(copy)
}

/// A session's models ([`cache_decodes`]).
static SESSION: std::sync::Mutex<Option<Models>> = std::sync::Mutex::new(None);
static DECODES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn with_models<T>(f: impl FnOnce(&mut Models) -> T) -> Option<T> {
    SESSION.lock().ok()?.as_mut().map(f)
}

/// From now on, open each file once, keep the models decoded (within `budget` bytes, one per
/// path) and hand out copies of them (`memlens session`): a copy costs a small part of a
/// decode.
pub fn cache_decodes(budget: u64) {
    if let Ok(mut m) = SESSION.lock() {
        m.get_or_insert_with(|| Models::new(budget));
    }
}

/// The models the session dropped since the last call (said in a session's answer).
pub fn evicted() -> Vec<Evicted> {
    with_models(Models::take_evicted).unwrap_or_default()
}

/// Files decoded by this process so far.
pub fn decodes() -> u64 {
    DECODES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Reads and decodes `path` (progress bar when large), from `opened` when a session opened it.
fn decode(path: &Path, g: &GlobalOptions, opened: Option<&Opened>) -> Result<Snapshot, Error> {
    let _oom_names = crate::alloc_guard::reading(path);
    let t0 = std::time::Instant::now();
    let inp = match opened {
        Some(o) => crate::load::read_opened(path, &o.file, o.meta.len(), &g.load)?,
        None => crate::load::read(path, &g.load)?,
    };
    let read = t0.elapsed();
    let timing = g.load.timing;
    if timing {
        eprintln!("input: {:.3} s", read.as_secs_f64());
    }
    if g.floor {
        floor(path, &inp);
    }
    let bar = progress::bytes_bar(inp.len_hint() as u64, &quoted_path(path));
    let snap = timings::decoded(path, &inp, read, || {
        crate::load::build(path, &inp, &g.load, &mut |pos| bar.set_position(pos))
    });
    bar.finish_and_clear();
    if let (Ok(s), true) = (&snap, timing) {
        eprintln!("model: {} bytes", s.heap_bytes());
    }
    snap
}

/// `MEMLENS_FLOOR=1` ([`GlobalOptions::floor`]): walks the opcodes of `inp` without
/// decoding them, prints `floor: S s, N opcodes` to stderr and ends the process: exit 0
/// without output, or 2 where the walk stops before `STOP`.
fn floor(path: &Path, inp: &crate::input::Input) -> ! {
    let bytes = inp.bytes();
    let t = std::time::Instant::now();
    let walked = crate::pickle::scan::floor_walk(bytes);
    let secs = t.elapsed().as_secs_f64();
    match walked {
        Ok(f) => {
            eprintln!("floor: {secs:.3} s, {} opcodes", f.opcodes);
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("memlens: {}: floor walk: {e}", quoted_path(path));
            std::process::exit(2)
        }
    }
}

/// The pipeline of a one-file report: load `file` once, run `analysis` on it, write its
/// report through `out`; returns the report for the exit status. An analysis's error names
/// the file.
pub fn report<R, F>(
    file: &Path,
    g: &GlobalOptions,
    device: DeviceArg,
    out: &OutputArgs<F>,
    analysis: impl FnOnce(&Loaded) -> Result<R, String>,
) -> Result<R, Error>
where
    F: Formats<R> + clap::ValueEnum + Default + Send + Sync + 'static,
{
    let loaded = Loaded::open(file, g, device)?;
    let spinner = progress::work_spinner(
        loaded.snap.heap_bytes() as u64,
        &format!("{}: analysing", quoted_path(file)),
    );
    let r = analysis(&loaded).map_err(|m| loaded.failed(m));
    spinner.finish_and_clear();
    let r = r?;
    super::output::report(out, &r, &loaded.title(), loaded.root())?;
    Ok(r)
}

/// The page of several runs (`report A B ...`, `serve`'s `/runs`) of files loaded, named as
/// `names` gives them (each file's title).
pub fn runs_page(
    loaded: &[Loaded],
    names: &[String],
) -> Result<crate::compose::runs::RunsPage, Error> {
    use crate::compose::runs::{self, RunInput, RunsOptions};
    let inputs: Vec<RunInput> = loaded
        .iter()
        .zip(names)
        .map(|(l, file)| RunInput {
            file,
            snap: &l.snap,
            replays: l.replays(),
        })
        .collect();
    let model_bytes = loaded.iter().map(|l| l.snap.heap_bytes() as u64).sum();
    let spinner = progress::work_spinner(model_bytes, "building the page of the runs");
    let page = runs::run(&inputs, &RunsOptions::default()).map_err(Error::Usage);
    spinner.finish_and_clear();
    page
}
