//! The scanner's state and its steps: the offset-only stack, how entries are tagged by their
//! place in the top-level dict, chunks cut and emitted, memo definitions recorded and
//! references marked. The opcode walk that drives these steps is in `walk.rs`.

use super::defs::*;
use super::plan::{Chunk, Target};
use super::skim::Skim;
use super::split::Split;
use crate::pickle::ops::{self, op};
use std::sync::atomic::Ordering::Relaxed;

pub(super) const T_PLAIN: u8 = 0;
const T_REF: u8 = 1;
pub(super) const T_TOP_DICT: u8 = 2;
const T_KEY_SEG: u8 = 3;
const T_KEY_TRACES: u8 = 4;
const T_TRACES: u8 = 5;
const T_SEG_LIST: u8 = 6;
pub(super) const T_TRACE_LIST: u8 = 7;

#[derive(Clone, Copy)]
pub(super) struct Ent {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) memo_at: u64,
    pub(super) memo: u32,
    pub(super) tag: u8,
    /// An empty list or dict: the only entries later opcodes can fill.
    pub(super) container: bool,
}

#[derive(Clone, Copy)]
pub(super) struct Mark {
    pub(super) at: usize,
}

pub(super) struct Open {
    chunk: Chunk,
    /// Stack index of the list being filled.
    list: usize,
    last_fill_end: u64,
    last_fill_memo: u64,
}

/// The top-level dict and the big lists: never decoded on demand.
pub(super) fn is_big_tag(tag: u8) -> bool {
    matches!(tag, T_TOP_DICT | T_TRACES | T_SEG_LIST | T_TRACE_LIST)
}

pub(super) struct Scanner<'a, 'b> {
    pub(super) buf: &'b [u8],
    /// Where the rest of an input still arriving comes from.
    more: Option<&'b (dyn Fn(usize) -> &'b [u8] + Sync)>,
    /// At this position, ask `more` for the next window (`usize::MAX`: the input is whole).
    pub(super) refill_at: usize,
    pub(super) pos: usize,
    pub(super) stack: Vec<Ent>,
    pub(super) marks: Vec<Mark>,
    pub(super) memo_next: u64,
    pub(super) defs: &'a Defs,
    pub(super) defined: usize,
    /// One bit per big container's memo id modulo 64 (see [`is_big_tag`]): a reference
    /// whose bit is set takes the checked path.
    pub(super) big_mask: u64,
    /// Stack index and memo id of the last open floor found (see [`Scanner::open_floor`]).
    pub(super) floor_at: Option<(usize, u32)>,
    /// The bottom entries of the stack known to hold no floor (see [`Scanner::open_floor`]):
    /// valid while the stack keeps them (a truncation or a memo store below lowers it). In a
    /// layout without memoized containers (the C++ pickler's) the search is not repeated
    /// for every trace entry.
    no_floor_below: usize,
    /// Most entries the stack may hold (bounded by the input size).
    max_stack: usize,
    /// Walk trace entries with [`Scanner::skim_entry`] (off only to test it against the
    /// opcode-by-opcode path).
    pub(super) skim: bool,
    /// Scratch list of the definitions inside a skimmed entry: (memo id, start, length).
    skim_defs: Vec<(u64, u64, u64)>,
    /// Scratch list of the entries a skimmed entry refers to among its own.
    skim_refs: Vec<u64>,
    pub(super) emit: &'a mut dyn FnMut(Chunk),
    pub(super) open: Option<Open>,
    chunk_bytes: u64,
    /// The run loop calls [`Scanner::watch`] at this offset: the next refill or region start.
    pub(super) watch_at: usize,
    /// The next region start: where the calling thread's scanner adopts a region's walk, or
    /// where a region's scanner stops (`usize::MAX`: none).
    pub(super) sync_at: usize,
    /// This scanner walks one region of a split pass 1 ([`super::region::walk_region`]).
    pub(super) region: bool,
    /// The split this scanner publishes to and adopts regions from (the calling thread's).
    pub(super) split: Option<&'a Split<'b>>,
    /// Region starts published by the split's helpers, and the index of the next one.
    pub(super) starts: Vec<usize>,
    pub(super) next_start: usize,
    /// Ids of the big containers defined, in order.
    pub(super) big_ids: Vec<u64>,
    /// How many of `big_ids` the regions were told about, once published.
    pub(super) big_published: Option<usize>,
    /// A region's walk stopped where its list ends.
    pub(super) list_ended: bool,
    /// Regions adopted (the calling thread's scanner).
    pub(super) adopted: usize,
}

pub(super) type S<T> = Option<T>;

/// Entries of a trace batch after which pass 1 takes them as appended ([`Scanner::fill_early`]).
const EARLY_FILL: usize = 256;

/// How far ahead of its position pass 1 wants input that is still arriving.
pub const WINDOW: usize = 1 << 20;

/// More of an input that is still arriving: `more(n)` blocks until at least `n` bytes are
/// there (or no more will come) and returns all there so far, never more than `total` bytes
/// (the second field).
pub type More<'a> = (&'a (dyn Fn(usize) -> &'a [u8] + Sync), usize);

/// The bytes of a string defined by the opcode at `off`, if it is one.
fn str_at(buf: &[u8], off: usize) -> Option<&[u8]> {
    let code = *buf.get(off)?;
    let (hdr, len) = match code {
        op::SHORT_BINUNICODE => (2, *buf.get(off + 1)? as usize),
        op::BINUNICODE => (
            5,
            u32::from_le_bytes(buf.get(off + 1..off + 5)?.try_into().ok()?) as usize,
        ),
        op::BINUNICODE8 => (
            9,
            usize::try_from(u64::from_le_bytes(
                buf.get(off + 1..off + 9)?.try_into().ok()?,
            ))
            .ok()?,
        ),
        _ => return None,
    };
    buf.get(off + hdr..(off + hdr).checked_add(len)?)
}

impl<'a, 'b> Scanner<'a, 'b> {
    /// A scanner at the start of `buf` (a region's is moved to its start by [`super::region`]).
    pub(super) fn new(
        buf: &'b [u8],
        more: Option<More<'b>>,
        total: usize,
        chunk_bytes: usize,
        defs: &'a Defs,
        emit: &'a mut dyn FnMut(Chunk),
        skim: bool,
    ) -> Self {
        let refill_at = if more.is_some() {
            buf.len().saturating_sub(WINDOW)
        } else {
            usize::MAX
        };
        Scanner {
            more: more.map(|(f, _)| f),
            refill_at,
            buf,
            pos: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            memo_next: 0,
            defs,
            defined: 0,
            big_mask: 0,
            floor_at: None,
            no_floor_below: 0,
            max_stack: total / 16 + 65_536,
            skim,
            skim_defs: Vec::new(),
            skim_refs: Vec::new(),
            emit,
            open: None,
            chunk_bytes: chunk_bytes.max(1) as u64,
            watch_at: refill_at,
            sync_at: usize::MAX,
            region: false,
            split: None,
            starts: Vec::new(),
            next_start: 0,
            big_ids: Vec::new(),
            big_published: None,
            list_ended: false,
            adopted: 0,
        }
    }

    #[inline]
    pub(super) fn take(&mut self, n: usize) -> S<usize> {
        let at = self.pos;
        if self.buf.len() - self.pos < n && !self.refill(self.pos.saturating_add(n)) {
            return None;
        }
        self.pos += n;
        Some(at)
    }

    /// Waits for input still arriving until `want` bytes are there (or no more will come);
    /// whether there are now.
    #[cold]
    #[inline(never)]
    pub(super) fn refill(&mut self, want: usize) -> bool {
        let Some(more) = self.more else {
            return false;
        };
        let asked = want.max(self.pos.saturating_add(WINDOW));
        let b = more(asked);
        if b.len() > self.buf.len() {
            self.buf = b;
        }
        if b.len() < asked {
            // Everything there is: nothing more to wait for.
            self.more = None;
            self.refill_at = usize::MAX;
        } else {
            self.refill_at = self.buf.len().saturating_sub(WINDOW);
        }
        self.rewatch();
        self.buf.len() >= want
    }

    #[inline]
    pub(super) fn u8(&mut self) -> S<u8> {
        let at = self.take(1)?;
        Some(self.buf[at])
    }

    #[inline]
    pub(super) fn u32(&mut self) -> S<u32> {
        let at = self.take(4)?;
        Some(u32::from_le_bytes(self.buf[at..at + 4].try_into().ok()?))
    }

    pub(super) fn u64(&mut self) -> S<u64> {
        let at = self.take(8)?;
        Some(u64::from_le_bytes(self.buf[at..at + 8].try_into().ok()?))
    }

    /// The length field of the length-prefixed opcode `code` (its width from the opcode
    /// table, [`ops::OPS`]); `None` past the input or for a negative `LONG4` length.
    #[inline]
    pub(super) fn len_field(&mut self, code: u8) -> S<u64> {
        let (k, signed) = ops::len_field(code)?;
        let at = self.take(k)?;
        ops::read_len(&self.buf[at..at + k], signed)
    }

    pub(super) fn floor(&self) -> usize {
        self.marks.last().map_or(0, |m| m.at)
    }

    #[inline]
    pub(super) fn push(&mut self, start: usize, tag: u8) -> S<()> {
        if self.stack.len() >= self.max_stack {
            return None;
        }
        if self.stack.len() == self.stack.capacity() {
            self.grow_stack()?;
        }
        self.stack.push(Ent {
            start: start as u64,
            end: self.pos as u64,
            memo_at: self.memo_next,
            memo: NONE,
            tag,
            container: false,
        });
        Some(())
    }

    /// Doubles the stack's room, or `None` (the plan is given up) when the system refuses:
    /// a stack this deep is a hostile file more often than a snapshot.
    #[cold]
    fn grow_stack(&mut self) -> S<()> {
        let more = self.stack.len().max(1024);
        crate::alloc_guard::fallible(|| self.stack.try_reserve(more)).ok()
    }

    /// Pushes an empty list or dict.
    pub(super) fn push_container(&mut self, start: usize, tag: u8) -> S<()> {
        self.push(start, tag)?;
        if let Some(top) = self.stack.last_mut() {
            top.container = true;
        }
        Some(())
    }

    /// The lowest memo id of a container still open on the stack, big lists excepted: every
    /// memo entry below it that is not big is complete, so referencing it needs no mark.
    ///
    /// Defined entries on the stack have increasing memo ids from the bottom (only the top is
    /// ever defined), so the first one found is the lowest; when there is none, the ids
    /// defined so far (an entry not defined yet is never settled).
    /// The entries searched once are not searched again (see `no_floor_below`), so a deep
    /// stack of entries waiting for their `APPENDS` (the C++ pickler's one batch per list)
    /// costs a look at each new one.
    fn open_floor(&mut self) -> u64 {
        // The entry found last time is still the floor while it is on the stack: entries
        // below it change only after the stack shrinks past it, and memo ids are unique.
        if let Some((at, memo)) = self.floor_at {
            if self
                .stack
                .get(at)
                .is_some_and(|e| e.container && e.memo == memo)
            {
                return memo as u64;
            }
        }
        let upto = self.stack.len();
        let from = self.no_floor_below.min(upto);
        match self.stack[from..upto]
            .iter()
            .position(|e| e.container && e.memo != NONE && !is_big_tag(e.tag))
        {
            Some(at) => {
                let at = from + at;
                let memo = self.stack[at].memo;
                self.floor_at = Some((at, memo));
                self.no_floor_below = at;
                memo as u64
            }
            None => {
                self.no_floor_below = upto;
                self.defined as u64
            }
        }
    }

    /// Where a value pushed now would sit in the top-level dict: a key, a value, or neither.
    fn top_dict_slot(&self) -> Option<bool> {
        let n = self.stack.len();
        match self.marks.last() {
            Some(m) if m.at == 1 && self.marks.len() == 1 => {
                (self.stack[0].tag == T_TOP_DICT).then_some((n - 1) % 2 == 1)
            }
            None => (self.stack.first()?.tag == T_TOP_DICT && (n == 1 || n == 2)).then_some(n == 2),
            _ => None,
        }
    }

    fn key_tag(&self, text: Option<&[u8]>) -> u8 {
        if self.top_dict_slot() == Some(false) {
            match text {
                Some(b"segments") => return T_KEY_SEG,
                Some(b"device_traces") => return T_KEY_TRACES,
                _ => {}
            }
        }
        T_PLAIN
    }

    pub(super) fn list_tag(&self) -> u8 {
        let n = self.stack.len();
        if n == 0 {
            return T_SEG_LIST;
        }
        if self.top_dict_slot() == Some(true) {
            return match self.stack[n - 1].tag {
                T_KEY_SEG => T_SEG_LIST,
                T_KEY_TRACES => T_TRACES,
                _ => T_PLAIN,
            };
        }
        let floor = self.floor();
        if (floor >= 1 && self.stack[floor - 1].tag == T_TRACES)
            || (floor < n && self.stack[n - 1].tag == T_TRACES)
        {
            return T_TRACE_LIST;
        }
        T_PLAIN
    }

    /// Records that the entry at `i` is complete and leaves the stack.
    fn consume(&mut self, i: usize) -> S<()> {
        let e = self.stack[i];
        if e.tag == T_SEG_LIST || e.tag == T_TRACE_LIST {
            if let Some(o) = &self.open {
                if o.list == i {
                    self.close_open();
                }
            }
        }
        if e.memo != NONE && e.tag != T_REF {
            let len = e.end - e.start;
            let slot = &self.defs.table[e.memo as usize];
            let v = slot.load(Relaxed);
            if len >= LEN_MAX {
                let mut extra = self.defs.extra.lock().unwrap_or_else(|e| e.into_inner());
                extra.entry(e.memo).or_insert((0, e.memo as u64)).0 = len;
                slot.store(v | LEN_MAX << LEN_SHIFT, Relaxed);
            } else {
                slot.store(v | len.max(1) << LEN_SHIFT, Relaxed);
            }
        }
        Some(())
    }

    pub(super) fn consume_above(&mut self, m: usize) -> S<()> {
        // A region's scanner never takes its list off the stack: what lies below it is not
        // its to walk.
        if m == 0 && self.region {
            return None;
        }
        for i in m..self.stack.len() {
            self.consume(i)?;
        }
        self.stack.truncate(m);
        self.no_floor_below = self.no_floor_below.min(m);
        Some(())
    }

    pub(super) fn close_open(&mut self) {
        if let Some(o) = self.open.take() {
            let mut c = o.chunk;
            c.end = o.last_fill_end;
            c.memo_end = o.last_fill_memo;
            (self.emit)(c);
        }
    }

    /// A container at stack index `t` receives items: it must not be a reference or an
    /// object already referenced (the plan would then decode it before it is complete).
    pub(super) fn fill(&mut self, t: usize) -> S<()> {
        let e = self.stack[t];
        if e.tag == T_REF {
            return None;
        }
        if e.memo != NONE && self.defs.table[e.memo as usize].load(Relaxed) & REF_BIT != 0 {
            return None;
        }
        self.stack[t].end = self.pos as u64;
        Some(())
    }

    /// Items `m..` are appended to the list at `t` by the opcode at `op_at`.
    pub(super) fn list_fill(&mut self, t: usize, m: usize, op_at: usize, with_mark: bool) -> S<()> {
        self.fill(t)?;
        let tag = self.stack[t].tag;
        if tag == T_SEG_LIST || tag == T_TRACE_LIST {
            let target = if tag == T_SEG_LIST {
                Target::Segments
            } else {
                Target::Trace
            };
            if self.open.as_ref().is_some_and(|o| o.list != t) {
                self.close_open();
            }
            for i in m..self.stack.len() {
                let e = self.stack[i];
                let cut = match &self.open {
                    Some(o) => e.start - o.chunk.start >= self.chunk_bytes,
                    None => false,
                };
                if cut {
                    if i == m {
                        self.close_open();
                    } else {
                        let mut o = self.open.take()?;
                        o.last_fill_end = e.start;
                        o.last_fill_memo = e.memo_at;
                        self.open = Some(o);
                        self.close_open();
                    }
                }
                match &mut self.open {
                    Some(o) => o.chunk.items = o.chunk.items.checked_add(1)?,
                    None => {
                        self.open = Some(Open {
                            chunk: Chunk {
                                start: e.start,
                                end: 0,
                                memo_base: e.memo_at,
                                memo_end: 0,
                                mark_open: with_mark,
                                items: 1,
                                target,
                            },
                            list: t,
                            last_fill_end: 0,
                            last_fill_memo: 0,
                        })
                    }
                }
            }
            let memo = self.memo_next;
            let o = self.open.as_mut()?;
            o.last_fill_end = op_at as u64;
            o.last_fill_memo = memo;
        }
        self.consume_above(m)
    }

    /// After a skimmed trace entry: once [`EARLY_FILL`] entries wait above the batch's MARK,
    /// they are taken as appended now (chunks cut and emitted as at `APPENDS`, which later
    /// takes only the entries after them). The C++ pickler writes a whole trace as one batch,
    /// whose `APPENDS` comes last: without this no chunk reached the workers before pass 1
    /// ended. The cuts are where `APPENDS` would have made them.
    pub(super) fn fill_early(&mut self) -> S<()> {
        let m = self.marks.last()?.at;
        if self.stack.len() - m < EARLY_FILL {
            return Some(());
        }
        self.list_fill(m - 1, m, self.pos, true)
    }

    pub(super) fn define(&mut self, idx: u64) -> S<()> {
        let top = self.stack.len().checked_sub(1)?;
        if top < self.floor() || self.stack.is_empty() {
            return None;
        }
        let e = self.stack[top];
        if e.memo != NONE || e.tag == T_REF {
            return None;
        }
        if idx != self.defined as u64 || self.defined >= self.defs.table.len() || idx >= NONE as u64
        {
            return None;
        }
        let mut v = e.start & START_MASK;
        if e.memo_at != idx {
            let mut extra = self.defs.extra.lock().unwrap_or_else(|e| e.into_inner());
            extra.entry(idx as u32).or_insert((0, 0)).1 = e.memo_at;
            v |= BASE_BIT;
        }
        if is_big_tag(e.tag) {
            v |= BIG_BIT;
            self.big_mask |= 1 << (idx & 63);
            self.big_ids.push(idx);
        }
        self.defs.table[self.defined].store(v, Relaxed);
        self.defined += 1;
        self.no_floor_below = self.no_floor_below.min(top);
        let ent = &mut self.stack[top];
        ent.memo = idx as u32;
        ent.end = self.pos as u64;
        Some(())
    }

    #[inline]
    pub(super) fn get(&mut self, idx: u64, op_at: usize) -> S<()> {
        if idx >= self.defined as u64 {
            return None;
        }
        let slot = &self.defs.table[idx as usize];
        let v = slot.load(Relaxed);
        if v & REF_BIT == 0 {
            slot.store(v | REF_BIT, Relaxed);
        }
        if v & BIG_BIT != 0 {
            return None;
        }
        // Only a key of the top-level dict can name a big list.
        if self.marks.len() >= 2 {
            return self.push_ref(idx, op_at);
        }
        let tag = if self.top_dict_slot() == Some(false) {
            self.key_tag(str_at(self.buf, (v & START_MASK) as usize))
        } else {
            T_PLAIN
        };
        if tag == T_PLAIN {
            return self.push_ref(idx, op_at);
        }
        self.push(op_at, tag)
    }

    /// Pushes a reference to memo entry `idx`.
    #[inline]
    fn push_ref(&mut self, idx: u64, op_at: usize) -> S<()> {
        if self.stack.len() >= self.max_stack {
            return None;
        }
        if self.stack.len() == self.stack.capacity() {
            self.grow_stack()?;
        }
        self.stack.push(Ent {
            start: op_at as u64,
            end: self.pos as u64,
            memo_at: self.memo_next,
            memo: idx as u32,
            tag: T_REF,
            container: false,
        });
        Some(())
    }

    /// True when the next value is an element of a trace list's `APPENDS` batch.
    #[inline]
    pub(super) fn in_trace_batch(&self) -> bool {
        match self.marks.last() {
            Some(m) => {
                m.at >= 1 && m.at <= self.stack.len() && self.stack[m.at - 1].tag == T_TRACE_LIST
            }
            None => false,
        }
    }

    /// Walks one trace entry dict at `op_at` in a single specialised pass: a flat dict of
    /// scalars, strings and memo references, whose frames are a list of references and flat
    /// frame dicts, or a reference to one. It leaves exactly the state the opcode-by-opcode
    /// path would (one stack entry for the dict; the same table entries); `false` (nothing
    /// changed but reference marks that path sets too) for anything else, which that path
    /// then walks.
    pub(super) fn skim_entry(&mut self, op_at: usize) -> S<bool> {
        let c0 = self.memo_next;
        if c0 != self.defined as u64 || self.stack.len() + 1 >= self.max_stack {
            return Some(false);
        }
        // c0 is the ids defined so far (checked above): the floor is never above it.
        let floor = self.open_floor();
        let mut w = Skim {
            buf: self.buf,
            table: &self.defs.table,
            c0,
            floor,
            big: self.big_mask,
            memo: c0,
            open: [u64::MAX; 3],
            defs: std::mem::take(&mut self.skim_defs),
            local_refs: std::mem::take(&mut self.skim_refs),
        };
        w.defs.clear();
        w.local_refs.clear();
        let walked = w.dict(op_at, 0);
        let Skim {
            memo,
            defs,
            local_refs,
            ..
        } = w;
        let ok = walked.filter(|_| {
            memo <= self.defs.table.len() as u64
                && memo < NONE as u64
                && defs.iter().all(|&(_, _, len)| len < LEN_MAX)
        });
        if let Some((end, dict_memo)) = ok {
            // Commit: the dict's own entry (complete once its batch is appended), the entries
            // inside it (complete now), then the marks of references to them.
            if dict_memo != NONE {
                self.defs.table[c0 as usize].store(op_at as u64 & START_MASK, Relaxed);
            }
            for &(idx, start, len) in &defs {
                let v = start & START_MASK | len.max(1) << LEN_SHIFT;
                self.defs.table[idx as usize].store(v, Relaxed);
            }
            for &idx in &local_refs {
                self.defs.table[idx as usize].fetch_or(REF_BIT, Relaxed);
            }
            self.defined = memo as usize;
            self.memo_next = memo;
            self.stack.push(Ent {
                start: op_at as u64,
                end: end as u64,
                memo_at: c0,
                memo: dict_memo,
                tag: T_PLAIN,
                container: true,
            });
            self.pos = end;
        }
        self.skim_defs = defs;
        self.skim_refs = local_refs;
        Some(ok.is_some())
    }

    /// `MARK` followed only by memo references and `APPENDS` (a frames list of shared frame
    /// dicts): marks the references and fills the list without stacking entries. `false` when
    /// the opcodes at `op_at` are not such a batch (only reference marks, which that path sets too, may have been set then).
    pub(super) fn ref_batch(&mut self, op_at: usize) -> S<bool> {
        let Some(m) = self.marks.last() else {
            return Some(false);
        };
        let m = m.at;
        if m == 0 || m != self.stack.len() || self.stack[m - 1].tag != T_PLAIN {
            return Some(false);
        }
        // Entries below the open floor are complete, so they cannot be filled later and
        // need no reference mark (the table stays untouched: these are the millions of frame
        // references). Anything else takes the checked path, and so does an entry not defined
        // yet (the floor is never above the ids defined).
        let (floor, big) = (self.open_floor(), self.big_mask);
        let buf = self.buf;
        let mut p = op_at;
        let end = loop {
            let idx = match buf.get(p) {
                Some(&op::BINGET) => {
                    p += 2;
                    *buf.get(p - 1)? as u64
                }
                Some(&op::LONG_BINGET) => {
                    p += 5;
                    u32::from_le_bytes(buf.get(p - 4..p)?.try_into().ok()?) as u64
                }
                Some(&op::APPENDS) => break p,
                // Not a batch: the marks set so far are ones the opcode-by-opcode path sets too.
                _ => return Some(false),
            };
            if idx < floor && big >> (idx & 63) & 1 == 0 {
                continue;
            }
            if idx >= self.defined as u64 {
                return None;
            }
            let slot = &self.defs.table[idx as usize];
            let v = slot.load(Relaxed);
            if v & BIG_BIT != 0 {
                return None;
            }
            if v & REF_BIT == 0 {
                slot.store(v | REF_BIT, Relaxed);
            }
        };
        self.pos = end + 1;
        self.marks.pop();
        self.fill(m - 1)?;
        Some(true)
    }

    pub(super) fn string(&mut self, op_at: usize, len: u64) -> S<()> {
        let len = usize::try_from(len).ok()?;
        let at = self.take(len)?;
        let tag = if self.top_dict_slot() == Some(false) {
            self.key_tag(Some(&self.buf[at..at + len]))
        } else {
            T_PLAIN
        };
        self.push(op_at, tag)
    }
}
