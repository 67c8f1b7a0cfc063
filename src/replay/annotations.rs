//! `annotate` events (`torch.cuda.memory._annotate_memory`, PyTorch 2.14) attached to the
//! allocation live at their address.
//!
//! An annotation is not an allocation: it names the block whose base address it carries,
//! at that moment. Several accumulate on one allocation, in trace order; a free and a new
//! allocation at the same address start clean (the new one is another [`Allocation`]).
//! The allocation may be older than the trace (`start == -1`: a final block or an orphan
//! free). An annotate whose address has no live allocation is counted as unattached.
//!
//! It lives in the replay because it is a per-allocation fact several analyses read
//! (`top`, `leaks`, the page); it is computed on demand, never on the replay's hot path.

use super::{Allocation, DeviceReplay};
use crate::model::{Action, Snapshot, StrId, TraceEvent};
use rustc_hash::FxHashMap;

/// The annotations of one device's allocations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Annotations {
    /// Per allocation index of [`DeviceReplay::allocations`] that has any: its texts
    /// (`user_metadata` of each `annotate`), in trace order.
    pub per_alloc: FxHashMap<u32, Vec<StrId>>,
    /// `annotate` events whose address had no live allocation.
    pub unattached: u64,
}

impl Annotations {
    /// The texts attached to allocation `i` (empty when none).
    pub fn of(&self, i: u32) -> &[StrId] {
        self.per_alloc.get(&i).map_or(&[], |v| v.as_slice())
    }

    /// True when allocation `i` carries a text containing `needle` (case-insensitive).
    pub fn mentions(&self, snap: &Snapshot, i: u32, needle: &str) -> bool {
        let needle = needle.to_ascii_lowercase();
        self.of(i)
            .iter()
            .any(|t| snap.strings.get(*t).to_ascii_lowercase().contains(&needle))
    }
}

/// Attaches each `annotate` event of `trace` to the allocation of `r` live at its address.
pub fn attach(r: &DeviceReplay, trace: &[TraceEvent], snap: &Snapshot) -> Annotations {
    let mut out = Annotations::default();
    if !trace.iter().any(|e| e.action == Action::Annotate) {
        return out;
    }
    let mut by_addr: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
    for (i, a) in r.allocations.iter().enumerate() {
        by_addr.entry(a.addr).or_default().push(i as u32);
    }
    for (at, e) in trace.iter().enumerate() {
        if e.action != Action::Annotate {
            continue;
        }
        let live = |a: &Allocation| a.live_at(at as i64);
        let hit = by_addr
            .get(&e.addr)
            .and_then(|v| v.iter().find(|&&i| live(&r.allocations[i as usize])));
        match hit {
            Some(&i) => out
                .per_alloc
                .entry(i)
                .or_default()
                .push(snap.event_tags(e).user_metadata),
            None => out.unattached += 1,
        }
    }
    out
}

/// The `user_metadata` and `internal_metadata` of allocation `a`'s `alloc` entry
/// ([`StrId::EMPTY`] when absent or older than the trace).
pub fn metadata(snap: &Snapshot, trace: &[TraceEvent], a: &Allocation) -> (StrId, StrId) {
    if a.start < 0 || a.origin != super::Origin::Trace {
        return (StrId::EMPTY, StrId::EMPTY);
    }
    match trace.get(a.start as usize) {
        Some(e) => {
            let t = snap.event_tags(e);
            (t.user_metadata, t.internal_metadata)
        }
        None => (StrId::EMPTY, StrId::EMPTY),
    }
}
