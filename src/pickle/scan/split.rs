//! Pass 1 split across threads: the trace is cut into regions, each walked by its own scanner,
//! and the calling thread's scanner adopts each region's result when it reaches the region's
//! first byte in exactly the state the region assumed.
//!
//! How a region is set up without the bytes before it:
//!
//! - **Where it starts.** The calling thread's scanner publishes where the trace starts (the
//!   first trace entry, its memo counter and the big containers' ids so far). A helper finds
//!   an opcode boundary near its region's nominal start through protocol 4's `FRAME` chain
//!   ([`align::frame_holding`]), then walks opcodes to the next `APPENDS MARK EMPTY_DICT`: the
//!   first dict of a list's next batch ([`align::batch_start`]).
//! - **Its memo ids.** Each helper counts the `MEMOIZE` opcodes of the stripe before its region
//!   ([`align::memo_count`], a walk that only steps over opcodes, 2.5-3 times as fast as the
//!   scanner's); a prefix sum of the counts gives every region its first memo id.
//! - **What it assumes.** The region's scanner starts with the list alone on its stack, under
//!   the batch's MARK, and with every memo entry before its first id taken as complete (big
//!   containers excepted, which it knows from what was published). It records its definitions
//!   in its own table and its chunks in a list, and stops at the next region's start or where
//!   the list ends; anything else gives the region up.
//!
//! The calling thread's scanner checks all of that when it reaches a region's first byte (a
//! batch just opened on a trace list, the same memo counter, no container open on its stack
//! that the region could have referred to, no big container defined since publishing), then
//! copies the region's definitions into the shared table, hands its chunks on, and jumps to
//! the region's end. A region it cannot adopt is simply walked as before: the split changes
//! how fast the plan is made, never what it says (the tests compare it with the whole walk).

use super::align;
use super::defs::{Defs, BIG_BIT};
use super::plan::Chunk;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Condvar, Mutex, MutexGuard};

/// How pass 1 may split: into at most `regions` regions of at least `min_bytes` each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitOptions {
    /// Most regions (threads walking them, the calling thread included); below 2, no split.
    pub regions: usize,
    /// Fewest bytes of trace per region; 0 = [`MIN_REGION_BYTES`].
    pub min_bytes: usize,
    /// Print each helper's and each region's times and fate to stderr (benchmarks).
    pub timing: bool,
}

/// Default fewest bytes per region: smaller regions cost more in setup than they save.
pub const MIN_REGION_BYTES: usize = 16 << 20;

/// The region 0 share of the trace, against 1 for each other region. The calling thread
/// walks region 0 from the start, while the helpers first wait for stripe 0 to be counted
/// (a count costs `c` ≈ 0.3-0.4 of a walk on the benchmark layouts, docs/performance.md) and
/// then walk their own: `r0 = c·r0 + r`, so `r0 = r / (1 - c)`, about 1.6 times a helper's.
const FIRST_REGION_WEIGHT: f64 = 1.6;

/// How far past its nominal start a helper looks for a batch boundary.
const FIND_LIMIT: usize = 64 << 20;

/// What the calling thread's scanner publishes at the first trace entry.
#[derive(Clone)]
pub(super) struct Published {
    /// Offset of the first trace entry.
    pub(super) start: usize,
    /// Memo counter there.
    pub(super) memo: u64,
    /// Ids of the big containers defined so far.
    pub(super) big: Vec<u64>,
}

/// Where a region of a split pass 1 starts ([`RegionWalk`]).
pub(super) struct RegionStart<'s> {
    /// Offset of its first trace entry (just after a batch's MARK).
    pub(super) start: usize,
    /// Where to stop: the next region's start (`usize::MAX`: at the list's end only).
    pub(super) stop: usize,
    /// Memo counter at `start`.
    pub(super) base: u64,
    /// Ids of the big containers defined before it.
    pub(super) big: &'s [u64],
}

/// Where a region's walk stopped.
pub(super) struct RegionEnd {
    /// Offset.
    pub(super) pos: usize,
    /// Memo counter there.
    pub(super) memo: u64,
    /// True when it stopped just past the list's last `APPENDS` (not at the next region).
    pub(super) list_ended: bool,
    /// The list's stack entry's end after its last fill in the region, if it was filled.
    pub(super) list_filled_to: Option<u64>,
}

/// How a region is walked (`region::walk_region`, given by the caller so that this file,
/// below the scanner, names neither the scanner nor the region walk): from `start` in
/// `buf` with `chunk_bytes` chunks, its definitions into the table and its chunks to `emit`.
pub(super) type RegionWalk =
    fn(&[u8], usize, &Defs, &mut dyn FnMut(Chunk), RegionStart) -> Option<RegionEnd>;

/// A region's walk, for the calling thread to adopt.
pub(super) struct RegionOut {
    /// First byte (a trace entry after a batch's MARK).
    pub(super) start: usize,
    /// Where the walk stopped: the next region's start, or just past the list's last `APPENDS`.
    pub(super) end: usize,
    /// Memo counter at `start` and at `end`.
    pub(super) base: u64,
    pub(super) memo_end: u64,
    /// True when it stopped where the list ends (its batch MARK is gone).
    pub(super) list_ended: bool,
    /// The list's last fill inside the region (its `end` on the stack), if any.
    pub(super) list_filled_to: Option<u64>,
    /// Chunks in file order.
    pub(super) chunks: Vec<Chunk>,
    /// Its table: entries `base..memo_end` are its definitions.
    pub(super) defs: Defs,
}

#[derive(Default)]
struct Shared {
    published: Option<Published>,
    /// The calling thread's scanner is done (or gave up): helpers still waiting leave.
    done: bool,
    /// Region starts, region `h` at index `h - 1`: `None` not yet known, `Some(None)` none.
    starts: Vec<Option<Option<usize>>>,
    /// Memo entries defined in stripe `j` (from region `j`'s start to region `j + 1`'s).
    counts: Vec<Option<Option<u64>>>,
    /// Region walks, region `h` at index `h - 1`.
    results: Vec<Option<Option<RegionOut>>>,
}

/// The state shared by the calling thread's scanner and the helpers.
pub(super) struct Split<'b> {
    buf: &'b [u8],
    regions: usize,
    min_bytes: usize,
    chunk_bytes: usize,
    /// How a region is walked.
    walk_region: RegionWalk,
    /// [`SplitOptions::timing`].
    pub(super) timing: bool,
    shared: Mutex<Shared>,
    cv: Condvar,
}

impl<'b> Split<'b> {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'g>(&self, g: MutexGuard<'g, Shared>) -> MutexGuard<'g, Shared> {
        self.cv.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    /// Called by the calling thread's scanner at the first trace entry; returns the starts of
    /// regions 1, 2, ... up to the first a helper found none for (a region's memo base needs
    /// every stripe before it counted).
    pub(super) fn publish(&self, p: Published) -> Vec<usize> {
        let mut g = self.lock();
        g.published = Some(p);
        self.cv.notify_all();
        while !g.starts.iter().all(|s| s.is_some()) {
            g = self.wait(g);
        }
        g.starts.iter().map_while(|s| s.flatten()).collect()
    }

    /// Region `h`'s walk, waiting for it; `None` when the helper gave it up.
    pub(super) fn take(&self, h: usize) -> Option<RegionOut> {
        let mut g = self.lock();
        loop {
            if let Some(r) = g.results.get_mut(h - 1)?.as_mut() {
                return r.take();
            }
            g = self.wait(g);
        }
    }

    /// The calling thread's scanner is done: helpers still waiting for it leave.
    fn finish(&self) {
        self.lock().done = true;
        self.cv.notify_all();
    }

    /// Helper `h` (1 ≤ h < regions): finds its region's start, counts the stripe before it,
    /// walks its region. Whatever it cannot do it marks as not done, so nobody waits on it.
    fn helper(&self, h: usize) {
        let _ = self.helper_steps(h);
        let mut g = self.lock();
        g.starts[h - 1].get_or_insert(None);
        g.counts[h - 1].get_or_insert(None);
        g.results[h - 1].get_or_insert(None);
        drop(g);
        self.cv.notify_all();
    }

    fn helper_steps(&self, h: usize) -> Option<()> {
        let published = {
            let mut g = self.lock();
            loop {
                if let Some(p) = &g.published {
                    break p.clone();
                }
                if g.done {
                    return None;
                }
                g = self.wait(g);
            }
        };
        let buf = self.buf;
        let trace = buf.len().checked_sub(published.start)?;
        let regions = self.regions.min(trace / self.min_bytes.max(1)).max(1);
        if h >= regions {
            // Too little trace for this many regions: no region for this helper.
            return None;
        }
        // Nominal start: region 0 weighs FIRST_REGION_WEIGHT, the others 1.
        let unit = trace as f64 / (FIRST_REGION_WEIGHT + (regions - 1) as f64);
        let nominal = published.start + (unit * (FIRST_REGION_WEIGHT + (h - 1) as f64)) as usize;
        let frame = align::frame_holding(buf, nominal)?;
        let start = align::batch_start(buf, frame, nominal, FIND_LIMIT)?;
        let prev = {
            let mut g = self.lock();
            g.starts[h - 1] = Some(Some(start));
            self.cv.notify_all();
            if h == 1 {
                published.start
            } else {
                loop {
                    match g.starts[h - 2] {
                        Some(Some(s)) => break s,
                        Some(None) => return None,
                        None => g = self.wait(g),
                    }
                }
            }
        };
        if prev >= start {
            return None;
        }
        let timing = self.timing;
        let t = std::time::Instant::now();
        let count = align::memo_count(buf, prev, start)?;
        if timing {
            eprintln!(
                "pass 1: helper {h}: stripe {prev}..{start} counted in {:.3} s",
                t.elapsed().as_secs_f64()
            );
        }
        let (base, stop) = {
            let mut g = self.lock();
            g.counts[h - 1] = Some(Some(count));
            self.cv.notify_all();
            loop {
                let known = g.counts[..h].iter().all(|c| c.is_some())
                    && g.starts.get(h).map_or(true, |s| s.is_some());
                if known {
                    break;
                }
                g = self.wait(g);
            }
            let mut base = published.memo;
            for c in &g.counts[..h] {
                base = base.checked_add((*c)??)?;
            }
            let stop = match g.starts.get(h) {
                Some(Some(Some(s))) => *s,
                _ => usize::MAX,
            };
            (base, stop)
        };
        let t = std::time::Instant::now();
        let out = self.walk(start, stop, base, &published.big)?;
        if timing {
            eprintln!(
                "pass 1: helper {h}: region {start}..{} walked in {:.3} s",
                out.end,
                t.elapsed().as_secs_f64()
            );
        }
        let mut g = self.lock();
        g.results[h - 1] = Some(Some(out));
        self.cv.notify_all();
        Some(())
    }

    /// Walks one region from `start` with memo counter `base` until `stop`.
    fn walk(&self, start: usize, stop: usize, base: u64, big: &[u64]) -> Option<RegionOut> {
        let defs = Defs::for_input(self.buf.len())?;
        for &id in big {
            defs.table.get(id as usize)?.store(BIG_BIT, Relaxed);
        }
        let mut chunks = Vec::new();
        let mut emit = |c: Chunk| chunks.push(c);
        let end = (self.walk_region)(
            self.buf,
            self.chunk_bytes,
            &defs,
            &mut emit,
            RegionStart {
                start,
                stop,
                base,
                big,
            },
        )?;
        Some(RegionOut {
            start,
            end: end.pos,
            base,
            memo_end: end.memo,
            list_ended: end.list_ended,
            list_filled_to: end.list_filled_to,
            chunks,
            defs,
        })
    }
}

/// Runs `main` (the calling thread's whole walk, given the split to publish to) beside the
/// helpers of `opts`; without a split (`None` to `main`) when the options or the input rule
/// it out. `main`'s result is returned.
pub(super) fn with_split<'b, R>(
    buf: &'b [u8],
    whole: bool,
    chunk_bytes: usize,
    opts: SplitOptions,
    walk_region: RegionWalk,
    main: impl FnOnce(Option<&Split<'b>>) -> R,
) -> R {
    let min_bytes = match opts.min_bytes {
        0 => MIN_REGION_BYTES,
        n => n,
    };
    if !whole || opts.regions < 2 || buf.len() < 2 * min_bytes || !framed(buf) {
        return main(None);
    }
    let n = opts.regions - 1;
    let split = Split {
        buf,
        regions: opts.regions,
        min_bytes,
        chunk_bytes,
        walk_region,
        timing: opts.timing,
        shared: Mutex::new(Shared {
            starts: (0..n).map(|_| None).collect(),
            counts: (0..n).map(|_| None).collect(),
            results: (0..n).map(|_| None).collect(),
            ..Default::default()
        }),
        cv: Condvar::new(),
    };
    std::thread::scope(|s| {
        let split = &split;
        for h in 1..=n {
            s.spawn(move || split.helper(h));
        }
        /// Lets the helpers go however `main` ends.
        struct Finish<'s, 'b>(&'s Split<'b>);
        impl Drop for Finish<'_, '_> {
            fn drop(&mut self) {
                self.0.finish();
            }
        }
        let _finish = Finish(split);
        main(Some(split))
    })
}

/// Protocol 4 or 5 with a first `FRAME`: the only files whose regions can be found.
fn framed(buf: &[u8]) -> bool {
    align::frame_holding(buf, 2).is_some()
}
