//! The category rules, in the order they are tried: the first that matches an allocation
//! decides its category, and says why and how sure it is (`high` when frames say it,
//! `medium` when the phase of the trace or the lifetime does, `low` for a guess).
//!
//! 1. user rules (`--rules`);
//! 2. `workspaces`: a cuBLAS/cuDNN workspace (C++ frames);
//! 3. `kv_cache`: a key/value cache's code ([`super::facts::is_kv_cache`]);
//! 4. under `torch/optim`: `optimizer_state` when it outlives the optimizer call that made it
//!    (kept, or rebuilt out of place and freed by the next call), `temporaries` when freed
//!    within it; made before the trace and freed by the optimizer: `optimizer_state`, or
//!    `gradients` when `zero_grad` freed it;
//! 5. made in a backward pass (autograd frames, the engine's C++ frames, or no frames during
//!    one): `gradients` when still live after the pass, `autograd_temporaries` otherwise;
//! 6. `parameters` made by module set-up; `inputs` made by data loading;
//! 7. made before the trace or the first step and never freed: `gradients` when its size pairs
//!    with a parameter's in a training trace ([`super::pairing`]), `parameters` otherwise;
//! 8. under a module's forward: `activations`; in a trace without backward, what outlives its
//!    forward pass (one that returned: code outside any module allocated after it) is the
//!    forward's `outputs` (a few tensors), or activations the outputs' autograd graph keeps
//!    (many);
//! 9. by the phase of the step: `inputs` (user code before the first module forward),
//!    `activations` (forward part, kept for backward), in a trace without backward `outputs`
//!    (kept past the step);
//! 10. `temporaries` freed within two events; `unknown`.

use super::facts::Facts;
use super::phases::{Burst, Bursts};
use super::UserRule;
use crate::model::{Action, PerStack, Snapshot, StackId, TraceEvent};
use crate::replay::steps::DeviceSteps;
use crate::replay::{Allocation, Origin, NEVER};
use rustc_hash::{FxHashMap, FxHashSet};

/// A forward pass of an inference trace whose outputs are at most this many tensors; more
/// survivors are activations kept by the outputs' autograd graph.
const MAX_OUTPUTS: usize = 4;

/// What the rules know about one device.
pub struct Ctx<'a> {
    snap: &'a Snapshot,
    trace: &'a [TraceEvent],
    steps: &'a DeviceSteps,
    rules: &'a [UserRule],
    /// Per rule: how a hit is written (`user rule CATEGORY: REGEX`).
    rule_texts: Vec<String>,
    /// Per stack, on first use.
    facts: PerStack<Facts>,
    backward: Bursts,
    optimizer: Bursts,
    forward: Bursts,
    /// Per forward burst (by its first event): allocations still live at its end.
    survivors: FxHashMap<i64, usize>,
    /// Allocations older than the trace taken for gradients by their sizes.
    paired: FxHashSet<(u64, i64)>,
    /// Per step: its first allocation under a module's forward, if any.
    forward_from: Vec<Option<i64>>,
    /// Per step: where its first backward pass begins, if any.
    backward_from: Vec<Option<i64>>,
    /// Categorising a final state without a trace: no lifetime is known, so the lifetime
    /// rule (made before the trace and never freed: parameters) does not apply.
    final_state: bool,
    /// Per backward burst (by its first event): its first free, found on first use.
    first_free: std::cell::RefCell<FxHashMap<i64, i64>>,
    /// True when some allocation of the trace carries frames.
    framed: bool,
}

/// A rule's verdict: category, rule in words, confidence.
pub type Verdict<'r> = (&'r str, &'r str, &'static str);

impl<'a> Ctx<'a> {
    /// The context of one device: its trace, steps, user rules, and every allocation of its
    /// replay (for the phases' survivors and the size pairing).
    pub fn new(
        snap: &'a Snapshot,
        trace: &'a [TraceEvent],
        steps: &'a DeviceSteps,
        rules: &'a [UserRule],
        allocations: &[Allocation],
    ) -> Ctx<'a> {
        let mut ctx = Ctx {
            snap,
            trace,
            steps,
            rules,
            rule_texts: rules
                .iter()
                .map(|r| format!("user rule {}: {}", r.category, r.pattern.as_str()))
                .collect(),
            facts: PerStack::new(&snap.stacks),
            backward: Bursts::default(),
            optimizer: Bursts::default(),
            forward: Bursts::default(),
            survivors: FxHashMap::default(),
            paired: FxHashSet::default(),
            forward_from: Vec::new(),
            backward_from: Vec::new(),
            final_state: false,
            first_free: Default::default(),
            framed: false,
        };
        ctx.backward = crate::replay::passes::backward_passes(snap, trace);
        ctx.optimizer = Bursts::find(trace, |e| ctx.facts(e.stack).optim, |_| false);
        ctx.forward = Bursts::find(trace, |e| ctx.facts(e.stack).forward, |_| false);
        ctx.framed = trace
            .iter()
            .any(|e| e.action == Action::Alloc && ctx.facts(e.stack).has_frames);
        for a in allocations.iter().filter(|a| a.start >= 0) {
            if !ctx.reaches_forward_rule(ctx.facts(a.stack)) {
                continue;
            }
            if let Some(b) = ctx.returned(a) {
                *ctx.survivors.entry(b.first).or_default() += 1;
            }
        }
        if ctx.training() {
            let params = allocations
                .iter()
                .filter(|a| ctx.facts(a.stack).param_setup)
                .map(|a| a.size)
                .collect::<Vec<_>>();
            ctx.paired = super::pairing::gradients_by_size(
                allocations.iter().filter(|a| {
                    a.start < 0
                        && a.end == NEVER
                        && a.origin != Origin::Trace
                        && !ctx.facts(a.stack).has_frames
                }),
                params.into_iter(),
            );
        }
        ctx.forward_from = ctx.first_alloc(|f| f.forward);
        ctx.backward_from = steps
            .steps
            .iter()
            .map(|s| {
                ctx.backward
                    .all()
                    .iter()
                    .map(|b| b.first)
                    .find(|&f| s.first_event <= f && f <= s.last_event)
            })
            .collect();
        ctx
    }

    /// The same context for a device's final blocks without a trace to date them: frames
    /// alone decide, but for frameless blocks among framed ones, which predate the recording
    /// and are taken as parameters (see the module documentation of [`super`]).
    pub fn final_state(mut self) -> Ctx<'a> {
        self.final_state = true;
        self
    }

    fn facts(&self, stack: StackId) -> &Facts {
        self.facts
            .get_or_init(stack, || Facts::of(self.snap, stack, self.rules))
    }

    /// True when no rule before the forward one takes an allocation with these facts (a
    /// forward pass's survivors are counted among those alone: its KV cache is no output).
    fn reaches_forward_rule(&self, f: &Facts) -> bool {
        f.forward
            && f.rule.is_none()
            && !f.workspace
            && !f.kv_cache
            && !f.optim
            && !f.backward_python
            && !f.backward_thread
            && !f.param_setup
            && !f.input_copy
    }

    /// The forward pass `a` was made in, when `a` outlived it: the pass returned (an
    /// allocation outside any module followed it; a pass still open when the trace ends, as at
    /// an OOM inside a forward, has not) and `a` was still live then.
    fn returned(&self, a: &Allocation) -> Option<Burst> {
        (a.start >= 0)
            .then(|| self.forward.at(a.start))
            .flatten()
            .filter(|b| b.end < self.trace.len() as i64 && a.end >= b.end)
    }

    /// True when the trace runs a backward pass.
    fn training(&self) -> bool {
        !self.backward.is_empty()
    }

    /// True when the trace runs a backward pass (a training trace): what `fit` asks before
    /// it offers accumulation or checkpointing.
    pub fn has_backward(&self) -> bool {
        self.training()
    }

    /// True when event `i` is inside a backward pass that has freed nothing yet: every
    /// activation of the forward is still alive, so the moment holds what the end of the
    /// forward pass held (reading.md §1: the peak of a large batch sits there).
    pub fn backward_not_yet_freeing(&self, i: i64) -> bool {
        let Some(b) = self.backward.at(i) else {
            return false;
        };
        // Each burst's first free is found once (phase peaks ask for every event).
        let first_free = *self
            .first_free
            .borrow_mut()
            .entry(b.first)
            .or_insert_with(|| {
                (b.first..b.end)
                    .find(|&k| {
                        matches!(
                            self.trace[k as usize].action,
                            Action::FreeRequested | Action::FreeCompleted | Action::Free
                        )
                    })
                    .unwrap_or(b.end)
            });
        i < first_free
    }

    /// True when event `i`, outside every burst, comes after a forward pass and before the
    /// backward that follows it with no other phase between: the loss (autograd records it
    /// as the forward's last operation), the end of the forward pass (reading.md §1).
    pub fn after_forward_before_backward(&self, i: i64) -> bool {
        if self.phase_at(i).is_some() {
            return false;
        }
        let ended = |b: &Bursts| b.last_before(i).map(|b| b.end);
        let last = [
            ended(&self.forward),
            ended(&self.backward),
            ended(&self.optimizer),
        ];
        let begins = |b: &Bursts| b.first_after(i).map(|b| b.first);
        let next = [
            begins(&self.forward),
            begins(&self.backward),
            begins(&self.optimizer),
        ];
        let latest = last.iter().flatten().max();
        let soonest = next.iter().flatten().min();
        matches!((last[0], latest), (Some(f), Some(&l)) if f == l)
            && matches!((next[1], soonest), (Some(b), Some(&s)) if b == s)
    }

    /// True when the trace holds an allocation.
    pub fn has_allocations(&self) -> bool {
        self.trace.iter().any(|e| e.action == Action::Alloc)
    }

    /// True when some allocation of the trace carries frames: a moment outside every burst
    /// can then be placed between phases, even when the trace shows none (set-up code).
    pub fn has_framed_allocations(&self) -> bool {
        self.framed
    }

    /// True when the trace shows any phase (a forward, backward or optimizer burst).
    pub fn has_phases(&self) -> bool {
        !(self.backward.is_empty() && self.optimizer.is_empty() && self.forward.is_empty())
    }

    /// The phase of the step event `i` falls in: `backward` (a burst of the autograd
    /// engine's allocations), `optimizer` (under `torch/optim`), `forward` (under a module's
    /// forward), or `None` between them.
    pub fn phase_at(&self, i: i64) -> Option<&'static str> {
        if self.backward.at(i).is_some() {
            Some("backward")
        } else if self.optimizer.at(i).is_some() {
            Some("optimizer")
        } else if self.forward.at(i).is_some() {
            Some("forward")
        } else {
            None
        }
    }

    /// Per step: its first allocation whose stack has `fact`, if any.
    fn first_alloc(&self, fact: fn(&Facts) -> bool) -> Vec<Option<i64>> {
        let steps = self.steps.steps.iter();
        steps
            .map(|s| {
                (s.first_event..=s.last_event).find(|&i| {
                    let e = &self.trace[i as usize];
                    e.action == Action::Alloc && fact(self.facts(e.stack))
                })
            })
            .collect()
    }

    fn step_of(&self, event: i64) -> Option<usize> {
        self.steps
            .steps
            .iter()
            .position(|s| s.first_event <= event && event <= s.last_event)
    }

    /// The category of `a`, the rule that put it there and the rule's confidence.
    pub fn classify(&self, a: &Allocation) -> Verdict<'_> {
        let facts = self.facts(a.stack);
        if let Some(k) = facts.rule {
            return (&self.rules[k].category, &self.rule_texts[k], "high");
        }
        if facts.workspace {
            return (
                "workspaces",
                "a cuBLAS/cuDNN workspace (C++ frames: setWorkspaceForHandle): kept by the library for its handle and stream",
                "high",
            );
        }
        if facts.kv_cache {
            return (
                "kv_cache",
                "frames of a key/value cache (cache_utils, a kv_cache file or function, past_key_values)",
                "high",
            );
        }
        if facts.optim {
            return self.optimizer_rule(a, facts);
        }
        if let Some(v) = self.backward_rule(a, facts) {
            return v;
        }
        if facts.param_setup {
            return (
                "parameters",
                "allocated by module setup (.to/.cuda/_apply, nn.init, load_state_dict)",
                "high",
            );
        }
        if facts.input_copy {
            return (
                "inputs",
                "allocated by data loading (torch.utils.data, pin_memory, collate)",
                "high",
            );
        }
        let step = (a.start >= 0).then(|| self.step_of(a.start)).flatten();
        let first_step = self.steps.steps.first().map(|s| s.first_event);
        // In a final state without a trace to date it, only a frameless block among framed
        // ones is known to predate the recording (weights loaded before history was on).
        let dated = !self.final_state || (!facts.has_frames && self.snap.has_frames());
        if dated && (a.start < 0 || first_step.is_some_and(|f| a.start < f)) && a.end == NEVER {
            if self.paired.contains(&(a.addr, a.start)) {
                return (
                    "gradients",
                    "alive before the trace, never freed, no frames, with a parameter's size (each weight's size twice: the parameter and its gradient)",
                    "low",
                );
            }
            return (
                "parameters",
                "allocated before the first step and never freed",
                "low",
            );
        }
        if facts.forward {
            return self.forward_rule(a);
        }
        if let Some(k) = step {
            if let Some(v) = self.step_rule(a, facts, k) {
                return v;
            }
        }
        if a.end != NEVER && a.end - a.start <= 2 {
            return (
                "temporaries",
                "freed within two events of its allocation",
                "medium",
            );
        }
        ("unknown", "no rule matched", "low")
    }

    /// Under `torch/optim`.
    fn optimizer_rule(&self, a: &Allocation, facts: &Facts) -> Verdict<'_> {
        if a.start < 0 {
            if a.origin == Origin::OrphanFree && facts.zero_grad {
                return (
                    "gradients",
                    "alive before the trace and freed by zero_grad: a gradient",
                    "high",
                );
            }
            if a.end == NEVER {
                return (
                    "optimizer_state",
                    "alive before the trace, made under torch/optim and kept",
                    "high",
                );
            }
            return (
                "optimizer_state",
                "alive before the trace and freed under torch/optim: state the optimizer replaces out of place",
                "medium",
            );
        }
        let kept = self
            .optimizer
            .at(a.start)
            .map_or(a.end == NEVER, |b| a.end >= b.end);
        if kept {
            (
                "optimizer_state",
                "allocated under torch/optim and kept past the optimizer call (kept, or replaced by the next call)",
                "high",
            )
        } else {
            (
                "temporaries",
                "allocated under torch/optim and freed within the optimizer call",
                "high",
            )
        }
    }

    /// Made in a backward pass: gradients when they outlive it.
    fn backward_rule(&self, a: &Allocation, facts: &Facts) -> Option<Verdict<'_>> {
        let burst: Option<Burst> = (a.start >= 0).then(|| self.backward.at(a.start)).flatten();
        let frameless = !facts.has_frames && burst.is_some();
        if !(facts.backward_python || facts.backward_thread || frameless) {
            return None;
        }
        let kept = a.start < 0 || burst.map_or(a.end == NEVER, |b| a.end >= b.end);
        let v = match (
            facts.backward_thread,
            facts.backward_python,
            kept,
        ) {
            (true, _, true) => (
                "gradients",
                "made by the autograd engine (C++ frames of an autograd node), kept past the backward pass",
                "high",
            ),
            (true, _, false) => (
                "autograd_temporaries",
                "made by the autograd engine (C++ frames of an autograd node), freed within the backward pass",
                "high",
            ),
            (false, true, true) => (
                "gradients",
                "frames under autograd backward, kept past the backward pass",
                "high",
            ),
            (false, true, false) => (
                "autograd_temporaries",
                "frames under autograd backward, freed within the backward pass",
                "high",
            ),
            (false, false, true) => (
                "gradients",
                "no frames, made during a backward pass (the autograd thread), kept past it",
                "medium",
            ),
            (false, false, false) => (
                "autograd_temporaries",
                "no frames, made during a backward pass (the autograd thread), freed within it",
                "medium",
            ),
        };
        Some(v)
    }

    /// Under a module's forward.
    fn forward_rule(&self, a: &Allocation) -> Verdict<'_> {
        if !self.training() {
            if let Some(b) = self.returned(a) {
                let n = self.survivors.get(&b.first).copied().unwrap_or(0);
                return if n <= MAX_OUTPUTS {
                    (
                        "outputs",
                        "made under a module's forward in a trace without backward and kept after the forward returned (what it returned)",
                        "medium",
                    )
                } else {
                    (
                        "activations",
                        "made under a module's forward in a trace without backward and kept after it returned, with many others: saved for a backward the outputs' autograd graph still allows (torch.no_grad() or torch.inference_mode() frees them)",
                        "medium",
                    )
                };
            }
        }
        ("activations", "allocated under a module's forward", "high")
    }

    /// By the phase of step `k`.
    fn step_rule(&self, a: &Allocation, facts: &Facts, k: usize) -> Option<Verdict<'_>> {
        let step_end = self.steps.steps[k].last_event;
        if !self.training() && a.end > step_end {
            return Some((
                "outputs",
                "made in a step of a trace without backward and kept past it",
                "medium",
            ));
        }
        let before_backward = self.backward_from[k].map_or(true, |b| a.start < b);
        if before_backward && a.end > a.start + 2 {
            // Before the step's first module forward, user code alone (a `.to(device)` of the
            // batch) allocates the inputs.
            let user_only = facts.has_frames && !facts.torch;
            if user_only && self.forward_from[k].is_some_and(|f| a.start < f) {
                return Some((
                    "inputs",
                    "allocated by user code before the step's first module forward",
                    "medium",
                ));
            }
            return Some(if self.training() {
                (
                    "activations",
                    "allocated in the forward part of a step and kept for backward",
                    "medium",
                )
            } else {
                (
                    "activations",
                    "allocated in a step of a trace without backward and freed within it",
                    "medium",
                )
            });
        }
        None
    }
}
