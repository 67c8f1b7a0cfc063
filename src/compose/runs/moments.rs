//! The moments of two runs a person can click on the compare page: both peaks, each step's
//! peak on both sides, and evenly spaced places on the event and time axes; at each, both live
//! sets compared site by site with what only one side holds.

use super::series::{extent, Axis, Coords};
use crate::analyze::diff::{site_deltas, SideSites, SiteDelta, Status, StatusCounts};
use crate::analyze::profile::moments::{sites_at, SitesAt};
use crate::analyze::profile::{ProfileOptions, SiteKey};
use crate::model::Snapshot;
use crate::replay::steps::Step;
use crate::replay::{self, DeviceReplay, Moment};
use rayon::prelude::*;
use serde::Serialize;

/// One run as the moments need it: its snapshot, device, replay, steps and coordinates.
#[derive(Clone, Copy)]
pub struct Side<'a> {
    /// The snapshot.
    pub snap: &'a Snapshot,
    /// The device compared.
    pub device: &'a crate::model::Device,
    /// Its replay.
    pub replay: &'a DeviceReplay,
    /// Its steps.
    pub steps: &'a [Step],
    /// Where its events lie on each axis.
    pub coords: &'a Coords,
}

/// What a moment pair is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MomentKind {
    /// Each run at its own peak.
    Peak,
    /// Each run at the peak of the same step.
    Step,
    /// Both runs after the same event index (a run that ended sooner at its end).
    Event,
    /// Both runs at the same time since their first event.
    Time,
}

/// One run at a moment.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SideMoment {
    /// The state after this event.
    pub at: Moment,
    /// Live requested bytes then.
    pub live_bytes: u64,
    /// Reserved bytes then.
    pub reserved_bytes: u64,
}

/// Both runs at one moment, site by site.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MomentPair {
    /// What aligns the two sides.
    pub kind: MomentKind,
    /// Its name for people (`peak`, `step 3`, `event 12000`, `1.250 s`).
    pub label: String,
    /// Its place on the axis of its kind (steps: the middle of the step; peak: 0).
    pub x: f64,
    /// The base then.
    pub base: SideMoment,
    /// The candidate then.
    pub cand: SideMoment,
    /// Live bytes of the base's sites the candidate does not hold then.
    pub only_base_bytes: u64,
    /// Live bytes of the candidate's sites the base does not hold then.
    pub only_cand_bytes: u64,
    /// The base's live bytes at sites both hold.
    pub common_base_bytes: u64,
    /// The candidate's live bytes at sites both hold.
    pub common_cand_bytes: u64,
    /// Sites per status (`new`: only in the candidate, `removed`: only in the base).
    pub counts: StatusCounts,
    /// The sites that differ most, by |change| (unchanged ones left out), at most the page's
    /// site rows.
    pub sites: Vec<SiteDelta>,
    /// Differing sites not listed.
    pub more_sites: usize,
}

/// Where the pairs are: kind, label, place, and each side's event.
struct Place {
    kind: MomentKind,
    label: String,
    x: f64,
    base: i64,
    cand: i64,
}

/// The places: both peaks; the peak of each step both runs have (at most `steps` of them,
/// evenly chosen, always the last); `even` places on the event axis and on the time axis.
fn places(base: Side, cand: Side, axes: &[Axis], steps: usize, even: usize) -> Vec<Place> {
    let mut out = vec![Place {
        kind: MomentKind::Peak,
        label: "peak".into(),
        x: 0.0,
        base: base.replay.peak,
        cand: cand.replay.peak,
    }];
    let common = base.steps.len().min(cand.steps.len());
    if axes.contains(&Axis::Step) && common > 0 {
        for k in spread(common, steps) {
            out.push(Place {
                kind: MomentKind::Step,
                label: format!("step {}", k + 1),
                x: k as f64 + 0.5,
                base: base.steps[k].peak_event,
                cand: cand.steps[k].peak_event,
            });
        }
    }
    let end = |s: Side| s.replay.live.len() as i64 - 1;
    let events = extent(base.replay, base.coords, Axis::Event).max(extent(
        cand.replay,
        cand.coords,
        Axis::Event,
    )) as i64;
    for k in spread(even, even) {
        let i = (events * k as i64) / (even.max(2) as i64 - 1);
        out.push(Place {
            kind: MomentKind::Event,
            label: format!("event {i}"),
            x: i as f64,
            base: i.min(end(base)),
            cand: i.min(end(cand)),
        });
    }
    if axes.contains(&Axis::Time) {
        let span = extent(base.replay, base.coords, Axis::Time).max(extent(
            cand.replay,
            cand.coords,
            Axis::Time,
        )) as i64;
        for k in spread(even, even) {
            let t = (span * k as i64) / (even.max(2) as i64 - 1);
            out.push(Place {
                kind: MomentKind::Time,
                label: format!("{:.3} s", t as f64 / 1e6),
                x: t as f64,
                base: base.coords.event_at_time(t),
                cand: cand.coords.event_at_time(t),
            });
        }
    }
    out
}

/// At most `most` of `0..n`, evenly spread, the first and last always in.
fn spread(n: usize, most: usize) -> Vec<usize> {
    if n <= most {
        return (0..n).collect();
    }
    let mut v: Vec<usize> = (0..most).map(|k| k * (n - 1) / (most.max(2) - 1)).collect();
    v.dedup();
    v
}

/// Every moment pair of `base` and `cand` (see [`places`]), sites keyed as `opts` says, each
/// listing at most `rows` sites.
pub fn pairs(
    base: Side,
    cand: Side,
    axes: &[Axis],
    opts: &ProfileOptions,
    limits: (usize, usize, usize),
) -> Vec<MomentPair> {
    let (rows, steps, even) = limits;
    let places = places(base, cand, axes, steps, even);
    let ats = |f: fn(&Place) -> i64| places.iter().map(f).collect::<Vec<i64>>();
    let (b_ats, c_ats) = (ats(|p| p.base), ats(|p| p.cand));
    let (b_sets, c_sets) = rayon::join(
        || sites_at(base.snap, base.device, base.replay, &b_ats, opts),
        || sites_at(cand.snap, cand.device, cand.replay, &c_ats, opts),
    );
    places
        .into_par_iter()
        .zip(b_sets.par_iter().zip(&c_sets))
        .map(|(p, (b, c))| pair(p, (base, b), (cand, c), opts, rows))
        .collect()
}

fn side(s: &SitesAt) -> SideSites<'_> {
    SideSites {
        sites: &s.sites,
        pretrace: &s.pretrace,
    }
}

fn pair(
    p: Place,
    base: (Side, &SitesAt),
    cand: (Side, &SitesAt),
    opts: &ProfileOptions,
    rows: usize,
) -> MomentPair {
    // The changed sites only (a site only one side holds always changed); what both hold is
    // each side's total less what it alone holds.
    let (mut sites, counts) =
        site_deltas(side(base.1), side(cand.1), false, opts.key == SiteKey::Site);
    let (mut only_base, mut only_cand) = (0, 0);
    for s in &sites {
        match s.status {
            Status::Removed => only_base += s.base_bytes,
            Status::New => only_cand += s.cand_bytes,
            _ => {}
        }
    }
    let total = |s: &SitesAt| s.sites.values().map(|t| t.bytes).sum::<u64>();
    let (common_base, common_cand) = (total(base.1) - only_base, total(cand.1) - only_cand);
    sites.retain(|s| s.delta_bytes != 0);
    let more_sites = sites.len().saturating_sub(rows);
    sites.truncate(rows);
    let at = |s: Side, e: i64| SideMoment {
        at: replay::moment(s.snap.device_trace(s.device), e),
        live_bytes: s.replay.live_at(e),
        reserved_bytes: s.replay.reserved_at(e),
    };
    MomentPair {
        kind: p.kind,
        label: p.label,
        x: p.x,
        base: at(base.0, p.base),
        cand: at(cand.0, p.cand),
        only_base_bytes: only_base,
        only_cand_bytes: only_cand,
        common_base_bytes: common_base,
        common_cand_bytes: common_cand,
        counts,
        sites,
        more_sites,
    }
}
