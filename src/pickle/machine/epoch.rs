//! When the answers of a cache keyed by bytes stop holding.
//!
//! The item cache and the list cache (`item_cache.rs`, `list_cache.rs`) map bytes that name
//! memo entries by id to what the hooks made of them. An answer holds while the entries it
//! names keep their values; the caches are told of every change that could alter one, and
//! this counter says which answers are still good.

/// The current epoch of a cache's answers, and the ids they name.
pub(super) struct Epoch {
    /// Answers added in an older epoch are not used.
    current: u64,
    /// One more than the highest memo id a current answer names (0: none): changes to
    /// entries at or above it alter no answer.
    names_below: u64,
}

impl Epoch {
    /// The first epoch, no answer in it.
    pub(super) fn new() -> Self {
        Epoch {
            current: 1,
            names_below: 0,
        }
    }

    /// The epoch answers are added in and read from.
    #[inline(always)]
    pub(super) fn current(&self) -> u64 {
        self.current
    }

    /// An answer naming memo ids up to `top` is added.
    #[inline]
    pub(super) fn names(&mut self, top: u64) {
        self.names_below = self.names_below.max(top.saturating_add(1));
    }

    /// Memo entry `index` (or every entry from it, when the memo is rolled back) changes:
    /// when an answer may name it, a new epoch starts and every answer is forgotten.
    #[inline]
    pub(super) fn forget_from(&mut self, index: u64) {
        if index < self.names_below {
            self.current += 1;
            self.names_below = 0;
        }
    }
}
