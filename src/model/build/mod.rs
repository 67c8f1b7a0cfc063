//! Decoded pickle values → [`Snapshot`]: every shape and version normalized here.
//!
//! The builder is the decoder's [`Hooks`](crate::pickle::Hooks): a frame dict becomes a
//! [`FrameId`](super::FrameId) the first time it is appended to a list, a frames list a
//! [`StackId`](super::StackId) when it is stored under `frames`, and each trace entry, block,
//! segment and annotation a compact struct as soon as it is appended to its list. Memo entries
//! then point at the converted handles, so shared objects are converted once and the generic
//! containers are released as the decoder goes.
//!
//! Here: the entry points and their options, and the sequential decoder's runs. Which path
//! runs is decided in `path.rs`; the builder's state is in `builder.rs`, what a dict is in
//! `kinds.rs`, dict → struct conversions in `convert.rs`, the hooks in `hooks.rs`, the top
//! level → [`Snapshot`] in `assemble.rs`, the stacks that join an entry's `forward_frames` and
//! the FX nodes' original traces in `joined.rs`, the parallel decoder in `parallel.rs` (threads) and
//! `chunk.rs` (a chunk's builder and the merge).

mod assemble;
mod builder;
mod chunk;
mod convert;
mod hooks;
mod joined;
mod kinds;
mod parallel;
mod path;

pub use crate::model::error::BuildError;
use crate::model::snapshot::{Snapshot, Warning};
use crate::pickle::{self, scan};
use crate::timings::{self, Phase};
use builder::Builder;
use path::{choose, Path};
pub use path::{
    default_threads, max_threads, PARALLEL_FROM_BYTES, PARALLEL_FROM_CORES, SPLIT_FROM_THREADS,
};

/// Which decoder builds the snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Strategy {
    /// Chosen by core count and input size ([`PARALLEL_FROM_CORES`], [`PARALLEL_FROM_BYTES`];
    /// the table of paths and their figures is in `model/build/path.rs`).
    #[default]
    Auto,
    /// The sequential decoder (the reference; handles every input).
    Sequential,
    /// The two-pass parallel decoder, falling back to the sequential one when pass 1 finds a
    /// layout it does not plan for or anything fails.
    Parallel,
}

/// Options for building a snapshot. The library reads no environment variable: the CLI maps
/// `MEMLENS_STRATEGY`, `MEMLENS_SPLIT_REGIONS`, `MEMLENS_PRESCAN` and `MEMLENS_TIMING` onto
/// `strategy`, `split_regions`, `prescan` and `timing`.
#[derive(Default)]
pub struct BuildOptions<'p> {
    /// Called about every 16 MiB of input with the byte offset reached.
    pub progress: Option<&'p mut dyn FnMut(u64)>,
    /// Worker threads; 0 = [`default_threads`] (and the parallel decoder only from
    /// [`PARALLEL_FROM_CORES`] cores).
    pub threads: usize,
    /// Sequential, parallel or automatic.
    pub strategy: Strategy,
    /// Target bytes per parallel chunk; 0 = 8 MiB (tests use tiny chunks).
    pub chunk_bytes: usize,
    /// Regions pass 1 of the parallel decoder is split into, each walked by its own thread;
    /// 0 = one per thread from [`SPLIT_FROM_THREADS`] threads on, else none; 1 = none.
    pub split_regions: usize,
    /// Fewest bytes of trace per region of a split pass 1; 0 = 16 MiB (tests use tiny regions).
    pub split_bytes: usize,
    /// Called with input byte ranges the builder will not read again soon (the caller may
    /// drop them from memory, e.g. `madvise(DONTNEED)` on a file mapping; reading them again
    /// must still work).
    pub release: Option<&'p (dyn Fn(usize, usize) + Sync)>,
    /// Keep what was complete before a truncation or corruption instead of failing
    /// (`--salvage`); a `salvaged` warning names the offset.
    pub salvage: bool,
    /// Decode every dict opcode by opcode, without the fast path for trace entries (slower;
    /// for differential tests of that path).
    pub no_fast_entries: bool,
    /// Benchmarks only: the parallel decoder's pass 1 runs to the end before any worker
    /// starts, and its time is printed as `prescan: S s` (scripts/bench `--scaling`
    /// subtracts it, measuring pass 2 and the merge alone).
    pub prescan: bool,
    /// Print each phase's time, the fallbacks taken and the decode's [`pickle::DecodeStats`]
    /// to stderr (scripts/bench reads them).
    pub timing: bool,
}

pub use crate::input::Arriving;

/// Like [`build`], on input still arriving: the parallel decoder starts on the first bytes;
/// otherwise (one thread, a small input, or a layout it gives up on) the input is awaited
/// whole and decoded as [`build`] would.
pub fn build_arriving(
    src: &dyn Arriving,
    mut options: BuildOptions,
) -> Result<Snapshot, BuildError> {
    if let Path::Parallel(how) = choose(&options, src.capacity(), default_threads()) {
        say_parallel(&how);
        let more = |n: usize| src.upto(n);
        let first = src.upto(scan::WINDOW);
        let more: scan::More = (&more, src.capacity());
        if let Some(snap) = parallel::try_build(
            first,
            Some(more),
            &how,
            &mut options.progress,
            options.release,
        ) {
            return Ok(snap);
        }
        gave_up(&how);
    }
    options.strategy = Strategy::Sequential;
    // Waiting for the rest of the input is part of the decode (the caller's `read` ended
    // when decompression started).
    let all = timings::time(Phase::Decode, || src.all());
    build(all, options)
}

/// Decodes `buf` (an uncompressed pickle) and builds the snapshot, on the path
/// `model/build/path.rs` chooses.
pub fn build(buf: &[u8], mut options: BuildOptions) -> Result<Snapshot, BuildError> {
    let fast = match choose(&options, buf.len(), default_threads()) {
        Path::Salvage => return build_salvage(buf, options),
        Path::Sequential { fast } => {
            timings::decoder(|| "sequential, 1 thread".into());
            fast
        }
        Path::Parallel(how) => {
            say_parallel(&how);
            let built =
                parallel::try_build(buf, None, &how, &mut options.progress, options.release);
            if let Some(snap) = built {
                return Ok(snap);
            }
            gave_up(&how);
            true
        }
    };
    let limits = pickle::Limits::for_input(buf.len());
    let mut b = Builder::new(options.progress);
    b.release = options.release;
    b.flat = fast;
    if !fast {
        let (heap, top) = timings::time(Phase::Decode, || pickle::decode(buf, &mut b, limits))
            .map_err(BuildError::Decode)?;
        return timings::time(Phase::Model, || b.finish(&heap, top));
    }
    let decoded = timings::time(Phase::Decode, || pickle::decode(buf, &mut b, limits));
    let progress = b.progress.take();
    if let Ok((heap, top)) = decoded {
        if options.timing {
            eprintln!("sequential: {:?}", heap.stats);
        }
        if let Ok(snap) = timings::time(Phase::Model, || b.finish(&heap, top)) {
            return Ok(snap);
        }
    }
    // The fast path for trace entries met a file it does not read like the general decoder
    // (a broken or unusual one): the general decoder gives the answer, or the error, of
    // record.
    if options.timing {
        eprintln!("fast path: gave up; decoding again opcode by opcode");
    }
    timings::decoder(|| "sequential; its fast path gave up, decoded again opcode by opcode".into());
    let mut g = Builder::new(progress);
    g.release = options.release;
    g.flat = false;
    let (heap, top) = timings::time(Phase::Decode, || pickle::decode(buf, &mut g, limits))
        .map_err(BuildError::Decode)?;
    timings::time(Phase::Model, || g.finish(&heap, top))
}

/// Says (for `--timings`) that the parallel decoder runs as `how` says.
fn say_parallel(how: &path::Parallel) {
    timings::decoder(|| format!("parallel, {} threads", how.threads.max(1)));
}

/// Says (for `--timings`) that the parallel decoder gave up and the sequential one took over.
fn gave_up(how: &path::Parallel) {
    timings::decoder(|| {
        format!(
            "parallel ({} threads) gave up; sequential took over",
            how.threads.max(1)
        )
    });
}

/// The salvage path: the general loop, keeping what was complete before a break.
fn build_salvage(buf: &[u8], options: BuildOptions) -> Result<Snapshot, BuildError> {
    timings::decoder(|| "sequential, salvaging".into());
    let mut b = Builder::new(options.progress);
    b.release = options.release;
    b.flat = false;
    let (heap, top, failure) = timings::time(Phase::Decode, || {
        pickle::decode_salvage(buf, &mut b, pickle::Limits::for_input(buf.len()))
    })
    .map_err(BuildError::Decode)?;
    let mut snap = timings::time(Phase::Model, || b.finish(&heap, top))?;
    if let Some(e) = failure {
        let kept = snap.events.len();
        snap.warnings.insert(
            0,
            Warning {
                code: "salvaged",
                device: None,
                message: format!(
                    "{} at byte {} of {} ({}); kept what was complete before it: {} segments, {} trace events",
                    if e.truncated { "the file ends early" } else { "the file is corrupt" },
                    e.offset,
                    buf.len(),
                    e.message,
                    snap.segments.len(),
                    kept
                ),
            },
        );
    }
    Ok(snap)
}

#[cfg(test)]
#[path = "../../../tests/common/canonical.rs"]
mod shared_canonical;

#[cfg(test)]
mod tests;
