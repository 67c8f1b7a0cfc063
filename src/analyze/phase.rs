//! The phase of a training step a moment falls in (`shared/docs/reading.md` §1), derived in
//! one place for every report that names one: `fit`, `oom`, `top`, `diff`, `leaks` and the
//! page.
//!
//! A phase is read from the bursts of allocations the category rules find
//! ([`crate::analyze::categories::rules::Ctx::phase_at`]): a backward pass (the autograd
//! engine's allocations), an optimizer step (allocations under `torch/optim`), a forward pass
//! (under a module's `forward`). A moment outside every burst of a trace that has some is
//! `between` phases (a data copy, `zero_grad`, set-up code), except the loss: a moment after a
//! forward burst and before the backward that follows it is the forward's end. A trace with
//! frames but no burst at all places every moment `between` (set-up, or a model without
//! `nn.Module`); a trace without frames, or no trace, cannot say, and the answer is `unknown`
//! with the reason.

use crate::analyze::categories::rules::Ctx;
use crate::model::Snapshot;
use crate::replay::steps::{self, DeviceSteps};
use crate::replay::DeviceReplay;
use serde::Serialize;

/// Where in a training step a moment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Inside a forward pass (allocations under a module's `forward`).
    Forward,
    /// Inside a backward pass (the autograd engine's allocations).
    Backward,
    /// Inside an optimizer step (allocations under `torch/optim`).
    Optimizer,
    /// Outside every phase of a trace that has phases (loss, data copies, `zero_grad`).
    Between,
    /// The trace shows no phase at all (no frames, no trace): nothing can be said.
    Unknown,
}

impl Phase {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer",
            Phase::Between => "between",
            Phase::Unknown => "unknown",
        }
    }

    /// The phase in words, as a place: "in the forward pass".
    pub fn place(self) -> &'static str {
        match self {
            Phase::Forward => "in the forward pass",
            Phase::Backward => "in the backward pass",
            Phase::Optimizer => "in the optimizer step",
            Phase::Between => "between phases",
            Phase::Unknown => "in a phase the trace cannot tell",
        }
    }

    /// The phase as a noun, for a sentence that names two ("the peak moved from the
    /// optimizer step to the forward pass").
    pub fn noun(self) -> &'static str {
        match self {
            Phase::Forward => "the forward pass",
            Phase::Backward => "the backward pass",
            Phase::Optimizer => "the optimizer step",
            Phase::Between => "a moment between phases",
            Phase::Unknown => "a moment the trace cannot place",
        }
    }

    /// True for the phases of a step proper (forward, backward, optimizer), which
    /// [`peaks`] measures.
    pub fn is_step_phase(self) -> bool {
        matches!(self, Phase::Forward | Phase::Backward | Phase::Optimizer)
    }
}

/// The phase of one moment, with the step it falls in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MomentPhase {
    /// The phase.
    pub phase: Phase,
    /// The 1-based step the moment falls in, when the trace has steps.
    pub step: Option<usize>,
    /// The phase and step in words ("in the optimizer step of step 3"); for `unknown`, why.
    pub words: String,
}

/// The phase of event `at` from a context already built for the device (`fit` and the
/// categories hold one).
pub fn with_ctx(ctx: &Ctx, steps: &DeviceSteps, at: i64) -> MomentPhase {
    let step = steps
        .steps
        .iter()
        .find(|s| s.first_event <= at && at <= s.last_event)
        .map(|s| s.index);
    let phase = phase_at(ctx, at);
    let mut words = match phase {
        Phase::Forward if at >= 0 && ctx.phase_at(at) == Some("backward") => {
            "at the end of the forward pass (its backward has begun and freed nothing yet)".into()
        }
        Phase::Forward if at >= 0 && ctx.phase_at(at).is_none() => {
            "at the end of the forward pass (the loss: after the model's forward, before its backward)".into()
        }
        Phase::Between if !ctx.has_phases() => "between phases: no allocation of the trace is made under a module's forward, a backward or an optimizer step (set-up code, or a model without nn.Module)".into(),
        Phase::Unknown if at < 0 => {
            "cannot tell the phase: the moment is before the trace (no allocation history)".into()
        }
        Phase::Unknown => "cannot tell the phase: the trace shows no forward, backward or optimizer allocations (record stacks with `_record_memory_history(stacks=\"python\")`)".into(),
        p => p.place().to_string(),
    };
    if let (Some(n), false) = (step, phase == Phase::Unknown) {
        words.push_str(&format!(" of step {n}"));
    }
    MomentPhase { phase, step, words }
}

/// The phase of event `at` alone: the one rule every answer here is read from.
fn phase_at(ctx: &Ctx, at: i64) -> Phase {
    if at < 0 {
        return Phase::Unknown;
    }
    match ctx.phase_at(at) {
        Some("forward") => Phase::Forward,
        // Until the backward frees anything, the forward's activations are all alive: the
        // moment is the end of the forward pass.
        Some("backward") if ctx.backward_not_yet_freeing(at) => Phase::Forward,
        Some("backward") => Phase::Backward,
        Some("optimizer") => Phase::Optimizer,
        // The loss, computed after the model's forward and before its backward, is the
        // forward's last operation: every activation is still alive.
        None if ctx.after_forward_before_backward(at) => Phase::Forward,
        _ if ctx.has_phases() || ctx.has_framed_allocations() => Phase::Between,
        _ => Phase::Unknown,
    }
}

/// The phase of event `at` on a replayed device, building the context it needs.
pub fn of(snap: &Snapshot, r: &DeviceReplay, at: i64) -> MomentPhase {
    reading(snap, r, |ctx, st| with_ctx(ctx, st, at)).unwrap_or_else(with_ctx_unknown)
}

/// Runs `f` with the context and steps of a replayed device (built once, for several
/// questions: the phase of a few moments, the peak of each phase); `None` when the snapshot
/// lacks the device.
pub fn reading<T>(
    snap: &Snapshot,
    r: &DeviceReplay,
    f: impl FnOnce(&Ctx, &DeviceSteps) -> T,
) -> Option<T> {
    let dev = snap.device(r.device)?;
    let trace = snap.device_trace(dev);
    let st = steps::find(snap, r);
    let ctx = Ctx::new(snap, trace, &st, &[], &r.allocations);
    Some(f(&ctx, &st))
}

/// The highest live requested bytes inside one phase of a device's trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PhasePeak {
    /// The phase (forward, backward or optimizer).
    pub phase: Phase,
    /// The first event inside the phase where live bytes reach that height.
    pub event: i64,
    /// Live requested bytes right after that event.
    pub bytes: u64,
}

/// The peak of each step phase of the replayed device (forward, backward, optimizer, in that
/// order; a phase the trace never enters is left out): over every event whose phase
/// ([`with_ctx`]'s rule) is that phase, the highest live requested bytes, at the first event
/// that reaches them.
pub fn peaks(ctx: &Ctx, r: &DeviceReplay) -> Vec<PhasePeak> {
    const ORDER: [Phase; 3] = [Phase::Forward, Phase::Backward, Phase::Optimizer];
    let mut best: [Option<PhasePeak>; 3] = [None; 3];
    for i in 0..r.events as i64 {
        let phase = phase_at(ctx, i);
        let Some(k) = ORDER.iter().position(|p| *p == phase) else {
            continue;
        };
        let bytes = r.live_at(i);
        if best[k].map_or(true, |b| bytes > b.bytes) {
            best[k] = Some(PhasePeak {
                phase,
                event: i,
                bytes,
            });
        }
    }
    best.into_iter().flatten().collect()
}

fn with_ctx_unknown() -> MomentPhase {
    MomentPhase {
        phase: Phase::Unknown,
        step: None,
        words: "cannot tell the phase: the device has no trace".into(),
    }
}
