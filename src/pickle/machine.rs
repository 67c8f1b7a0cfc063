//! The pickle virtual machine: bytes in, one top-level [`Value`] out.
//!
//! It executes the data-only subset of the pickle protocols 0-5 and refuses every opcode that
//! names or calls Python code. Containers are handed to [`Hooks`] as they are filled, so a
//! driver can convert each element into compact structs as soon as it is complete and no
//! generic tree of the whole file is ever kept.
//!
//! Here: the machine's state, its memo, stack and byte readers, and how containers are filled
//! (and closed after a failure, when salvaging). The opcode loop is in `machine/dispatch.rs`,
//! the fast path for flat trace entries in `machine/flat.rs`; the entry points that set a
//! machine up are in `decode.rs`.

use super::error::DecodeError;
use super::hooks::Hooks;
use super::limits::Limits;
use super::scan::{Chunk, Defs};
use super::value::{Heap, ObjData, ObjId, Value};

mod dispatch;
mod epoch;
pub mod flat;
mod flat_read;
mod item_cache;
mod list_cache;
#[cfg(test)]
mod tests;

pub(super) const PROGRESS_STEP: u64 = 16 << 20;

pub(super) struct Machine<'a> {
    pub(super) heap: Heap<'a>,
    buf: &'a [u8],
    pub(super) pos: usize,
    pub(super) op_at: usize,
    pub(super) stack: Vec<Value>,
    pub(super) marks: Vec<usize>,
    limits: Limits,
    prev_memoize: bool,
    pub(super) next_progress: u64,
    /// Values without content made so far, and the offset of the first ([`Limits::bare_every`]).
    bare: usize,
    bare_from: Option<usize>,
    /// Decoding stops at this offset (the end of the input, a chunk or a definition).
    pub(super) end: usize,
    /// True when reaching `end` is a normal stop rather than a truncation.
    pub(super) ranged: bool,
    /// Explicit counter for implicit MEMOIZE ids (after a skip, inside a definition).
    memo_next: Option<u64>,
    /// Where memo entries defined outside the decoded ranges lie.
    pub(super) defs: Option<&'a Defs>,
    /// Chunks to skip, and the offset of the next one.
    pub(super) chunks: &'a [Chunk],
    skip_idx: usize,
    pub(super) next_skip: usize,
    /// Nesting of on-demand definition decodes.
    depth: u32,
    /// Direct-mapped cache of converted memo values (planned decoding only).
    ext_cache: Vec<(u64, Value)>,
    /// Salvaging: a FRAME that runs past the end is not an error (decode up to the cut).
    pub(super) salvage: bool,
    /// Scratch of the flat-dict fast path (`flat.rs`): pairs and list items.
    flat_pairs: Vec<(Value, Value)>,
    flat_items: Vec<Value>,
    /// Pairs of a dict defined inline among a fast-path list's items.
    flat_item_pairs: Vec<(Value, Value)>,
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
    /// Frame dicts written inline, by their bytes (`machine/item_cache.rs`); told of every
    /// memo change that could alter what one means.
    item_cache: item_cache::ItemCache,
    /// Frames lists of memo references, by their bytes (`machine/list_cache.rs`); told of
    /// every memo change that could alter what one means.
    list_cache: list_cache::ListCache,
    /// The value the list cache gave for the list of the dict being read, if it did.
    flat_known: Option<Value>,
    /// The list of the dict being read, to record in the list cache once the hooks have
    /// converted it: the hash of its run of references and where the run lies.
    flat_record: Option<(u64, usize, usize)>,
}

pub(super) const EXT_CACHE: usize = 1 << 14;

/// Deepest chain of definitions decoded on demand (a frames list holding a frame dict...).
const MAX_DEF_DEPTH: u32 = 64;

pub(super) type R<T> = Result<T, DecodeError>;

impl<'a> Machine<'a> {
    pub(super) fn new(buf: &'a [u8], limits: Limits) -> Self {
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
            bare: 0,
            bare_from: None,
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
            flat_item_pairs: Vec::new(),
            flat_pending: Vec::new(),
            flat_memo: Vec::new(),
            flat_sentinel: None,
            flat_skip: 0,
            flat_backoff: 0,
            flat_transient: std::cell::Cell::new(false),
            item_cache: item_cache::ItemCache::new(),
            list_cache: list_cache::ListCache::new(),
            flat_known: None,
            flat_record: None,
        }
    }

    /// Decodes the definition of memo entry `index` (outside the ranges decoded here) and
    /// returns its value; the memo then holds it for later references.
    fn resolve_external<H: Hooks>(&mut self, hooks: &mut H, index: u64) -> R<Option<Value>> {
        // Only an entry stored before this point of the file: the sequential decoder refuses
        // a reference to one defined later, and so must a chunk (pass 1 records definitions
        // from all over the file).
        let counter = self
            .memo_next
            .unwrap_or(self.heap.memo_base + self.heap.memo.len() as u64);
        if index >= counter {
            return Ok(None);
        }
        let Some(def) = self.defs.and_then(|d| d.get(index)) else {
            return Ok(None);
        };
        self.heap.stats.ext_defs += 1;
        self.heap.stats.ext_bytes += def.len;
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
            self.overwrite_memo(rel, v);
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
    pub(super) fn err<T>(&self, message: impl Into<String>) -> R<T> {
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

    /// The length field of a length-prefixed opcode, `K` bytes wide (from the opcode table:
    /// `{ ops::len_bytes(op::X) }`), checked against what is left of the input.
    #[inline(always)]
    fn len_arg<const K: usize>(&mut self, what: &str) -> R<usize> {
        let b = self.take(K, what)?;
        let n = super::ops::read_len(b, false).unwrap_or(u64::MAX);
        self.length(n, what)
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

    /// Counts a value without content (`None`, a bool, an empty container, a `DUP`) and
    /// refuses the input once they are denser than any snapshot's: bounded memory and time
    /// for a pickle of nothing else (issue 53).
    fn bare_value(&mut self) -> R<()> {
        self.bare += 1;
        let from = *self.bare_from.get_or_insert(self.op_at);
        let allowed = (self.pos - from) / self.limits.bare_every.max(1) + self.limits.bare_slack;
        if self.bare > allowed {
            return self.err(format!(
                "{} values without content (None, True/False, empty containers, DUP) in {} bytes: more than one per {} bytes, which no snapshot has (a pickle bomb?)",
                self.bare,
                self.pos - from,
                self.limits.bare_every
            ));
        }
        Ok(())
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

    /// Replaces the memo entry at `rel` (from `memo_base`). A string or integer there may be
    /// named by a frame dict the item cache knows, a converted handle by a list the list
    /// cache knows: the cache is told. (Entries past the memo's range, in `sparse_memo`, are
    /// never named by either.)
    #[inline]
    fn overwrite_memo(&mut self, rel: usize, v: Value) {
        let slot = &mut self.heap.memo[rel];
        match slot {
            Value::Str { .. } | Value::Int(_) => self
                .item_cache
                .forget_from(self.heap.memo_base + rel as u64),
            Value::Ext { .. } => self
                .list_cache
                .forget_from(self.heap.memo_base + rel as u64),
            _ => {}
        }
        *slot = v;
    }

    /// Stores `v` at memo `index`: in line when it is the next id and not a container (a
    /// string, a scalar, a placeholder: nearly every store of a trace entry).
    #[inline]
    fn memo_put(&mut self, index: u64, v: Value) -> R<()> {
        let next = self.heap.memo_base + self.heap.memo.len() as u64;
        if index == next && !matches!(v, Value::Obj(_)) {
            self.heap.memo.push(v);
            return Ok(());
        }
        self.memo_put_any(index, v)
    }

    #[inline(never)]
    fn memo_put_any(&mut self, index: u64, v: Value) -> R<()> {
        let memo_len = self.heap.memo.len() as u64;
        let base = self.heap.memo_base;
        if index >= base && index - base == memo_len {
            self.heap.memo.push(v);
        } else if index >= base && index - base < memo_len {
            self.overwrite_memo((index - base) as usize, v);
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
    pub(super) fn close_open<H: Hooks>(&mut self, hooks: &mut H) -> Option<Value> {
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

    pub(super) fn fill_list<H: Hooks>(&mut self, hooks: &mut H, list: ObjId, m: usize) -> R<()> {
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
}
