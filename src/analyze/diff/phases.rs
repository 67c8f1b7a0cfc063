//! Comparing like with like (`shared/docs/reading.md` §2): the phase of each run's compared
//! moment (its peak by default) and whether it moved, and each step phase's peak (forward,
//! backward, optimizer step) beside its counterpart in the other run.
//!
//! Phases come from [`crate::analyze::phase`], the one rule every report uses; this module
//! only pairs its answers.

use super::Run;
use crate::analyze::phase::{self, MomentPhase, Phase, PhasePeak};
use serde::Serialize;

/// The phase of the moment each run is compared at, on one device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PeakPhases {
    /// The device whose moments these are (the one the steps compare: the base's largest at
    /// the moment, present in both runs).
    pub device: u32,
    /// The base's moment.
    pub base: MomentPhase,
    /// The candidate's moment.
    pub cand: MomentPhase,
    /// True when both phases are known and differ: the two moments sit in different phases,
    /// so what one holds and the other lacks may only belong to another phase.
    pub moved: bool,
}

impl PeakPhases {
    /// The pair, `moved` when both phases are known and differ.
    pub fn new(device: u32, base: MomentPhase, cand: MomentPhase) -> PeakPhases {
        let known = |p: &MomentPhase| p.phase != Phase::Unknown;
        let moved = known(&base) && known(&cand) && base.phase != cand.phase;
        PeakPhases {
            device,
            base,
            cand,
            moved,
        }
    }
}

/// One step phase's peak in both runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PhaseRow {
    /// `forward`, `backward` or `optimizer`.
    pub phase: Phase,
    /// The base's highest live requested bytes inside that phase; `null` when its trace
    /// never enters it.
    pub base_peak_bytes: Option<u64>,
    /// The candidate's, likewise.
    pub cand_peak_bytes: Option<u64>,
    /// Candidate − base (signed), when both runs have the phase.
    pub delta_bytes: Option<i64>,
    /// The base's event where that peak is first reached.
    pub base_event: Option<i64>,
    /// The candidate's event, likewise.
    pub cand_event: Option<i64>,
}

/// What one run's trace says of phases on a device: the phase of each of `moments`, and the
/// peak of each step phase.
pub struct RunPhases {
    /// The phase of each moment asked about, in order.
    pub moments: Vec<MomentPhase>,
    /// Each step phase's peak ([`phase::peaks`]).
    pub peaks: Vec<PhasePeak>,
}

/// The phases of `moments` and the phase peaks of `device` in `run`; `None` when the run has
/// no replay of that device.
pub fn read(run: Run, device: u32, moments: &[i64]) -> Option<RunPhases> {
    let r = run.replays.iter().find(|r| r.device == device)?;
    phase::reading(run.snap, r, |ctx, st| RunPhases {
        moments: moments
            .iter()
            .map(|&at| phase::with_ctx(ctx, st, at))
            .collect(),
        peaks: phase::peaks(ctx, r),
    })
}

/// Adds to `report` the phase of each run's moment on `device` (when both sides measured
/// it from a trace), each step phase's peaks side by side, and the phase of each step peak
/// where the runs part most.
pub fn attach(report: &mut super::DiffReport, base: Run, cand: Run, device: u32) {
    let Some(d) = report.devices.iter().find(|d| d.device == device) else {
        return;
    };
    let (Some(b), Some(c)) = (&d.base, &d.cand) else {
        return;
    };
    if b.basis != "trace" || c.basis != "trace" {
        return;
    }
    let parting = report
        .steps
        .as_ref()
        .and_then(|s| s.divergence.as_ref())
        .and_then(|dv| {
            let row = report
                .steps
                .as_ref()?
                .rows
                .iter()
                .find(|r| r.step == dv.step)?;
            Some((
                row.base.as_ref()?.peak_at.event_index,
                row.cand.as_ref()?.peak_at.event_index,
            ))
        });
    let moments =
        |at: i64, step: Option<i64>| -> Vec<i64> { std::iter::once(at).chain(step).collect() };
    let (bm, cm) = (
        moments(b.at.event_index, parting.map(|p| p.0)),
        moments(c.at.event_index, parting.map(|p| p.1)),
    );
    let (rb, rc) = rayon::join(|| read(base, device, &bm), || read(cand, device, &cm));
    let (Some(mut rb), Some(mut rc)) = (rb, rc) else {
        return;
    };
    report.by_phase = rows(&rb.peaks, &rc.peaks);
    if parting.is_some() {
        let (sb, sc) = (rb.moments.pop(), rc.moments.pop());
        if let (Some(sb), Some(sc), Some(dv)) = (
            sb,
            sc,
            report.steps.as_mut().and_then(|s| s.divergence.as_mut()),
        ) {
            dv.phases = Some(PeakPhases::new(device, sb, sc));
        }
    }
    if let (Some(pb), Some(pc)) = (rb.moments.pop(), rc.moments.pop()) {
        report.peak_phases = Some(PeakPhases::new(device, pb, pc));
    }
}

/// Each step phase either run enters, its peaks side by side (forward, backward, optimizer).
pub fn rows(base: &[PhasePeak], cand: &[PhasePeak]) -> Vec<PhaseRow> {
    [Phase::Forward, Phase::Backward, Phase::Optimizer]
        .into_iter()
        .filter_map(|p| {
            let b = base.iter().find(|x| x.phase == p);
            let c = cand.iter().find(|x| x.phase == p);
            (b.is_some() || c.is_some()).then(|| PhaseRow {
                phase: p,
                base_peak_bytes: b.map(|x| x.bytes),
                cand_peak_bytes: c.map(|x| x.bytes),
                delta_bytes: b.zip(c).map(|(x, y)| y.bytes as i64 - x.bytes as i64),
                base_event: b.map(|x| x.event),
                cand_event: c.map(|x| x.event),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mp(phase: Phase) -> MomentPhase {
        MomentPhase {
            phase,
            step: Some(1),
            words: phase.place().into(),
        }
    }

    #[test]
    fn moved_needs_two_known_phases_that_differ() {
        use Phase::*;
        assert!(PeakPhases::new(0, mp(Optimizer), mp(Forward)).moved);
        assert!(PeakPhases::new(0, mp(Between), mp(Forward)).moved);
        assert!(!PeakPhases::new(0, mp(Forward), mp(Forward)).moved);
        assert!(!PeakPhases::new(0, mp(Unknown), mp(Forward)).moved);
        assert!(!PeakPhases::new(0, mp(Unknown), mp(Unknown)).moved);
    }

    #[test]
    fn rows_pair_phases_and_leave_a_missing_side_null() {
        let pk = |phase, event, bytes| PhasePeak {
            phase,
            event,
            bytes,
        };
        let b = [pk(Phase::Forward, 3, 100), pk(Phase::Optimizer, 9, 500)];
        let c = [pk(Phase::Forward, 4, 700), pk(Phase::Backward, 8, 650)];
        let r = rows(&b, &c);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].phase, Phase::Forward);
        assert_eq!(r[0].delta_bytes, Some(600));
        assert_eq!((r[0].base_event, r[0].cand_event), (Some(3), Some(4)));
        assert_eq!(r[1].phase, Phase::Backward);
        assert_eq!(r[1].base_peak_bytes, None);
        assert_eq!(r[1].delta_bytes, None);
        assert_eq!(r[1].cand_peak_bytes, Some(650));
        assert_eq!(r[2].phase, Phase::Optimizer);
        assert_eq!(r[2].cand_event, None);
        assert!(rows(&[], &[]).is_empty());
    }
}
