//! The allocations live at a point of a trace, keyed by address: what the checks of a decode
//! (`validate.rs`, `coverage.rs`) and `summary` follow over every event of a trace.
//!
//! An alloc inserts its address, a free removes it: two table operations per allocation, over
//! millions of events. A general hash map spends most of its instructions on what these keys
//! do not need (a hasher object, SIMD group probing, tombstones): this table is one array of
//! (address, value) slots, linear probing from a multiplicative hash, and deletion by shifting
//! the probe chain back, so it holds no tombstones and never slows as events go by.

/// The empty slot's key; an address equal to it is kept apart ([`LiveAddrs::max_key`]).
const EMPTY: u64 = u64::MAX;

/// Addresses with a value each (an allocation's requested bytes): insert, remove, iterate.
#[derive(Debug, Clone)]
pub struct LiveAddrs {
    /// `(address, value)`, `EMPTY` where free; the length is a power of two (or zero).
    slots: Vec<(u64, u64)>,
    /// Addresses held in `slots`.
    len: usize,
    /// The value of address `u64::MAX`, which `slots` cannot hold.
    max_key: Option<u64>,
}

impl Default for LiveAddrs {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveAddrs {
    /// An empty table; it allocates on the first insert.
    pub fn new() -> Self {
        LiveAddrs {
            slots: Vec::new(),
            len: 0,
            max_key: None,
        }
    }

    /// Addresses held.
    pub fn len(&self) -> usize {
        self.len + self.max_key.is_some() as usize
    }

    /// Whether no address is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The home slot of `addr` in a table of `mask + 1` slots: the high bits of a
    /// multiplicative hash (allocation addresses share their low bits).
    #[inline]
    fn home(addr: u64, mask: usize) -> usize {
        (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask
    }

    /// Holds `addr` with `value` (replacing the value it had); returns the value replaced. The
    /// table stays at most half full: linear probing's chains stay short.
    #[inline]
    pub fn insert(&mut self, addr: u64, value: u64) -> Option<u64> {
        if addr == EMPTY {
            return self.max_key.replace(value);
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = Self::home(addr, mask);
        loop {
            let s = &mut self.slots[i];
            if s.0 == addr {
                return Some(std::mem::replace(&mut s.1, value));
            }
            if s.0 == EMPTY {
                *s = (addr, value);
                self.len += 1;
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Lets `addr` go; returns its value when it was held.
    #[inline]
    pub fn remove(&mut self, addr: u64) -> Option<u64> {
        if addr == EMPTY {
            return self.max_key.take();
        }
        if self.len == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = Self::home(addr, mask);
        loop {
            let s = self.slots[i];
            if s.0 == EMPTY {
                return None;
            }
            if s.0 == addr {
                break;
            }
            i = (i + 1) & mask;
        }
        let value = self.slots[i].1;
        // Shift the rest of the chain back over the hole: an entry moves into it when its home
        // does not lie (cyclically) between the hole and the entry.
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s.0 == EMPTY {
                break;
            }
            let home = Self::home(s.0, mask);
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = (EMPTY, 0);
        self.len -= 1;
        Some(value)
    }

    /// Whether `addr` is held.
    pub fn contains(&self, addr: u64) -> bool {
        if addr == EMPTY {
            return self.max_key.is_some();
        }
        if self.len == 0 {
            return false;
        }
        let mask = self.slots.len() - 1;
        let mut i = Self::home(addr, mask);
        loop {
            match self.slots[i].0 {
                a if a == addr => return true,
                EMPTY => return false,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Every `(address, value)` held, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.slots
            .iter()
            .filter(|s| s.0 != EMPTY)
            .copied()
            .chain(self.max_key.map(|v| (EMPTY, v)))
    }

    /// Doubles the table (from 64 slots) and places every entry again.
    #[inline(never)]
    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(64);
        let old = std::mem::replace(&mut self.slots, vec![(EMPTY, 0); cap]);
        let mask = cap - 1;
        for s in old.into_iter().filter(|s| s.0 != EMPTY) {
            let mut i = Self::home(s.0, mask);
            while self.slots[i].0 != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A small deterministic generator (xorshift), so the sequence is the same on every run.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn agrees_with_a_hash_map_over_a_long_random_mix_of_inserts_and_removes() {
        let mut ours = LiveAddrs::new();
        let mut theirs: HashMap<u64, u64> = HashMap::new();
        let mut state = 0x2545_F491_4F6C_DD1D;
        // Few distinct addresses (long probe chains, many removals of held ones), the
        // sentinel's value among them.
        for step in 0..200_000u64 {
            let r = next(&mut state);
            let addr = match r % 97 {
                0 => u64::MAX,
                k => (k * 512) << (r >> 60),
            };
            if r >> 8 & 1 == 0 {
                assert_eq!(
                    ours.insert(addr, step),
                    theirs.insert(addr, step),
                    "step {step}"
                );
            } else {
                assert_eq!(ours.remove(addr), theirs.remove(&addr), "step {step}");
            }
            assert_eq!(ours.len(), theirs.len());
            if step % 997 == 0 {
                let mut a: Vec<_> = ours.iter().collect();
                let mut b: Vec<_> = theirs.iter().map(|(k, v)| (*k, *v)).collect();
                a.sort_unstable();
                b.sort_unstable();
                assert_eq!(a, b, "step {step}");
                for probe in [addr, addr ^ 512, 0, u64::MAX] {
                    assert_eq!(ours.contains(probe), theirs.contains_key(&probe));
                }
            }
        }
    }

    #[test]
    fn removing_from_a_wrapped_chain_keeps_every_other_entry_reachable() {
        let mut t = LiveAddrs::new();
        for a in 0..50u64 {
            t.insert(a * 4096, a);
        }
        for a in (0..50u64).step_by(3) {
            assert_eq!(t.remove(a * 4096), Some(a));
        }
        for a in 0..50u64 {
            assert_eq!(t.contains(a * 4096), a % 3 != 0, "{a}");
        }
        assert_eq!(t.len(), 50 - 17);
        assert!(t.remove(7).is_none());
        assert!(LiveAddrs::new().is_empty());
    }
}
