//! The two-pass parallel decoder.
//!
//! Pass 1 ([`crate::pickle::scan`]) walks the opcodes on the calling thread, keeping byte
//! offsets only, and hands out chunks of the big lists as soon as they are complete. Worker
//! threads decode the chunks into compact structs with their own interning tables
//! ([`super::chunk::build_chunk`]) while pass 1 goes on. Then the calling thread decodes the
//! rest of the file and merges each chunk's results in file order as it reaches it, so ids
//! (and every report) do not depend on the thread count. Any failure returns `None`, and the
//! caller runs the sequential decoder, which reports errors with their byte offsets.

use super::chunk::{build_chunk, build_planned, ChunkOut};
use super::path::Parallel;
use crate::model::snapshot::Snapshot;
use crate::pickle::scan::{self, Chunk, Defs};
use crate::timings::{self, Phase};
use std::cell::{Cell, RefCell};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

struct State {
    chunks: Vec<Chunk>,
    slots: Vec<Option<Option<ChunkOut>>>,
    next: usize,
    scanned: bool,
    abort: bool,
    /// Input bytes of the chunks the workers have decoded: the progress while pass 1 runs
    /// and the calling thread waits for chunks.
    decoded: u64,
}

/// How often a calling thread waiting for a chunk says how far the workers have got.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the calling thread, pass 1 and the workers share.
struct Work<'w, 'a> {
    state: Mutex<State>,
    cv: Condvar,
    defs: &'w Defs,
    /// The input as far as a given end (all of it once pass 1 is done).
    upto: &'w (dyn Fn(usize) -> &'a [u8] + Sync),
    release: Option<&'w (dyn Fn(usize, usize) + Sync)>,
}

impl<'a> Work<'_, 'a> {
    /// Worker `w` of `threads`: decodes chunks as pass 1 hands them out, until they are all
    /// done or the plan is abandoned.
    fn worker(&self, w: usize, threads: usize, arriving: bool) {
        // While the input is still arriving, the thread producing it has a core: one worker
        // fewer until it is all there.
        if w > 0 && w + 1 == threads && arriving {
            (self.upto)(usize::MAX);
        }
        while let Some((i, chunk)) = self.next_chunk() {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                build_chunk((self.upto)(chunk.end as usize), &chunk, self.defs)
            }))
            .ok()
            .flatten();
            if let Some(r) = self.release {
                r(chunk.start as usize, (chunk.end - chunk.start) as usize);
            }
            let mut st = lock(&self.state);
            st.abort |= out.is_none();
            st.slots[i] = Some(out);
            st.decoded += chunk.end - chunk.start;
            self.cv.notify_all();
        }
    }

    /// The next chunk no worker has taken, waiting for pass 1; `None` when there is none
    /// left or the plan is abandoned.
    fn next_chunk(&self) -> Option<(usize, Chunk)> {
        let mut st = lock(&self.state);
        loop {
            if st.abort || (st.scanned && st.next >= st.chunks.len()) {
                return None;
            }
            if st.next < st.chunks.len() {
                break;
            }
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.next += 1;
        Some((st.next - 1, st.chunks[st.next - 1]))
    }

    /// Pass 1 on the calling thread, handing each chunk to the workers as it is complete
    /// (and the pages it has walked back: a worker maps its chunk again from the page cache,
    /// so the input is resident only where a worker is reading it).
    fn pass1(
        &self,
        buf: &'a [u8],
        more: Option<scan::More<'a>>,
        how: &Parallel,
        report: &dyn Fn(u64),
    ) -> Option<()> {
        let mut scanned_to = 0usize;
        scan::scan_into(
            buf,
            more,
            how.chunk_bytes,
            self.defs,
            &mut |c| {
                if let Some(r) = self.release {
                    let upto = c.end as usize;
                    r(scanned_to, upto.saturating_sub(scanned_to));
                    scanned_to = scanned_to.max(upto);
                }
                let decoded = {
                    let mut st = lock(&self.state);
                    st.chunks.push(c);
                    st.slots.push(None);
                    self.cv.notify_one();
                    st.decoded
                };
                report(decoded);
            },
            how.split,
        )
    }

    /// Chunk `i`'s result for the calling thread's merge, waiting for its worker (and saying
    /// how far the workers have got meanwhile); `None` when the plan is abandoned.
    fn take(&self, i: usize, end: u64, report: &dyn Fn(u64)) -> Option<ChunkOut> {
        let mut st = lock(&self.state);
        loop {
            if let Some(out) = st.slots.get_mut(i)?.take() {
                let end = end.max(st.decoded);
                drop(st);
                report(end);
                return out;
            }
            if st.abort {
                return None;
            }
            let decoded = st.decoded;
            drop(st);
            report(decoded);
            st = lock(&self.state);
            if st.slots.get(i).is_some_and(|s| s.is_none()) && !st.abort {
                st = self
                    .cv
                    .wait_timeout(st, PROGRESS_EVERY)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
        }
    }

    /// Ends the workers: no more chunks will be taken.
    fn abort(&self) {
        lock(&self.state).abort = true;
        self.cv.notify_all();
    }
}

/// Builds as `how` says; `None` when the plan or any step fails. With `more`, `buf` is the
/// part of the input there so far (see [`scan::More`]).
pub(crate) fn try_build<'a>(
    buf: &'a [u8],
    more: Option<scan::More<'a>>,
    how: &Parallel,
    progress: &mut Option<&mut dyn FnMut(u64)>,
    release: Option<&(dyn Fn(usize, usize) + Sync)>,
) -> Option<Snapshot> {
    let total = more.map_or(buf.len(), |(_, total)| total.max(buf.len()));
    let defs = Defs::for_input(total)?;
    let upto = |end: usize| match more {
        Some((f, _)) => f(end),
        None => buf,
    };
    // Benchmarks only (`BuildOptions::prescan`): pass 1 runs to the end before any worker
    // starts, so that what follows measures pass 2 and the merge alone.
    let started = std::time::Instant::now();
    let mut pre = Vec::new();
    if how.prescan {
        let t = std::time::Instant::now();
        scan::scan_into(
            buf,
            more,
            how.chunk_bytes,
            &defs,
            &mut |c| pre.push(c),
            how.split,
        )?;
        if how.timing {
            eprintln!("prescan: {:.3} s", t.elapsed().as_secs_f64());
        }
    }
    let t0 = std::time::Instant::now();
    let n_pre = pre.len();
    let work = Work {
        state: Mutex::new(State {
            chunks: pre,
            slots: (0..n_pre).map(|_| None).collect(),
            next: 0,
            scanned: how.prescan,
            abort: false,
            decoded: 0,
        }),
        cv: Condvar::new(),
        defs: &defs,
        upto: &upto,
        release,
    };
    // Progress only ever moves forward: the bytes the workers have decoded while pass 1
    // runs, then the calling thread's position as it merges (each chunk it takes is done).
    let reported = Cell::new(0u64);
    let progress = RefCell::new(progress.as_mut().map(|p| &mut **p as &mut dyn FnMut(u64)));
    let report = |done: u64| {
        if done > reported.get() {
            reported.set(done);
            if let Some(p) = progress.borrow_mut().as_mut() {
                p(done);
            }
        }
    };
    let work = &work;
    std::thread::scope(|s| {
        let threads = how.threads.max(1);
        for w in 0..threads {
            s.spawn(move || work.worker(w, threads, more.is_some()));
        }
        let planned = match how.prescan {
            true => Some(()),
            false => work.pass1(buf, more, how, &report),
        };
        // Pass 1 (the workers decoding beside it) is the decode's first part; the merge
        // below, its second (`build_planned`).
        timings::add(Phase::Decode, started.elapsed());
        let chunks = {
            let mut st = lock(&work.state);
            st.scanned = true;
            st.abort |= planned.is_none() || st.chunks.is_empty();
            work.cv.notify_all();
            if st.abort {
                return None;
            }
            st.chunks.clone()
        };
        if how.timing {
            eprintln!(
                "pass 1: {:.3} s, {} chunks",
                t0.elapsed().as_secs_f64(),
                chunks.len()
            );
        }
        let mut take = |i: usize| work.take(i, chunks[i].end, &report);
        let (snap, stats) = build_planned(
            upto(usize::MAX),
            &chunks,
            &defs,
            Some(&mut |pos| report(pos)),
            &mut take,
        );
        work.abort();
        if how.timing {
            eprintln!(
                "total: {:.3} s{}; {} definitions decoded on demand ({} bytes); {} dicts left to the general decoder",
                t0.elapsed().as_secs_f64(),
                if snap.is_some() {
                    ""
                } else {
                    " (failed: the sequential decoder takes over)"
                },
                stats.ext_defs,
                stats.ext_bytes,
                stats.declined,
            );
        }
        snap
    })
}
