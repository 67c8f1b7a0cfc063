//! The two-pass parallel decoder.
//!
//! Pass 1 ([`crate::pickle::scan`]) walks the opcodes once, keeping byte offsets only, and
//! plans chunks of the big lists. Worker threads decode the chunks into compact structs with
//! their own interning tables ([`super::build::build_chunk`]); the calling thread decodes the
//! rest of the file and merges each chunk's results in file order as it reaches it, so ids
//! (and every report) do not depend on the thread count. Any failure returns `None`, and the
//! caller runs the sequential decoder, which reports errors with their byte offsets.

use super::build::{build_chunk, build_planned, ChunkOut};
use super::snapshot::Snapshot;
use crate::pickle::scan;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

struct State {
    slots: Vec<Option<Option<ChunkOut>>>,
    merged: usize,
    abort: bool,
}

/// Builds with `threads` workers; `None` when the plan or any step fails.
pub(crate) fn try_build(
    buf: &[u8],
    threads: usize,
    chunk_bytes: usize,
    progress: &mut Option<&mut dyn FnMut(u64)>,
    release: Option<&(dyn Fn(usize, usize) + Sync)>,
) -> Option<Snapshot> {
    let t0 = std::time::Instant::now();
    let timing = std::env::var_os("MEMLENS_TIMING").is_some();
    let plan = scan::scan(buf, chunk_bytes)?;
    if timing {
        eprintln!(
            "pass 1: {:.3} s, {} chunks, {} referenced memo definitions",
            t0.elapsed().as_secs_f64(),
            plan.chunks.len(),
            plan.defs.len()
        );
    }
    if plan.chunks.is_empty() {
        return None;
    }
    if let Some(r) = release {
        r(0, buf.len());
    }
    let n = plan.chunks.len();
    let threads = threads.max(1);
    // Results waiting to be merged are bounded, so memory stays near the final model's.
    let window = threads * 4;
    let state = Mutex::new(State {
        slots: (0..n).map(|_| None).collect(),
        merged: 0,
        abort: false,
    });
    let ready = Condvar::new();
    let next = AtomicUsize::new(0);
    let plan = &plan;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                {
                    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
                    while !st.abort && i >= st.merged + window {
                        st = ready.wait(st).unwrap_or_else(|e| e.into_inner());
                    }
                    if st.abort {
                        break;
                    }
                }
                let tc = std::time::Instant::now();
                let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    build_chunk(buf, &plan.chunks[i], &plan.defs)
                }))
                .ok()
                .flatten();
                if timing {
                    let c = &plan.chunks[i];
                    eprintln!(
                        "chunk {i}: {:?} {} items {} bytes {:.3}..{:.3} s ok={}",
                        c.target,
                        c.items,
                        c.end - c.start,
                        (tc - t0).as_secs_f64(),
                        t0.elapsed().as_secs_f64(),
                        out.is_some()
                    );
                }
                let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
                st.slots[i] = Some(out);
                ready.notify_all();
            });
        }
        let mut take = |i: usize| -> Option<ChunkOut> {
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(out) = st.slots.get_mut(i)?.take() {
                    st.merged = i + 1;
                    ready.notify_all();
                    drop(st);
                    if let Some(r) = release {
                        let c = &plan.chunks[i];
                        r(c.start as usize, (c.end - c.start) as usize);
                    }
                    return out;
                }
                st = ready.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        };
        let progress = progress.as_mut().map(|p| &mut **p as &mut dyn FnMut(u64));
        let snap = build_planned(buf, plan, progress, &mut take);
        if timing {
            eprintln!("pass 2: {:.3} s total", t0.elapsed().as_secs_f64());
        }
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        st.abort = true;
        ready.notify_all();
        snap
    })
}
