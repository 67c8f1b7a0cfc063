//! Frames lists of memo references, recognised by their bytes.
//!
//! In PyTorch's own layout a trace entry's frames list is a run of memo references to frame
//! dicts defined once (`BINGET`/`LONG_BINGET` ... `APPENDS`), and the same few hundred stacks
//! recur in millions of entries, byte for byte: the references name the same memo entries.
//! Read item by item, each reference costs a memo read and the list a hash of its frame ids
//! ([`Hooks::on_flat`] interning the stack); this cache maps the run's bytes to the value the
//! hooks gave for the list, so a stack seen before costs one hash of its bytes and one
//! comparison with a copy of them.
//!
//! As with the item cache (`item_cache.rs`), the bytes name memo entries, not values: an
//! answer holds only while those entries keep their values. Answers name only entries that
//! held a converted handle (`Value::Ext`) when they were recorded, and lie inside the memo's
//! range or before it (a chunk's outside definitions, which do not change while it is
//! decoded). Overwriting a memo entry that holds a handle, or rolling the memo back below an
//! id an answer names, moves the cache to a new epoch, and older answers are not used.
//!
//! [`Hooks::on_flat`]: crate::pickle::Hooks::on_flat

use super::epoch::Epoch;
use crate::pickle::ops::op;
use crate::pickle::value::Value;

/// Most lists kept; past this, new ones are not added.
const MAX_ENTRIES: usize = 1 << 16;
/// Most bytes of lists kept (their copies, for the comparison on a hit).
const MAX_BYTES: usize = 8 << 20;
/// Lookups after which a cache that answered fewer than one in [`MIN_HIT_SHARE`] stops being
/// consulted (a file whose stacks rarely recur would pay for the hash and gain nothing).
const TRIAL_LOOKUPS: u64 = 4096;
/// See [`TRIAL_LOOKUPS`].
const MIN_HIT_SHARE: u64 = 4;

/// One slot: the hash of a list's bytes, where its copy lies in the arena, the epoch it was
/// added in, the hooks' value.
#[derive(Clone, Copy)]
struct Slot {
    hash: u64,
    at: u32,
    len: u32,
    epoch: u64,
    value: Value,
}

/// An empty slot (real lists have at least one reference: `len` > 0).
const EMPTY: Slot = Slot {
    hash: 0,
    at: 0,
    len: 0,
    epoch: 0,
    value: Value::None,
};

/// Open-addressed table from the bytes of a run of memo references to the list's value.
pub(super) struct ListCache {
    slots: Vec<Slot>,
    /// Copies of the recorded runs.
    arena: Vec<u8>,
    used: usize,
    /// Which answers still hold.
    epoch: Epoch,
    lookups: u64,
    hits: u64,
}

impl ListCache {
    /// An empty cache; it allocates on the first [`ListCache::insert`].
    pub(super) fn new() -> Self {
        ListCache {
            slots: Vec::new(),
            arena: Vec::new(),
            used: 0,
            epoch: Epoch::new(),
            lookups: 0,
            hits: 0,
        }
    }

    /// Whether lists are worth looking up: always during the first [`TRIAL_LOOKUPS`], then
    /// only while at least one lookup in [`MIN_HIT_SHARE`] found its list.
    #[inline]
    pub(super) fn in_use(&self) -> bool {
        self.lookups < TRIAL_LOOKUPS || self.hits * MIN_HIT_SHARE >= self.lookups
    }

    /// Memo entry `index` (or every entry from it, when the memo is rolled back) changes:
    /// when an answer may name it, every answer is forgotten.
    #[inline]
    pub(super) fn forget_from(&mut self, index: u64) {
        self.epoch.forget_from(index);
    }

    /// The value recorded for the run `bytes` (whose hash is `hash`) in the current epoch.
    #[inline]
    pub(super) fn get(&mut self, hash: u64, bytes: &[u8]) -> Option<Value> {
        self.lookups += 1;
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = (hash >> 32) as usize & mask;
        loop {
            let s = &self.slots[i];
            if s.len == 0 {
                return None;
            }
            if s.hash == hash
                && s.len as usize == bytes.len()
                && self.arena[s.at as usize..s.at as usize + bytes.len()] == *bytes
            {
                if s.epoch != self.epoch.current() {
                    return None;
                }
                self.hits += 1;
                return Some(s.value);
            }
            i = (i + 1) & mask;
        }
    }

    /// Records `value` for the run `bytes` (hash `hash`) in the current epoch, replacing an
    /// older answer; `top` is the highest memo id the run names.
    pub(super) fn insert(&mut self, hash: u64, bytes: &[u8], value: Value, top: u64) {
        if bytes.is_empty() || bytes.len() > u32::MAX as usize {
            return;
        }
        if (self.used + 1) * 2 > self.slots.len() && self.used < MAX_ENTRIES {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = (hash >> 32) as usize & mask;
        loop {
            let s = self.slots[i];
            if s.len == 0 {
                break;
            }
            if s.hash == hash
                && s.len as usize == bytes.len()
                && self.arena[s.at as usize..s.at as usize + bytes.len()] == *bytes
            {
                self.epoch.names(top);
                self.slots[i].epoch = self.epoch.current();
                self.slots[i].value = value;
                return;
            }
            i = (i + 1) & mask;
        }
        if self.used >= MAX_ENTRIES || self.arena.len() + bytes.len() > MAX_BYTES {
            return;
        }
        self.epoch.names(top);
        let at = self.arena.len() as u32;
        self.arena.extend_from_slice(bytes);
        self.slots[i] = Slot {
            hash,
            at,
            len: bytes.len() as u32,
            epoch: self.epoch.current(),
            value,
        };
        self.used += 1;
    }

    /// Doubles the table (from 1024 slots). Answers of older epochs are kept (their bytes
    /// stay in the arena); they are refreshed in place when their list is recorded again.
    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(1024);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; cap]);
        for s in old {
            if s.len != 0 {
                let mask = cap - 1;
                let mut i = (s.hash >> 32) as usize & mask;
                while self.slots[i].len != 0 {
                    i = (i + 1) & mask;
                }
                self.slots[i] = s;
            }
        }
    }
}

/// The end of a run of memo references (`BINGET`, `LONG_BINGET`) from `p`, when an
/// `APPENDS` follows it before `lim`: `(offset of the APPENDS, hash of the run)`. `None` for
/// anything else (an empty run, a frame dict written inline, the end of the range).
///
/// The hash is taken in the same pass, from the ids the references name and their opcodes
/// (rotate and xor per reference, one multiply at the end): the same bytes hash alike, and
/// [`ListCache::get`] compares the bytes themselves, so a weaker hash costs probes, never a
/// wrong answer.
#[inline]
pub(super) fn ref_run(buf: &[u8], p: usize, lim: usize) -> Option<(usize, u64)> {
    let buf = buf.get(..lim)?;
    let mut q = p;
    let mut h = 0u64;
    let id = |b: &[u8], at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    loop {
        // Four LONG_BINGETs at a time (PyTorch's frames lists): one bounds check for them.
        while let Some(w) = buf.get(q..q + 20).and_then(|r| r.first_chunk::<20>()) {
            if w[0] != op::LONG_BINGET
                || w[5] != op::LONG_BINGET
                || w[10] != op::LONG_BINGET
                || w[15] != op::LONG_BINGET
            {
                break;
            }
            for at in [1, 6, 11, 16] {
                h = h.rotate_left(7) ^ id(w, at) as u64;
            }
            q += 20;
        }
        match buf.get(q) {
            Some(&op::LONG_BINGET) => {
                h = h.rotate_left(7) ^ id(buf.get(q + 1..q + 5)?, 0) as u64;
                q += 5;
            }
            Some(&op::BINGET) => {
                h = h.rotate_left(7) ^ (*buf.get(q + 1)? as u64 | 1 << 32);
                q += 2;
            }
            Some(&op::APPENDS) if q > p => return Some((q, finish_hash(h, q - p))),
            _ => return None,
        }
    }
}

/// The run's hash from its mixed ids and its length in bytes.
#[inline]
fn finish_hash(h: u64, len: usize) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let h = (h ^ (len as u64).rotate_left(40)).wrapping_mul(K);
    h ^ h >> 29
}

/// The hash [`ref_run`] gives the run `bytes` (which must be one: references only).
#[cfg(test)]
fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut run = bytes.to_vec();
    run.push(op::APPENDS);
    ref_run(&run, 0, run.len()).map_or(0, |(_, h)| h)
}

#[cfg(test)]
mod tests {
    use super::super::flat::highest_id_named;
    use super::*;

    fn stack(id: u32) -> Value {
        Value::Ext { kind: 3, id }
    }

    #[test]
    fn a_run_ends_at_its_appends_and_nothing_else() {
        let run = [
            op::BINGET,
            7,
            op::LONG_BINGET,
            1,
            2,
            0,
            0,
            op::BINGET,
            op::APPENDS,
        ];
        let buf = [&run[..], &[op::APPENDS, op::STOP]].concat();
        // A reference whose id byte is the APPENDS opcode does not end the run.
        let (end, _) = ref_run(&buf, 0, buf.len()).expect("a run");
        assert_eq!(end, run.len());
        assert_eq!(highest_id_named(&buf[..end]), 0x201);
        // Cut before its APPENDS, empty, or holding anything else: no run.
        assert_eq!(ref_run(&buf, 0, run.len()), None);
        assert_eq!(ref_run(&[op::APPENDS], 0, 1), None);
        assert_eq!(
            ref_run(&[op::BINGET, 1, op::EMPTY_DICT, op::APPENDS], 0, 4),
            None
        );
        // The same bytes hash alike wherever they lie; different ones (almost always) not.
        let twice = [&run[..], &[op::APPENDS], &run[..], &[op::APPENDS]].concat();
        let a = ref_run(&twice, 0, twice.len()).unwrap();
        let b = ref_run(&twice, run.len() + 1, twice.len()).unwrap();
        assert_eq!(a.1, b.1);
        let mut other = twice.clone();
        other[1] = 8;
        assert_ne!(ref_run(&other, 0, other.len()).unwrap().1, a.1);
    }

    #[test]
    fn answers_hold_until_invalidated_and_compare_bytes_not_hashes() {
        let mut cache = ListCache::new();
        let run = |n: u32| {
            let mut r = vec![op::LONG_BINGET];
            r.extend_from_slice(&n.to_le_bytes());
            r.extend_from_slice(&[op::BINGET, 9]);
            r
        };
        for n in 1..5000u32 {
            let r = run(n);
            cache.insert(hash_bytes(&r), &r, stack(n), n as u64);
        }
        for n in 1..5000u32 {
            let r = run(n);
            assert_eq!(cache.get(hash_bytes(&r), &r), Some(stack(n)), "{n}");
        }
        // The right hash with other bytes is not an answer.
        assert_eq!(cache.get(hash_bytes(&run(7)), &run(8)), None);
        // Entries above every id named change nothing; one named forgets all.
        cache.forget_from(5000);
        assert_eq!(cache.get(hash_bytes(&run(7)), &run(7)), Some(stack(7)));
        cache.forget_from(4999);
        assert_eq!(cache.get(hash_bytes(&run(7)), &run(7)), None);
        // Recorded again in the new epoch: answered again, and only that one.
        cache.insert(hash_bytes(&run(7)), &run(7), stack(70), 7);
        assert_eq!(cache.get(hash_bytes(&run(7)), &run(7)), Some(stack(70)));
        assert_eq!(cache.get(hash_bytes(&run(8)), &run(8)), None);
        cache.forget_from(8);
        assert_eq!(cache.get(hash_bytes(&run(7)), &run(7)), Some(stack(70)));
    }

    #[test]
    fn a_cache_that_rarely_answers_stops_being_used() {
        let mut cache = ListCache::new();
        let r = [op::BINGET, 1];
        for _ in 0..TRIAL_LOOKUPS {
            assert!(cache.in_use());
            cache.get(hash_bytes(&r), &r);
        }
        assert!(!cache.in_use());
        let mut cache = ListCache::new();
        cache.insert(hash_bytes(&r), &r, stack(1), 1);
        for _ in 0..2 * TRIAL_LOOKUPS {
            cache.get(hash_bytes(&r), &r);
        }
        assert!(cache.in_use());
    }
}
