//! Pass 1 of the parallel decoder: a walk over the opcodes that keeps byte offsets only.
//!
//! It simulates the pickle stack without decoding values and produces a [`Plan`]: the byte
//! ranges ("chunks") of consecutive elements of the big lists (`segments`, or the top-level
//! list, and each `device_traces[d]`), and, for every memoized object that is referenced again,
//! where its definition lies, so a worker can decode it on its own. Lists are keyed on their
//! place in the top-level dict, not on batch sizes; implicit (`MEMOIZE`) and explicit
//! (`BINPUT`) memo ids are both handled. Whenever the file does something the plan cannot
//! express (protocol 0/1 text opcodes, `DUP`, a memo id stored twice, a reference to an
//! object still being filled, anything malformed), [`scan`] returns `None` and the caller uses
//! the sequential decoder, which is the reference for every odd input.

use super::ops::op;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

mod skim;
use skim::Skim;

/// Which big list a chunk belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Elements are segment dicts (`segments`, or a bare top-level list).
    Segments,
    /// Elements are trace entry dicts (`device_traces[d]`).
    Trace,
}

/// Consecutive elements of one big list, decodable on their own.
#[derive(Clone, Copy, Debug)]
pub struct Chunk {
    /// Offset of the first element's first opcode.
    pub start: u64,
    /// Offset just past the last element (may include batch `APPENDS`/`MARK` opcodes inside).
    pub end: u64,
    /// Memo counter when the first element starts (implicit `MEMOIZE` numbering).
    pub memo_base: u64,
    /// Memo counter at `end`.
    pub memo_end: u64,
    /// True when the first element sits above an open `MARK` (an `APPENDS` batch).
    pub mark_open: bool,
    /// Number of elements.
    pub items: u32,
    /// The list the elements belong to.
    pub target: Target,
}

/// Where a referenced memoized object is defined.
#[derive(Clone, Copy, Debug)]
pub struct MemoDef {
    /// Offset of its first opcode.
    pub start: u64,
    /// Length of its definition in bytes (through its last `APPENDS`/`SETITEMS`/`MEMOIZE`).
    pub len: u64,
    /// Memo counter at `start`.
    pub base: u64,
}

/// Where each memo entry is defined, filled by pass 1 while workers already read it (a
/// chunk is handed out only after every definition before it is complete).
///
/// One word per memo id, allocated zeroed for the most ids the input could hold (pages never
/// written cost nothing): start (40 bits) | len (21 bits) | flags.
#[derive(Debug)]
pub struct Defs {
    table: Vec<AtomicU64>,
    /// Lengths of 2 MiB or more, and memo bases that differ from the id.
    extra: Mutex<FxHashMap<u32, (u64, u64)>>,
    count: AtomicU64,
}

impl Defs {
    /// A table for an input of `len` bytes; `None` when the system refuses the reservation
    /// (the caller then decodes sequentially, which needs no table).
    pub fn for_input(len: usize) -> Option<Self> {
        let cap = len / 8 + 4096;
        let layout = std::alloc::Layout::array::<AtomicU64>(cap).ok()?;
        // SAFETY: the layout is not zero-sized. Zeroed allocation: pages are mapped only when
        // pass 1 writes them.
        let ptr = crate::alloc_guard::fallible(|| unsafe { std::alloc::alloc_zeroed(layout) });
        if ptr.is_null() {
            return None;
        }
        // SAFETY: allocated by the global allocator with the layout of `cap` AtomicU64s, and
        // all-zero bytes are a valid AtomicU64.
        let table = unsafe { Vec::from_raw_parts(ptr as *mut AtomicU64, cap, cap) };
        Some(Defs {
            table,
            extra: Mutex::new(FxHashMap::default()),
            count: AtomicU64::new(0),
        })
    }

    /// The definition of memo entry `idx`, if it is known and complete.
    pub fn get(&self, idx: u64) -> Option<MemoDef> {
        let e = self.table.get(usize::try_from(idx).ok()?)?.load(Relaxed);
        if e & BIG_BIT != 0 {
            return None;
        }
        let len = (e >> LEN_SHIFT) & LEN_MAX;
        if len == 0 {
            return None;
        }
        let (mut len_out, mut base) = (len, idx);
        if len == LEN_MAX || e & BASE_BIT != 0 {
            let extra = self.extra.lock().unwrap_or_else(|e| e.into_inner());
            let (l, b) = *extra.get(&(idx as u32))?;
            if len == LEN_MAX {
                len_out = l;
            }
            if e & BASE_BIT != 0 {
                base = b;
            }
        }
        Some(MemoDef {
            start: e & START_MASK,
            len: len_out,
            base,
        })
    }

    /// Number of memo entries defined.
    pub fn len(&self) -> usize {
        self.count.load(Relaxed) as usize
    }

    /// True when no memo entry is defined.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The result of pass 1.
#[derive(Debug)]
pub struct Plan {
    /// Chunks in file order.
    pub chunks: Vec<Chunk>,
    /// Definitions of referenced memo entries.
    pub defs: Defs,
}

const NONE: u32 = u32::MAX;
const T_PLAIN: u8 = 0;
const T_REF: u8 = 1;
const T_TOP_DICT: u8 = 2;
const T_KEY_SEG: u8 = 3;
const T_KEY_TRACES: u8 = 4;
const T_TRACES: u8 = 5;
const T_SEG_LIST: u8 = 6;
const T_TRACE_LIST: u8 = 7;

#[derive(Clone, Copy)]
struct Ent {
    start: u64,
    end: u64,
    memo_at: u64,
    memo: u32,
    tag: u8,
    /// An empty list or dict: the only entries later opcodes can fill.
    container: bool,
}

#[derive(Clone, Copy)]
struct Mark {
    at: usize,
}

struct Open {
    chunk: Chunk,
    /// Stack index of the list being filled.
    list: usize,
    last_fill_end: u64,
    last_fill_memo: u64,
}

/// Table entry: start (40 bits) | len (21 bits) | base differs | big | referenced.
/// len 0 = not complete; big = the top-level dict or a big list (never decoded on demand).
const LEN_SHIFT: u32 = 40;
const LEN_MAX: u64 = (1 << 21) - 1;
const REF_BIT: u64 = 1 << 63;
const BIG_BIT: u64 = 1 << 62;
const BASE_BIT: u64 = 1 << 61;
const START_MASK: u64 = (1 << LEN_SHIFT) - 1;

/// The top-level dict and the big lists: never decoded on demand.
fn is_big_tag(tag: u8) -> bool {
    matches!(tag, T_TOP_DICT | T_TRACES | T_SEG_LIST | T_TRACE_LIST)
}

struct Scanner<'a, 'b> {
    buf: &'b [u8],
    /// Where the rest of an input still arriving comes from.
    more: Option<&'b (dyn Fn(usize) -> &'b [u8] + Sync)>,
    /// At this position, ask `more` for the next window (`usize::MAX`: the input is whole).
    refill_at: usize,
    pos: usize,
    stack: Vec<Ent>,
    marks: Vec<Mark>,
    memo_next: u64,
    defs: &'a Defs,
    defined: usize,
    /// One bit per big container's memo id modulo 64 (see [`is_big_tag`]): a reference
    /// whose bit is set takes the checked path.
    big_mask: u64,
    /// Stack index and memo id of the last open floor found (see [`Scanner::open_floor`]).
    floor_at: Option<(usize, u32)>,
    /// Most entries the stack may hold (bounded by the input size).
    max_stack: usize,
    /// Walk trace entries with [`Scanner::skim_entry`] (off only to test it against the
    /// opcode-by-opcode path).
    skim: bool,
    /// Scratch list of the definitions inside a skimmed entry: (memo id, start, length).
    skim_defs: Vec<(u64, u64, u64)>,
    /// Scratch list of the entries a skimmed entry refers to among its own.
    skim_refs: Vec<u64>,
    emit: &'a mut dyn FnMut(Chunk),
    open: Option<Open>,
    chunk_bytes: u64,
}

type S<T> = Option<T>;

/// Runs pass 1 over `buf` and returns the whole plan. `chunk_bytes` is the target size of a
/// chunk. `None`: the layout is not one the parallel path handles (use the sequential decoder).
pub fn scan(buf: &[u8], chunk_bytes: usize) -> Option<Plan> {
    scan_with(buf, chunk_bytes, true)
}

/// [`scan`], with or without the trace entry walk of [`Scanner::skim_entry`].
fn scan_with(buf: &[u8], chunk_bytes: usize, skim: bool) -> Option<Plan> {
    let defs = Defs::for_input(buf.len())?;
    let mut chunks = Vec::new();
    scan_into_with(buf, None, chunk_bytes, &defs, &mut |c| chunks.push(c), skim)?;
    Some(Plan { chunks, defs })
}

/// How far ahead of its position pass 1 wants input that is still arriving.
pub const WINDOW: usize = 1 << 20;

/// More of an input that is still arriving: `more(n)` blocks until at least `n` bytes are
/// there (or no more will come) and returns all there so far, never more than `total` bytes
/// (the second field).
pub type More<'a> = (&'a (dyn Fn(usize) -> &'a [u8] + Sync), usize);

/// Runs pass 1, filling `defs` and handing each chunk to `emit` as soon as it is complete
/// (every memo definition before its end is then recorded in `defs`). With `more`, `buf` is
/// the part of the input there so far and pass 1 asks for the rest as it goes.
pub fn scan_into<'b>(
    buf: &'b [u8],
    more: Option<More<'b>>,
    chunk_bytes: usize,
    defs: &Defs,
    emit: &mut dyn FnMut(Chunk),
) -> Option<()> {
    scan_into_with(buf, more, chunk_bytes, defs, emit, true)
}

fn scan_into_with<'b>(
    buf: &'b [u8],
    more: Option<More<'b>>,
    chunk_bytes: usize,
    defs: &Defs,
    emit: &mut dyn FnMut(Chunk),
    skim: bool,
) -> Option<()> {
    let total = more.map_or(buf.len(), |(_, total)| total.max(buf.len()));
    if total as u64 > START_MASK {
        return None;
    }
    let mut s = Scanner {
        more: more.map(|(f, _)| f),
        refill_at: if more.is_some() {
            buf.len().saturating_sub(WINDOW)
        } else {
            usize::MAX
        },
        buf,
        pos: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo_next: 0,
        defs,
        defined: 0,
        big_mask: 0,
        floor_at: None,
        max_stack: total / 16 + 65_536,
        skim,
        skim_defs: Vec::new(),
        skim_refs: Vec::new(),
        emit,
        open: None,
        chunk_bytes: chunk_bytes.max(1) as u64,
    };
    s.run()?;
    defs.count.store(s.defined as u64, Relaxed);
    Some(())
}

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

impl Scanner<'_, '_> {
    #[inline]
    fn take(&mut self, n: usize) -> S<usize> {
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
    fn refill(&mut self, want: usize) -> bool {
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
        self.buf.len() >= want
    }

    #[inline]
    fn u8(&mut self) -> S<u8> {
        let at = self.take(1)?;
        Some(self.buf[at])
    }

    #[inline]
    fn u32(&mut self) -> S<u32> {
        let at = self.take(4)?;
        Some(u32::from_le_bytes(self.buf[at..at + 4].try_into().ok()?))
    }

    fn u64(&mut self) -> S<u64> {
        let at = self.take(8)?;
        Some(u64::from_le_bytes(self.buf[at..at + 8].try_into().ok()?))
    }

    fn floor(&self) -> usize {
        self.marks.last().map_or(0, |m| m.at)
    }

    #[inline]
    fn push(&mut self, start: usize, tag: u8) -> S<()> {
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
    fn push_container(&mut self, start: usize, tag: u8) -> S<()> {
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
    /// ever defined), so the first one found is the lowest; 0 (no floor) when it is not among
    /// the bottom entries.
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
        match self
            .stack
            .iter()
            .take(64)
            .position(|e| e.container && e.memo != NONE && !is_big_tag(e.tag))
        {
            Some(at) => {
                let memo = self.stack[at].memo;
                self.floor_at = Some((at, memo));
                memo as u64
            }
            None if self.stack.len() <= 64 => u64::MAX,
            None => 0,
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

    fn list_tag(&self) -> u8 {
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

    fn consume_above(&mut self, m: usize) -> S<()> {
        for i in m..self.stack.len() {
            self.consume(i)?;
        }
        self.stack.truncate(m);
        Some(())
    }

    fn close_open(&mut self) {
        if let Some(o) = self.open.take() {
            let mut c = o.chunk;
            c.end = o.last_fill_end;
            c.memo_end = o.last_fill_memo;
            (self.emit)(c);
        }
    }

    /// A container at stack index `t` receives items: it must not be a reference or an
    /// object already referenced (the plan would then decode it before it is complete).
    fn fill(&mut self, t: usize) -> S<()> {
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
    fn list_fill(&mut self, t: usize, m: usize, op_at: usize, with_mark: bool) -> S<()> {
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

    fn define(&mut self, idx: u64) -> S<()> {
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
        }
        self.defs.table[self.defined].store(v, Relaxed);
        self.defined += 1;
        let ent = &mut self.stack[top];
        ent.memo = idx as u32;
        ent.end = self.pos as u64;
        Some(())
    }

    #[inline]
    fn get(&mut self, idx: u64, op_at: usize) -> S<()> {
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
    fn in_trace_batch(&self) -> bool {
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
    fn skim_entry(&mut self, op_at: usize) -> S<bool> {
        let c0 = self.memo_next;
        if c0 != self.defined as u64 || self.stack.len() + 1 >= self.max_stack {
            return Some(false);
        }
        let floor = self.open_floor().min(c0);
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
    fn ref_batch(&mut self, op_at: usize) -> S<bool> {
        let Some(m) = self.marks.last() else {
            return Some(false);
        };
        let m = m.at;
        if m == 0 || m != self.stack.len() || self.stack[m - 1].tag != T_PLAIN {
            return Some(false);
        }
        // Entries below the open floor are complete, so they cannot be filled later and
        // need no reference mark (the table stays untouched: these are the millions of frame
        // references). Anything else takes the checked path.
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

    fn string(&mut self, op_at: usize, len: u64) -> S<()> {
        let len = usize::try_from(len).ok()?;
        let at = self.take(len)?;
        let tag = if self.top_dict_slot() == Some(false) {
            self.key_tag(Some(&self.buf[at..at + len]))
        } else {
            T_PLAIN
        };
        self.push(op_at, tag)
    }

    fn run(&mut self) -> S<()> {
        loop {
            let op_at = self.pos;
            if op_at >= self.refill_at {
                self.refill(op_at + 1);
            }
            let code = *self.buf.get(self.pos)?;
            self.pos += 1;
            match code {
                op::PROTO => {
                    if self.u8()? > 5 {
                        return None;
                    }
                }
                op::FRAME => {
                    self.u64()?;
                }
                op::STOP => {
                    if !self.marks.is_empty() || self.stack.len() != 1 {
                        return None;
                    }
                    self.consume_above(0)?;
                    self.close_open();
                    return Some(());
                }
                op::MARK => {
                    if self.marks.len() >= 1000 {
                        return None;
                    }
                    self.marks.push(Mark {
                        at: self.stack.len(),
                    });
                }
                op::POP => {
                    let n = self.stack.len();
                    if n <= self.floor() {
                        return None;
                    }
                    self.consume_above(n - 1)?;
                }
                op::POP_MARK => {
                    let m = self.marks.pop()?;
                    self.consume_above(m.at)?;
                }
                op::EMPTY_DICT
                    if self.skim && self.in_trace_batch() && self.skim_entry(op_at)? => {}
                op::EMPTY_DICT => {
                    let tag = if self.stack.is_empty() {
                        T_TOP_DICT
                    } else {
                        T_PLAIN
                    };
                    self.push_container(op_at, tag)?;
                }
                op::EMPTY_LIST => {
                    let tag = self.list_tag();
                    self.push_container(op_at, tag)?;
                }
                op::EMPTY_TUPLE | op::NONE | op::NEWTRUE | op::NEWFALSE => {
                    self.push(op_at, T_PLAIN)?
                }
                op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => {
                    let k = (code - op::TUPLE1 + 1) as usize;
                    let n = self.stack.len();
                    if n < self.floor() + k {
                        return None;
                    }
                    let first = self.stack[n - k];
                    self.consume_above(n - k)?;
                    self.push(first.start as usize, T_PLAIN)?;
                    let top = self.stack.len() - 1;
                    self.stack[top].memo_at = first.memo_at;
                }
                op::APPEND => {
                    let n = self.stack.len();
                    if n < self.floor() + 2 {
                        return None;
                    }
                    self.list_fill(n - 2, n - 1, op_at, false)?;
                }
                op::APPENDS => {
                    let m = self.marks.pop()?.at;
                    if m == 0 || m <= self.floor() {
                        return None;
                    }
                    self.list_fill(m - 1, m, op_at, true)?;
                }
                op::SETITEM => {
                    let n = self.stack.len();
                    if n < self.floor() + 3 {
                        return None;
                    }
                    self.fill(n - 3)?;
                    self.consume_above(n - 2)?;
                }
                op::SETITEMS => {
                    let m = self.marks.pop()?.at;
                    if m == 0 || m <= self.floor() {
                        return None;
                    }
                    self.fill(m - 1)?;
                    self.consume_above(m)?;
                }
                op::SHORT_BINUNICODE => {
                    let n = self.u8()? as u64;
                    self.string(op_at, n)?;
                }
                op::BINUNICODE => {
                    let n = self.u32()? as u64;
                    self.string(op_at, n)?;
                }
                op::BINUNICODE8 => {
                    let n = self.u64()?;
                    self.string(op_at, n)?;
                }
                op::SHORT_BINBYTES => {
                    let n = self.u8()? as usize;
                    self.take(n)?;
                    self.push(op_at, T_PLAIN)?;
                }
                op::BINBYTES => {
                    let n = self.u32()? as usize;
                    self.take(n)?;
                    self.push(op_at, T_PLAIN)?;
                }
                op::BINBYTES8 => {
                    let n = usize::try_from(self.u64()?).ok()?;
                    self.take(n)?;
                    self.push(op_at, T_PLAIN)?;
                }
                op::BININT1 => {
                    self.take(1)?;
                    self.push(op_at, T_PLAIN)?;
                }
                op::BININT2 => {
                    self.take(2)?;
                    self.push(op_at, T_PLAIN)?;
                }
                op::BININT => {
                    self.take(4)?;
                    self.push(op_at, T_PLAIN)?;
                }
                op::BINFLOAT => {
                    self.take(8)?;
                    self.push(op_at, T_PLAIN)?;
                }
                op::LONG1 => {
                    let n = self.u8()? as usize;
                    self.take(n)?;
                    self.push(op_at, T_PLAIN)?;
                }
                op::LONG4 => {
                    let n = usize::try_from(self.u32()? as i32).ok()?;
                    self.take(n)?;
                    self.push(op_at, T_PLAIN)?;
                }
                op::MEMOIZE => {
                    let idx = self.memo_next;
                    self.define(idx)?;
                    self.memo_next += 1;
                }
                op::BINPUT | op::LONG_BINPUT => {
                    let idx = if code == op::BINPUT {
                        self.u8()? as u64
                    } else {
                        self.u32()? as u64
                    };
                    self.define(idx)?;
                    self.memo_next = self.memo_next.max(idx + 1);
                }
                op::BINGET | op::LONG_BINGET => {
                    // A batch starts right after its MARK; other references (dict keys) skip
                    // the batch check.
                    if self.marks.last().is_some_and(|m| m.at == self.stack.len())
                        && self.ref_batch(op_at)?
                    {
                        continue;
                    }
                    let idx = if code == op::BINGET {
                        self.u8()? as u64
                    } else {
                        self.u32()? as u64
                    };
                    self.get(idx, op_at)?;
                }
                // Text opcodes (protocols 0/1), DUP, LIST/DICT/TUPLE with marks and every
                // code opcode: not planned; the sequential decoder handles or refuses them.
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_a_small_trace() {
        // {"device_traces": [[{"a": 1}, {"a": 2}, {"a": 3}]]} in protocol 4.
        let body: &[u8] = b"\x80\x04}\x94\x8c\x0ddevice_traces\x94]\x94]\x94(}\x94\x8c\x01a\x94K\x01s}\x94h\x05K\x02s}\x94h\x05K\x03seas.";
        let plan = scan(body, 1).expect("planned");
        assert_eq!(plan.chunks.len(), 3);
        assert!(plan
            .chunks
            .iter()
            .all(|c| c.target == Target::Trace && c.items == 1));
        assert_eq!(plan.chunks[0].end, plan.chunks[1].start);
        assert_eq!(plan.defs.len(), 8);
        let d = plan.defs.get(5).unwrap();
        assert_eq!(
            &body[d.start as usize..(d.start + d.len) as usize],
            b"\x8c\x01a\x94"
        );
        let plan = scan(body, 1 << 20).unwrap();
        assert_eq!(plan.chunks.len(), 1);
        assert_eq!(plan.chunks[0].items, 3);
        assert!(plan.chunks[0].mark_open);
    }

    /// Both plans of `buf`, with and without the trace entry walk, must be identical.
    fn assert_skim_agrees(name: &str, buf: &[u8]) {
        for chunk_bytes in [1 << 12, 8 << 20] {
            let with = scan_with(buf, chunk_bytes, true);
            let without = scan_with(buf, chunk_bytes, false);
            let (with, without) = match (with, without) {
                (Some(a), Some(b)) => (a, b),
                (None, None) => return,
                (a, b) => panic!(
                    "{name}: planned with skim {}, without {}",
                    a.is_some(),
                    b.is_some()
                ),
            };
            assert_eq!(with.defs.len(), without.defs.len(), "{name}: memo count");
            for i in 0..with.defs.len() {
                let (a, b) = (
                    with.defs.table[i].load(Relaxed),
                    without.defs.table[i].load(Relaxed),
                );
                // Reference marks matter only on entries still open when referenced; the
                // walk skips marking complete ones that the opcode path marks.
                if (a ^ b) == REF_BIT {
                    assert!(a >> LEN_SHIFT & LEN_MAX != 0, "{name}: memo entry {i} open");
                    continue;
                }
                assert_eq!(a, b, "{name}: memo entry {i}: {a:#x} vs {b:#x}");
            }
            let key = |c: &Chunk| {
                (
                    c.start,
                    c.end,
                    c.memo_base,
                    c.memo_end,
                    c.items,
                    c.mark_open,
                )
            };
            let a: Vec<_> = with.chunks.iter().map(key).collect();
            let b: Vec<_> = without.chunks.iter().map(key).collect();
            assert_eq!(a, b, "{name}: chunks");
        }
    }

    #[test]
    fn skimmed_trace_entries_plan_like_the_opcode_walk() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut dirs = vec![root.join("samples"), root.join("samples/ranks")];
        dirs.push(root.join("../shared/samples/real"));
        let mut seen = 0;
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            for path in paths {
                let Ok(input) = crate::input::read(&path) else {
                    continue;
                };
                if scan_with(input.bytes(), 1 << 20, false).is_none() {
                    continue;
                }
                assert_skim_agrees(&path.display().to_string(), input.bytes());
                seen += 1;
            }
        }
        assert!(seen >= 5, "only {seen} plannable samples found");
    }

    #[test]
    fn skim_handles_frames_refs_and_memoized_values() {
        // {"device_traces": [[e1, .., e5]]}: e1 defines strings and a frames list holding a
        // new frame dict (left to the opcode walk), e2 refers to them, e3 has an empty frames
        // list and a FRAME opcode, e4 an APPEND (left to the walk), e5 a shared frames list.
        let body: &[u8] = b"\x80\x04\x7d\x94\x8c\x0d\x64\x65\x76\x69\x63\x65\x5f\x74\x72\x61\x63\x65\x73\x94\x5d\x94\x5d\x94\x28\x7d\x94\x28\x8c\x06\x61\x63\x74\x69\x6f\x6e\x94\x8c\x05\x61\x6c\x6c\x6f\x63\x94\x8c\x06\x66\x72\x61\x6d\x65\x73\x94\x5d\x94\x28\x7d\x94\x8c\x01\x61\x94\x4b\x01\x73\x68\x09\x65\x75\x7d\x94\x28\x68\x05\x68\x06\x68\x07\x5d\x94\x28\x68\x09\x68\x09\x65\x75\x7d\x94\x28\x68\x05\x8c\x01\x78\x94\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x04\x73\x69\x7a\x65\x94\x4b\x05\x68\x07\x5d\x94\x75\x7d\x94\x28\x68\x05\x68\x06\x68\x07\x5d\x94\x68\x09\x61\x75\x7d\x94\x28\x68\x05\x68\x06\x68\x07\x68\x12\x75\x65\x61\x73\x2e";
        assert_skim_agrees("inline", body);
        let plan = scan_with(body, 1, true).expect("planned");
        assert_eq!(plan.chunks.len(), 5);
        // e2's frames list (memo 12) is complete and spans `] MEMOIZE ( h h e`.
        let d = plan.defs.get(12).expect("defined");
        assert_eq!((d.start, d.len), (79, 8));
    }

    #[test]
    fn refuses_what_it_cannot_plan() {
        assert!(scan(b"(lp0\nI3\na.", 1).is_none());
        assert!(scan(b"\x80\x04]\x94K\x012a.", 1).is_none());
        assert!(scan(b"\x80\x04K", 1).is_none());
        assert!(scan(b"", 1).is_none());
    }
}
