//! The pickle virtual machine: bytes in, one top-level [`Value`] out.
//!
//! It executes the data-only subset of the pickle protocols 0-5 and refuses every opcode that
//! names or calls Python code. Containers are handed to [`Hooks`] as they are filled, so a
//! driver can convert each element into compact structs as soon as it is complete and no
//! generic tree of the whole file is ever kept.

use super::ops::{self, op};
use super::scan::{Chunk, Defs};
use super::value::{Heap, ListData, ObjData, ObjId, Value};

pub mod flat;

/// A decoding failure at a byte offset of the (decompressed) input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Offset of the opcode (or field) that failed.
    pub offset: u64,
    /// What was expected or what went wrong.
    pub message: String,
    /// True when the input ended before the pickle did.
    pub truncated: bool,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for DecodeError {}

/// Callbacks run as containers are filled; each returns the value to store in place of the
/// item (the item itself, or a converted `Ext` handle). Errors become [`DecodeError`]s at the
/// offset of the opcode being executed.
pub trait Hooks {
    /// `item` is being appended to the list `list`.
    fn on_append(&mut self, heap: &mut Heap, list: ObjId, item: Value) -> Result<Value, String>;
    /// `value` is being stored under `key` in the dict `dict`.
    fn on_setitem(
        &mut self,
        heap: &mut Heap,
        dict: ObjId,
        key: Value,
        value: Value,
    ) -> Result<Value, String>;
    /// Called about every 16 MiB of input with the current offset.
    fn on_progress(&mut self, _offset: u64) {}
    /// Only with [`decode_planned`]: the elements of chunk `index` (decoded elsewhere) are
    /// needed now; returns `(kind, first id, count)` of the `Ext` handles that stand for them.
    fn on_skip(&mut self, _heap: &mut Heap, _index: usize) -> Result<(u8, u32, u32), String> {
        Err("unexpected chunk".into())
    }
    /// How many records the driver has produced so far. A memo definition decoded on demand
    /// (a second time, out of file order) must not produce any: the decoder refuses it then.
    fn records(&self) -> usize {
        0
    }
    /// Whether `value`, a memo definition just decoded on demand, may stand in for the
    /// object the file defined there. A record (a trace entry, a block...) is converted where
    /// its list holds it, so a copy decoded elsewhere would differ from it: the decoder
    /// refuses such a definition.
    fn accepts_definition(&self, _heap: &Heap, _value: Value) -> bool {
        true
    }
    /// Whether the decoder should offer flat dicts to [`Hooks::on_flat`] (checked per dict).
    fn wants_flat(&self) -> bool {
        false
    }
    /// A dict built directly inside a list, read in one step because it is flat: string keys,
    /// scalar, string or converted values, and at most one list of such values, whose pair
    /// index and items `list` gives (its value in `pairs` is a placeholder). Returns the
    /// dict's value and the list's (`Value::None` without a list), or `None` to have the
    /// dict decoded opcode by opcode instead. Must be equivalent to what `on_setitem` and
    /// `on_append` would do with that dict.
    fn on_flat(
        &mut self,
        _heap: &mut Heap,
        _pairs: &mut [(Value, Value)],
        _list: Option<(usize, &[Value])>,
    ) -> Option<(Value, Value)> {
        None
    }
}

/// Hooks that convert nothing: the decoder then builds a plain value tree (tests, small inputs).
pub struct NoHooks;

impl Hooks for NoHooks {
    fn on_append(&mut self, _: &mut Heap, _: ObjId, item: Value) -> Result<Value, String> {
        Ok(item)
    }
    fn on_setitem(&mut self, _: &mut Heap, _: ObjId, _: Value, v: Value) -> Result<Value, String> {
        Ok(v)
    }
}

/// Resource bounds, so a hostile file cannot exhaust memory or time.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most MARKs open at once (container nesting).
    pub max_marks: usize,
    /// Most values on the stack at once.
    pub max_stack: usize,
}

impl Limits {
    /// Bounds scaled to an input of `len` bytes: legitimate snapshots stay far below them.
    pub fn for_input(len: usize) -> Self {
        Limits {
            max_marks: 1000,
            max_stack: len / 16 + 65_536,
        }
    }
}

const PROGRESS_STEP: u64 = 16 << 20;

/// Decodes one pickle from `buf`, returning the heap and the top-level value.
pub fn decode<'a, H: Hooks>(
    buf: &'a [u8],
    hooks: &mut H,
    limits: Limits,
) -> Result<(Heap<'a>, Value), DecodeError> {
    let mut m = Machine::new(buf, limits);
    let top = m.run(hooks)?;
    Ok((m.heap, top))
}

/// Decodes like [`decode`], but when the input is cut short or corrupt, keeps everything
/// that was complete before the failure: open containers are closed, partly built dicts
/// (an event whose fields were still being written) are dropped, lists keep the items they
/// had. Returns the failure alongside the salvaged top-level value.
pub fn decode_salvage<'a, H: Hooks>(
    buf: &'a [u8],
    hooks: &mut H,
    limits: Limits,
) -> Result<(Heap<'a>, Value, Option<DecodeError>), DecodeError> {
    let mut m = Machine::new(buf, limits);
    m.salvage = true;
    match m.run(hooks) {
        Ok(top) => Ok((m.heap, top, None)),
        Err(e) => match m.close_open(hooks) {
            Some(top) => Ok((m.heap, top, Some(e))),
            None => Err(e),
        },
    }
}

/// Decodes the whole pickle like [`decode`], except that the element ranges of `chunks`
/// (pass 1's plan) are not decoded: [`Hooks::on_skip`] supplies handles for them. Memo
/// entries defined inside skipped ranges are decoded on demand from `defs`.
pub fn decode_planned<'a, H: Hooks>(
    buf: &'a [u8],
    hooks: &mut H,
    limits: Limits,
    chunks: &'a [Chunk],
    defs: &'a Defs,
) -> Result<(Heap<'a>, Value), DecodeError> {
    let mut m = Machine::new(buf, limits);
    m.defs = Some(defs);
    m.chunks = chunks;
    m.next_skip = chunks.first().map_or(usize::MAX, |c| c.start as usize);
    let top = m.run(hooks)?;
    Ok((m.heap, top))
}

/// Decodes the elements of one chunk into a fresh list (returned with the heap). Memo
/// entries defined before the chunk are decoded on demand from `defs`.
pub fn decode_chunk<'a, H: Hooks>(
    buf: &'a [u8],
    hooks: &mut H,
    limits: Limits,
    chunk: &Chunk,
    defs: &'a Defs,
) -> Result<(Heap<'a>, Value), DecodeError> {
    let mut m = Machine::new(buf, limits);
    m.defs = Some(defs);
    m.heap.memo_base = chunk.memo_base;
    m.pos = chunk.start as usize;
    m.end = (chunk.end as usize).min(buf.len());
    m.ranged = true;
    m.next_progress = u64::MAX;
    let list = m.heap.alloc(ObjData::List(ListData::Items(Vec::new())));
    let Value::Obj(id) = list else { unreachable!() };
    m.stack.push(list);
    if chunk.mark_open {
        m.marks.push(1);
    }
    if m.run_inner(hooks)?.is_some() {
        return m.err("STOP inside a chunk");
    }
    m.op_at = m.pos;
    let floor = m.marks.last().copied().unwrap_or(1);
    if floor < 1 || m.marks.len() > 1 {
        return m.err("chunk ends inside a container");
    }
    m.fill_list(hooks, id, floor)?;
    m.marks.clear();
    if m.stack.len() != 1 {
        return m.err("chunk leaves values on the stack");
    }
    Ok((m.heap, list))
}

struct Machine<'a> {
    heap: Heap<'a>,
    buf: &'a [u8],
    pos: usize,
    op_at: usize,
    stack: Vec<Value>,
    marks: Vec<usize>,
    limits: Limits,
    prev_memoize: bool,
    next_progress: u64,
    /// Decoding stops at this offset (the end of the input, a chunk or a definition).
    end: usize,
    /// True when reaching `end` is a normal stop rather than a truncation.
    ranged: bool,
    /// Explicit counter for implicit MEMOIZE ids (after a skip, inside a definition).
    memo_next: Option<u64>,
    /// Where memo entries defined outside the decoded ranges lie.
    defs: Option<&'a Defs>,
    /// Chunks to skip, and the offset of the next one.
    chunks: &'a [Chunk],
    skip_idx: usize,
    next_skip: usize,
    /// Nesting of on-demand definition decodes.
    depth: u32,
    /// Direct-mapped cache of converted memo values (planned decoding only).
    ext_cache: Vec<(u64, Value)>,
    /// Salvaging: a FRAME that runs past the end is not an error (decode up to the cut).
    salvage: bool,
    /// Scratch of the flat-dict fast path (`flat.rs`): pairs and list items.
    flat_pairs: Vec<(Value, Value)>,
    flat_items: Vec<Value>,
    /// Stack indices (ascending) of the items the fast path converted that no `APPEND(S)`
    /// has consumed yet; see [`Machine::flat_consumed`].
    flat_pending: Vec<usize>,
    /// Memo slots given to such items, with their values; until the items are appended the
    /// slots hold `flat_sentinel`, whose use stops the decode like [`Machine::flat_consumed`].
    flat_memo: Vec<(u64, Value)>,
    flat_sentinel: Option<Value>,
    /// Dicts still to leave to the general loop before the fast path is tried again, and
    /// how many the next decline adds (doubling while declines follow each other).
    flat_skip: u32,
    flat_backoff: u32,
    /// Set when the fast path declined only because a reference was not resolved yet (a
    /// definition outside a chunk not decoded so far): such a decline is no reason to back off.
    flat_transient: std::cell::Cell<bool>,
}

const EXT_CACHE: usize = 1 << 14;
/// Definitions decoded on demand, and their bytes (for `MEMLENS_TIMING`).
pub static EXT_COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// Bytes of the definitions decoded on demand.
pub static EXT_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Deepest chain of definitions decoded on demand (a frames list holding a frame dict...).
const MAX_DEF_DEPTH: u32 = 64;

type R<T> = Result<T, DecodeError>;

impl<'a> Machine<'a> {
    fn new(buf: &'a [u8], limits: Limits) -> Self {
        Machine {
            heap: Heap::new(buf),
            buf,
            pos: 0,
            op_at: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            limits,
            prev_memoize: false,
            next_progress: PROGRESS_STEP,
            end: buf.len(),
            ranged: false,
            memo_next: None,
            defs: None,
            chunks: &[],
            skip_idx: 0,
            next_skip: usize::MAX,
            depth: 0,
            ext_cache: Vec::new(),
            salvage: false,
            flat_pairs: Vec::new(),
            flat_items: Vec::new(),
            flat_pending: Vec::new(),
            flat_memo: Vec::new(),
            flat_sentinel: None,
            flat_skip: 0,
            flat_backoff: 0,
            flat_transient: std::cell::Cell::new(false),
        }
    }

    /// Decodes the definition of memo entry `index` (outside the ranges decoded here) and
    /// returns its value; the memo then holds it for later references.
    fn resolve_external<H: Hooks>(&mut self, hooks: &mut H, index: u64) -> R<Option<Value>> {
        let Some(def) = self.defs.and_then(|d| d.get(index)) else {
            return Ok(None);
        };
        EXT_COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        EXT_BYTES.fetch_add(def.len, std::sync::atomic::Ordering::Relaxed);
        if self.depth >= MAX_DEF_DEPTH {
            return self.err("memo definitions nested too deeply");
        }
        let end = def
            .start
            .checked_add(def.len)
            .filter(|&e| e <= self.buf.len() as u64);
        let Some(end) = end else {
            return self.err("memo definition outside the input");
        };
        let saved = (
            self.pos,
            self.op_at,
            self.end,
            self.ranged,
            self.memo_next,
            self.next_skip,
            self.prev_memoize,
        );
        if self.marks.len() >= self.limits.max_marks {
            return self.err("containers nested too deeply");
        }
        let barrier = self.stack.len();
        self.marks.push(barrier);
        let marks = self.marks.len();
        self.pos = def.start as usize;
        self.end = end as usize;
        self.ranged = true;
        self.memo_next = Some(def.base);
        self.next_skip = usize::MAX;
        self.prev_memoize = false;
        self.depth += 1;
        let records = hooks.records();
        let r = self.run_inner(hooks);
        self.depth -= 1;
        let ok = matches!(r, Ok(None))
            && self.marks.len() == marks
            && self.stack.len() == barrier + 1
            && hooks.records() == records;
        (
            self.pos,
            self.op_at,
            self.end,
            self.ranged,
            self.memo_next,
            self.next_skip,
            self.prev_memoize,
        ) = saved;
        r?;
        if !ok || !hooks.accepts_definition(&self.heap, self.stack[barrier]) {
            return self.err(format!(
                "memo entry {index}: its definition is not one value, or holds records"
            ));
        }
        self.marks.pop();
        self.stack.pop();
        Ok(self.memo_lookup(index))
    }

    fn memo_store(&mut self, index: u64, v: Value) {
        let rel = index.wrapping_sub(self.heap.memo_base) as usize;
        if index >= self.heap.memo_base && rel < self.heap.memo.len() {
            self.heap.memo[rel] = v;
        } else if let Some(slot) = self.heap.sparse_memo.get_mut(&index) {
            *slot = v;
        }
    }

    fn memo_lookup(&self, index: u64) -> Option<Value> {
        let rel = index.wrapping_sub(self.heap.memo_base) as usize;
        if index >= self.heap.memo_base && rel < self.heap.memo.len() {
            Some(self.heap.memo[rel])
        } else {
            self.heap.sparse_memo.get(&index).copied()
        }
    }

    fn do_skip<H: Hooks>(&mut self, hooks: &mut H) -> R<()> {
        let i = self.skip_idx;
        let c = self.chunks[i];
        self.skip_idx += 1;
        self.next_skip = self
            .chunks
            .get(self.skip_idx)
            .map_or(usize::MAX, |c| c.start as usize);
        let (kind, start, n) = match hooks.on_skip(&mut self.heap, i) {
            Ok(r) => r,
            Err(e) => return self.err(e),
        };
        for k in 0..n {
            self.push(Value::Ext {
                kind,
                id: start + k,
            })?;
        }
        self.pos = c.end as usize;
        self.memo_next = Some(c.memo_end);
        self.prev_memoize = false;
        Ok(())
    }

    #[cold]
    fn err<T>(&self, message: impl Into<String>) -> R<T> {
        Err(DecodeError {
            offset: self.op_at as u64,
            message: message.into(),
            truncated: false,
        })
    }

    #[cold]
    #[inline(never)]
    fn eof<T>(&self, what: &str) -> R<T> {
        Err(DecodeError {
            offset: self.buf.len() as u64,
            message: format!(
                "file ends in the middle of {what} (opcode at byte {}); the snapshot is truncated",
                self.op_at
            ),
            truncated: true,
        })
    }

    #[inline(always)]
    fn take(&mut self, n: usize, what: &str) -> R<&'a [u8]> {
        if self.buf.len() - self.pos < n {
            return self.eof(what);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline(always)]
    fn u8(&mut self, what: &str) -> R<u8> {
        Ok(self.take(1, what)?[0])
    }

    #[inline(always)]
    fn u32le(&mut self, what: &str) -> R<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64le(&mut self, what: &str) -> R<u64> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap()))
    }

    /// A length field, checked against what is left of the input.
    fn length(&mut self, len: u64, what: &str) -> R<usize> {
        let left = (self.buf.len() - self.pos) as u64;
        if len > left {
            if len > (1 << 40) || len > left.saturating_mul(2) + 4096 {
                return self.err(format!(
                    "{what} length {len} exceeds the {left} bytes left in the file"
                ));
            }
            return self.eof(what);
        }
        Ok(len as usize)
    }

    fn line(&mut self, what: &str) -> R<&'a [u8]> {
        match self.buf[self.pos..].iter().position(|&b| b == b'\n') {
            Some(n) => {
                let s = &self.buf[self.pos..self.pos + n];
                self.pos += n + 1;
                Ok(s)
            }
            None => self.eof(what),
        }
    }

    #[inline]
    fn push(&mut self, v: Value) -> R<()> {
        if self.stack.len() >= self.limits.max_stack {
            return self.err(format!(
                "more than {} values pending on the pickle stack; not a snapshot",
                self.limits.max_stack
            ));
        }
        self.stack.push(v);
        Ok(())
    }

    #[inline]
    fn pop(&mut self, what: &str) -> R<Value> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return self.err(format!("{what} needs a value but the stack is empty"));
        }
        Ok(self.stack.pop().unwrap())
    }

    fn top(&self, what: &str) -> R<Value> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return self.err(format!("{what} needs a value but the stack is empty"));
        }
        Ok(*self.stack.last().unwrap())
    }

    fn pop_mark(&mut self, what: &str) -> R<usize> {
        match self.marks.pop() {
            Some(m) => Ok(m),
            None => self.err(format!("{what} without a matching MARK")),
        }
    }

    fn str_value(&mut self, len: usize, what: &str) -> R<Value> {
        let off = self.pos as u64;
        self.take(len, what)?;
        if len > u32::MAX as usize {
            return self.err("string longer than 4 GiB");
        }
        Ok(Value::Str {
            off,
            len: len as u32,
        })
    }

    fn bytes_value(&mut self, len: usize, what: &str) -> R<Value> {
        let off = self.pos as u64;
        self.take(len, what)?;
        if len > u32::MAX as usize {
            return self.err("bytes longer than 4 GiB");
        }
        Ok(Value::Bytes {
            off,
            len: len as u32,
        })
    }

    fn memo_put(&mut self, index: u64, v: Value) -> R<()> {
        let memo_len = self.heap.memo.len() as u64;
        let base = self.heap.memo_base;
        if index >= base && index - base == memo_len {
            self.heap.memo.push(v);
        } else if index >= base && index - base < memo_len {
            self.heap.memo[(index - base) as usize] = v;
        } else {
            if self.heap.sparse_memo.len() as u64 >= (self.buf.len() as u64) / 2 + 1024 {
                return self.err("too many memo entries");
            }
            self.heap.sparse_memo.insert(index, v);
        }
        self.heap.note_memoized(v, index);
        Ok(())
    }

    fn memo_get<H: Hooks>(&mut self, hooks: &mut H, index: u64) -> R<Value> {
        let v = if let Some(v) = self.memo_lookup(index) {
            if Some(v) == self.flat_sentinel {
                return self.err(flat::FLAT_BROKEN);
            }
            let r = self.heap.resolve(v);
            if r != v && !matches!(r, Value::Obj(_)) {
                // Point the memo entry at the converted value: later references skip the heap.
                self.memo_store(index, r);
            }
            v
        } else if let Some(v) = self.resolve_external(hooks, index)? {
            v
        } else {
            return self.err(format!(
                "memo reference {index} before any object was stored there ({} stored)",
                self.heap.memo.len()
            ));
        };
        let v = self.heap.resolve(v);
        self.heap.note_escaped(v);
        Ok(v)
    }

    fn container(&self, heap: &Heap, v: Value, what: &str, want_list: bool) -> R<ObjId> {
        if let Value::Obj(id) = v {
            match (heap.data(id), want_list) {
                (ObjData::List(_), true) | (ObjData::Dict(_), false) => return Ok(id),
                _ => {}
            }
        }
        self.err(format!(
            "{what} needs a {} below its items, found {}",
            if want_list { "list" } else { "dict" },
            v.type_name(heap)
        ))
    }

    /// Moves the values above stack position `m` into `list`; each container among them is
    /// first offered to the hooks, which may replace it (scalars are never offered).
    /// Closes every open MARK after a failure (see [`decode_salvage`]); returns the
    /// outermost container, if there is one.
    fn close_open<H: Hooks>(&mut self, hooks: &mut H) -> Option<Value> {
        let partial: Vec<ObjId> = self
            .marks
            .iter()
            .filter_map(|&m| match m.checked_sub(1).map(|i| self.stack[i]) {
                Some(Value::Obj(id)) => Some(id),
                _ => None,
            })
            .collect();
        let incomplete = |heap: &Heap, v: &Value| match v {
            Value::Obj(id) => match heap.data(*id) {
                ObjData::Dict(d) => d.is_empty() || partial.contains(id),
                _ => false,
            },
            _ => false,
        };
        while let Some(m) = self.marks.pop() {
            if m == 0 {
                self.stack.truncate(0);
                break;
            }
            let Value::Obj(target) = self.stack[m - 1] else {
                self.stack.truncate(m);
                continue;
            };
            let mut items: Vec<Value> = self.stack.split_off(m);
            match self.heap.data(target) {
                ObjData::List(_) => {
                    items.retain(|v| !incomplete(&self.heap, v));
                    self.stack.extend(items);
                    self.fill_list(hooks, target, m).ok()?;
                }
                ObjData::Dict(_) => {
                    // Keys then values; a container where a key belongs was being appended to
                    // the value before it (a pending one-item APPEND).
                    let mut pairs: Vec<Value> = Vec::new();
                    for v in items {
                        if pairs.len() % 2 == 0 && self.heap.str_bytes(v).is_none() {
                            if let Some(Value::Obj(prev)) = pairs.last().copied() {
                                if matches!(self.heap.data(prev), ObjData::List(_))
                                    && !incomplete(&self.heap, &v)
                                {
                                    self.stack.push(v);
                                    let at = self.stack.len() - 1;
                                    let _ = self.fill_list(hooks, prev, at);
                                }
                            }
                            continue;
                        }
                        pairs.push(v);
                    }
                    if pairs.len() % 2 == 1 {
                        pairs.pop();
                    }
                    let mut kept = Vec::with_capacity(pairs.len());
                    for p in pairs.chunks_exact(2) {
                        if !incomplete(&self.heap, &p[1]) {
                            kept.extend_from_slice(p);
                        }
                    }
                    self.stack.extend(kept);
                    self.fill_dict(hooks, target, m, "salvage").ok()?;
                }
                _ => {}
            }
        }
        match self.stack.first() {
            Some(v @ Value::Obj(_)) => Some(*v),
            _ => None,
        }
    }

    fn fill_list<H: Hooks>(&mut self, hooks: &mut H, list: ObjId, m: usize) -> R<()> {
        for item in self.stack[m..].iter_mut() {
            if let Value::Obj(_) = item {
                match hooks.on_append(&mut self.heap, list, *item) {
                    Ok(v) => *item = v,
                    Err(e) => return self.err(e),
                }
            }
        }
        self.heap.list_extend(list, &self.stack[m..]);
        self.stack.truncate(m);
        Ok(())
    }

    /// Moves the key/value pairs above stack position `m` into `dict`, offering each
    /// container value to the hooks first.
    fn fill_dict<H: Hooks>(&mut self, hooks: &mut H, dict: ObjId, m: usize, what: &str) -> R<()> {
        if (self.stack.len() - m) % 2 != 0 {
            return self.err(format!(
                "{what} needs key/value pairs but found an odd count"
            ));
        }
        for pair in self.stack[m..].chunks_exact_mut(2) {
            if let Value::Obj(_) = pair[1] {
                match hooks.on_setitem(&mut self.heap, dict, pair[0], pair[1]) {
                    Ok(v) => pair[1] = v,
                    Err(e) => return self.err(e),
                }
            }
        }
        self.heap.dict_extend(dict, &self.stack[m..]);
        self.stack.truncate(m);
        Ok(())
    }

    fn long(&mut self, bytes: &[u8]) -> Value {
        // Little-endian two's complement of any length.
        if bytes.is_empty() {
            return Value::Int(0);
        }
        let negative = bytes[bytes.len() - 1] & 0x80 != 0;
        let mut significant = bytes.len();
        let fill = if negative { 0xff } else { 0x00 };
        while significant > 1 && bytes[significant - 1] == fill {
            significant -= 1;
        }
        if significant <= 8 {
            let mut b = [fill; 8];
            b[..significant].copy_from_slice(&bytes[..significant]);
            let u = u64::from_le_bytes(b);
            if negative {
                // Fits i64 only when the top bit of the extended value is set.
                if (u as i64) < 0 {
                    return Value::Int(u as i64);
                }
                return Value::Huge(true);
            }
            if u <= i64::MAX as u64 {
                return Value::Int(u as i64);
            }
            return Value::UInt(u);
        }
        Value::Huge(negative)
    }

    /// A protocol-0 memo index: a decimal line.
    fn text_index(&mut self, what: &str) -> R<u64> {
        let line = self.line(what)?;
        match self.decimal_int(line, what)? {
            Value::Int(i) if i >= 0 => Ok(i as u64),
            _ => self.err(format!("{what}: expected a non-negative memo index")),
        }
    }

    fn decimal_int(&self, text: &[u8], what: &str) -> R<Value> {
        let s = std::str::from_utf8(text).unwrap_or("");
        let s = s.trim().trim_end_matches('L');
        match s {
            "01" => return Ok(Value::Bool(true)),
            "00" => return Ok(Value::Bool(false)),
            _ => {}
        }
        if let Ok(i) = s.parse::<i64>() {
            return Ok(Value::Int(i));
        }
        if let Ok(u) = s.parse::<u64>() {
            return Ok(Value::UInt(u));
        }
        if !s.is_empty()
            && s.trim_start_matches('-')
                .bytes()
                .all(|b| b.is_ascii_digit())
        {
            return Ok(Value::Huge(s.starts_with('-')));
        }
        self.err(format!("{what}: expected a decimal integer, found {s:?}"))
    }

    fn run<H: Hooks>(&mut self, hooks: &mut H) -> R<Value> {
        if self.buf.is_empty() {
            return self.err("file is empty: expected a pickle (the dump probably crashed)");
        }
        match self.run_inner(hooks)? {
            Some(v) => Ok(v),
            None => self.eof("the pickle: no STOP opcode"),
        }
    }

    /// Runs opcodes until STOP (`Some(top)`) or until `end` (`None`).
    fn run_inner<H: Hooks>(&mut self, hooks: &mut H) -> R<Option<Value>> {
        loop {
            self.op_at = self.pos;
            if self.pos == self.next_skip {
                self.do_skip(hooks)?;
                continue;
            }
            if self.pos as u64 >= self.next_progress {
                hooks.on_progress(self.pos as u64);
                self.next_progress = (self.pos as u64 / PROGRESS_STEP + 1) * PROGRESS_STEP;
            }
            if self.pos >= self.end {
                if self.ranged {
                    return Ok(None);
                }
                return self.eof("the pickle: no STOP opcode");
            }
            let code = self.buf[self.pos];
            self.pos += 1;
            let was_memoize = std::mem::replace(&mut self.prev_memoize, false);
            match code {
                op::PROTO => {
                    let v = self.u8("PROTO")?;
                    if v > 5 {
                        return self.err(format!(
                            "pickle protocol {v} is newer than any memlens knows (0-5)"
                        ));
                    }
                }
                op::FRAME => {
                    let len = self.u64le("FRAME")?;
                    let left = (self.buf.len() - self.pos) as u64;
                    if len > left && !self.salvage {
                        return Err(DecodeError {
                            offset: self.op_at as u64,
                            message: format!(
                                "FRAME announces {len} bytes but only {left} are left; the snapshot is truncated"
                            ),
                            truncated: true,
                        });
                    }
                }
                op::STOP => {
                    if self.ranged {
                        return self.err("STOP inside a planned range");
                    }
                    if !self.marks.is_empty() {
                        return self.err(format!(
                            "STOP with {} MARK(s) never closed; the pickle is malformed",
                            self.marks.len()
                        ));
                    }
                    let v = self.pop("STOP")?;
                    if !self.stack.is_empty() {
                        return self.err(format!(
                            "STOP leaves {} values unused on the stack; the pickle is malformed",
                            self.stack.len()
                        ));
                    }
                    return Ok(Some(v));
                }
                op::MARK => {
                    if self.marks.len() >= self.limits.max_marks {
                        return self.err(format!(
                            "containers nested deeper than {} levels; not a snapshot",
                            self.limits.max_marks
                        ));
                    }
                    self.marks.push(self.stack.len());
                }
                op::POP => {
                    self.flat_consumed(self.stack.len().saturating_sub(1))?;
                    self.pop("POP")?;
                }
                op::POP_MARK => {
                    let m = self.pop_mark("POP_MARK")?;
                    self.flat_consumed(m)?;
                    self.stack.truncate(m);
                }
                op::DUP => {
                    self.flat_consumed(self.stack.len().saturating_sub(1))?;
                    let v = self.top("DUP")?;
                    self.heap.note_escaped(v);
                    self.push(v)?;
                }
                op::EMPTY_DICT => {
                    if hooks.wants_flat() && self.depth == 0 {
                        if self.flat_skip > 0 {
                            self.flat_skip -= 1;
                        } else if let Some(v) = self.try_flat(hooks) {
                            self.push(v)?;
                            continue;
                        }
                    }
                    let v = self.heap.new_dict();
                    self.push(v)?;
                }
                op::EMPTY_LIST => {
                    let v = self.heap.new_list();
                    self.push(v)?;
                }
                op::EMPTY_TUPLE => {
                    let v = self.heap.alloc(ObjData::Tuple(Box::new([])));
                    self.push(v)?;
                }
                op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => {
                    let n = (code - op::TUPLE1 + 1) as usize;
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + n {
                        return self.err(format!(
                            "{} needs {n} values on the stack",
                            ops::name(code).unwrap()
                        ));
                    }
                    self.flat_consumed(self.stack.len() - n)?;
                    let items: Box<[Value]> = self.stack.split_off(self.stack.len() - n).into();
                    let v = self.heap.alloc(ObjData::Tuple(items));
                    self.push(v)?;
                }
                op::TUPLE => {
                    let m = self.pop_mark("TUPLE")?;
                    self.flat_consumed(m)?;
                    let items: Box<[Value]> = self.stack.split_off(m).into();
                    let v = self.heap.alloc(ObjData::Tuple(items));
                    self.push(v)?;
                }
                op::LIST => {
                    let m = self.pop_mark("LIST")?;
                    self.flat_consumed(m)?;
                    let v = self.heap.alloc(ObjData::List(ListData::Items(Vec::new())));
                    let Value::Obj(id) = v else { unreachable!() };
                    self.fill_list(hooks, id, m)?;
                    self.push(v)?;
                }
                op::DICT => {
                    let m = self.pop_mark("DICT")?;
                    self.flat_consumed(m)?;
                    let v = self.heap.alloc(ObjData::Dict(Vec::new()));
                    let Value::Obj(id) = v else { unreachable!() };
                    self.fill_dict(hooks, id, m, "DICT")?;
                    self.push(v)?;
                }
                op::APPEND => {
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + 2 {
                        return self.err("APPEND needs a list and a value on the stack");
                    }
                    let m = self.stack.len() - 1;
                    let id = self.container(&self.heap, self.stack[m - 1], "APPEND", true)?;
                    self.fill_list(hooks, id, m)?;
                    self.flat_appended(m);
                }
                op::APPENDS => {
                    let m = self.pop_mark("APPENDS")?;
                    if m == 0 || m <= self.marks.last().copied().unwrap_or(0) {
                        return self.err("APPENDS needs a list below its MARK");
                    }
                    let target = self.stack[m - 1];
                    let id = self.container(&self.heap, target, "APPENDS", true)?;
                    self.fill_list(hooks, id, m)?;
                    self.flat_appended(m);
                }
                op::SETITEM => {
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + 3 {
                        return self.err("SETITEM needs a dict, a key and a value on the stack");
                    }
                    let m = self.stack.len() - 2;
                    self.flat_consumed(m - 1)?;
                    let id = self.container(&self.heap, self.stack[m - 1], "SETITEM", false)?;
                    self.fill_dict(hooks, id, m, "SETITEM")?;
                }
                op::SETITEMS => {
                    let m = self.pop_mark("SETITEMS")?;
                    if m == 0 || m <= self.marks.last().copied().unwrap_or(0) {
                        return self.err("SETITEMS needs a dict below its MARK");
                    }
                    self.flat_consumed(m - 1)?;
                    let target = self.stack[m - 1];
                    let id = self.container(&self.heap, target, "SETITEMS", false)?;
                    self.fill_dict(hooks, id, m, "SETITEMS")?;
                }
                op::SHORT_BINUNICODE => {
                    let n = self.u8("SHORT_BINUNICODE")? as usize;
                    let v = self.str_value(n, "SHORT_BINUNICODE")?;
                    self.push(v)?;
                }
                op::BINUNICODE => {
                    let n = self.u32le("BINUNICODE")? as u64;
                    let n = self.length(n, "BINUNICODE")?;
                    let v = self.str_value(n, "BINUNICODE")?;
                    self.push(v)?;
                }
                op::BINUNICODE8 => {
                    let n = self.u64le("BINUNICODE8")?;
                    let n = self.length(n, "BINUNICODE8")?;
                    let v = self.str_value(n, "BINUNICODE8")?;
                    self.push(v)?;
                }
                op::UNICODE => {
                    let raw = self.line("UNICODE")?;
                    let s = unescape_raw_unicode(raw);
                    self.heap.owned.push(s);
                    let v = Value::Owned(self.heap.owned.len() as u32 - 1);
                    self.push(v)?;
                }
                op::SHORT_BINBYTES => {
                    let n = self.u8("SHORT_BINBYTES")? as usize;
                    let v = self.bytes_value(n, "SHORT_BINBYTES")?;
                    self.push(v)?;
                }
                op::BINBYTES => {
                    let n = self.u32le("BINBYTES")? as u64;
                    let n = self.length(n, "BINBYTES")?;
                    let v = self.bytes_value(n, "BINBYTES")?;
                    self.push(v)?;
                }
                op::BINBYTES8 => {
                    let n = self.u64le("BINBYTES8")?;
                    let n = self.length(n, "BINBYTES8")?;
                    let v = self.bytes_value(n, "BINBYTES8")?;
                    self.push(v)?;
                }
                op::BININT1 => {
                    let v = self.u8("BININT1")?;
                    self.push(Value::Int(v as i64))?;
                }
                op::BININT2 => {
                    let b = self.take(2, "BININT2")?;
                    self.push(Value::Int(u16::from_le_bytes([b[0], b[1]]) as i64))?;
                }
                op::BININT => {
                    let v = self.u32le("BININT")? as i32;
                    self.push(Value::Int(v as i64))?;
                }
                op::LONG1 => {
                    let n = self.u8("LONG1")? as usize;
                    let b = self.take(n, "LONG1")?;
                    let v = self.long(b);
                    self.push(v)?;
                }
                op::LONG4 => {
                    let n = self.u32le("LONG4")? as i32;
                    if n < 0 {
                        return self.err(format!("LONG4 length {n} is negative"));
                    }
                    let n = self.length(n as u64, "LONG4")?;
                    let b = self.take(n, "LONG4")?;
                    let v = self.long(b);
                    self.push(v)?;
                }
                op::INT | op::LONG => {
                    let what = ops::name(code).unwrap();
                    let text = self.line(what)?;
                    let v = self.decimal_int(text, what)?;
                    self.push(v)?;
                }
                op::BINFLOAT => {
                    let b = self.take(8, "BINFLOAT")?;
                    self.push(Value::Float(f64::from_be_bytes(b.try_into().unwrap())))?;
                }
                op::FLOAT => {
                    let text = self.line("FLOAT")?;
                    let s = std::str::from_utf8(text).unwrap_or("").trim();
                    match s.parse::<f64>() {
                        Ok(f) => self.push(Value::Float(f))?,
                        Err(_) => {
                            return self.err(format!("FLOAT: expected a number, found {s:?}"))
                        }
                    }
                }
                op::NONE => self.push(Value::None)?,
                op::NEWTRUE => self.push(Value::Bool(true))?,
                op::NEWFALSE => self.push(Value::Bool(false))?,
                op::MEMOIZE => {
                    if was_memoize {
                        return self.err("MEMOIZE twice in a row on one object; not a snapshot");
                    }
                    let v = self.top("MEMOIZE")?;
                    let index = match self.memo_next.as_mut() {
                        Some(n) => {
                            *n += 1;
                            *n - 1
                        }
                        None => self.heap.memo_base + self.heap.memo.len() as u64,
                    };
                    let v = self.flat_memoized(index, v);
                    self.memo_put(index, v)?;
                    self.prev_memoize = true;
                }
                op::BINPUT | op::LONG_BINPUT | op::PUT => {
                    let index = match code {
                        op::BINPUT => self.u8("BINPUT")? as u64,
                        op::LONG_BINPUT => self.u32le("LONG_BINPUT")? as u64,
                        _ => self.text_index("PUT")?,
                    };
                    let v = self.top("PUT")?;
                    let v = self.flat_memoized(index, v);
                    self.memo_put(index, v)?;
                }
                op::BINGET | op::LONG_BINGET => {
                    // Frames lists are long runs of memo references: decode the whole run here.
                    let mut code = code;
                    // Tight loop first: references to converted or scalar entries (in the memo
                    // or, in a chunk, in the cache of outside entries), each copied as one
                    // 16-byte block; anything else continues in the general loop below.
                    let buf = self.buf;
                    let limit = self.end.min(self.next_skip).min(buf.len());
                    let room = self.limits.max_stack.saturating_sub(self.stack.len());
                    let base = self.heap.memo_base;
                    let mut p = self.pos - 1;
                    let mut pushed = 0usize;
                    while pushed < room && p + 2 <= limit {
                        let (index, next) = match buf[p] {
                            op::BINGET => (buf[p + 1] as u64, p + 2),
                            op::LONG_BINGET if p + 5 <= limit => {
                                let b: [u8; 4] = buf[p + 1..p + 5].try_into().unwrap_or([0; 4]);
                                (u32::from_le_bytes(b) as u64, p + 5)
                            }
                            _ => break,
                        };
                        let rel = index.wrapping_sub(base) as usize;
                        let v = match self.heap.memo.get(rel..rel.wrapping_add(1)) {
                            Some(slot) if !matches!(slot[0], Value::Obj(_)) => slot,
                            _ => match self.ext_cache.get((index as usize) & (EXT_CACHE - 1)) {
                                Some(e) if e.0 == index => std::slice::from_ref(&e.1),
                                _ => break,
                            },
                        };
                        self.stack.extend_from_slice(v);
                        p = next;
                        pushed += 1;
                    }
                    if pushed > 0 {
                        self.op_at = p;
                        self.pos = p;
                        match buf.get(p) {
                            Some(&c @ (op::BINGET | op::LONG_BINGET)) if p < limit => {
                                self.pos = p + 1;
                                code = c;
                            }
                            _ => continue,
                        }
                    }
                    loop {
                        let index = if code == op::BINGET {
                            self.u8("BINGET")? as u64
                        } else {
                            self.u32le("LONG_BINGET")? as u64
                        };
                        let rel = index.wrapping_sub(self.heap.memo_base) as usize;
                        // Fast path: a converted or scalar entry, copied as one 16-byte block
                        // (a field-wise copy of the 15-byte payload stalls store forwarding).
                        if let Some(slot) = self.heap.memo.get(rel..rel.wrapping_add(1)) {
                            if !matches!(slot[0], Value::Obj(_))
                                && self.stack.len() < self.limits.max_stack
                            {
                                self.stack.extend_from_slice(slot);
                                match self.buf.get(self.pos) {
                                    Some(&c @ (op::BINGET | op::LONG_BINGET)) => {
                                        self.op_at = self.pos;
                                        self.pos += 1;
                                        code = c;
                                        continue;
                                    }
                                    _ => break,
                                }
                            }
                        }
                        // Entries from outside the decoded range (shared frame dicts): a
                        // direct-mapped cache in front of the sparse memo; a hit is copied
                        // whole, as above.
                        let slot = (index as usize) & (EXT_CACHE - 1);
                        if self.defs.is_some() && self.stack.len() < self.limits.max_stack {
                            if let Some(e) = self.ext_cache.get(slot..slot + 1) {
                                if e[0].0 == index {
                                    self.stack.extend_from_slice(std::slice::from_ref(&e[0].1));
                                    match self.buf.get(self.pos) {
                                        Some(&c @ (op::BINGET | op::LONG_BINGET)) => {
                                            self.op_at = self.pos;
                                            self.pos += 1;
                                            code = c;
                                            continue;
                                        }
                                        _ => break,
                                    }
                                }
                            }
                        }
                        let v = match self.heap.memo.get(rel) {
                            Some(v) if !matches!(v, Value::Obj(_)) => *v,
                            _ if self.defs.is_none() => self.memo_get(hooks, index)?,
                            _ => match self.ext_cache.get(slot) {
                                Some(&(i, v)) if i == index => v,
                                _ => {
                                    let v = self.memo_get(hooks, index)?;
                                    let v = self.heap.resolve(v);
                                    if !matches!(v, Value::Obj(_)) {
                                        if self.ext_cache.is_empty() {
                                            self.ext_cache =
                                                vec![(u64::MAX, Value::None); EXT_CACHE];
                                        }
                                        self.ext_cache[slot] = (index, v);
                                    }
                                    v
                                }
                            },
                        };
                        self.push(v)?;
                        match self.buf.get(self.pos) {
                            Some(&c @ (op::BINGET | op::LONG_BINGET)) => {
                                self.op_at = self.pos;
                                self.pos += 1;
                                code = c;
                            }
                            _ => break,
                        }
                    }
                }
                op::GET => {
                    let index = self.text_index("GET")?;
                    let v = self.memo_get(hooks, index)?;
                    self.push(v)?;
                }
                c if ops::names_code(c) => {
                    return self.err(format!(
                        "opcode {} (0x{c:02x}) names or calls Python code; memlens never runs code from a file, and real snapshots never contain it",
                        ops::name(c).unwrap()
                    ));
                }
                c => {
                    return self.err(match ops::name(c) {
                        Some(n) => format!(
                            "opcode {n} (0x{c:02x}) is not used by memory snapshots; is this a snapshot?"
                        ),
                        None => format!("byte 0x{c:02x} is not a pickle opcode; is this a snapshot?"),
                    });
                }
            }
        }
    }
}

/// Decodes protocol 0 `raw-unicode-escape` text (`\uXXXX`, `\UXXXXXXXX`, bytes as Latin-1).
fn unescape_raw_unicode(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\' && i + 1 < raw.len() && (raw[i + 1] == b'u' || raw[i + 1] == b'U') {
            let n = if raw[i + 1] == b'u' { 4 } else { 8 };
            if let Some(hex) = raw.get(i + 2..i + 2 + n) {
                if let Some(c) = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                {
                    out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                    i += 2 + n;
                    continue;
                }
            }
        }
        out.push(raw[i] as char);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(bytes: &[u8]) -> Result<String, DecodeError> {
        let (heap, top) = decode(bytes, &mut NoHooks, Limits::for_input(bytes.len()))?;
        Ok(show(&heap, top))
    }

    fn err(bytes: &[u8]) -> DecodeError {
        run(bytes).expect_err("expected an error")
    }

    /// A Python-like rendering of a value, for assertions.
    fn show(heap: &Heap, v: Value) -> String {
        match heap.resolve(v) {
            Value::None => "None".into(),
            Value::Bool(b) => if b { "True" } else { "False" }.into(),
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            Value::Huge(neg) => if neg { "-huge" } else { "huge" }.into(),
            Value::Float(f) => format!("{f:?}"),
            s @ (Value::Str { .. } | Value::Owned(_)) => format!("{:?}", heap.text(s).unwrap()),
            Value::Bytes { off, len } => {
                format!(
                    "b{:?}",
                    &heap.buf[off as usize..(off + len as u64) as usize]
                )
            }
            Value::Ext { kind, id } => format!("ext{kind}:{id}"),
            Value::Obj(id) => match heap.data(id) {
                ObjData::List(l) => {
                    let items: Vec<_> = l.iter().map(|x| show(heap, x)).collect();
                    format!("[{}]", items.join(", "))
                }
                ObjData::Tuple(t) => {
                    let items: Vec<_> = t.iter().map(|x| show(heap, *x)).collect();
                    let comma = if items.len() == 1 { "," } else { "" };
                    format!("({}{comma})", items.join(", "))
                }
                ObjData::Dict(d) => {
                    let items: Vec<_> = d
                        .iter()
                        .map(|(k, v)| format!("{}: {}", show(heap, *k), show(heap, *v)))
                        .collect();
                    format!("{{{}}}", items.join(", "))
                }
                ObjData::Replaced(r) => show(heap, *r),
                ObjData::Free => "<freed>".into(),
            },
        }
    }

    fn p4(body: &[u8]) -> Vec<u8> {
        let mut v = vec![0x80, 4];
        v.extend_from_slice(body);
        v.push(b'.');
        v
    }

    #[test]
    fn scalars() {
        assert_eq!(run(&p4(b"N")).unwrap(), "None");
        assert_eq!(run(&p4(&[0x88])).unwrap(), "True");
        assert_eq!(run(&p4(&[0x89])).unwrap(), "False");
        assert_eq!(run(&p4(b"K\xff")).unwrap(), "255");
        assert_eq!(run(&p4(b"M\xff\xff")).unwrap(), "65535");
        assert_eq!(run(&p4(b"J\xfe\xff\xff\xff")).unwrap(), "-2");
        assert_eq!(run(&p4(b"G\x3f\xf8\0\0\0\0\0\0")).unwrap(), "1.5");
        assert_eq!(run(b"I42\n.").unwrap(), "42");
        assert_eq!(run(b"I01\n.").unwrap(), "True");
        assert_eq!(run(b"I00\n.").unwrap(), "False");
        assert_eq!(run(b"L123456789012345678901234567890L\n.").unwrap(), "huge");
        assert_eq!(run(b"L-5L\n.").unwrap(), "-5");
        assert_eq!(run(b"F2.25\n.").unwrap(), "2.25");
    }

    #[test]
    fn long_integers_of_every_width() {
        // CUDA address, 6 bytes.
        assert_eq!(
            run(&p4(b"\x8a\x06\x00\x00\x00\x00\x20\x7f")).unwrap(),
            (0x7f2000000000u64).to_string()
        );
        // 2^64-1 needs 9 bytes in two's complement (line numbers of the Python path).
        assert_eq!(
            run(&p4(b"\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00")).unwrap(),
            u64::MAX.to_string()
        );
        // XPU address >= 2^63.
        assert_eq!(
            run(&p4(b"\x8a\x09\x00\x00\x00\x00\x00\xff\xff\xff\x00")).unwrap(),
            "18446742974197923840"
        );
        // -1 from the C++ pickler, 8 bytes.
        assert_eq!(
            run(&p4(b"\x8a\x08\xff\xff\xff\xff\xff\xff\xff\xff")).unwrap(),
            "-1"
        );
        assert_eq!(
            run(&p4(b"\x8a\x08\0\0\0\0\0\0\0\x80")).unwrap(),
            i64::MIN.to_string()
        );
        assert_eq!(run(&p4(b"\x8a\x00")).unwrap(), "0");
        assert_eq!(run(&p4(b"\x8a\x0a\0\0\0\0\0\0\0\0\0\x01")).unwrap(), "huge");
        assert_eq!(
            run(&p4(b"\x8a\x0a\0\0\0\0\0\0\0\0\0\x80")).unwrap(),
            "-huge"
        );
        assert_eq!(run(&p4(b"\x8b\x02\0\0\0\x01\x01")).unwrap(), "257");
    }

    #[test]
    fn strings_and_bytes() {
        assert_eq!(run(&p4(b"\x8c\x03abc")).unwrap(), "\"abc\"");
        assert_eq!(run(&p4(b"X\x02\0\0\0hi")).unwrap(), "\"hi\"");
        assert_eq!(run(&p4(b"\x8d\x01\0\0\0\0\0\0\0z")).unwrap(), "\"z\"");
        assert_eq!(run(b"V\\u00e9t\\U0001f600\n.").unwrap(), "\"ét😀\"");
        assert_eq!(run(&p4(b"C\x02\x01\x02")).unwrap(), "b[1, 2]");
        assert_eq!(run(&p4(b"B\x01\0\0\0\x07")).unwrap(), "b[7]");
        assert_eq!(run(&p4(b"\x8e\x01\0\0\0\0\0\0\0\x09")).unwrap(), "b[9]");
        // A lone surrogate written with surrogatepass decodes leniently.
        assert_eq!(
            run(&p4(b"\x8c\x04a\xed\xa0\x80")).unwrap(),
            "\"a\u{fffd}\u{fffd}\u{fffd}\""
        );
    }

    #[test]
    fn containers() {
        assert_eq!(run(&p4(b"]")).unwrap(), "[]");
        assert_eq!(run(&p4(b"}")).unwrap(), "{}");
        assert_eq!(run(&p4(b")")).unwrap(), "()");
        assert_eq!(run(&p4(b"]K\x01a")).unwrap(), "[1]");
        assert_eq!(run(&p4(b"](K\x01K\x02e")).unwrap(), "[1, 2]");
        assert_eq!(run(&p4(b"}\x8c\x01aK\x01s")).unwrap(), "{\"a\": 1}");
        assert_eq!(
            run(&p4(b"}(\x8c\x01aK\x01\x8c\x01bK\x02u")).unwrap(),
            "{\"a\": 1, \"b\": 2}"
        );
        assert_eq!(run(&p4(b"(K\x01K\x02l")).unwrap(), "[1, 2]");
        assert_eq!(run(&p4(b"(\x8c\x01aK\x01d")).unwrap(), "{\"a\": 1}");
        assert_eq!(run(&p4(b"(K\x01K\x02t")).unwrap(), "(1, 2)");
        assert_eq!(run(&p4(b"K\x01\x85")).unwrap(), "(1,)");
        assert_eq!(run(&p4(b"K\x01K\x02\x86")).unwrap(), "(1, 2)");
        assert_eq!(run(&p4(b"K\x01K\x02K\x03\x87")).unwrap(), "(1, 2, 3)");
        assert_eq!(run(&p4(b"(K\x01K\x02\x31N")).unwrap(), "None");
        assert_eq!(run(&p4(b"K\x01\x30N")).unwrap(), "None");
        // DUP then APPEND: a list holding itself is legal pickle; it decodes without looping.
        let bytes = p4(b"]\x32a");
        let (heap, top) = decode(&bytes, &mut NoHooks, Limits::for_input(bytes.len())).unwrap();
        let Value::Obj(id) = top else { panic!() };
        assert_eq!(heap.list(top).unwrap().get(0), Value::Obj(id));
    }

    #[test]
    fn memo_shares_objects() {
        // A dict memoized once and referenced twice: one object, seen through both references.
        let body = b"](}\x94\x8c\x01aK\x01sh\x00e";
        assert_eq!(run(&p4(body)).unwrap(), "[{\"a\": 1}, {\"a\": 1}]");
        // Explicit ids of protocols 2-3 (BINPUT/LONG_BINPUT, BINGET/LONG_BINGET, PUT/GET).
        assert_eq!(run(b"\x80\x02](K\x07q\x05h\x05e.").unwrap(), "[7, 7]");
        assert_eq!(
            run(b"\x80\x02](K\x07r\x00\x01\x00\x00j\x00\x01\x00\x00e.").unwrap(),
            "[7, 7]"
        );
        // Protocol 0 text forms.
        assert_eq!(
            run(b"(lp0\nI3\na(lp1\nI4\naag1\na.").unwrap(),
            "[3, [4], [4]]"
        );
    }

    #[test]
    fn frame_and_proto_are_skipped() {
        let mut v = vec![0x80, 5, 0x95];
        v.extend_from_slice(&3u64.to_le_bytes());
        v.extend_from_slice(b"K\x05.");
        assert_eq!(run(&v).unwrap(), "5");
    }

    #[test]
    fn refuses_every_code_opcode() {
        for (bytes, name) in [
            (&b"cos\nsystem\n."[..], "GLOBAL"),
            (b"\x80\x04\x8c\x02os\x8c\x06system\x93.", "STACK_GLOBAL"),
            (b"N)R.", "REDUCE"),
            (b"}}b.", "BUILD"),
            (b"(ios\nsystem\n.", "INST"),
            (b"(No.", "OBJ"),
            (b"N)\x81.", "NEWOBJ"),
            (b"N)}\x92.", "NEWOBJ_EX"),
            (b"\x82\x01.", "EXT1"),
            (b"\x83\x01\x00.", "EXT2"),
            (b"\x84\x01\0\0\0.", "EXT4"),
            (b"Pabc\n.", "PERSID"),
            (b"NQ.", "BINPERSID"),
        ] {
            let e = err(bytes);
            assert!(e.message.contains(name), "{name}: {}", e.message);
            assert!(
                e.message.contains("never runs code"),
                "{name}: {}",
                e.message
            );
            assert!(!e.truncated);
        }
    }

    #[test]
    fn malformed_inputs_name_the_offset() {
        let e = err(b"");
        assert_eq!(e.offset, 0);
        assert!(e.message.contains("empty"));
        let e = err(b"\x80\x04K");
        assert!(e.truncated);
        assert!(e.message.contains("BININT1"));
        let e = err(b"\x80\x04K\x01");
        assert!(e.truncated && e.message.contains("STOP"));
        let e = err(b"\x80\x06N.");
        assert!(e.message.contains("protocol 6"));
        let e = err(b"\x80\x04h\x05.");
        assert_eq!(e.offset, 2);
        assert!(e.message.contains("memo reference 5"));
        let e = err(b"\x80\x04K\x01e.");
        assert!(e.message.contains("without a matching MARK"));
        let e = err(b"\x80\x04K\x01K\x02a.");
        assert!(e.message.contains("needs a list"), "{}", e.message);
        let e = err(b"\x80\x04]K\x01s.");
        assert!(
            e.message
                .contains("SETITEM needs a dict, a key and a value"),
            "{}",
            e.message
        );
        let e = err(b"\x80\x04}(K\x01u.");
        assert!(e.message.contains("odd count"));
        let e = err(b"\x80\x04N\x94\x94.");
        assert!(e.message.contains("twice"));
        let e = err(b"\x80\x04\xff.");
        assert!(e.message.contains("0xff is not a pickle opcode"));
        let e = err(b"\x80\x04S'x'\n.");
        assert!(e.message.contains("STRING"));
        let e = err(b".");
        assert!(e.message.contains("stack is empty"));
    }

    #[test]
    fn huge_lengths_are_refused_without_allocating() {
        let mut v = vec![0x80, 4, 0x8d];
        v.extend_from_slice(&(1u64 << 60).to_le_bytes());
        v.extend_from_slice(b"abc.");
        let e = err(&v);
        assert!(e.message.contains("exceeds"), "{}", e.message);
        let mut v = vec![0x80, 4, 0x8b];
        v.extend_from_slice(&0x7fff_ffffu32.to_le_bytes());
        let e = err(&v);
        assert!(e.message.contains("exceeds"), "{}", e.message);
        let mut v = vec![0x80, 4, 0x95];
        v.extend_from_slice(&(1u64 << 40).to_le_bytes());
        v.extend_from_slice(b"N.");
        let e = err(&v);
        assert!(e.truncated && e.message.contains("FRAME"), "{}", e.message);
        // A length a little past the end is a truncation, not an attack.
        let e = err(b"\x80\x04X\x10\0\0\0abc");
        assert!(e.truncated);
    }

    #[test]
    fn nesting_and_stack_are_bounded() {
        let mut v = vec![0x80, 4];
        v.extend(std::iter::repeat(b"](").take(5000).flatten());
        let e = err(&v);
        assert!(e.message.contains("nested deeper"), "{}", e.message);
        let mut v = vec![0x80, 4];
        v.extend(std::iter::repeat(b'N').take(1_000_000));
        let e = err(&v);
        assert!(
            e.message.contains("pending on the pickle stack"),
            "{}",
            e.message
        );
    }

    #[test]
    fn lists_without_marks_nest() {
        // [[1]] via APPEND only.
        assert_eq!(run(&p4(b"]]K\x01aa")).unwrap(), "[[1]]");
    }
}
