//! Frame dicts written inline, recognised by their bytes.
//!
//! In a layout where every trace entry spells out its own frame dicts with memo references
//! to strings defined once (a snapshot rewritten and dumped again with `pickle.dump`), the
//! same few thousand dicts recur byte for byte. [`Machine::flat_item_seen`] reads each one by
//! looking up its six keys and values in the memo; this cache maps the dict's bytes to the
//! item the hooks gave for it, so a dict seen before costs one hash of its bytes.
//!
//! The bytes name memo entries, not values, so an answer holds only while those entries keep
//! their values. A change that could alter one — a memo entry holding a string or integer
//! overwritten, the memo rolled back below an id an answer names — moves the cache to a new
//! epoch, and answers from older epochs are not used. Answers are only recorded for dicts
//! whose ids lie inside the memo's range or before it (a chunk's outside definitions, which
//! do not change while it is decoded); entries written past the range are never named.
//!
//! [`Machine::flat_item_seen`]: super::Machine

use super::epoch::Epoch;
use crate::pickle::value::Value;

/// Most dicts kept: past this, new ones are not added (6 MiB of slots at the most).
const MAX_ENTRIES: usize = 1 << 16;

/// One slot: the dict's bytes (see [`dict_key`]), the epoch it was added in, the item.
#[derive(Clone, Copy)]
struct Slot {
    key: [u64; 3],
    epoch: u64,
    item: Value,
}

/// An empty slot (a real key's third word always holds the length, 12 or more).
const EMPTY: Slot = Slot {
    key: [0; 3],
    epoch: 0,
    item: Value::None,
};

/// Open-addressed table from a frame dict's bytes to its item.
pub(super) struct ItemCache {
    slots: Vec<Slot>,
    /// Slots in use.
    used: usize,
    /// Which answers still hold.
    epoch: Epoch,
}

impl ItemCache {
    /// An empty cache; it allocates on the first [`ItemCache::insert`].
    pub(super) fn new() -> Self {
        ItemCache {
            slots: Vec::new(),
            used: 0,
            epoch: Epoch::new(),
        }
    }

    /// Memo entry `index` (or every entry from it, when the memo is rolled back) changes:
    /// when an answer may name it, every answer is forgotten.
    #[inline]
    pub(super) fn forget_from(&mut self, index: u64) {
        self.epoch.forget_from(index);
    }

    /// The item recorded for these bytes in the current epoch.
    #[inline]
    pub(super) fn get(&self, key: &[u64; 3]) -> Option<Value> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = slot_of(key) & mask;
        loop {
            let s = &self.slots[i];
            if s.key == *key {
                return (s.epoch == self.epoch.current()).then_some(s.item);
            }
            if s.key[2] == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Records `item` for these bytes in the current epoch (replacing an older answer);
    /// `top` is the highest memo id the bytes name.
    pub(super) fn insert(&mut self, key: [u64; 3], item: Value, top: u64) {
        self.epoch.names(top);
        if (self.used + 1) * 2 > self.slots.len() {
            if self.used >= MAX_ENTRIES {
                // Full: an older answer may still be refreshed in place, below.
                if self.slots.is_empty() {
                    return;
                }
            } else {
                self.grow();
            }
        }
        let mask = self.slots.len() - 1;
        let mut i = slot_of(&key) & mask;
        loop {
            let s = &mut self.slots[i];
            if s.key == key {
                s.epoch = self.epoch.current();
                s.item = item;
                return;
            }
            if s.key[2] == 0 {
                if self.used >= MAX_ENTRIES {
                    return;
                }
                *s = Slot {
                    key,
                    epoch: self.epoch.current(),
                    item,
                };
                self.used += 1;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Doubles the table (from 1024 slots), dropping answers of older epochs.
    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(1024);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; cap]);
        self.used = 0;
        for s in old {
            if s.key[2] != 0 && s.epoch == self.epoch.current() {
                let mask = cap - 1;
                let mut i = slot_of(&s.key) & mask;
                while self.slots[i].key[2] != 0 {
                    i = (i + 1) & mask;
                }
                self.slots[i] = s;
                self.used += 1;
            }
        }
    }
}

/// The table slot for a key (its high hash bits).
#[inline(always)]
fn slot_of(key: &[u64; 3]) -> usize {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let h = (key[0].wrapping_mul(K).rotate_left(26) ^ key[1]).wrapping_mul(K);
    let h = (h.rotate_left(26) ^ key[2]).wrapping_mul(K);
    (h >> 32) as usize
}

/// A frame dict's key: its pair bytes `pairs` (12 to 19 bytes, from after its MARK up to its
/// SETITEMS) read from `window`, which starts at them and holds at least 24 bytes; the
/// length goes in the last byte, which the pairs never reach.
#[inline(always)]
pub(super) fn dict_key(window: &[u8; 24], len: usize) -> [u64; 3] {
    debug_assert!((12..=19).contains(&len));
    let word = |i: usize| {
        u64::from_le_bytes([
            window[8 * i],
            window[8 * i + 1],
            window[8 * i + 2],
            window[8 * i + 3],
            window[8 * i + 4],
            window[8 * i + 5],
            window[8 * i + 6],
            window[8 * i + 7],
        ])
    };
    // Bytes of a word that belong to the pairs: the rest is masked off.
    let keep = |bytes: usize| match bytes {
        0 => 0,
        1..=7 => (1u64 << (8 * bytes)) - 1,
        _ => u64::MAX,
    };
    [
        word(0),
        word(1) & keep(len - 8),
        word(2) & keep(len.saturating_sub(16)) | (len as u64) << 56,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: u32) -> Value {
        Value::Ext { kind: 1, id }
    }

    #[test]
    fn bytes_past_the_pairs_do_not_change_the_key() {
        let mut a = [0xAAu8; 24];
        let mut b = [0x55u8; 24];
        a[..13].copy_from_slice(&[b'h', 1, b'h', 2, b'h', 3, b'K', 4, b'h', 5, b'j', 6, 0]);
        b[..13].copy_from_slice(&a[..13]);
        assert_eq!(dict_key(&a, 13), dict_key(&b, 13));
        assert_ne!(dict_key(&a, 13), dict_key(&a, 12));
        a[12] = 7;
        assert_ne!(dict_key(&a, 13), dict_key(&b, 13));
        // The longest dict: every byte but the last counts.
        let c = [3u8; 24];
        let mut d = c;
        d[18] = 4;
        assert_ne!(dict_key(&c, 19), dict_key(&d, 19));
        d[18] = 3;
        d[19] = 4;
        assert_eq!(dict_key(&c, 19), dict_key(&d, 19));
    }

    #[test]
    fn answers_hold_until_invalidated_and_survive_growth() {
        let mut cache = ItemCache::new();
        let key = |n: u64| [n, n * 3, n << 8 | 12 << 56];
        for n in 1..5000u64 {
            cache.insert(key(n), item(n as u32), 40);
        }
        for n in 1..5000u64 {
            assert_eq!(cache.get(&key(n)), Some(item(n as u32)), "{n}");
        }
        assert_eq!(cache.get(&key(6000)), None);
        // Entries above every id named change nothing; one named forgets all.
        cache.forget_from(41);
        assert_eq!(cache.get(&key(7)), Some(item(7)));
        cache.forget_from(40);
        assert_eq!(cache.get(&key(7)), None);
        cache.insert(key(7), item(70), 3);
        cache.forget_from(4);
        assert_eq!(cache.get(&key(7)), Some(item(70)));
        assert_eq!(cache.get(&key(8)), None);
    }

    #[test]
    fn a_full_cache_adds_nothing_but_still_answers() {
        let mut cache = ItemCache::new();
        let key = |n: u64| [n, 0, 12 << 56];
        for n in 1..=(MAX_ENTRIES as u64 + 10) {
            cache.insert(key(n), item(n as u32), 40);
        }
        assert_eq!(cache.used, MAX_ENTRIES);
        assert_eq!(cache.get(&key(1)), Some(item(1)));
        assert_eq!(cache.get(&key(MAX_ENTRIES as u64 + 5)), None);
    }
}
