//! Parameters and gradients older than the trace, told apart by their sizes.
//!
//! When history recording starts after the model was built and trained a step, the
//! parameters and the gradients the last backward left (`zero_grad(set_to_none=False)`, or
//! gradient accumulation) are both live before the first event, never freed, and carry no
//! frames: nothing but their sizes tells them apart. Every gradient has its parameter's size,
//! so each size appears twice as often as among the parameters alone. When the device's trace
//! runs a backward pass and every size among those allocations appears an even number of
//! times (a model's parameters alone nearly always have a size of their own: the embedding,
//! the last norm), half of each size is taken for gradients — the later half in the replay's
//! order (address order), which says nothing about which block is which, only how many bytes
//! each side holds.

use crate::replay::{Allocation, Origin, NEVER};
use rustc_hash::{FxHashMap, FxHashSet};

/// The allocations taken for gradients, by `(address, start)`: among `candidates` (alive
/// before the trace, never freed, without frames), half of each size when every size appears
/// an even number of times; none otherwise, or with fewer than two candidates.
pub fn gradients_by_size<'a>(
    candidates: impl Iterator<Item = &'a Allocation>,
) -> FxHashSet<(u64, i64)> {
    let mut by_size: FxHashMap<u64, Vec<&Allocation>> = FxHashMap::default();
    let mut n = 0;
    for a in candidates {
        debug_assert!(a.start < 0 && a.end == NEVER && a.origin != Origin::Trace);
        by_size.entry(a.size).or_default().push(a);
        n += 1;
    }
    if n < 2 || by_size.values().any(|v| v.len() % 2 == 1) {
        return FxHashSet::default();
    }
    by_size
        .values()
        .flat_map(|v| v[v.len() / 2..].iter().map(|a| (a.addr, a.start)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StackId;

    fn a(addr: u64, size: u64) -> Allocation {
        Allocation {
            addr,
            size,
            stack: StackId::EMPTY,
            start: -1,
            free_requested: None,
            end: NEVER,
            origin: Origin::FinalBlock,
        }
    }

    #[test]
    fn half_of_each_size_when_all_pair_up() {
        let v = [a(0, 8), a(8, 4), a(12, 8), a(20, 4)];
        let g = gradients_by_size(v.iter());
        assert_eq!(g.len(), 2);
        assert!(g.contains(&(12, -1)) && g.contains(&(20, -1)));
        // One size alone (an embedding): no split.
        let v = [a(0, 8), a(8, 4), a(12, 8), a(20, 4), a(24, 16)];
        assert!(gradients_by_size(v.iter()).is_empty());
        assert!(gradients_by_size([a(0, 8)].iter()).is_empty());
    }
}
