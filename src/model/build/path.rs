//! The one place that says which decode path runs, when and why ([`choose`]), with the
//! thresholds it uses and the figures that set them.

use super::{BuildOptions, Strategy};
use crate::pickle::scan;

/// The decode paths, and which one [`choose`] takes. Figures: this VM (2 cores of an AMD
/// EPYC) unless said otherwise; `docs/performance.md` has the tables.
///
/// | path | runs when | why (measured) |
/// |---|---|---|
/// | salvage (`decode_salvage`, general loop, open containers closed) | `salvage` | the only path that keeps what came before a break |
/// | plain (general loop only) | `no_fast_entries` | the reference the fast path is tested against (`MEMLENS_FLAT=0`) |
/// | fast path (`machine/flat.rs`) + fallback | every other sequential decode | 23% fewer instructions than plain on the generated shared layout (3.27 → 2.53 G, 104 MB), 26% on a real 109 MB `_dump_snapshot` (5.24 → 3.87 G); +3% on the fresh layout, which the back-off leaves to the general loop. The fallback (a second, plain decode) runs only after the fast path gave up on a file |
/// | parallel (pass 1 + planned chunks) | `Strategy::Parallel`; `Auto` from [`PARALLEL_FROM_BYTES`] with `threads` ≥ 2 asked for, or by default from [`PARALLEL_FROM_CORES`] cores | 16 cores: 1.31 s per GB against the single pass's 3.4; 2 cores: 1.33-1.36× *slower* than `--threads 1` by default (issue 38), so not the default there |
/// | split pass 1 (`scan/split.rs`) | parallel with [`SPLIT_FROM_THREADS`] threads or more (`split_regions` overrides) | pass 1 1.3-1.4× faster on 2 cores but the whole decode not (its CPU is 1.5× the single pass's); kept until measured on 16 cores, where pass 1 unsplit is the wall |
/// | streaming (`build_arriving`) | the parallel path on a gzip/zstd input still being decompressed | the decode overlaps decompression instead of waiting for it |
///
/// A parallel decode that finds a layout it does not plan for, or fails anywhere, falls back
/// to the sequential fast path (and that to the plain one), which gives the answer or error
/// of record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// Keep what was complete before a break (`BuildOptions::salvage`).
    Salvage,
    /// The sequential decoder; `fast`: with the trace entry fast path (and its fallback).
    Sequential {
        /// Trace entries through `machine/flat.rs`.
        fast: bool,
    },
    /// The two-pass parallel decoder.
    Parallel(Parallel),
}

/// How the parallel decoder runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Parallel {
    /// Worker threads.
    pub(crate) threads: usize,
    /// Target bytes per chunk.
    pub(crate) chunk_bytes: usize,
    /// How pass 1 is split across threads.
    pub(crate) split: scan::SplitOptions,
    /// Pass 1 runs to the end before any worker starts (`BuildOptions::prescan`).
    pub(crate) prescan: bool,
    /// Phase timings and counters to stderr (`BuildOptions::timing`).
    pub(crate) timing: bool,
}

/// Smallest input the parallel decoder takes by default: below it pass 1 and the threads'
/// setup are not worth it (tens of MB and up are where it wins on 16 cores).
pub const PARALLEL_FROM_BYTES: usize = 16 << 20;

/// Fewest cores on which the default (`threads` 0) runs the parallel decoder. On 2 cores the
/// default (two threads) was 1.33-1.36× slower than `--threads 1` on PyTorch's 1M-entry memo
/// layout and a 927 MB per-entry layout (issue 38: whole-process wall, runs interleaved A/B,
/// medians of 5 and 3), and "two threads faster than one on every layout" was never met on
/// 2 cores (docs/performance.md: the memo layout's pass 1 alone costs about the single
/// pass). The decode takes about max(pass 1, CPU / cores) with the two-pass CPU 1.5× the
/// single pass's; pass 1 stops being the wall once it is split, from [`SPLIT_FROM_THREADS`]
/// on (16 cores: 1.31 s per GB against 3.4 single-pass). So the default goes parallel from
/// there; on fewer cores it runs one thread, and `--threads N` still asks for N.
pub const PARALLEL_FROM_CORES: usize = SPLIT_FROM_THREADS;

/// Threads from which pass 1 is split by default. The split makes pass 1's wall several times
/// shorter but adds CPU (each helper counts memo entries, a third of a walk, before walking its
/// region): on `n` cores the decode takes about max(pass 1, all CPU / n), and with pass 1 about
/// a fifth of the CPU (measured on two cores, docs/performance.md) pass 1 becomes the wall,
/// and the split pays, from about 6 cores on; on two it is slower.
pub const SPLIT_FROM_THREADS: usize = 6;

/// Target bytes per parallel chunk when `chunk_bytes` is 0.
const CHUNK_BYTES: usize = 8 << 20;

/// The thread count used when [`BuildOptions::threads`] is 0: one per core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The most decoder threads one decode starts: one per core, and two on a single core (so that
/// asking for the parallel decoder still runs it). More threads than cores only add switching;
/// `--threads 100000` used to start 100,000 (issue 36).
pub fn max_threads() -> usize {
    default_threads().max(2)
}

/// The threads `options` ask for: 0 = one per core, else at most [`max_threads`].
pub(crate) fn resolved_threads(options: &BuildOptions) -> usize {
    match options.threads {
        0 => default_threads(),
        n => n.min(max_threads()),
    }
}

/// Which path decodes an input of `len` bytes with `options` on `cores` cores (see [`Path`]
/// for the table of paths and the figures behind each rule).
pub(crate) fn choose(options: &BuildOptions, len: usize, cores: usize) -> Path {
    if options.salvage {
        return Path::Salvage;
    }
    if options.no_fast_entries {
        return Path::Sequential { fast: false };
    }
    let threads = resolved_threads(options);
    let parallel = match options.strategy {
        Strategy::Sequential => false,
        Strategy::Parallel => true,
        Strategy::Auto if len < PARALLEL_FROM_BYTES => false,
        // Asked for: as many threads as asked (benchmarks compare `--threads 1` and `2`).
        Strategy::Auto if options.threads != 0 => threads >= 2,
        Strategy::Auto => cores >= PARALLEL_FROM_CORES,
    };
    if !parallel {
        return Path::Sequential { fast: true };
    }
    Path::Parallel(Parallel {
        threads,
        chunk_bytes: match options.chunk_bytes {
            0 => CHUNK_BYTES,
            n => n,
        },
        split: split_options(options, threads),
        prescan: options.prescan,
        timing: options.timing,
    })
}

/// How pass 1 splits: [`BuildOptions::split_regions`], else one region per thread from
/// [`SPLIT_FROM_THREADS`] threads on.
fn split_options(options: &BuildOptions, threads: usize) -> scan::SplitOptions {
    let regions = match options.split_regions {
        0 if threads >= SPLIT_FROM_THREADS => threads,
        0 => 1,
        n => n,
    };
    scan::SplitOptions {
        regions,
        min_bytes: options.split_bytes,
        timing: options.timing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(threads: usize) -> BuildOptions<'static> {
        BuildOptions {
            threads,
            ..Default::default()
        }
    }

    #[test]
    fn threads_asked_past_the_cores_are_cut_to_them() {
        let asked = |threads| resolved_threads(&opts(threads));
        assert_eq!(asked(100_000), default_threads().max(2));
        assert_eq!(asked(0), default_threads());
        assert_eq!(asked(1), 1);
        assert_eq!(asked(2), 2);
    }

    #[test]
    fn the_default_is_sequential_below_the_cores_that_pay_and_parallel_from_them() {
        let big = 1 << 30;
        let seq = Path::Sequential { fast: true };
        assert_eq!(choose(&opts(0), big, 2), seq);
        assert_eq!(choose(&opts(0), big, PARALLEL_FROM_CORES - 1), seq);
        assert!(matches!(
            choose(&opts(0), big, PARALLEL_FROM_CORES),
            Path::Parallel(_)
        ));
        // Asked for, two threads run the parallel decoder whatever the cores.
        assert!(matches!(choose(&opts(2), big, 2), Path::Parallel(_)));
        assert_eq!(choose(&opts(1), big, 16), seq);
        assert_eq!(choose(&opts(2), PARALLEL_FROM_BYTES - 1, 16), seq);
    }
}
