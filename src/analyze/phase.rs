//! The phase of a training step a moment falls in (`shared/docs/reading.md` §1), derived in
//! one place for every report that names one: `fit`, `oom`, `top`, `diff`, `leaks` and the
//! page.
//!
//! A phase is read from the bursts of allocations the category rules find
//! ([`crate::analyze::categories::rules::Ctx::phase_at`]): a backward pass (the autograd
//! engine's allocations), an optimizer step (allocations under `torch/optim`), a forward pass
//! (under a module's `forward`). A moment outside every burst of a trace that has some is
//! `between` phases (a loss, a data copy, `zero_grad`); a trace with no burst at all (no
//! frames, or no trace) cannot say, and the answer is `unknown` with the reason.

use crate::analyze::categories::rules::Ctx;
use crate::model::Snapshot;
use crate::replay::steps::{self, DeviceSteps};
use crate::replay::DeviceReplay;
use serde::Serialize;

/// Where in a training step a moment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
}

/// The phase of one moment, with the step it falls in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
    let phase = if at < 0 {
        Phase::Unknown
    } else {
        match ctx.phase_at(at) {
            Some("forward") => Phase::Forward,
            Some("backward") => Phase::Backward,
            Some("optimizer") => Phase::Optimizer,
            _ if ctx.has_phases() => Phase::Between,
            _ => Phase::Unknown,
        }
    };
    let mut words = match phase {
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

/// The phase of event `at` on a replayed device, building the context it needs.
pub fn of(snap: &Snapshot, r: &DeviceReplay, at: i64) -> MomentPhase {
    let Some(dev) = snap.device(r.device) else {
        return with_ctx_unknown();
    };
    let trace = snap.device_trace(dev);
    let st = steps::find(snap, r);
    let ctx = Ctx::new(snap, trace, &st, &[], &r.allocations);
    with_ctx(&ctx, &st, at)
}

fn with_ctx_unknown() -> MomentPhase {
    MomentPhase {
        phase: Phase::Unknown,
        step: None,
        words: "cannot tell the phase: the device has no trace".into(),
    }
}
