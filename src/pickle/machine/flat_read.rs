//! The fast path's readers (`machine/flat.rs`): a trace entry's scalar and string values,
//! memo references to settled slots (one at a time, and runs of them out of line), and the
//! memo stores after a value; each returns where it stopped, 0 or `None` to decline.

use super::super::ops::{head, op, w};
use super::Machine;
use crate::pickle::value::Value;

/// The references to settled memo slots (not a container, not `pending`) from `p` in `buf`,
/// each slot copied onto `items` as one 16-byte block, up to `max` items; in a chunk
/// (`outside` is its cache of outside definitions, [`super::EXT_CACHE`] slots) also those
/// found there. Returns the offset of the first other opcode. Kept out of line: inside the
/// decoder's loop its few values lived on the stack and every item reloaded them.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(super) fn settled_refs_run(
    buf: &[u8],
    mut p: usize,
    memo: &[Value],
    base: u64,
    outside: Option<&[(u64, Value)]>,
    pending: [Option<u64>; 2],
    items: &mut Vec<Value>,
    max: usize,
) -> usize {
    while items.len() < max {
        let Some(w) = buf.get(p..).and_then(|r| r.first_chunk::<5>()) else {
            break;
        };
        let (index, next) = match w[0] {
            op::BINGET => (w[1] as u64, p + w::BINGET),
            op::LONG_BINGET => (
                u32::from_le_bytes([w[1], w[2], w[3], w[4]]) as u64,
                p + w::LONG_BINGET,
            ),
            _ => break,
        };
        match settled_slot(memo, base, outside, pending, index) {
            Some(v) => items.extend_from_slice(std::slice::from_ref(v)),
            None => break,
        }
        p = next;
    }
    p
}

/// The value of memo entry `index` when it is neither a container nor `pending`: from `memo`
/// (entry `base` first) or, in a chunk, from `outside`, its cache of outside definitions
/// ([`super::EXT_CACHE`] slots); `None` when not at hand.
#[inline(always)]
pub(super) fn settled_slot<'m>(
    memo: &'m [Value],
    base: u64,
    outside: Option<&'m [(u64, Value)]>,
    pending: [Option<u64>; 2],
    index: u64,
) -> Option<&'m Value> {
    if pending[0] == Some(index) || pending[1] == Some(index) {
        return None;
    }
    match memo.get(index.wrapping_sub(base) as usize) {
        Some(v) if !matches!(v, Value::Obj(_)) => Some(v),
        Some(_) => None,
        None => {
            let e = outside?.get((index as usize) & (super::EXT_CACHE - 1))?;
            (e.0 == index).then_some(&e.1)
        }
    }
}

impl Machine<'_> {
    /// A memo entry that is neither a container nor pending, from the memo or, in a chunk,
    /// from the cache of outside definitions; `None` when not at hand.
    #[inline(always)]
    pub(super) fn settled_ref(&self, index: u64, pending: &[Option<u64>; 2]) -> Option<Value> {
        let outside = self.defs.is_some().then_some(&self.ext_cache[..]);
        settled_slot(
            &self.heap.memo,
            self.heap.memo_base,
            outside,
            *pending,
            index,
        )
        .copied()
    }

    /// A memo reference at `p` to a string in the memo (a trace entry's key, nearly always):
    /// the string and the offset after the reference; `None` for anything else, which
    /// [`Machine::flat_scalar`] then reads. A pending slot (the entry's dict or list) holds a
    /// placeholder, never a string, so it needs no check here.
    #[inline(always)]
    pub(super) fn settled_str_ref(&self, p: usize, lim: usize) -> Option<(Value, usize)> {
        let w = self.buf.get(p..p + 5).filter(|_| p + 5 <= lim)?;
        let (index, q) = match w[0] {
            op::LONG_BINGET => (
                u32::from_le_bytes([w[1], w[2], w[3], w[4]]) as u64,
                p + w::LONG_BINGET,
            ),
            op::BINGET => (w[1] as u64, p + w::BINGET),
            _ => return None,
        };
        let rel = index.wrapping_sub(self.heap.memo_base) as usize;
        match self.heap.memo.get(rel) {
            Some(&v @ Value::Str { .. }) => Some((v, q)),
            _ => None,
        }
    }

    /// An optional memo opcode at `p`: its slot (implicit ids counted as `MEMOIZE` does).
    #[inline]
    pub(super) fn memo_op(&mut self, p: usize, lim: usize) -> Option<(Option<u64>, usize)> {
        let buf = self.buf;
        match buf.get(p).filter(|_| p < lim) {
            Some(&op::MEMOIZE) => {
                let index = match self.memo_next.as_mut() {
                    Some(n) => {
                        *n += 1;
                        *n - 1
                    }
                    None => self.heap.memo_base + self.heap.memo.len() as u64,
                };
                Some((Some(index), p + 1))
            }
            Some(&op::BINPUT) if p + w::BINPUT <= lim => {
                Some((Some(buf[p + 1] as u64), p + w::BINPUT))
            }
            Some(&op::LONG_BINPUT) if p + w::LONG_BINPUT <= lim => {
                let b: [u8; 4] = buf[p + 1..p + w::LONG_BINPUT].try_into().ok()?;
                Some((Some(u32::from_le_bytes(b) as u64), p + w::LONG_BINPUT))
            }
            Some(&(op::PUT | op::BINPUT | op::LONG_BINPUT)) => None,
            _ => Some((None, p)),
        }
    }

    /// A key or scalar value at `p` into `out`: a string (memoized as it is read), an integer,
    /// None, a bool, or a reference to a non-container. Returns the offset after it, 0 when
    /// declining.
    #[inline(always)]
    pub(super) fn flat_scalar(
        &mut self,
        p: usize,
        lim: usize,
        pending: &[Option<u64>; 2],
        out: &mut Value,
    ) -> usize {
        let buf = self.buf;
        // Every fixed-size form below fits in 10 bytes; nearer the end, decline.
        if p + 10 > lim {
            return 0;
        }
        // A reference into the input, not a copy of the window on the stack.
        let w: &[u8; 10] = match buf[p..p + 10].try_into() {
            Ok(w) => w,
            Err(_) => return 0,
        };
        let (v, q) = match w[0] {
            // The window already holds the id: no second read of the opcode.
            op::BINGET => return self.flat_ref_at(w[1] as u64, p + w::BINGET, pending, out),
            op::LONG_BINGET => {
                let index = u32::from_le_bytes([w[1], w[2], w[3], w[4]]) as u64;
                return self.flat_ref_at(index, p + w::LONG_BINGET, pending, out);
            }
            op::SHORT_BINUNICODE => {
                const H: usize = head::SHORT_BINUNICODE;
                let n = w[1] as usize;
                if p + H + n > lim {
                    return 0;
                }
                let v = Value::Str {
                    off: (p + H) as u64,
                    len: n as u32,
                };
                (v, p + H + n)
            }
            op::BINUNICODE => {
                const H: usize = head::BINUNICODE;
                let n = u32::from_le_bytes([w[1], w[2], w[3], w[4]]) as usize;
                if n > lim - p - H {
                    return 0;
                }
                let v = Value::Str {
                    off: (p + H) as u64,
                    len: n as u32,
                };
                (v, p + H + n)
            }
            op::LONG1 => {
                let n = w[1] as usize;
                if n > 8 {
                    return 0;
                }
                // Non-negative (top bit of the last byte clear): zero-extended as is.
                let v = if n > 0 && w[1 + n] < 0x80 {
                    // The window's last 8 bytes, masked to the n that are the integer's (a
                    // copy of n bytes would be a call to memcpy).
                    let all = u64::from_le_bytes([w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9]]);
                    let mask = u64::MAX >> (64 - 8 * n as u32);
                    Value::Int((all & mask) as i64)
                } else {
                    self.long(&w[2..2 + n])
                };
                (v, p + head::LONG1 + n)
            }
            op::BININT => (
                Value::Int(i32::from_le_bytes([w[1], w[2], w[3], w[4]]) as i64),
                p + w::BININT,
            ),
            op::BININT1 => (Value::Int(w[1] as i64), p + w::BININT1),
            op::BININT2 => (
                Value::Int(u16::from_le_bytes([w[1], w[2]]) as i64),
                p + w::BININT2,
            ),
            op::NONE => (Value::None, p + w::NONE),
            op::NEWTRUE => (Value::Bool(true), p + w::NEWTRUE),
            op::NEWFALSE => (Value::Bool(false), p + w::NEWFALSE),
            _ => return 0,
        };
        *out = v;
        if let Value::Str { .. } = v {
            let Some((slot, q)) = self.memo_op(q, lim) else {
                return 0;
            };
            if let Some(i) = slot {
                if self.memo_put(i, v).is_err() {
                    return 0;
                }
            }
            return q;
        }
        q
    }

    /// A memo reference at `p` to anything but a container (a string, a scalar, a converted
    /// handle), from the memo or, in a chunk, from the cache of outside definitions.
    #[inline(always)]
    pub(super) fn flat_ref(
        &self,
        p: usize,
        lim: usize,
        pending: &[Option<u64>; 2],
        out: &mut Value,
    ) -> usize {
        let buf = self.buf;
        let (index, q) = match buf[p] {
            op::BINGET if p + w::BINGET <= lim => (buf[p + 1] as u64, p + w::BINGET),
            op::LONG_BINGET if p + w::LONG_BINGET <= lim => (
                u32::from_le_bytes([buf[p + 1], buf[p + 2], buf[p + 3], buf[p + 4]]) as u64,
                p + w::LONG_BINGET,
            ),
            _ => return 0,
        };
        self.flat_ref_at(index, q, pending, out)
    }

    /// [`Machine::flat_ref`] once the reference is read: memo id `index`, `q` after it.
    #[inline(always)]
    pub(super) fn flat_ref_at(
        &self,
        index: u64,
        q: usize,
        pending: &[Option<u64>; 2],
        out: &mut Value,
    ) -> usize {
        if let Some(v) = self.settled_ref(index, pending) {
            *out = v;
            return q;
        }
        if pending[0] == Some(index) || pending[1] == Some(index) {
            return 0;
        }
        match self.flat_ref_slow(index) {
            Some(v) => {
                *out = v;
                q
            }
            None => 0,
        }
    }

    /// [`Machine::flat_ref`] for converted containers and sparse entries.
    #[inline(never)]
    pub(super) fn flat_ref_slow(&self, index: u64) -> Option<Value> {
        let Some(v) = self.memo_lookup(index) else {
            self.flat_transient.set(true);
            return None;
        };
        let v = self.heap.resolve(v);
        (!matches!(v, Value::Obj(_))).then_some(v)
    }
}
