//! The scanner's side of a split pass 1 (see [`super::split`]): where the run loop stops
//! ([`Scanner::watch`]), publishing the trace's start to the helpers, adopting a region's walk
//! (the calling thread's scanner), and a region's own walk and where it stops.

use super::defs::{Defs, NONE};
use super::plan::Chunk;
use super::scanner::*;
use super::split::{Published, RegionEnd, RegionStart};
use crate::pickle::ops::op;
use std::sync::atomic::Ordering::Relaxed;

/// Walks one region of a split pass 1 (see [`super::split`]): from `at.start`, with the list
/// alone on the stack under its batch's MARK and memo counter `at.base`, to `at.stop` or the
/// list's end. `None`: the region does not walk like that (the calling thread walks it).
pub(super) fn walk_region(
    buf: &[u8],
    chunk_bytes: usize,
    defs: &Defs,
    emit: &mut dyn FnMut(Chunk),
    at: RegionStart,
) -> Option<RegionEnd> {
    let mut s = Scanner::new(buf, None, buf.len(), chunk_bytes, defs, emit, true);
    s.region = true;
    s.pos = at.start;
    s.memo_next = at.base;
    s.defined = usize::try_from(at.base).ok()?;
    for &id in at.big {
        s.big_mask |= 1 << (id & 63);
    }
    s.stack.push(Ent {
        start: at.start as u64,
        end: at.start as u64,
        memo_at: at.base,
        memo: NONE,
        tag: T_TRACE_LIST,
        container: true,
    });
    s.marks.push(Mark { at: 1 });
    s.sync_at = at.stop;
    s.rewatch();
    s.run()?;
    let list = s.stack.first()?;
    Some(RegionEnd {
        pos: s.pos,
        memo: s.memo_next,
        list_ended: s.list_ended,
        list_filled_to: (list.end != at.start as u64).then_some(list.end),
    })
}

impl Scanner<'_, '_> {
    /// The next offset the run loop stops at for [`Scanner::watch`].
    pub(super) fn rewatch(&mut self) {
        self.watch_at = self.refill_at.min(self.sync_at);
    }

    /// At [`Scanner::watch_at`]: refills input still arriving, and at a region start adopts the
    /// region (the calling thread's scanner) or stops (a region's; `true`).
    #[cold]
    #[inline(never)]
    pub(super) fn watch(&mut self, op_at: usize) -> S<bool> {
        if op_at >= self.refill_at {
            self.refill(op_at + 1);
        }
        if op_at >= self.sync_at {
            if self.region {
                // Where it started from: its list alone under one batch MARK.
                if op_at == self.sync_at
                    && self.marks.len() == 1
                    && self.stack.len() == 1
                    && self.at_region_start()
                {
                    self.close_open();
                    return Some(true);
                }
                // Walked past it: the calling thread will not adopt the next region.
                self.sync_at = usize::MAX;
            } else {
                self.adopt(op_at)?;
            }
        }
        self.rewatch();
        Some(false)
    }

    /// A batch just opened on a trace list: the state every region starts in.
    pub(super) fn at_region_start(&self) -> bool {
        self.marks.last().is_some_and(|m| m.at == self.stack.len())
            && self.stack.last().is_some_and(|e| e.tag == T_TRACE_LIST)
    }

    /// Publishes at the first trace entry when there is a split to publish to (see
    /// [`Scanner::publish`]); always true, to sit in the run loop's guard.
    #[inline]
    pub(super) fn publish_first(&mut self, op_at: usize) -> bool {
        if self.split.is_some() && self.big_published.is_none() {
            self.publish(op_at);
        }
        true
    }

    /// At the first trace entry: tells the split's helpers where the trace starts, and learns
    /// where their regions start.
    #[cold]
    fn publish(&mut self, op_at: usize) {
        let Some(split) = self.split else {
            return;
        };
        self.big_published = Some(self.big_ids.len());
        self.starts = split.publish(Published {
            start: op_at,
            memo: self.memo_next,
            big: self.big_ids.clone(),
        });
        self.sync_at = self.starts.first().copied().unwrap_or(usize::MAX);
        self.rewatch();
    }

    /// At a region start (`op_at` at or past it): adopts the region's walk when this scanner
    /// is exactly in the state the region assumed; otherwise walks on (the region is dropped).
    fn adopt(&mut self, op_at: usize) -> S<()> {
        let h = self.next_start + 1;
        let start = self.starts[self.next_start];
        self.next_start += 1;
        self.sync_at = self
            .starts
            .get(self.next_start)
            .copied()
            .unwrap_or(usize::MAX);
        let split = self.split?;
        let timing = split.timing;
        if op_at != start || !self.at_region_start() {
            if timing {
                eprintln!("pass 1: region {h} at {start}: walked past it (at {op_at})");
            }
            return Some(());
        }
        let t = std::time::Instant::now();
        let taken = split.take(h);
        if timing {
            eprintln!(
                "pass 1: waited {:.3} s for region {h}",
                t.elapsed().as_secs_f64()
            );
        }
        let Some(out) = taken else {
            if timing {
                eprintln!("pass 1: region {h} at {start}: no walk");
            }
            return Some(());
        };
        // Every memo entry before the region is complete to it: none may be an open container
        // here (they are only big ones at a batch start of a real trace), and no big container
        // it was not told about may exist.
        let fits = out.start == op_at
            && out.base == self.memo_next
            && self.defined as u64 == self.memo_next
            && Some(self.big_ids.len()) == self.big_published
            && !self
                .stack
                .iter()
                .any(|e| e.container && e.memo != NONE && !is_big_tag(e.tag))
            && out.memo_end <= self.defs.table.len() as u64;
        if timing {
            eprintln!(
                "pass 1: region {h} at {op_at}: {} (to {}, memo {}..{}, {} chunks)",
                if fits { "adopted" } else { "not adopted" },
                out.end,
                out.base,
                out.memo_end,
                out.chunks.len()
            );
        }
        if !fits {
            return Some(());
        }
        for id in out.base..out.memo_end {
            let v = out.defs.table[id as usize].load(Relaxed);
            self.defs.table[id as usize].store(v, Relaxed);
        }
        {
            let theirs = out.defs.extra.lock().unwrap_or_else(|e| e.into_inner());
            let mut ours = self.defs.extra.lock().unwrap_or_else(|e| e.into_inner());
            for (&id, &v) in theirs.iter() {
                if id as u64 >= out.base && (id as u64) < out.memo_end {
                    ours.insert(id, v);
                }
            }
        }
        self.close_open();
        for c in out.chunks {
            (self.emit)(c);
        }
        self.pos = out.end;
        self.memo_next = out.memo_end;
        self.defined = usize::try_from(out.memo_end).ok()?;
        let top = self.stack.len() - 1;
        if let Some(end) = out.list_filled_to {
            self.stack[top].end = end;
        }
        if out.list_ended {
            self.marks.pop();
        }
        self.floor_at = None;
        self.adopted += 1;
        Some(())
    }

    /// In a region, after an `APPENDS` left no MARK: whether the list ends here (the next
    /// opcode, past any FRAME, is not the MARK of another batch).
    pub(super) fn region_list_ends(&mut self) -> S<bool> {
        if self.stack.len() != 1 {
            return None;
        }
        let mut p = self.pos;
        while self.buf.get(p) == Some(&op::FRAME) {
            p += 9;
        }
        if self.buf.get(p) == Some(&op::MARK) {
            return Some(false);
        }
        self.list_ended = true;
        self.close_open();
        Some(true)
    }
}
