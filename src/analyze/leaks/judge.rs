//! Whether `leaks` can judge a device, and what it concluded (`shared/docs/reading.md` §3).
//!
//! Growth is judged at the same phase (the end) of consecutive steps after the warm-up; a
//! device whose trace shows fewer steps than the warm-up plus [`LeaksOptions::min_steps`] —
//! no trace, no allocation in the trace, no step told, or too few — cannot be judged either
//! way: its judgement is `cannot_judge`, with the absence (code and message) that says why and
//! what to record, never "no leak found". A judged device is `found` when a cause grows, else
//! `none`. The report's own judgement gathers its devices'.

use super::{DeviceLeaks, Finding, LeaksOptions};
use crate::model::{Device, Snapshot};
use crate::replay::steps::DeviceSteps;
use crate::replay::{passes, DeviceReplay};
use crate::units::{iec, plural};
use crate::vocab::absence::{self, Absence, Judgement, JudgementState};

/// What to record so that `leaks` can judge: enough steps of the loop in the history.
pub(super) fn record(opts: &LeaksOptions) -> String {
    format!(
        "at least {} steps of the training loop with `torch.cuda.memory._record_memory_history(max_entries=...)` (enough entries to keep them all), then `torch.cuda.memory._dump_snapshot(...)`",
        opts.steps_needed()
    )
}

/// `N live blocks holding X`: what a device's final state still says.
fn final_state_words(snap: &Snapshot, dev: &Device) -> String {
    let (n, bytes) = snap
        .live_blocks(dev)
        .fold((0u64, 0u64), |(n, b), x| (n + 1, b + x.requested_size));
    format!(
        "its final state holds {} in {} live block{} (`memlens top` and `memlens categories` show what and where)",
        iec(bytes),
        n,
        if n == 1 { "" } else { "s" }
    )
}

/// A device without a trace: its absence and judgement.
pub(super) fn no_trace(snap: &Snapshot, dev: &Device, opts: &LeaksOptions) -> (Absence, Judgement) {
    let msg = format!(
        "device {} has no trace (allocation history was not recorded): growth between steps cannot be measured; {}",
        dev.id,
        final_state_words(snap, dev)
    );
    (
        Absence::new(absence::NO_TRACE, Some(dev.id), msg),
        Judgement::cannot_judge(
            "the device has no trace (allocation history was not recorded)".into(),
            record(opts),
        ),
    )
}

/// The trace as a reason: how many backward passes it holds, and that no step repeats.
fn no_step_words(snap: &Snapshot, trace: &[crate::model::TraceEvent]) -> String {
    match passes::backward_passes(snap, trace).all().len() {
        0 => "the trace holds no backward pass and no repeated step".into(),
        1 => "the trace holds one backward pass and no repeated step".into(),
        n => format!("the trace holds {n} backward passes but no step could be told (no ProfilerStep annotations, optimizer steps, periodic allocation or loop lines)"),
    }
}

/// Why a replayed device cannot be judged (no allocation in its trace, too few steps), as its
/// absence and judgement; `None` when it can be.
pub(super) fn unjudged(
    snap: &Snapshot,
    r: &DeviceReplay,
    dev: &Device,
    st: &DeviceSteps,
    opts: &LeaksOptions,
) -> Option<(Absence, Judgement)> {
    let trace = snap.device_trace(dev);
    if !crate::analyze::profile::records_activity(trace) {
        let msg = format!(
            "the trace of device {} records no allocation or free ({}: a `snapshot` marker or a history of max_entries=1): growth between steps cannot be measured; {}",
            r.device,
            if trace.len() == 1 { "1 entry".to_string() } else { format!("{} entries", trace.len()) },
            final_state_words(snap, dev)
        );
        let why = "the trace records no allocation or free".to_string();
        return Some((
            Absence::new(absence::NO_ACTIVITY, Some(r.device), msg),
            Judgement::cannot_judge(why, record(opts)),
        ));
    }
    let n = st.steps.len();
    if n >= opts.steps_needed() {
        return None;
    }
    let msg = format!(
        "{} found{}; at least {} are needed ({} warm-up + {}) to tell growth from warm-up, so no finding is made",
        plural(n as u64, "step"),
        if st.source.is_none() { " (no ProfilerStep annotations, user_defined markers, optimizer steps, periodic structure or repeating loop lines outside a forward or backward pass)" } else { "" },
        opts.steps_needed(),
        opts.warmup,
        opts.min_steps
    );
    let (code, msg, why) = if n == 0 {
        let msg = format!(
            "{msg}; over the whole trace, live bytes went from {} to {} (`memlens timeline` plots them)",
            iec(r.live_at(-1)),
            iec(r.live_at(r.events as i64 - 1))
        );
        (absence::NO_STEPS, msg, no_step_words(snap, trace))
    } else {
        let why = format!(
            "{} found; at least {} are needed to tell growth from warm-up",
            plural(n as u64, "step"),
            opts.steps_needed()
        );
        (absence::TOO_FEW_STEPS, msg, why)
    };
    Some((
        Absence::new(code, Some(r.device), msg),
        Judgement::cannot_judge(why, record(opts)),
    ))
}

/// The judgement of a judged device of `steps` steps with `findings` causes of growth.
pub(super) fn judged(steps: usize, findings: usize) -> Judgement {
    let n = plural(steps as u64, "step");
    if findings == 0 {
        Judgement::none(format!("judged {n}: nothing grows"))
    } else {
        Judgement::found(format!(
            "judged {n}: {} grow{} step after step",
            plural(findings as u64, "cause"),
            if findings == 1 { "s" } else { "" }
        ))
    }
}

/// One kind of growth (`leak` or `retained_graph`) on a device, from the device's growth
/// judgement and its findings: what could not be judged stays so; a finding of the kind is
/// `found`; a judged device without one is `none` — except that growth made at stacks without
/// frames cannot be told apart (`cannot_judge` for both kinds: its finding says `leak` only
/// because nothing shows a forward pass).
pub(super) fn of_kind(growth: &Judgement, found: &[Finding], kind: &str) -> Judgement {
    // Judged without growth, or not judged: each kind is what the growth's judgement says.
    if growth.state != JudgementState::Found {
        return growth.clone();
    }
    let steps = found.first().map(|f| f.steps);
    let mine: Vec<&Finding> = found.iter().filter(|f| f.kind == kind).collect();
    let what = if kind == "leak" {
        "leak"
    } else {
        "retained graph"
    };
    // Growth at stacks without frames is a finding of kind `leak` only because nothing shows
    // a forward pass: it tells neither kind.
    let frameless = |f: &&Finding| f.site == crate::vocab::sites::NO_FRAMES;
    let told: Vec<&Finding> = mine.iter().copied().filter(|f| !frameless(f)).collect();
    if told.is_empty() && found.iter().any(|f| frameless(&f)) {
        return Judgement::cannot_judge(
            format!("memory grows at stacks without frames, where a {what} cannot be told from other growth (nothing shows a forward pass)"),
            absence::RECORD_STACKS.into(),
        );
    }
    let mine = if kind == "leak" { told } else { mine };
    match (mine.first(), steps) {
        (Some(first), Some(steps)) => Judgement::found(format!(
            "judged {}: {} {what}{} (biggest at {})",
            plural(steps as u64, "step"),
            mine.len(),
            if mine.len() == 1 { "" } else { "s" },
            first.site
        )),
        _ => {
            let tail = match kind {
                "leak" => "nothing kept outside an autograd graph grows",
                _ => "no forward pass's tensors grow",
            };
            Judgement::none(match steps {
                Some(n) => format!("judged {}: {tail}", plural(n as u64, "step")),
                None => format!("{}: {tail}", growth.why),
            })
        }
    }
}

/// The report's judgement: `found` when a device found growth, `none` when every device was
/// judged and nothing grows, else `cannot_judge` (some device, or the file, lacks evidence).
pub(super) fn overall(
    devices: &[DeviceLeaks],
    opts: &LeaksOptions,
    judgement: fn(&DeviceLeaks) -> &Judgement,
) -> Judgement {
    let Some(first) = devices.first() else {
        return Judgement::cannot_judge("the file holds no device".into(), record(opts));
    };
    let of = |d: &DeviceLeaks| judgement(d).state;
    let state = if devices.iter().any(|d| of(d) == JudgementState::Found) {
        JudgementState::Found
    } else if devices.iter().all(|d| of(d) == JudgementState::None) {
        JudgementState::None
    } else {
        JudgementState::CannotJudge
    };
    // Several devices: those that could not be judged first (they decide `cannot_judge`).
    let why = if devices.len() == 1 {
        judgement(first).why.clone()
    } else {
        let unjudged = |d: &&DeviceLeaks| of(d) == JudgementState::CannotJudge;
        let parts: Vec<String> = devices
            .iter()
            .filter(unjudged)
            .chain(devices.iter().filter(|d| !unjudged(d)))
            .map(|d| format!("device {}: {}", d.steps.device, judgement(d).why))
            .collect();
        parts.join("; ")
    };
    match state {
        JudgementState::Found => Judgement::found(why),
        JudgementState::None => Judgement::none(why),
        JudgementState::CannotJudge => Judgement::cannot_judge(
            why,
            devices
                .iter()
                .find_map(|d| judgement(d).record.clone())
                .unwrap_or_else(|| record(opts)),
        ),
    }
}
