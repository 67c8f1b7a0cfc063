//! Steps of a loop that no annotation marks and no allocation repeats regularly: the lines
//! of the loop's own frame.
//!
//! Most allocations of a loop run under one chain of Python frames (`<module>` → `main` →
//! `validate`) that ends in the function holding the loop; in that frame the line advances
//! through the loop's body and jumps back to its top at each new iteration (`validate:59`,
//! `:60`, `:63` ... `:59`). The frame is found by following, from the outermost frame, the
//! frame (file, function and line) nearly every allocation (90%) passes through, down to the
//! first frame whose lines vary, or whose callee is an `nn.Module` call (a loop inside a
//! forward pass runs over layers, not steps: that frame is not followed). Each jump back to
//! the loop's top starts a step; the first step starts at the first allocation on that line.
//! At least two steps, memory freed inside each (an iteration releases its temporaries; a
//! set-up loop only allocates).

use crate::model::kinds;
use crate::model::{Action, FrameId, Snapshot, TraceEvent};
use rustc_hash::FxHashMap;

/// True for the function of an `nn.Module` call: `forward`, `_call_impl`,
/// `_wrapped_call_impl`.
pub fn is_module_call(name: &str) -> bool {
    name == "forward" || name == "_call_impl" || name == "_wrapped_call_impl"
}

/// Share of allocations a frame must hold to be followed.
const DOMINANT: f64 = 0.9;

/// The loop's frame (`file:function`) and the events where its steps start, if the trace
/// has such a loop (see the module documentation).
pub fn loop_starts(snap: &Snapshot, trace: &[TraceEvent]) -> Option<(String, Vec<i64>)> {
    // Python frames of every allocation, outermost first.
    let mut stacks: FxHashMap<crate::model::StackId, Vec<FrameId>> = FxHashMap::default();
    let mut allocs: Vec<(i64, crate::model::StackId)> = Vec::new();
    for (i, e) in trace.iter().enumerate() {
        if e.action != Action::Alloc {
            continue;
        }
        let py = stacks.entry(e.stack).or_insert_with(|| {
            snap.stacks
                .get(e.stack)
                .iter()
                .rev()
                .copied()
                .filter(|&f| {
                    let fr = snap.frames.get(f);
                    !kinds::is_native_frame(
                        snap.strings.get(fr.filename),
                        snap.strings.get(fr.name),
                    )
                })
                .collect()
        });
        if !py.is_empty() {
            allocs.push((i as i64, e.stack));
        }
    }
    let total = allocs.len();
    if total < 2 {
        return None;
    }
    let enough = |n: usize| n as f64 >= DOMINANT * total as f64;
    // The descent works on distinct stacks, each weighed by its allocations: the cost is the
    // frames of the distinct stacks, never allocations x depth (issue #36).
    let mut weight: FxHashMap<crate::model::StackId, usize> = FxHashMap::default();
    for (_, s) in &allocs {
        *weight.entry(*s).or_default() += 1;
    }
    let mut members: Vec<(crate::model::StackId, usize)> = weight.into_iter().collect();
    let mut depth = 0;
    loop {
        // The most common function at this depth.
        let mut by_fn: FxHashMap<(crate::model::StrId, crate::model::StrId), usize> =
            FxHashMap::default();
        for (s, w) in &members {
            if let Some(&f) = stacks[s].get(depth) {
                let fr = snap.frames.get(f);
                *by_fn.entry((fr.filename, fr.name)).or_default() += w;
            }
        }
        let (&(file, name), &n) = by_fn
            .iter()
            .max_by_key(|(k, &n)| (n, std::cmp::Reverse(**k)))?;
        if !enough(n) || is_module_call(snap.strings.get(name)) {
            return None;
        }
        members.retain(|(s, _)| {
            stacks[s].get(depth).is_some_and(|&f| {
                let fr = snap.frames.get(f);
                (fr.filename, fr.name) == (file, name)
            })
        });
        let line_of = |s: &crate::model::StackId| snap.frames.get(stacks[s][depth]).line;
        let mut by_line: FxHashMap<i64, usize> = FxHashMap::default();
        for (s, w) in &members {
            *by_line.entry(line_of(s)).or_default() += w;
        }
        let (&line, &n) = by_line
            .iter()
            .max_by_key(|(&l, &n)| (n, std::cmp::Reverse(l)))?;
        let callee_is_module = members.iter().any(|(s, _)| {
            line_of(s) == line
                && stacks[s]
                    .get(depth + 1)
                    .is_some_and(|&f| is_module_call(snap.strings.get(snap.frames.get(f).name)))
        });
        let deeper: usize = members
            .iter()
            .filter(|(s, _)| line_of(s) == line && stacks[s].len() > depth + 1)
            .map(|(_, w)| w)
            .sum();
        if enough(n) && enough(deeper) && !callee_is_module {
            members.retain(|(s, _)| line_of(s) == line);
            depth += 1;
            continue;
        }
        // The allocations of the stacks left, in trace order.
        let kept: rustc_hash::FxHashSet<crate::model::StackId> =
            members.iter().map(|(s, _)| *s).collect();
        let members: Vec<(i64, crate::model::StackId)> = allocs
            .into_iter()
            .filter(|(_, s)| kept.contains(s))
            .collect();
        // This frame holds the loop, if its lines jump back.
        let lines: Vec<(i64, i64)> = members.iter().map(|(i, s)| (*i, line_of(s))).collect();
        let mut targets: FxHashMap<i64, usize> = FxHashMap::default();
        for w in lines.windows(2) {
            if w[1].1 < w[0].1 {
                *targets.entry(w[1].1).or_default() += 1;
            }
        }
        let (&top, _) = targets
            .iter()
            .max_by_key(|(&l, &n)| (n, std::cmp::Reverse(l)))?;
        let mut starts: Vec<i64> = Vec::new();
        if let Some(&(i, _)) = lines.iter().find(|(_, l)| *l == top) {
            starts.push(i);
        }
        for w in lines.windows(2) {
            if w[1].1 == top && w[1].1 < w[0].1 && starts.last() != Some(&w[1].0) {
                starts.push(w[1].0);
            }
        }
        let frees_between = |a: i64, b: i64| {
            trace[a as usize..b as usize].iter().any(|e| {
                matches!(
                    e.action,
                    Action::FreeRequested | Action::FreeCompleted | Action::Free
                )
            })
        };
        let freed = starts.windows(2).all(|w| frees_between(w[0], w[1]))
            && starts
                .last()
                .is_some_and(|&l| frees_between(l, trace.len() as i64));
        if starts.len() < 2 || !freed {
            return None;
        }
        let label = format!("{}:{}", snap.strings.get(file), snap.strings.get(name));
        return Some((label, starts));
    }
}
