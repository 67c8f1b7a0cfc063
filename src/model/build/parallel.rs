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
use crate::model::snapshot::Snapshot;
use crate::pickle::scan::{self, Chunk, Defs};
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

/// Builds with `threads` workers; `None` when the plan or any step fails. With `more`, `buf`
/// is the part of the input there so far (see [`scan::More`]).
pub(crate) fn try_build<'a>(
    buf: &'a [u8],
    more: Option<scan::More<'a>>,
    threads: usize,
    chunk_bytes: usize,
    progress: &mut Option<&mut dyn FnMut(u64)>,
    release: Option<&(dyn Fn(usize, usize) + Sync)>,
    split: scan::SplitOptions,
) -> Option<Snapshot> {
    let timing = std::env::var_os("MEMLENS_TIMING").is_some();
    let total = more.map_or(buf.len(), |(_, total)| total.max(buf.len()));
    let defs = Defs::for_input(total)?;
    // The input as far as `end` (all of it once pass 1 is done).
    let upto = |end: usize| match more {
        Some((f, _)) => f(end),
        None => buf,
    };
    // MEMLENS_PRESCAN=1 (benchmarks only): pass 1 runs to the end before any worker starts,
    // so that what follows measures pass 2 and the merge alone (scripts/bench --scaling).
    let prescan = std::env::var_os("MEMLENS_PRESCAN").is_some();
    let mut pre = Vec::new();
    if prescan {
        let t = std::time::Instant::now();
        scan::scan_into(buf, more, chunk_bytes, &defs, &mut |c| pre.push(c), split)?;
        if timing {
            eprintln!("prescan: {:.3} s", t.elapsed().as_secs_f64());
        }
    }
    let t0 = std::time::Instant::now();
    let n_pre = pre.len();
    let state = Mutex::new(State {
        chunks: pre,
        slots: (0..n_pre).map(|_| None).collect(),
        next: 0,
        scanned: prescan,
        abort: false,
        decoded: 0,
    });
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
    let report = &report;
    let cv = Condvar::new();
    let (state, cv, defs, upto) = (&state, &cv, &defs, &upto);
    std::thread::scope(|s| {
        for w in 0..threads.max(1) {
            s.spawn(move || {
                // While the input is still arriving, the thread producing it has a core:
                // one worker fewer until it is all there.
                if w > 0 && w + 1 == threads && more.is_some() {
                    upto(usize::MAX);
                }
                loop {
                    let (i, chunk) = {
                        let mut st = lock(state);
                        loop {
                            if st.abort || (st.scanned && st.next >= st.chunks.len()) {
                                return;
                            }
                            if st.next < st.chunks.len() {
                                break;
                            }
                            st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
                        }
                        st.next += 1;
                        (st.next - 1, st.chunks[st.next - 1])
                    };
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        build_chunk(upto(chunk.end as usize), &chunk, defs)
                    }))
                    .ok()
                    .flatten();
                    if let Some(r) = release {
                        r(chunk.start as usize, (chunk.end - chunk.start) as usize);
                    }
                    let mut st = lock(state);
                    st.abort |= out.is_none();
                    st.slots[i] = Some(out);
                    st.decoded += chunk.end - chunk.start;
                    cv.notify_all();
                }
            });
        }
        // Pass 1 hands back the pages it has walked: a worker maps its chunk again from the
        // page cache, so the input is resident only where a worker is reading it.
        let mut scanned_to = 0usize;
        let planned = if prescan {
            Some(())
        } else {
            scan::scan_into(
                buf,
                more,
                chunk_bytes,
                defs,
                &mut |c| {
                    if let Some(r) = release {
                        let upto = c.end as usize;
                        r(scanned_to, upto.saturating_sub(scanned_to));
                        scanned_to = scanned_to.max(upto);
                    }
                    let decoded = {
                        let mut st = lock(state);
                        st.chunks.push(c);
                        st.slots.push(None);
                        cv.notify_one();
                        st.decoded
                    };
                    report(decoded);
                },
                split,
            )
        };
        let chunks = {
            let mut st = lock(state);
            st.scanned = true;
            st.abort |= planned.is_none() || st.chunks.is_empty();
            cv.notify_all();
            if st.abort {
                return None;
            }
            st.chunks.clone()
        };
        if timing {
            eprintln!(
                "pass 1: {:.3} s, {} chunks",
                t0.elapsed().as_secs_f64(),
                chunks.len()
            );
        }
        let mut take = |i: usize| -> Option<ChunkOut> {
            let mut st = lock(state);
            loop {
                if let Some(out) = st.slots.get_mut(i)?.take() {
                    let end = chunks[i].end.max(st.decoded);
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
                st = lock(state);
                if st.slots.get(i).is_some_and(|s| s.is_none()) && !st.abort {
                    st = cv
                        .wait_timeout(st, PROGRESS_EVERY)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0);
                }
            }
        };
        let snap = build_planned(
            upto(usize::MAX),
            &chunks,
            defs,
            Some(&mut |pos| report(pos)),
            &mut take,
        );
        lock(state).abort = true;
        cv.notify_all();
        if timing {
            eprintln!(
                "total: {:.3} s{}; {} definitions decoded on demand ({} bytes); {} dicts left to the general decoder",
                t0.elapsed().as_secs_f64(),
                if snap.is_some() {
                    ""
                } else {
                    " (failed: the sequential decoder takes over)"
                },
                crate::pickle::machine::EXT_COUNT.load(std::sync::atomic::Ordering::Relaxed),
                crate::pickle::machine::EXT_BYTES.load(std::sync::atomic::Ordering::Relaxed),
                crate::pickle::machine::flat::DECLINED.load(std::sync::atomic::Ordering::Relaxed)
            );
        }
        snap
    })
}
