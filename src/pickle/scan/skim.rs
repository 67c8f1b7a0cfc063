//! The trace entry walk of pass 1 ([`super::scanner::Scanner::skim_entry`]): one trace entry
//! dict in a single specialised pass, for the shapes nearly every entry of a real trace has.

use super::defs::{BIG_BIT, NONE, REF_BIT};
use crate::pickle::ops::{self, head, op, w};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The state of one trace entry walk ([`super::scanner::Scanner::skim_entry`]); nothing
/// reaches the scanner unless the whole entry is walked.
pub(super) struct Skim<'a> {
    pub(super) buf: &'a [u8],
    pub(super) table: &'a [AtomicU64],
    /// Memo counter at the entry's first opcode.
    pub(super) c0: u64,
    /// References below this (and not to a big container) need no table access.
    pub(super) floor: u64,
    /// One bit per big container id modulo 64.
    pub(super) big: u64,
    /// Memo counter now.
    pub(super) memo: u64,
    /// Ids of the containers of this entry still open (entry dict, frames list, frame dict).
    pub(super) open: [u64; 3],
    /// Definitions completed inside the entry: (memo id, start, length).
    pub(super) defs: Vec<(u64, u64, u64)>,
    /// Entries of this walk referenced after they were complete (marked on commit).
    pub(super) local_refs: Vec<u64>,
}

/// The end of the run of memo references from `p` to complete entries below `floor` that are
/// not big containers (`big`: one bit per id modulo 64): the offset of the first other
/// opcode. Out of line: inside [`Skim::dict`] its values lived on the stack.
#[inline(never)]
fn settled_run(buf: &[u8], mut p: usize, floor: u64, big: u64) -> usize {
    while let Some(rest) = buf.get(p..) {
        let (idx, next) = match *rest {
            [op::LONG_BINGET, a, b, c, d, ..] => {
                (u32::from_le_bytes([a, b, c, d]) as u64, p + w::LONG_BINGET)
            }
            [op::BINGET, a, ..] => (a as u64, p + w::BINGET),
            _ => break,
        };
        if idx >= floor || big >> (idx & 63) & 1 != 0 {
            break;
        }
        p = next;
    }
    p
}

impl Skim<'_> {
    /// Skips protocol 4 FRAME opcodes.
    #[inline(always)]
    fn skip_frames(&self, mut p: usize) -> usize {
        let buf = self.buf;
        while buf.get(p) == Some(&op::FRAME) && p + w::FRAME <= buf.len() {
            p += w::FRAME;
        }
        p
    }

    /// The length of a memo store at `p` defining the next entry (MEMOIZE, or BINPUT /
    /// LONG_BINPUT naming exactly that id); 0 for another opcode; `None` for a store the
    /// walk leaves to the opcode path.
    #[inline]
    fn store(&self, p: usize) -> Option<usize> {
        let buf = self.buf;
        match buf.get(p) {
            Some(&op::MEMOIZE) => Some(w::MEMOIZE),
            Some(&op::BINPUT) => {
                (buf.get(p + 1).map(|&i| i as u64) == Some(self.memo)).then_some(w::BINPUT)
            }
            Some(&op::LONG_BINPUT) => {
                let b: [u8; 4] = buf.get(p + 1..p + w::LONG_BINPUT)?.try_into().ok()?;
                (u32::from_le_bytes(b) as u64 == self.memo).then_some(w::LONG_BINPUT)
            }
            _ => Some(0),
        }
    }

    /// A memo reference to entry `idx` ending at `next`: `next`, or `None` when it is left to
    /// the opcode path. Complete entries below the floor need nothing; entries defined
    /// before this one are checked and marked as `get` does; entries of this walk are
    /// marked on commit unless still open.
    #[inline(always)]
    fn reference(&mut self, idx: u64, next: usize) -> Option<usize> {
        if self.settled(idx) {
            return Some(next);
        }
        if idx >= self.c0 {
            if idx >= self.memo || self.open.contains(&idx) {
                return None;
            }
            self.local_refs.push(idx);
            return Some(next);
        }
        let slot = &self.table[idx as usize];
        let v = slot.load(Relaxed);
        if v & REF_BIT == 0 {
            slot.store(v | REF_BIT, Relaxed);
        }
        (v & BIG_BIT == 0).then_some(next)
    }

    /// The memo id of the BINGET at `p` and the offset after it.
    #[inline(always)]
    fn binget(&self, p: usize) -> Option<(u64, usize)> {
        Some((*self.buf.get(p + 1)? as u64, p + w::BINGET))
    }

    /// The memo id of the LONG_BINGET at `p` and the offset after it.
    #[inline(always)]
    fn long_binget(&self, p: usize) -> Option<(u64, usize)> {
        let b: [u8; 4] = self.buf.get(p + 1..p + w::LONG_BINGET)?.try_into().ok()?;
        Some((u32::from_le_bytes(b) as u64, p + w::LONG_BINGET))
    }

    /// A string or scalar at `p`: the offset after it.
    #[inline]
    fn scalar(&self, p: usize) -> Option<usize> {
        let buf = self.buf;
        let left = buf.len().checked_sub(p)?;
        let code = *buf.get(p)?;
        // Length-prefixed values with their header widths from the opcode table, each arm
        // reading its length field whole (a loop over the field's bytes cost 15% of
        // `Skim::dict`).
        let w = match SCALAR[code as usize] {
            0 => match code {
                op::SHORT_BINUNICODE => head::SHORT_BINUNICODE + *buf.get(p + 1)? as usize,
                op::BINUNICODE => {
                    let b: [u8; 4] = buf.get(p + 1..p + head::BINUNICODE)?.try_into().ok()?;
                    head::BINUNICODE + u32::from_le_bytes(b) as usize
                }
                op::LONG1 => head::LONG1 + *buf.get(p + 1)? as usize,
                _ => return None,
            },
            w => w as usize,
        };
        (w <= left).then_some(p + w)
    }

    /// A dict at `q` (`}`, a store, MARK, pairs, SETITEMS) whose values are references,
    /// strings and scalars, and at `level` 0 also a frames list. Returns the offset after it
    /// and its memo id (or `NONE`); at level 1 its definition is recorded here.
    pub(super) fn dict(&mut self, q: usize, level: usize) -> Option<(usize, u32)> {
        let buf = self.buf;
        let mut p = self.skip_frames(q + 1);
        let mut id = NONE;
        let k = self.store(p)?;
        if k > 0 {
            id = self.memo as u32;
            self.open[level] = self.memo;
            self.memo += 1;
            p = self.skip_frames(p + k);
        }
        if buf.get(p) != Some(&op::MARK) {
            return None;
        }
        p += 1;
        let mut items = 0u32;
        // Start of the last value, while a store may still follow it.
        let mut last: Option<usize> = None;
        loop {
            let at = p;
            match *buf.get(p)? {
                op::FRAME => {
                    // A cut FRAME is left to the opcode path (which reports it).
                    p = Some(self.skip_frames(p)).filter(|&q| q > p)?;
                    continue;
                }
                op::SETITEMS => {
                    p += 1;
                    break;
                }
                op::MEMOIZE | op::BINPUT | op::LONG_BINPUT => {
                    let start = last.take()?;
                    let k = self.store(p).filter(|&k| k > 0)?;
                    p += k;
                    self.defs
                        .push((self.memo, start as u64, (p - start) as u64));
                    self.memo += 1;
                    continue;
                }
                op::BINGET => {
                    let (idx, next) = self.binget(p)?;
                    p = self.reference(idx, next)?;
                    last = None;
                }
                op::LONG_BINGET => {
                    let (idx, next) = self.long_binget(p)?;
                    p = self.reference(idx, next)?;
                    last = None;
                }
                op::EMPTY_LIST if level == 0 => {
                    p = self.frames_list(p)?;
                    last = None;
                }
                _ => {
                    p = self.scalar(p)?;
                    last = Some(at);
                }
            }
            items += 1;
        }
        if items % 2 != 0 {
            return None;
        }
        if level > 0 && id != NONE {
            self.defs.push((id as u64, q as u64, (p - q) as u64));
        }
        self.open[level] = u64::MAX;
        Some((p, id))
    }

    /// Whether a reference to `idx` needs nothing: a complete entry below the floor that is
    /// not a big container.
    #[inline(always)]
    fn settled(&self, idx: u64) -> bool {
        idx < self.floor && self.big >> (idx & 63) & 1 == 0
    }

    /// A reference from a frame dict's straight pass: whether it needs nothing more than
    /// what [`Skim::reference`] records (a settled entry costs a comparison; another, the
    /// table or the walk's own references, as `reference` does). `reference` tests
    /// `settled` too, but calling it alone costs 22 M more instructions on the memo layout
    /// (100k entries, two threads): the test stated here stays the one inlined.
    #[inline(always)]
    fn frame_ref(&mut self, idx: u64) -> bool {
        self.settled(idx) || self.reference(idx, 0).is_some()
    }

    /// The common frame dict at `q` in one straight pass: `}`, MEMOIZE, MARK, three pairs of
    /// a BINGET key and a reference or an integer, SETITEMS (a frame whose strings were all
    /// seen before: what a re-dumped snapshot repeats for every entry). Records what
    /// [`Skim::dict`] would; `None` for any other shape, with nothing changed but the marks
    /// of references (which `dict` makes again).
    #[inline]
    fn frame_dict(&mut self, q: usize) -> Option<usize> {
        let buf = self.buf;
        if buf.get(q + 1..q + 3)? != [op::MEMOIZE, op::MARK] {
            return None;
        }
        let mut p = q + 3;
        for _ in 0..3 {
            match *buf.get(p..p + 2)? {
                [op::BINGET, k] if self.frame_ref(k as u64) => p += w::BINGET,
                _ => return None,
            }
            match *buf.get(p)? {
                op::BINGET => {
                    if !self.frame_ref(*buf.get(p + 1)? as u64) {
                        return None;
                    }
                    p += w::BINGET;
                }
                op::LONG_BINGET => {
                    let b: [u8; 4] = buf.get(p + 1..p + w::LONG_BINGET)?.try_into().ok()?;
                    if !self.frame_ref(u32::from_le_bytes(b) as u64) {
                        return None;
                    }
                    p += w::LONG_BINGET;
                }
                op::BININT1 => p += w::BININT1,
                op::BININT2 => p += w::BININT2,
                op::BININT => p += w::BININT,
                _ => return None,
            }
        }
        if *buf.get(p)? != op::SETITEMS {
            return None;
        }
        p += 1;
        self.defs.push((self.memo, q as u64, (p - q) as u64));
        self.memo += 1;
        Some(p)
    }

    /// A frames list at `at`: `]`, a store, then nothing or MARK, references and frame
    /// dicts, APPENDS, and a store there if none came first (the C++ pickler's). Returns the
    /// offset after it; its definition is recorded here.
    fn frames_list(&mut self, at: usize) -> Option<usize> {
        let buf = self.buf;
        let memo_at = self.memo;
        let mut p = self.skip_frames(at + 1);
        let mut end = at + 1;
        let mut id = None;
        let k = self.store(p)?;
        if k > 0 {
            id = Some(self.memo);
            self.open[1] = self.memo;
            self.memo += 1;
            end = p + k;
            p = self.skip_frames(p + k);
        }
        if buf.get(p) == Some(&op::MARK) {
            p += 1;
            loop {
                // Runs of references to complete entries below the floor: the common case.
                // (Frame dicts written inline, item after item, skip the call.)
                if matches!(buf.get(p), Some(&(op::BINGET | op::LONG_BINGET))) {
                    p = settled_run(buf, p, self.floor, self.big);
                }
                match *buf.get(p)? {
                    op::APPENDS => {
                        p += 1;
                        break;
                    }
                    op::FRAME => p = Some(self.skip_frames(p)).filter(|&q| q > p)?,
                    op::BINGET => {
                        let (idx, next) = self.binget(p)?;
                        p = self.reference(idx, next)?;
                    }
                    op::LONG_BINGET => {
                        let (idx, next) = self.long_binget(p)?;
                        p = self.reference(idx, next)?;
                    }
                    op::EMPTY_DICT => {
                        p = match self.frame_dict(p) {
                            Some(q) => q,
                            None => self.dict(p, 2)?.0,
                        }
                    }
                    _ => return None,
                }
            }
            end = p;
        }
        if id.is_none() {
            // The C++ pickler memoizes a shared list after it is complete. Left to the opcode
            // path when the list defined entries itself (its definition then starts below its
            // own id, which the table records apart).
            let k = self.store(end)?;
            if k > 0 {
                if self.memo != memo_at {
                    return None;
                }
                id = Some(self.memo);
                self.memo += 1;
                end += k;
            }
        }
        if let Some(id) = id {
            self.defs.push((id, at as u64, (end - at) as u64));
        }
        self.open[1] = u64::MAX;
        Some(end)
    }
}

/// Widths of the fixed-width scalars a trace entry's values may be ([`Skim::scalar`]).
const SCALAR: [u8; 256] = ops::widths(&[
    op::BININT1,
    op::BININT2,
    op::BININT,
    op::BINFLOAT,
    op::NONE,
    op::NEWTRUE,
    op::NEWFALSE,
]);
