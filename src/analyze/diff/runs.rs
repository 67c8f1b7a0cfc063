//! What `diff` says of two runs beyond the sites at one moment: how their allocator settings
//! differ, each side's steps side by side and the step where they part most (with the sites
//! that make the difference there); [`explain`] adds those, the phases ([`super::phases`]) and
//! the observations ([`super::observe`]) to a report.

use super::{site_deltas, SideSites, SiteDelta};
use crate::analyze::profile::{self, ProfileOptions, SiteKey};
use crate::model::{Action, Snapshot};
use crate::replay::{steps, Moment};
use serde::Serialize;
use std::collections::BTreeMap;

pub use super::Run;

/// An allocator setting that differs between the runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SettingChange {
    /// The key of `allocator_settings`.
    pub key: String,
    /// Its value in the base, as JSON text; `null` when the base does not record it.
    pub base: Option<String>,
    /// Its value in the candidate, as JSON text; `null` when the candidate does not record it.
    pub cand: Option<String>,
}

/// One step of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepFigures {
    /// The step's name (`ProfilerStep#3`, `step 3`).
    pub name: String,
    /// Its peak of live requested bytes.
    pub peak_bytes: u64,
    /// Where that peak is.
    pub peak_at: Moment,
    /// The most bytes reserved during it.
    pub max_reserved_bytes: u64,
    /// `alloc` entries in it.
    pub allocations: u64,
    /// Time from its first to its last event, when the trace records times.
    pub duration_us: Option<i64>,
}

/// The k-th step of both runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepRow {
    /// 1-based position of the step in each run.
    pub step: usize,
    /// The base's step; `null` when the base has fewer steps.
    pub base: Option<StepFigures>,
    /// The candidate's step; `null` when the candidate has fewer steps.
    pub cand: Option<StepFigures>,
    /// Candidate peak − base peak (signed), when both have the step.
    pub delta_bytes: Option<i64>,
}

/// Where the runs part most.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Divergence {
    /// The step (1-based, as in `rows`).
    pub step: usize,
    /// Candidate peak − base peak in that step (signed).
    pub delta_bytes: i64,
    /// The sites at the two step peaks, as `sites` compares them (changed ones, largest
    /// change first; sites that only moved matched).
    pub sites: Vec<SiteDelta>,
    /// The phase of each step peak ([`super::phases`]); absent when no trace says.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "super::phases::PeakPhases"))]
    pub phases: Option<super::phases::PeakPhases>,
}

/// The runs' steps side by side, on one device.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepsCompared {
    /// The device compared (the base's largest at the moment, present in both runs).
    pub device: u32,
    /// How the base's steps were found (`annotations`, `user_markers`, `optimizer`,
    /// `periodic`, `loop_lines`); `null`: none found.
    pub base_source: Option<steps::StepSource>,
    /// How the candidate's steps were found.
    pub cand_source: Option<steps::StepSource>,
    /// Step k of both runs, for every k either has.
    pub rows: Vec<StepRow>,
    /// The step where the peaks differ most; `null` when no step is in both or the peaks
    /// never differ.
    pub divergence: Option<Divergence>,
}

/// The allocator settings that differ, by key.
pub fn settings_changes(base: &Snapshot, cand: &Snapshot) -> Vec<SettingChange> {
    let text = |s: &Snapshot| -> BTreeMap<String, String> {
        s.allocator_settings
            .iter()
            .flatten()
            .map(|(k, v)| {
                (
                    k.clone(),
                    serde_json::to_string(v).unwrap_or_else(|_| "?".into()),
                )
            })
            .collect()
    };
    let (b, c) = (text(base), text(cand));
    let keys: std::collections::BTreeSet<&String> = b.keys().chain(c.keys()).collect();
    keys.into_iter()
        .filter(|k| b.get(*k) != c.get(*k))
        .map(|k| SettingChange {
            key: k.clone(),
            base: b.get(k).cloned(),
            cand: c.get(k).cloned(),
        })
        .collect()
}

/// The figures of each step of `device` in `run`, and how they were found.
fn step_figures(run: Run, device: u32) -> Option<(Vec<StepFigures>, Option<steps::StepSource>)> {
    let r = run.replays.iter().find(|r| r.device == device)?;
    let dev = run.snap.device(device)?;
    let trace = run.snap.device_trace(dev);
    let found = steps::find(run.snap, r);
    let figures = found
        .steps
        .iter()
        .map(|s| {
            let (first, last) = (s.first_event.max(0), s.last_event.max(0));
            let events = &trace[first as usize..=(last as usize).min(trace.len() - 1)];
            StepFigures {
                name: s.name.clone(),
                peak_bytes: s.peak_bytes,
                peak_at: crate::replay::moment(trace, s.peak_event),
                max_reserved_bytes: (first..=last).map(|i| r.reserved_at(i)).max().unwrap_or(0),
                allocations: events.iter().filter(|e| e.action == Action::Alloc).count() as u64,
                duration_us: events
                    .first()
                    .and_then(|a| a.time())
                    .zip(events.last().and_then(|b| b.time()))
                    .map(|(a, b)| b - a),
            }
        })
        .collect();
    Some((figures, found.source))
}

/// Both runs' steps on `device`, and where they part most (sites keyed as `opts` says).
pub fn steps_compared(
    base: Run,
    cand: Run,
    device: u32,
    opts: &ProfileOptions,
) -> Option<StepsCompared> {
    // Each run's steps, then each run's live set at the parting step, side by side.
    let (b, c) = rayon::join(|| step_figures(base, device), || step_figures(cand, device));
    let ((b, base_source), (c, cand_source)) = (b?, c?);
    if b.is_empty() && c.is_empty() {
        return None;
    }
    let rows: Vec<StepRow> = (0..b.len().max(c.len()))
        .map(|k| StepRow {
            step: k + 1,
            base: b.get(k).cloned(),
            cand: c.get(k).cloned(),
            delta_bytes: b
                .get(k)
                .zip(c.get(k))
                .map(|(x, y)| y.peak_bytes as i64 - x.peak_bytes as i64),
        })
        .collect();
    let divergence = rows
        .iter()
        .filter_map(|r| r.delta_bytes.filter(|d| *d != 0).map(|d| (r, d)))
        .max_by(|x, y| {
            x.1.unsigned_abs()
                .cmp(&y.1.unsigned_abs())
                .then(y.0.step.cmp(&x.0.step))
        })
        .map(|(row, d)| {
            let at = |run: Run, f: &StepFigures| {
                let r = run.replays.iter().find(|r| r.device == device)?;
                let dev = run.snap.device(device)?;
                Some(profile::device_at(
                    run.snap,
                    dev,
                    r,
                    f.peak_at.event_index,
                    opts,
                ))
            };
            let (pb, pc) = rayon::join(
                || row.base.as_ref().and_then(|f| at(base, f)),
                || row.cand.as_ref().and_then(|f| at(cand, f)),
            );
            let sites = match (&pb, &pc) {
                (Some(x), Some(y)) => {
                    site_deltas(
                        SideSites {
                            sites: &x.sites,
                            pretrace: &x.pretrace,
                        },
                        SideSites {
                            sites: &y.sites,
                            pretrace: &y.pretrace,
                        },
                        false,
                        opts.key == SiteKey::Site,
                    )
                    .0
                }
                _ => Vec::new(),
            };
            Divergence {
                step: row.step,
                delta_bytes: d,
                sites,
                phases: None,
            }
        });
    Some(StepsCompared {
        device,
        base_source,
        cand_source,
        rows,
        divergence,
    })
}

/// Adds the runs' settings, steps, phases and observations to `report` (sites keyed as `opts`
/// says; steps on the base's largest device present in both).
pub fn explain(report: &mut super::DiffReport, base: Run, cand: Run, opts: &ProfileOptions) {
    report.settings = settings_changes(base.snap, cand.snap);
    let device = report
        .devices
        .iter()
        .filter(|d| d.base.is_some() && d.cand.is_some())
        .max_by(|a, b| a.peak.base.cmp(&b.peak.base).then(b.device.cmp(&a.device)))
        .map(|d| d.device);
    report.steps = device.and_then(|d| steps_compared(base, cand, d, opts));
    if let Some(d) = device {
        super::phases::attach(report, base, cand, d);
    }
    let said = super::observe::observations(base, cand, report);
    report.observations = said.iter().map(|o| o.text.clone()).collect();
    report.observation_details = said;
}
