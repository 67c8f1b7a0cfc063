//! Gradients older than the trace, told apart from parameters by their sizes.
//!
//! When the trace begins after a backward pass (history started late, or the ring buffer
//! wrapped), the gradients that pass left (`zero_grad(set_to_none=False)`, gradient
//! accumulation) are live before the first event and never freed. Made on the autograd
//! engine's thread, they carry no Python frames (with `stacks="python"`) and, when history
//! started late, no frames at all: nothing but their sizes tells them from the parameters.
//! Every gradient has its parameter's size:
//!
//! - when parameters are known by their frames (module set-up), a frameless allocation of the
//!   same age takes a parameter's size as a gradient, once per parameter of that size;
//! - without such parameters, when every size among those allocations appears an even number
//!   of times — a model's parameters alone nearly always have a size of their own (the
//!   embedding, the last norm) — half of each size is taken for gradients.
//!
//! Which block of a size is which cannot be said, only how many bytes each side holds: the
//! later ones in the replay's order (address order) are taken.

use crate::replay::Allocation;
use rustc_hash::{FxHashMap, FxHashSet};

/// The allocations among `candidates` (alive before the trace, never freed, without frames)
/// taken for gradients, by `(address, start)`; `parameter_sizes` are the sizes of the
/// parameters known by their frames (see the module documentation).
pub fn gradients_by_size<'a>(
    candidates: impl Iterator<Item = &'a Allocation>,
    parameter_sizes: impl Iterator<Item = u64>,
) -> FxHashSet<(u64, i64)> {
    let mut by_size: FxHashMap<u64, Vec<&Allocation>> = FxHashMap::default();
    let mut n = 0;
    for a in candidates {
        by_size.entry(a.size).or_default().push(a);
        n += 1;
    }
    let mut params: FxHashMap<u64, usize> = FxHashMap::default();
    for s in parameter_sizes {
        *params.entry(s).or_default() += 1;
    }
    if !params.is_empty() {
        return by_size
            .iter()
            .flat_map(|(size, v)| {
                let k = params.get(size).copied().unwrap_or(0).min(v.len());
                v[v.len() - k..].iter().map(|a| (a.addr, a.start))
            })
            .collect();
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
    use crate::replay::{Origin, NEVER};

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
        let g = gradients_by_size(v.iter(), std::iter::empty());
        assert_eq!(g.len(), 2);
        assert!(g.contains(&(12, -1)) && g.contains(&(20, -1)));
        // One size alone (an embedding): no split.
        let v = [a(0, 8), a(8, 4), a(12, 8), a(20, 4), a(24, 16)];
        assert!(gradients_by_size(v.iter(), std::iter::empty()).is_empty());
        assert!(gradients_by_size([a(0, 8)].iter(), std::iter::empty()).is_empty());
    }

    #[test]
    fn known_parameters_take_one_gradient_each() {
        // Parameters of 8 and 16 bytes known by their frames; a 32-byte workspace stays.
        let v = [a(0, 8), a(8, 16), a(24, 32)];
        let g = gradients_by_size(v.iter(), [8, 16, 16].into_iter());
        assert_eq!(g.len(), 2);
        assert!(!g.contains(&(24, -1)));
    }
}
