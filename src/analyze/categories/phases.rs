//! The phases of a trace the category rules need: backward passes, optimizer calls and
//! forward passes, each a *burst* of allocations.
//!
//! A burst begins at an allocation of its kind and goes on while allocations are of that kind
//! (frees never end one); the first allocation of another kind ends it. That allocation's
//! index is the burst's `end`: what is still live there outlived the phase (a gradient past
//! its backward pass, an optimizer's state past its `step`, a forward pass's outputs).
//! Backward passes also take allocations without frames: with `stacks="python"` the engine's
//! thread records none, and the main thread waits in `backward()` meanwhile.

use crate::model::{Action, TraceEvent};

/// One burst: the events `first..end` (`end` exclusive: the allocation that ended it, or the
/// trace's length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst {
    /// Its first allocation.
    pub first: i64,
    /// The allocation that ended it (exclusive), or the trace's length.
    pub end: i64,
}

/// Bursts of a trace, in order.
#[derive(Clone, Debug, Default)]
pub struct Bursts(Vec<Burst>);

impl Bursts {
    /// The bursts of `trace`: `starts` says whether an allocation begins (and continues) one,
    /// `continues` whether one that cannot begin it continues it.
    pub fn find(
        trace: &[TraceEvent],
        starts: impl Fn(&TraceEvent) -> bool,
        continues: impl Fn(&TraceEvent) -> bool,
    ) -> Bursts {
        let mut out = Vec::new();
        let mut open: Option<i64> = None;
        for (i, e) in trace.iter().enumerate() {
            if e.action != Action::Alloc {
                continue;
            }
            let i = i as i64;
            match open {
                None if starts(e) => open = Some(i),
                Some(first) if !starts(e) && !continues(e) => {
                    out.push(Burst { first, end: i });
                    open = None;
                }
                _ => {}
            }
        }
        if let Some(first) = open {
            out.push(Burst {
                first,
                end: trace.len() as i64,
            });
        }
        Bursts(out)
    }

    /// The burst holding event `i`, if any.
    pub fn at(&self, i: i64) -> Option<Burst> {
        let k = self.0.partition_point(|b| b.first <= i);
        k.checked_sub(1).map(|k| self.0[k]).filter(|b| i < b.end)
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The bursts.
    pub fn all(&self) -> &[Burst] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{StackId, StreamId, TagsId, NO_TIME};

    fn ev(action: Action, stack: u32) -> TraceEvent {
        TraceEvent {
            addr: 0,
            size: 0,
            stream: StreamId(0),
            time_us: NO_TIME,
            stack: StackId(stack),
            tags: TagsId::NONE,
            action,
        }
    }

    #[test]
    fn bursts_begin_continue_and_end() {
        use Action::*;
        // stacks: 1 = kind, 2 = neutral (continues), 3 = other
        let t = vec![
            ev(Alloc, 3),
            ev(Alloc, 1),
            ev(FreeCompleted, 3),
            ev(Alloc, 2),
            ev(Alloc, 1),
            ev(Alloc, 3),
            ev(Alloc, 2),
            ev(Alloc, 1),
        ];
        let b = Bursts::find(&t, |e| e.stack.0 == 1, |e| e.stack.0 == 2);
        assert_eq!(
            b.all(),
            &[Burst { first: 1, end: 5 }, Burst { first: 7, end: 8 }]
        );
        assert_eq!(b.at(4), Some(Burst { first: 1, end: 5 }));
        assert_eq!(b.at(5), None);
        assert_eq!(b.at(0), None);
        assert_eq!(b.at(7), Some(Burst { first: 7, end: 8 }));
    }
}
