//! How closely the model, replayed as recorded, reproduces the trace's own segment events:
//! for each request, the same cudaMallocs, frees, maps and unmaps of the same sizes.
//! Addresses are not compared (the driver chooses them); the share of allocations served at
//! their recorded address is reported beside.

use super::device::SegEvent;
use super::recorded::RecordedSeg;
use crate::model::Action;

/// Agreement of the model's segment events with the recorded ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Agreement {
    /// Segment events in the trace.
    pub recorded: u64,
    /// Segment events of the model.
    pub modelled: u64,
    /// Events with the same request, action and size on both sides (as multisets per request).
    pub matched: u64,
    /// Trace index of the first request whose segment events differ (`null`: none).
    pub first_difference: Option<u32>,
}

impl Agreement {
    /// Matched over the larger of the two counts (1 when neither side has any).
    pub fn ratio(&self) -> f64 {
        let n = self.recorded.max(self.modelled);
        if n == 0 {
            1.0
        } else {
            self.matched as f64 / n as f64
        }
    }
}

/// Compares the trace's segment events with the model's, request by request.
pub fn compare(recorded: &[RecordedSeg], model: &[SegEvent]) -> Agreement {
    let mut a: Vec<(u32, Action, u64)> = recorded
        .iter()
        .map(|s| (s.owner.unwrap_or(s.event), s.action, s.size))
        .collect();
    let mut b: Vec<(u32, Action, u64)> =
        model.iter().map(|s| (s.owner, s.action, s.size)).collect();
    a.sort_unstable();
    b.sort_unstable();
    let (mut i, mut j, mut matched) = (0usize, 0usize, 0u64);
    let mut first: Option<u32> = None;
    let mut differ = |o: u32| {
        if first.map_or(true, |f| o < f) {
            first = Some(o);
        }
    };
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => {
                matched += 1;
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x < y => {
                differ(x.0);
                i += 1;
            }
            (Some(_), Some(y)) => {
                differ(y.0);
                j += 1;
            }
            (Some(x), None) => {
                differ(x.0);
                i += 1;
            }
            (None, Some(y)) => {
                differ(y.0);
                j += 1;
            }
            (None, None) => break,
        }
    }
    Agreement {
        recorded: a.len() as u64,
        modelled: b.len() as u64,
        matched,
        first_difference: first,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_request_and_finds_the_first_difference() {
        let rec = |event, owner, action, size| RecordedSeg {
            event,
            owner: Some(owner),
            action,
            addr: 0,
            size,
        };
        let m = |owner, action, size| SegEvent {
            owner,
            action,
            addr: 1,
            size,
        };
        let recorded = [
            rec(0, 1, Action::SegmentAlloc, 20),
            rec(5, 7, Action::SegmentFree, 2),
            rec(6, 7, Action::SegmentAlloc, 4),
        ];
        let model = [
            m(1, Action::SegmentAlloc, 20),
            m(7, Action::SegmentAlloc, 4),
            m(9, Action::SegmentAlloc, 2),
        ];
        let a = compare(&recorded, &model);
        assert_eq!((a.recorded, a.modelled, a.matched), (3, 3, 2));
        assert_eq!(a.first_difference, Some(7));
        assert!((a.ratio() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(compare(&[], &[]).ratio(), 1.0);
    }
}
