//! The fast path for flat dicts built inside a list: trace entries.
//!
//! A trace entry is a dict of string keys and scalar values with one list of memo references
//! (its frames). Decoded opcode by opcode it costs a heap dict, a heap list, a stack push per
//! value and a hook call per container; here it is read in one pass over its bytes, and the
//! driver converts it from a slice ([`Hooks::on_flat`]). Anything else — a frame dict defined
//! inline, a reference to an unconverted container or to a definition not decoded yet, a FRAME
//! boundary, the end of the range — makes the path decline; the memo is rolled back and the
//! general loop decodes the dict from its first byte, so both paths leave the same state.

use super::super::ops::{self, op, w};
use super::flat_read::settled_refs_run;
use super::{Hooks, Machine};
use crate::pickle::hooks::FlatList;
use crate::pickle::value::{ObjData, ObjId, Value};

/// Most pairs in a flat dict (a trace entry has 8 to 10).
const MAX_PAIRS: usize = 32;
/// Most unconverted items waiting above the list's MARK that are converted early (see
/// [`Machine::finish_flat`]); more makes the path decline. Above CPython's batch of 1000:
/// entries the general loop decoded (after a decline) are then always taken up by the next
/// entry the path reads, instead of piling up until every later entry of the batch declines.
const MAX_PENDING: usize = 4096;

/// The error that stops a decode whose fast-path assumption broke (see
/// [`Machine::flat_consumed`]); decoding again without the fast path gives the answer.
pub const FLAT_BROKEN: &str =
    "a trace entry read by the fast path was used as something other than a list item";

/// Most dicts skipped after a run of declines (see [`Machine::try_flat`]).
const MAX_BACKOFF: u32 = 1024;

/// What [`Machine::parse_flat`] read.
struct Parsed {
    /// Offset after the dict's `SETITEMS`.
    end: usize,
    /// Memo slot of the dict, if memoized.
    dict_slot: Option<u64>,
    /// Pair index of the list value and its memo slot.
    list: Option<(usize, Option<u64>)>,
}

/// The length of a frame dict value read by [`Machine::flat_item_seen`], by its opcode (a
/// memo reference or a small integer); 0 for any other opcode.
const FRAME_VALUE_LEN: [u8; 256] =
    ops::widths(&[op::BINGET, op::LONG_BINGET, op::BININT1, op::BININT2]);

/// The highest memo id named by `pairs`: the pairs of a frame dict of the straight shape (from
/// after its MARK up to its SETITEMS), or a run of memo references (a frames list's).
pub(super) fn highest_id_named(pairs: &[u8]) -> u64 {
    let (mut top, mut q) = (0u64, 0);
    while let Some(&code) = pairs.get(q) {
        let id = match code {
            op::BINGET => pairs.get(q + 1).map_or(0, |&i| i as u64),
            op::LONG_BINGET => pairs
                .get(q + 1..q + 5)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64),
            _ => 0,
        };
        top = top.max(id);
        q += FRAME_VALUE_LEN[code as usize].max(1) as usize;
    }
    top
}

impl Machine<'_> {
    /// Tries the fast path at an `EMPTY_DICT` (already consumed); `Some(value)` when the dict
    /// was read and converted, with `pos` after it.
    pub(super) fn try_flat<H: Hooks>(&mut self, hooks: &mut H) -> Option<Value> {
        // Only inside a list's MARK: the dict is then an item of that list.
        let m = *self.marks.last()?;
        let Value::Obj(list_id) = *self.stack.get(m.checked_sub(1)?)? else {
            return None;
        };
        if !matches!(self.heap.data(list_id), ObjData::List(_)) {
            return None;
        }
        // A list that is a dict's value (a key below it: `frames`, `blocks`, `history`)
        // holds frames or blocks, not trace entries; its dicts belong to an outer dict the
        // general loop is decoding. Not offered, so they cause no back-off.
        if m >= 2 && matches!(self.stack[m - 2], Value::Str { .. } | Value::Owned(_)) {
            return None;
        }
        let saved = (self.heap.memo.len(), self.memo_next);
        self.flat_transient.set(false);
        let done = match self.parse_flat(hooks) {
            Some(parsed) => self.finish_flat(hooks, list_id, m, parsed),
            None => None,
        };
        if done.is_none() {
            self.heap.stats.declined += 1;
            if self.heap.memo.len() > saved.0 {
                self.heap.memo.truncate(saved.0);
                let from = self.heap.memo_base + saved.0 as u64;
                self.item_cache.forget_from(from);
                self.list_cache.forget_from(from);
            }
            self.memo_next = saved.1;
            // A layout the path does not read would pay for a partial read of every entry:
            // back off, 1, 2, 4 ... 1024 dicts.
            if !self.flat_transient.replace(false) {
                self.flat_skip = self.flat_backoff;
                self.flat_backoff = (self.flat_backoff * 2).clamp(1, MAX_BACKOFF);
            }
        } else {
            self.flat_backoff = 0;
        }
        done
    }

    /// Reads the dict's bytes from `pos`, storing its strings in the memo as it goes (and a
    /// placeholder for the dict and the list); `None` on anything outside the flat shape.
    /// Out of line: inside the decoder's loop its values lived on the stack.
    #[inline(never)]
    fn parse_flat<H: Hooks>(&mut self, hooks: &mut H) -> Option<Parsed> {
        let buf = self.buf;
        let lim = self.end.min(self.next_skip).min(buf.len());
        let mut pending = [None; 2];
        self.flat_known = None;
        self.flat_record = None;
        let (dict_slot, mut p) = self.memo_op(self.pos, lim)?;
        if let Some(i) = dict_slot {
            self.memo_put(i, Value::None).ok()?;
            pending[0] = Some(i);
        }
        if *buf.get(p).filter(|_| p < lim)? != op::MARK {
            return None;
        }
        p += 1;
        self.flat_pairs.clear();
        self.flat_items.clear();
        let mut list = None;
        loop {
            let code = *buf.get(p).filter(|_| p < lim)?;
            if code == op::SETITEMS {
                p += 1;
                break;
            }
            if self.flat_pairs.len() == MAX_PAIRS {
                return None;
            }
            // Values travel through out-parameters, not `Option<(Value, usize)>`: that
            // niche-packed return moves a Value as tag + 15 bytes, whose reload stalls.
            let mut key = Value::None;
            p = match self.settled_str_ref(p, lim) {
                Some((k, q)) => {
                    key = k;
                    q
                }
                None => self.flat_scalar(p, lim, &pending, &mut key),
            };
            if p == 0 || !matches!(key, Value::Str { .. }) {
                return None;
            }
            if *buf.get(p).filter(|_| p < lim)? != op::EMPTY_LIST {
                let mut value = Value::None;
                p = self.flat_scalar(p, lim, &pending, &mut value);
                if p == 0 {
                    return None;
                }
                self.flat_pairs.push((key, value));
                continue;
            }
            if list.is_some() {
                return None;
            }
            let (slot, q) = self.memo_op(p + 1, lim)?;
            if let Some(i) = slot {
                self.memo_put(i, Value::None).ok()?;
                pending[1] = Some(i);
            }
            p = q;
            match buf.get(p).filter(|_| p < lim) {
                Some(&op::MARK) => p = self.flat_list(hooks, p + 1, lim, &pending)?,
                Some(&(op::BINGET | op::LONG_BINGET)) => {
                    // One item and APPEND, or an empty list followed by a key reference.
                    let mut item = Value::None;
                    let q = self.flat_ref(p, lim, &pending, &mut item);
                    if q != 0 && buf.get(q).filter(|_| q < lim) == Some(&op::APPEND) {
                        self.flat_items.push(item);
                        p = q + 1;
                    }
                }
                _ => {}
            }
            // The C++ pickler memoizes a shared list after it is complete.
            let mut slot = slot;
            if slot.is_none() {
                let (after, q) = self.memo_op(p, lim)?;
                if let Some(i) = after {
                    self.memo_put(i, Value::None).ok()?;
                    pending[1] = Some(i);
                    slot = Some(i);
                }
                p = q;
            }
            list = Some((self.flat_pairs.len(), slot));
            self.flat_pairs.push((key, Value::None));
        }
        Some(Parsed {
            end: p,
            dict_slot,
            list,
        })
    }

    /// [`Machine::flat_items_run`] with the list cache in front: a run of memo references
    /// whose bytes were seen before (in this epoch, see `list_cache.rs`) sets `flat_known`
    /// to the value the hooks gave for it, without reading the memo; a run not seen whose
    /// references are all settled sets `flat_record`, for [`Machine::finish_flat`] to record.
    fn flat_list<H: Hooks>(
        &mut self,
        hooks: &mut H,
        p: usize,
        lim: usize,
        pending: &[Option<u64>; 2],
    ) -> Option<usize> {
        if !self.list_cache.in_use() {
            return self.flat_items_run(hooks, p, lim, pending);
        }
        let Some((end, hash)) = super::list_cache::ref_run(self.buf, p, lim) else {
            return self.flat_items_run(hooks, p, lim, pending);
        };
        if let Some(v) = self.list_cache.get(hash, &self.buf[p..end]) {
            self.flat_known = Some(v);
            return Some(end + 1);
        }
        let q = settled_refs_run(
            &self.buf[..lim],
            p,
            &self.heap.memo,
            self.heap.memo_base,
            self.defs.is_some().then_some(&self.ext_cache[..]),
            *pending,
            &mut self.flat_items,
            self.limits.max_stack,
        );
        if q != end {
            return self.flat_items_run(hooks, q, lim, pending);
        }
        if self.flat_items.len() >= self.limits.max_stack {
            return None;
        }
        self.flat_record = Some((hash, p, end));
        Some(end + 1)
    }

    /// The items of a list from `p` to its `APPENDS` (a frames list): memo references, each
    /// copied from its slot as one 16-byte block, and flat dicts defined inline
    /// ([`Machine::flat_item`]). Returns the offset after `APPENDS`.
    fn flat_items_run<H: Hooks>(
        &mut self,
        hooks: &mut H,
        mut p: usize,
        lim: usize,
        pending: &[Option<u64>; 2],
    ) -> Option<usize> {
        let all = self.buf;
        let buf = &all[..lim];
        let base = self.heap.memo_base;
        let in_chunk = self.defs.is_some();
        let max = self.limits.max_stack;
        loop {
            // Runs of references to settled memo slots (nearly every item of a shared-frames
            // layout) in a loop of their own; anything else is read by the step below, from
            // its start. Frame dicts written inline (item after item) skip the call.
            if matches!(buf.get(p), Some(&(op::BINGET | op::LONG_BINGET))) {
                p = settled_refs_run(
                    buf,
                    p,
                    &self.heap.memo,
                    base,
                    in_chunk.then_some(&self.ext_cache[..]),
                    *pending,
                    &mut self.flat_items,
                    max,
                );
            }
            if p + 5 > buf.len() || self.flat_items.len() >= max {
                return None;
            }
            let w: &[u8; 5] = buf[p..p + 5].try_into().ok()?;
            let (index, next) = match w[0] {
                op::BINGET => (w[1] as u64, p + w::BINGET),
                op::LONG_BINGET => (
                    u32::from_le_bytes([w[1], w[2], w[3], w[4]]) as u64,
                    p + w::LONG_BINGET,
                ),
                op::APPENDS => return Some(p + 1),
                op::EMPTY_DICT => {
                    p = match self.flat_item_cached(hooks, p + 1, lim, pending) {
                        Some(q) => q,
                        None => self.flat_item(hooks, p + 1, lim, pending)?,
                    };
                    continue;
                }
                _ => return None,
            };
            if pending[0] == Some(index) || pending[1] == Some(index) {
                return None;
            }
            let rel = index.wrapping_sub(base) as usize;
            let slot = match self.heap.memo.get(rel..rel.wrapping_add(1)) {
                Some(s) if !matches!(s[0], Value::Obj(_)) => s,
                None if in_chunk => {
                    match self
                        .ext_cache
                        .get((index as usize) & (super::EXT_CACHE - 1))
                    {
                        Some(e) if e.0 == index => std::slice::from_ref(&e.1),
                        _ => {
                            self.flat_transient.set(true);
                            return None;
                        }
                    }
                }
                _ => {
                    let v = self.flat_ref_slow(index)?;
                    self.flat_items.push(v);
                    p = next;
                    continue;
                }
            };
            self.flat_items.extend_from_slice(slot);
            p = next;
        }
    }

    /// [`Machine::flat_item`] for a dict the hooks have seen ([`Hooks::seen_flat_item`]), in
    /// one straight pass from `p` just after its `EMPTY_DICT`: MEMOIZE, MARK, three pairs of a
    /// BINGET key and a memo reference or an integer, SETITEMS: no pairs are built. `None`
    /// (nothing changed) for any other shape, a reference not at hand, or a dict not seen.
    fn flat_item_seen<H: Hooks>(
        &mut self,
        hooks: &mut H,
        p: usize,
        lim: usize,
        pending: &[Option<u64>; 2],
    ) -> Option<usize> {
        let buf = &self.buf[..lim];
        if buf.get(p..p + 2)? != [op::MEMOIZE, op::MARK] {
            return None;
        }
        let mut q = p + 2;
        let mut words = [0u64; 6];
        for pair in 0..3 {
            let [op::BINGET, k] = *buf.get(q..q + 2)? else {
                return None;
            };
            words[2 * pair] = crate::pickle::key_word(self.settled_ref(k as u64, pending)?)?;
            q += 2;
            words[2 * pair + 1] = match *buf.get(q)? {
                op::BINGET => {
                    let v = self.settled_ref(*buf.get(q + 1)? as u64, pending)?;
                    q += w::BINGET;
                    crate::pickle::value_word(v)?
                }
                op::LONG_BINGET => {
                    let b: [u8; 4] = buf.get(q + 1..q + w::LONG_BINGET)?.try_into().ok()?;
                    let v = self.settled_ref(u32::from_le_bytes(b) as u64, pending)?;
                    q += w::LONG_BINGET;
                    crate::pickle::value_word(v)?
                }
                op::BININT1 => {
                    let v = *buf.get(q + 1)? as u64;
                    q += w::BININT1;
                    v | 1 << 63
                }
                op::BININT2 => {
                    let b: [u8; 2] = buf.get(q + 1..q + w::BININT2)?.try_into().ok()?;
                    q += w::BININT2;
                    u16::from_le_bytes(b) as u64 | 1 << 63
                }
                _ => return None,
            };
        }
        if *buf.get(q)? != op::SETITEMS || self.flat_items.len() >= self.limits.max_stack {
            return None;
        }
        let item = hooks.seen_flat_item(&words)?;
        // What flat_item does after reading the dict: its memo slot holds the item.
        let (slot, _) = self.memo_op(p, lim)?;
        self.memo_put(slot?, item).ok()?;
        self.flat_items.push(item);
        Some(q + 1)
    }

    /// [`Machine::flat_item_seen`] with the item cache in front: a dict of that shape whose
    /// bytes were seen before (in this epoch, see `item_cache.rs`) takes the item recorded
    /// for them, without reading the memo; one not seen is read by `flat_item_seen`, and
    /// recorded when every entry it names lies inside the memo's range or before it.
    fn flat_item_cached<H: Hooks>(
        &mut self,
        hooks: &mut H,
        p: usize,
        lim: usize,
        pending: &[Option<u64>; 2],
    ) -> Option<usize> {
        let Some(w) = self
            .buf
            .get(p..lim.min(self.buf.len()))
            .and_then(|r| r.first_chunk::<26>())
        else {
            return self.flat_item_seen(hooks, p, lim, pending);
        };
        if w[..2] != [op::MEMOIZE, op::MARK] {
            return None;
        }
        // The shape flat_item_seen reads: each value's length from a table of its opcode.
        let mut q = 2;
        for _ in 0..3 {
            if w[q] != op::BINGET {
                return None;
            }
            let len = FRAME_VALUE_LEN[w[q + 2] as usize] as usize;
            if len == 0 {
                return None;
            }
            q += 2 + len;
        }
        if w[q] != op::SETITEMS {
            return None;
        }
        let window = w[2..].first_chunk::<24>()?;
        let key = super::item_cache::dict_key(window, q - 2);
        if let Some(item) = self.item_cache.get(&key) {
            if self.flat_items.len() >= self.limits.max_stack {
                return None;
            }
            // Its MEMOIZE: the next memo entry (a push, unless ids are counted explicitly).
            if self.memo_next.is_none() {
                let index = self.heap.memo_base + self.heap.memo.len() as u64;
                self.heap.memo.push(item);
                self.heap.note_memoized(item, index);
            } else {
                let (slot, _) = self.memo_op(p, lim)?;
                self.memo_put(slot?, item).ok()?;
            }
            self.flat_items.push(item);
            return Some(p + q + 1);
        }
        let known = self.heap.memo_base + self.heap.memo.len() as u64;
        let end = self.flat_item_seen(hooks, p, lim, pending)?;
        let top = highest_id_named(&w[2..q]);
        if top < known {
            self.item_cache.insert(key, *self.flat_items.last()?, top);
        }
        Some(end)
    }

    /// A flat dict defined inline among a list's items, from `p` just after its `EMPTY_DICT`:
    /// an optional memo store, MARK, pairs of string keys and scalar or string values,
    /// SETITEMS, an optional memo store. The hooks convert it ([`Hooks::on_flat_item`]); its
    /// value joins the items and its memo slot. Until then the slot holds the sentinel, so
    /// a reference to the dict from inside it declines. Returns the offset after it.
    fn flat_item<H: Hooks>(
        &mut self,
        hooks: &mut H,
        p: usize,
        lim: usize,
        pending: &[Option<u64>; 2],
    ) -> Option<usize> {
        let buf = self.buf;
        let (before, mut p) = self.memo_op(p, lim)?;
        if let Some(i) = before {
            let s = self.sentinel();
            self.memo_put(i, s).ok()?;
        }
        if *buf.get(p).filter(|_| p < lim)? != op::MARK {
            return None;
        }
        p += 1;
        let mut pairs = std::mem::take(&mut self.flat_item_pairs);
        pairs.clear();
        let read = loop {
            let Some(&code) = buf.get(p).filter(|_| p < lim) else {
                break None;
            };
            if code == op::SETITEMS {
                break Some(p + 1);
            }
            if pairs.len() == MAX_PAIRS {
                break None;
            }
            let mut key = Value::None;
            p = self.flat_scalar(p, lim, pending, &mut key);
            if p == 0 || !matches!(key, Value::Str { .. }) {
                break None;
            }
            let mut value = Value::None;
            p = self.flat_scalar(p, lim, pending, &mut value);
            if p == 0 {
                break None;
            }
            pairs.push((key, value));
        };
        let item = read.and_then(|_| hooks.on_flat_item(&mut self.heap, &pairs));
        self.flat_item_pairs = pairs;
        let (item, p) = (item?, read?);
        let (after, p) = self.memo_op(p, lim)?;
        for i in [before, after].into_iter().flatten() {
            self.memo_put(i, item).ok()?;
        }
        if self.flat_items.len() >= self.limits.max_stack {
            return None;
        }
        self.flat_items.push(item);
        Some(p)
    }

    /// Hands the parsed dict to the hooks and stores what they return; `None` when they
    /// decline. Unconverted items already above the list's MARK are offered to `on_append`
    /// first, so that records keep the order of the list.
    fn finish_flat<H: Hooks>(
        &mut self,
        hooks: &mut H,
        list_id: ObjId,
        m: usize,
        parsed: Parsed,
    ) -> Option<Value> {
        let mut i = self.stack.len();
        while i > m && matches!(self.stack[i - 1], Value::Obj(_)) {
            i -= 1;
            if self.stack.len() - i > MAX_PENDING {
                return None;
            }
        }
        for j in i..self.stack.len() {
            let item = self.stack[j];
            self.stack[j] = hooks.on_append(&mut self.heap, list_id, item).ok()?;
        }
        if self.stack.len() >= self.limits.max_stack {
            return None;
        }
        let items = match self.flat_known {
            Some(v) => FlatList::Known(v),
            None => FlatList::Items(&self.flat_items),
        };
        let list = parsed.list.map(|(at, _)| (at, items));
        let (value, list_value) = hooks.on_flat(&mut self.heap, &mut self.flat_pairs, list)?;
        if let Some((hash, start, end)) = self.flat_record.take() {
            // Every id the run names was read from the memo's range or from before it.
            let run = &self.buf[start..end];
            let top = highest_id_named(run);
            if top < self.heap.memo_base + self.heap.memo.len() as u64 {
                self.list_cache.insert(hash, run, list_value, top);
            }
        }
        if let Some(i) = parsed.dict_slot {
            let s = self.sentinel();
            self.memo_store(i, s);
            self.flat_memo.push((i, value));
        }
        if let Some((_, Some(i))) = parsed.list {
            self.memo_store(i, list_value);
        }
        self.pos = parsed.end;
        self.op_at = parsed.end;
        self.flat_pending.push(self.stack.len());
        Some(value)
    }

    /// Called before an opcode other than `APPEND(S)` takes the stack values from `from` up:
    /// the fast path converted a dict on the assumption that its list would take it, so if
    /// anything else does, decoding stops ([`FLAT_BROKEN`]) and the caller decodes again
    /// without the fast path. Real snapshots never get here.
    #[inline]
    pub(super) fn flat_consumed(&self, from: usize) -> Result<(), super::DecodeError> {
        match self.flat_pending.last() {
            Some(&i) if i >= from => self.err(FLAT_BROKEN),
            _ => Ok(()),
        }
    }

    /// `APPEND(S)` moved the stack values from `from` up into a list, as the fast path assumed.
    #[inline]
    pub(super) fn flat_appended(&mut self, from: usize) {
        while self.flat_pending.last().is_some_and(|&i| i >= from) {
            self.flat_pending.pop();
        }
        if self.flat_pending.is_empty() && !self.flat_memo.is_empty() {
            for (index, v) in std::mem::take(&mut self.flat_memo) {
                if self.memo_lookup(index) == self.flat_sentinel {
                    self.memo_store(index, v);
                }
            }
        }
    }

    /// The value to memoize at `index` for `v`, the top of the stack: a pending item gets the
    /// sentinel until its list takes it (the general decoder would hand out the dict itself
    /// before that, a converted handle after).
    #[inline]
    pub(super) fn flat_memoized(&mut self, index: u64, v: Value) -> Value {
        if self.flat_pending.last() != Some(&(self.stack.len() - 1)) {
            return v;
        }
        self.flat_memo.push((index, v));
        self.sentinel()
    }

    /// The stand-in of pending items in the memo (an object no opcode can produce).
    fn sentinel(&mut self) -> Value {
        match self.flat_sentinel {
            Some(s) => s,
            None => {
                let s = self.heap.alloc(ObjData::Tuple(Box::new([])));
                self.heap.note_escaped(s);
                self.flat_sentinel = Some(s);
                s
            }
        }
    }
}
