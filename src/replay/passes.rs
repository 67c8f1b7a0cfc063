//! Backward passes, and the rule that tells a step from a layer (`shared/docs/reading.md` §3).
//!
//! **A repeat inside one forward or backward pass is a layer, not a step.** A model of many
//! identical blocks hits the same site once per block: under one module's `forward` in the
//! forward pass, and once per block's backward node (`MmBackward0` ...) under one `backward()`
//! call. Such a repeat says nothing about the training loop, and what it keeps (activations
//! saved for backward, gradients made by the backward) is not growth between steps. The rule
//! is applied where steps are found ([`super::steps`], [`super::loops`]):
//!
//! - an allocation made *in a backward pass* ([`in_backward`]: the autograd engine's thread, a
//!   custom function's backward, the Python frames of a `backward()` / `autograd.grad` call) or
//!   under a module's forward never marks a step;
//! - a candidate whose repeats all fall inside one backward pass ([`backward_passes`],
//!   [`within_one`]), or are all made in backward passes, is a layer's and is rejected
//!   ([`layer_repeats`]).
//!
//! A backward pass is a [`Burst`]: it begins at an allocation made in a backward pass and goes
//! on while allocations are of that kind or carry no frames (with `stacks="python"` the engine's
//! thread records none, and the main thread waits in `backward()` meanwhile); the first
//! allocation of another kind ends it.

use crate::model::kinds;
use crate::model::{cpp_names, Action, PerStack, Snapshot, StackId, TraceEvent};

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
    /// `continues` whether one that cannot begin it continues it. Frees never end one.
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

    /// The last burst that ended at or before event `i`.
    pub fn last_before(&self, i: i64) -> Option<Burst> {
        let k = self.0.partition_point(|b| b.end <= i);
        k.checked_sub(1).map(|k| self.0[k])
    }

    /// The first burst that begins after event `i`.
    pub fn first_after(&self, i: i64) -> Option<Burst> {
        let k = self.0.partition_point(|b| b.first <= i);
        self.0.get(k).copied()
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

/// The autograd engine's C++ frames: a node's `apply`, the engine's loop and calls.
pub fn is_engine_frame(name: &str) -> bool {
    cpp_names::autograd_node(name).is_some()
        || name.starts_with("torch::autograd::Engine::")
        || name.starts_with("torch::autograd::python::PythonEngine::")
}

/// The Python frames of a backward call: `torch.autograd.backward` /
/// `_engine_run_backward` / `torch.autograd.grad`, `Tensor.backward`. `file` uses `/`.
pub fn is_backward_call(file: &str, name: &str) -> bool {
    (file.contains("torch/autograd/")
        && (name == "backward" || name == "_engine_run_backward" || name == "grad"))
        || (file.ends_with("torch/_tensor.py") && name == "backward")
}

/// True for `torch/autograd/function.py`'s `apply` (`BackwardCFunction.apply`) as the
/// outermost Python frame of a stack: the engine's thread running a custom function's
/// backward (the forward's `Function.apply` is always called from other Python code).
pub fn runs_custom_backward(snap: &Snapshot, frames: &[crate::model::FrameId]) -> bool {
    let outermost = frames.iter().rev().find(|&&f| {
        let fr = snap.frames.get(f);
        !kinds::is_native_frame(snap.strings.get(fr.filename), snap.strings.get(fr.name))
    });
    outermost.is_some_and(|&f| {
        let fr = snap.frames.get(f);
        let file = snap.strings.get(fr.filename).replace('\\', "/");
        file.ends_with("torch/autograd/function.py") && snap.strings.get(fr.name) == "apply"
    })
}

/// True when `stack` was made in a backward pass: it has forward frames (the forward code a
/// backward-pass entry differentiates), a C++ frame of the autograd engine
/// ([`is_engine_frame`]), a backward call's Python frame ([`is_backward_call`]), or runs a
/// custom function's backward on the engine's thread.
pub fn in_backward(snap: &Snapshot, stack: StackId) -> bool {
    let (frames, forward) = snap.split_forward(stack);
    !forward.is_empty()
        || frames.iter().any(|&f| {
            let fr = snap.frames.get(f);
            let (raw, name) = (snap.strings.get(fr.filename), snap.strings.get(fr.name));
            if kinds::is_native_frame(raw, name) {
                is_engine_frame(name)
            } else {
                is_backward_call(&raw.replace('\\', "/"), name)
            }
        })
        || runs_custom_backward(snap, frames)
}

/// True when `stack` was made inside a forward pass (under an `nn.Module` call,
/// [`under_module_forward`]) or a backward pass ([`in_backward`]): a repeat of
/// it is a layer's, never a step's.
pub fn inside_a_pass(snap: &Snapshot, stack: StackId) -> bool {
    in_backward(snap, stack) || under_module_forward(snap, stack)
}

/// The backward passes of a device's trace (see the module documentation).
pub fn backward_passes(snap: &Snapshot, trace: &[TraceEvent]) -> Bursts {
    let seen = PerStack::new(&snap.stacks);
    let backward = |s: StackId| *seen.get_or_init(s, || in_backward(snap, s));
    Bursts::find(
        trace,
        |e| backward(e.stack),
        |e| snap.split_forward(e.stack).0.is_empty(),
    )
}

/// True when every event of `starts` (at least one) falls inside the same one of `passes`:
/// repeats of a layer, not steps.
pub fn within_one(starts: &[i64], passes: &Bursts) -> bool {
    let Some(&first) = starts.first() else {
        return false;
    };
    passes
        .at(first)
        .is_some_and(|b| starts.iter().all(|&s| b.first <= s && s < b.end))
}

/// True when repeats starting at the events `starts` are a layer's, not steps: they all fall
/// inside one backward pass ([`within_one`]), or every one of them was made in a backward pass
/// ([`in_backward`]; the same node of every layer, in each of several passes).
pub fn layer_repeats(
    snap: &Snapshot,
    trace: &[TraceEvent],
    starts: &[i64],
    passes: &Bursts,
) -> bool {
    within_one(starts, passes)
        || (!starts.is_empty()
            && starts.iter().all(|&i| {
                trace
                    .get(i as usize)
                    .is_some_and(|e| in_backward(snap, e.stack))
            }))
}

/// True when a stack runs inside an `nn.Module` call ([`super::loops::is_module_call`]). A `forward` of
/// PyTorch's own machinery outside `torch/nn` (AOTAutograd's compiled function,
/// `torch/_functorch/aot_autograd.py:forward`, which also runs a compiled helper such as
/// flex attention's `create_block_mask` before any model runs) is no module's.
pub fn under_module_forward(snap: &Snapshot, stack: StackId) -> bool {
    // A backward-pass entry's forward frames name the forward it differentiates, not a
    // forward it runs under.
    snap.split_forward(stack).0.iter().any(|&f| {
        let fr = snap.frames.get(f);
        let name = snap.strings.get(fr.name);
        super::loops::is_module_call(name)
            && (name != "forward" || !is_torch_machinery(snap.strings.get(fr.filename)))
    })
}

/// A file of PyTorch itself outside `torch/nn` (whose modules' `forward`s are module calls).
fn is_torch_machinery(file: &str) -> bool {
    crate::model::kinds::is_torch(file) && !file.replace('\\', "/").contains("torch/nn/")
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
        // repeats inside one burst are a layer's; across two, or outside any, they are not
        assert!(within_one(&[1, 3, 4], &b));
        assert!(!within_one(&[1, 7], &b));
        assert!(!within_one(&[0, 1], &b));
        assert!(!within_one(&[], &b));
    }

    #[test]
    fn backward_frames_are_told() {
        assert!(is_engine_frame(
            "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)"
        ));
        assert!(is_engine_frame(
            "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"
        ));
        assert!(!is_engine_frame("at::native::mm(at::Tensor const&)"));
        assert!(is_backward_call(
            "/e/site-packages/torch/autograd/graph.py",
            "_engine_run_backward"
        ));
        assert!(is_backward_call(
            "/e/site-packages/torch/_tensor.py",
            "backward"
        ));
        assert!(!is_backward_call("/u/model.py", "backward"));
    }
}
