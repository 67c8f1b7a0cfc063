//! Evidence → the rule that decides the verdict: the numbers derived once ([`Facts`]) and the
//! checks of the module documentation, in order ([`Facts::rule`]).

use super::{Evidence, CONTEXT_ALLOWANCE, GIB, MIB};

/// Which check of the module documentation decided the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rule {
    /// Check 1: the request alone exceeds the capacity.
    TooBig,
    /// Check 2: reserved-but-unallocated covers the request and is material.
    Fragmented,
    /// Check 3: reserved + the request exceed a known per-process limit.
    LimitBound,
    /// Check 3: the device had the request free, so a limit the snapshot implies refused it.
    LimitImplied,
    /// Check 4: memory outside this process's PyTorch would fit the request if released.
    Outside,
    /// Check 5: the gap plus device free covers the request, well below the capacity.
    FragmentedWithFree,
    /// Check 6: the device reported enough free memory.
    FreeEnough,
    /// Check 7: the live set does not fit the capacity.
    LiveSet,
    /// None of the checks had its numbers.
    Undecided,
}

/// The numbers every rule and sentence needs, derived once.
pub(super) struct Facts<'a> {
    pub(super) e: &'a Evidence,
    pub(super) req: Option<u64>,
    pub(super) free: Option<u64>,
    pub(super) cap: Option<u64>,
    /// The capacity was inferred from reserved + free (no capacity was given).
    pub(super) inferred: Option<&'a crate::vocab::gpus::InferredCapacity>,
    pub(super) alloc: Option<u64>,
    pub(super) unalloc: Option<u64>,
    pub(super) reserved: Option<u64>,
    pub(super) limit: Option<u64>,
    /// Bounds of a limit implied by a snapshot, when no limit is known.
    pub(super) implied: Option<(u64, u64)>,
    pub(super) non_pt: Option<u64>,
    pub(super) others: u64,
    pub(super) in_process_non_pt: Option<u64>,
    pub(super) shortfall: Option<u64>,
}

impl<'a> Facts<'a> {
    /// Derives the shared numbers from `e`: reserved, outside PyTorch, the effective limit and
    /// the shortfall against free memory or that limit.
    pub(super) fn new(e: &'a Evidence) -> Self {
        let reserved = match (e.allocated_bytes, e.reserved_unallocated_bytes) {
            (Some(a), Some(u)) => Some(a.saturating_add(u)),
            _ => None,
        };
        let inferred = e
            .inferred_capacity
            .as_ref()
            .filter(|_| e.capacity_bytes.is_none());
        let cap = e.capacity_bytes.or(inferred.map(|i| i.capacity_bytes));
        let non_pt = match (cap, e.device_free_bytes, reserved) {
            (Some(c), Some(f), Some(r)) => Some(c.saturating_sub(f).saturating_sub(r)),
            _ => None,
        };
        // A limit at or above the capacity limits nothing.
        let limit = e.allowed_bytes.filter(|&l| cap.map_or(true, |c| l < c));
        let implied = e.implied_limit_bytes.filter(|_| limit.is_none());
        let device_short = e
            .requested_bytes
            .zip(e.device_free_bytes)
            .map(|(r, f)| r.saturating_sub(f));
        // Under a limit the allocator checks reserved + request against it, not device free.
        let limit_short = limit
            .or(implied.map(|(lo, _)| lo))
            .zip(reserved.zip(e.requested_bytes))
            .map(|(l, (res, r))| res.saturating_add(r).saturating_sub(l));
        let shortfall = match (device_short, limit_short) {
            (Some(d), Some(l)) => Some(d.max(l)),
            (d, l) => d.or(l),
        };
        Facts {
            e,
            req: e.requested_bytes,
            free: e.device_free_bytes,
            cap,
            inferred,
            alloc: e.allocated_bytes,
            unalloc: e.reserved_unallocated_bytes,
            reserved,
            limit,
            implied,
            non_pt,
            others: e.other_processes.iter().map(|&(_, b)| b).sum(),
            in_process_non_pt: e
                .process_bytes
                .zip(reserved)
                .map(|(p, r)| p.saturating_sub(r)),
            shortfall,
        }
    }

    /// Reserved-but-unallocated worth acting on: 2% of the capacity, between 128 MiB and 1 GiB.
    pub(super) fn material_gap(&self) -> u64 {
        self.cap
            .map_or(256 * MIB, |c| (c / 50).clamp(128 * MIB, GIB))
    }

    /// Memory outside PyTorch worth blaming: 10% of the capacity, at least 2 GiB.
    pub(super) fn outside_threshold(&self) -> u64 {
        self.cap.map_or(2 * GIB, |c| (c / 10).max(2 * GIB))
    }

    /// Memory held outside this process's PyTorch: the device figure, or the listed processes.
    /// Listed processes count only once this process is told apart from them (its own entry,
    /// or PyTorch's reserve to compare against): a lone "Process N" may be this process.
    pub(super) fn outside(&self) -> Option<u64> {
        let others_known = self.e.process_bytes.is_some() || self.reserved.is_some();
        let others = if others_known { self.others } else { 0 };
        match self.non_pt {
            Some(n) => Some(n.max(others)),
            None if others > 0 => Some(others),
            None => None,
        }
    }

    /// The first check, in the documented order, that these numbers pass.
    pub(super) fn rule(&self) -> Rule {
        let Facts {
            req,
            free,
            cap,
            unalloc,
            reserved,
            limit,
            ..
        } = *self;
        if let (Some(r), Some(c)) = (req, cap) {
            if r > c {
                return Rule::TooBig;
            }
        }
        if let (Some(r), Some(u)) = (req, unalloc) {
            if u >= r && u >= self.material_gap() {
                return Rule::Fragmented;
            }
        }
        if let (Some(r), Some(l), Some(res)) = (req, limit, reserved) {
            if res.saturating_add(r) > l {
                return Rule::LimitBound;
            }
        }
        if let (Some(r), Some(f), Some(_)) = (req, free, self.implied) {
            if f >= r {
                return Rule::LimitImplied;
            }
        }
        if let (Some(r), Some(out)) = (req, self.outside()) {
            let f = free.unwrap_or(0);
            if out >= self.outside_threshold()
                && f.saturating_add(out.saturating_sub(CONTEXT_ALLOWANCE)) >= r
            {
                return Rule::Outside;
            }
        }
        if let (Some(r), Some(u), Some(f)) = (req, unalloc, free) {
            // Only when the live set is well below the capacity: near it, the shortage is real.
            let well_below = match (self.alloc, cap) {
                (Some(a), Some(c)) => a <= c / 100 * 85,
                _ => true,
            };
            if u.saturating_add(f) >= r && u >= self.material_gap() && u >= r / 2 && well_below {
                return Rule::FragmentedWithFree;
            }
        }
        if let (Some(r), Some(f)) = (req, free) {
            if f >= r {
                return Rule::FreeEnough;
            }
        }
        if cap.is_some() && self.alloc.is_some() && req.is_some() {
            return Rule::LiveSet;
        }
        Rule::Undecided
    }
}
