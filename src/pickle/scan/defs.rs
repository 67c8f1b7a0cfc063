//! The table of memo definitions: where each memoized object is defined, written by pass 1
//! while workers already read it. One atomic word per memo id, in the layout below.

use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// No memo id (an entry not memoized); memo ids are below it.
pub(super) const NONE: u32 = u32::MAX;

/// Table entry: start (40 bits) | len (21 bits) | base differs | big | referenced.
/// len 0 = not complete; big = the top-level dict or a big list (never decoded on demand).
pub(super) const LEN_SHIFT: u32 = 40;
pub(super) const LEN_MAX: u64 = (1 << 21) - 1;
pub(super) const REF_BIT: u64 = 1 << 63;
pub(super) const BIG_BIT: u64 = 1 << 62;
pub(super) const BASE_BIT: u64 = 1 << 61;
pub(super) const START_MASK: u64 = (1 << LEN_SHIFT) - 1;

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
    pub(super) table: Vec<AtomicU64>,
    /// Lengths of 2 MiB or more, and memo bases that differ from the id.
    pub(super) extra: Mutex<FxHashMap<u32, (u64, u64)>>,
    pub(super) count: AtomicU64,
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
