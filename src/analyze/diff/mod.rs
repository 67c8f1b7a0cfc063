//! `memlens diff BASE CAND`: two snapshots compared site by site, never by address.
//!
//! In: the [`Profile`]s of both sides at the same kind of moment (default: each device's own
//! peak). Out: the change of live bytes ("peak"), reserved bytes and fragmentation, overall and
//! device by device (matched by device id), and every normalized site (or stack) that is new,
//! removed, grown or shrunk, sorted by the absolute change.
//!
//! Top-level `peak` and `reserved` are sums over devices (each device at its own moment);
//! top-level `fragmentation` is the worst device's. Sites are summed over devices too.
//!
//! Memory alive before the trace with no stack recorded is one row per likely kind on both
//! sides (`<before trace, no stack> likely parameters`, [`crate::analyze::pretrace`]), not `<no frames>`.
//!
//! What cannot be compared is said, never shown as a change ([`Absence`]s): a side without
//! stack frames has all its memory at `<no frames>`, so sites are not compared
//! (`sites_compared: false`); categories are compared only when both sides have frames and
//! were categorised from the same data (both from traces, or both from final blocks); a
//! device without a trace is measured at its final state.

pub mod line_text;
pub mod lines;
pub mod moved;
pub mod observe;
pub mod phases;
pub mod runs;

use crate::analyze::profile::{Profile, SiteTotal};
use crate::replay::Moment;
use crate::vocab::absence::{self, Absence};
use serde::Serialize;
use std::collections::BTreeSet;

/// One side of the comparison: a snapshot and its replays.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    /// The snapshot.
    pub snap: &'a crate::model::Snapshot,
    /// Its replays.
    pub replays: &'a [crate::replay::DeviceReplay],
}

/// Options of `diff` beyond the profiles' own.
#[derive(Clone, Copy, Debug, Default)]
pub struct DiffOptions {
    /// Keep unchanged sites too (status `unchanged`).
    pub all: bool,
    /// Growth gate: fail when the peak grows by at least this fraction (0.05 = 5%)...
    pub fail_on_growth: Option<f64>,
    /// ...and by at least this many bytes (both must hold).
    pub min_abs_bytes: Option<u64>,
}

/// A number on both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Pair {
    /// Base.
    pub base: u64,
    /// Candidate.
    pub cand: u64,
    /// cand − base (signed).
    pub delta_bytes: i64,
}

impl Pair {
    /// The pair of `base` and `cand`.
    pub fn new(base: u64, cand: u64) -> Pair {
        Pair {
            base,
            cand,
            delta_bytes: cand as i64 - base as i64,
        }
    }
}

/// A ratio on both sides.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RatioPair {
    /// Base.
    pub base: f64,
    /// Candidate.
    pub cand: f64,
    /// cand − base (signed).
    pub delta: f64,
}

/// What happened to a site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Only in the candidate.
    New,
    /// Only in the base.
    Removed,
    /// More bytes in the candidate.
    Grown,
    /// Fewer bytes in the candidate.
    Shrunk,
    /// Same bytes (listed with `--all` only).
    Unchanged,
}

impl Status {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::New => "new",
            Status::Removed => "removed",
            Status::Grown => "grown",
            Status::Shrunk => "shrunk",
            Status::Unchanged => "unchanged",
        }
    }

    /// The status for a table; `other_phase`: the two moments sit in different phases
    /// ([`phases::PeakPhases::moved`]), so a site at one only is not new or removed, only
    /// absent at the other moment (`cand peak only`, `base peak only`).
    pub fn label(self, other_phase: bool) -> &'static str {
        match (self, other_phase) {
            (Status::New, true) => "cand peak only",
            (Status::Removed, true) => "base peak only",
            _ => self.as_str(),
        }
    }
}

/// One site on both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SiteDelta {
    /// Normalized site (or stack).
    pub site: String,
    /// Live bytes in the base.
    pub base_bytes: u64,
    /// Live bytes in the candidate.
    pub cand_bytes: u64,
    /// cand − base (signed).
    pub delta_bytes: i64,
    /// Live allocations in the base.
    pub base_count: u64,
    /// Live allocations in the candidate.
    pub cand_count: u64,
    /// new, removed, grown, shrunk (or unchanged).
    pub status: Status,
    /// For memory alive before the trace with no stack recorded
    /// (`<before trace, no stack> likely parameters`, [`crate::analyze::pretrace`]): its likely kind by
    /// the category rules and the evidence, the base's where both sides have it
    /// (`predates_trace`, `likely_kind`, `kind_confidence`, `evidence` in the JSON).
    #[serde(flatten)]
    pub pretrace: Option<crate::analyze::pretrace::Pretrace>,
    /// When the site only moved (same file and function, another line; [`moved`]): the
    /// base's line, as `:84`. The row is the candidate's site with the base's totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<String>,
}

/// One side of a device.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SideDevice {
    /// `trace` or `final_state`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["trace", "final_state"])))]
    pub basis: &'static str,
    /// The moment compared.
    pub at: Moment,
    /// Live requested bytes.
    pub live_bytes: u64,
    /// Reserved bytes.
    pub reserved_bytes: u64,
    /// Fragmentation index.
    pub fragmentation: f64,
    /// Reserved but unallocated bytes (the inactive blocks of its segments): fragmentation as
    /// bytes.
    pub free_bytes: u64,
}

/// One device id on both sides.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceDelta {
    /// Device index.
    pub device: u32,
    /// The base side, if the base has this device.
    pub base: Option<SideDevice>,
    /// The candidate side, if the candidate has this device (`null` otherwise).
    pub cand: Option<SideDevice>,
    /// Live bytes on both sides (0 for a missing side).
    pub peak: Pair,
    /// Reserved bytes on both sides.
    pub reserved: Pair,
}

/// The growth gate's verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Gate {
    /// The fraction asked for (`--fail-on-growth`), 0 when not given.
    pub min_growth: f64,
    /// The bytes asked for (`--min-abs`), 0 when not given.
    pub min_abs_bytes: u64,
    /// Growth of the peak as a fraction of the base (null when the base is 0).
    pub growth: Option<f64>,
    /// True when the peak grew past both thresholds.
    pub failed: bool,
}

/// Two snapshots compared by normalized call site: peak, reserved, fragmentation, and new,
/// removed, grown and shrunk sites.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DiffReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Live requested bytes at the moment, summed over devices (each at its own moment).
    pub peak: Pair,
    /// Reserved bytes at the moment, summed over devices.
    pub reserved: Pair,
    /// The worst device's fragmentation index on each side.
    pub fragmentation: RatioPair,
    /// Reserved but unallocated bytes at the moment, summed over devices: fragmentation as
    /// bytes (what `observations` weigh, not the index).
    pub reserved_unallocated: Pair,
    /// Changed sites, by |delta| descending, then site.
    pub sites: Vec<SiteDelta>,
    /// The moment compared (`peak`, `end`, `oom`).
    pub moment: String,
    /// `site` or `stack`.
    pub by: crate::analyze::profile::SiteKey,
    /// Line numbers dropped from keys.
    pub ignore_lines: bool,
    /// The directory stripped from each side's user files.
    pub roots: Roots,
    /// Devices matched by id.
    pub devices: Vec<DeviceDelta>,
    /// Sites per status (unchanged ones counted even without `--all`).
    pub counts: StatusCounts,
    /// Change per category (parameters, optimizer state, gradients, activations, ...; see
    /// [`crate::analyze::categories`]), by |delta| descending; `null` when a side has no categories, or
    /// when the sides cannot be compared (see `absent`).
    pub categories: Option<Vec<CategoryDelta>>,
    /// The growth gate, when `--fail-on-growth` or `--min-abs` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Gate"))]
    pub gate: Option<Gate>,
    /// What limits the answer.
    pub notes: Vec<String>,
    /// False when the sites cannot be matched (a side recorded no stack frames): `sites` then
    /// only says where each side's memory is, not what changed.
    pub sites_compared: bool,
    /// What a side lacks for the comparison, with stable codes (see [`absence`]).
    pub absent: Vec<Absence>,
    /// Allocator settings that differ ([`runs::settings_changes`]); absent when none does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<runs::SettingChange>,
    /// Each run's steps side by side and the step where they part most
    /// ([`runs::steps_compared`]); absent when neither run has steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "runs::StepsCompared"))]
    pub steps: Option<runs::StepsCompared>,
    /// The phase of each run's moment (forward, backward, optimizer step, between) on the
    /// steps' device, and whether it moved ([`phases`]); absent when a side has no trace
    /// there.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "phases::PeakPhases"))]
    pub peak_phases: Option<phases::PeakPhases>,
    /// Each step phase's peak in both runs on that device, like with like ([`phases::rows`]):
    /// forward, backward, optimizer; absent when neither trace shows a phase.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_phase: Vec<phases::PhaseRow>,
    /// What the two runs show, in words ([`observe::observations`]), by the bytes each
    /// explains (a peak that moved phase first); absent when nothing stands out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub observations: Vec<String>,
    /// The same observations in the same order, each with its kind and the bytes it explains.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub observation_details: Vec<observe::Observation>,
}

/// One category on both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CategoryDelta {
    /// Category name.
    pub category: String,
    /// Live bytes in the base.
    pub base_bytes: u64,
    /// Live bytes in the candidate.
    pub cand_bytes: u64,
    /// cand − base (signed).
    pub delta_bytes: i64,
    /// Allocations in the base.
    pub base_count: u64,
    /// Allocations in the candidate.
    pub cand_count: u64,
}

fn category_deltas(
    base: &std::collections::BTreeMap<String, SiteTotal>,
    cand: &std::collections::BTreeMap<String, SiteTotal>,
) -> Vec<CategoryDelta> {
    let names: BTreeSet<&String> = base.keys().chain(cand.keys()).collect();
    let mut v: Vec<CategoryDelta> = names
        .into_iter()
        .map(|k| {
            let b = base.get(k).copied().unwrap_or_default();
            let c = cand.get(k).copied().unwrap_or_default();
            CategoryDelta {
                category: k.clone(),
                base_bytes: b.bytes,
                cand_bytes: c.bytes,
                delta_bytes: c.bytes as i64 - b.bytes as i64,
                base_count: b.count,
                cand_count: c.count,
            }
        })
        .collect();
    v.sort_by(|a, b| {
        b.delta_bytes
            .unsigned_abs()
            .cmp(&a.delta_bytes.unsigned_abs())
            .then_with(|| a.category.cmp(&b.category))
    });
    v
}

/// The stripped roots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Roots {
    /// Base.
    pub base: Option<String>,
    /// Candidate.
    pub cand: Option<String>,
}

/// Sites per status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StatusCounts {
    /// New sites.
    pub new: usize,
    /// Removed sites.
    pub removed: usize,
    /// Grown sites.
    pub grown: usize,
    /// Shrunk sites.
    pub shrunk: usize,
    /// Unchanged sites.
    pub unchanged: usize,
    /// Of all those, sites that moved to another line of the same file and function
    /// (counted under their status as well).
    pub moved: usize,
}

/// The status of a site with these totals.
fn status(b: SiteTotal, c: SiteTotal) -> Status {
    if b.count == 0 && c.count > 0 {
        Status::New
    } else if c.count == 0 && b.count > 0 {
        Status::Removed
    } else if c.bytes > b.bytes {
        Status::Grown
    } else if c.bytes < b.bytes {
        Status::Shrunk
    } else {
        Status::Unchanged
    }
}

/// Whether a peak change passes the growth gate: it grew, by at least `min_growth` of the
/// base and by at least `min_abs` bytes.
pub fn gate(peak: Pair, min_growth: f64, min_abs: u64) -> Gate {
    let growth = (peak.base > 0).then(|| peak.delta_bytes as f64 / peak.base as f64);
    let failed = peak.delta_bytes > 0
        && peak.delta_bytes as u64 >= min_abs
        && growth.map_or(true, |g| g >= min_growth);
    Gate {
        min_growth,
        min_abs_bytes: min_abs,
        growth,
        failed,
    }
}

fn side(d: &crate::analyze::profile::DeviceProfile) -> SideDevice {
    SideDevice {
        basis: d.basis,
        at: d.at,
        live_bytes: d.live_bytes,
        reserved_bytes: d.reserved_bytes,
        fragmentation: d.fragmentation,
        free_bytes: d.free_bytes,
    }
}

/// Compares two profiles (taken with the same [`crate::analyze::profile::ProfileOptions`]).
pub fn run(
    base: &Profile,
    cand: &Profile,
    key: crate::analyze::profile::SiteKey,
    ignore_lines: bool,
    opts: &DiffOptions,
) -> DiffReport {
    let by_site = key == crate::analyze::profile::SiteKey::Site;
    let (sites, counts) = site_deltas(SideSites::of(base), SideSites::of(cand), opts.all, by_site);
    let devices = device_deltas(base, cand);
    let peak = Pair::new(base.live_bytes(), cand.live_bytes());
    let gate = (opts.fail_on_growth.is_some() || opts.min_abs_bytes.is_some()).then(|| {
        gate(
            peak,
            opts.fail_on_growth.unwrap_or(0.0),
            opts.min_abs_bytes.unwrap_or(0),
        )
    });
    let notes = diff_notes(&devices, base, cand);
    let (mut absent, sites_compared) = absences(base, cand);
    let categories = compared_categories(base, cand, sites_compared, &mut absent);
    let (bf, cf) = (base.fragmentation(), cand.fragmentation());
    DiffReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        peak,
        reserved: Pair::new(base.reserved_bytes(), cand.reserved_bytes()),
        fragmentation: RatioPair {
            base: bf,
            cand: cf,
            delta: cf - bf,
        },
        reserved_unallocated: Pair::new(base.free_bytes(), cand.free_bytes()),
        sites,
        moment: base.moment.clone(),
        by: key,
        ignore_lines,
        roots: Roots {
            base: base.root.clone(),
            cand: cand.root.clone(),
        },
        devices,
        counts,
        categories,
        gate,
        notes,
        sites_compared,
        absent,
        settings: Vec::new(),
        steps: None,
        peak_phases: None,
        by_phase: Vec::new(),
        observations: Vec::new(),
        observation_details: Vec::new(),
    }
}

/// The sites and pre-trace verdicts of one side.
pub struct SideSites<'a> {
    /// Live bytes per key.
    pub sites: &'a std::collections::BTreeMap<String, SiteTotal>,
    /// What the category rules say of memory older than the trace without a stack.
    pub pretrace: &'a std::collections::BTreeMap<String, crate::analyze::pretrace::Pretrace>,
}

impl<'a> SideSites<'a> {
    /// The sites of a whole profile.
    pub fn of(p: &'a Profile) -> Self {
        SideSites {
            sites: &p.sites,
            pretrace: &p.pretrace,
        }
    }
}

/// Every site's change, largest first (unchanged ones only with `all`; `by_site`: keys are
/// sites, so sites that only moved are matched), and the sites per status.
pub fn site_deltas(
    base: SideSites,
    cand: SideSites,
    all: bool,
    by_site: bool,
) -> (Vec<SiteDelta>, StatusCounts) {
    // Sites that only moved (sites only, not whole stacks): the candidate's key stands for
    // the pair.
    let mut moved: std::collections::BTreeMap<&str, &str> = moved::pairs(
        base.sites
            .keys()
            .filter(|k| !cand.sites.contains_key(*k))
            .map(|k| k.as_str()),
        cand.sites
            .keys()
            .filter(|k| !base.sites.contains_key(*k))
            .map(|k| k.as_str()),
    )
    .into_iter()
    .map(|(b, c)| (c, b))
    .collect();
    if !by_site {
        moved.clear();
    }
    let paired_base: BTreeSet<&str> = moved.values().copied().collect();
    let keys: BTreeSet<&String> = base
        .sites
        .keys()
        .filter(|k| !paired_base.contains(k.as_str()))
        .chain(cand.sites.keys())
        .collect();
    let mut counts = StatusCounts::default();
    let mut sites = Vec::new();
    for k in keys {
        let base_key = moved.get(k.as_str()).copied().unwrap_or(k.as_str());
        let b = base.sites.get(base_key).copied().unwrap_or_default();
        let c = cand.sites.get(k).copied().unwrap_or_default();
        let st = status(b, c);
        match st {
            Status::New => counts.new += 1,
            Status::Removed => counts.removed += 1,
            Status::Grown => counts.grown += 1,
            Status::Shrunk => counts.shrunk += 1,
            Status::Unchanged => counts.unchanged += 1,
        }
        if base_key != k.as_str() {
            counts.moved += 1;
        }
        if st == Status::Unchanged && !all {
            continue;
        }
        sites.push(SiteDelta {
            site: k.clone(),
            base_bytes: b.bytes,
            cand_bytes: c.bytes,
            delta_bytes: c.bytes as i64 - b.bytes as i64,
            base_count: b.count,
            cand_count: c.count,
            status: st,
            pretrace: base
                .pretrace
                .get(base_key)
                .or_else(|| cand.pretrace.get(k))
                .cloned(),
            moved_from: (base_key != k.as_str())
                .then(|| moved::parts(base_key).map(|(_, line, _)| format!(":{line}")))
                .flatten(),
        });
    }
    sites.sort_by(|a, b| {
        b.delta_bytes
            .unsigned_abs()
            .cmp(&a.delta_bytes.unsigned_abs())
            .then_with(|| a.site.cmp(&b.site))
    });
    (sites, counts)
}

/// Every device of either side, compared.
fn device_deltas(base: &Profile, cand: &Profile) -> Vec<DeviceDelta> {
    let ids: BTreeSet<u32> = base
        .devices
        .iter()
        .chain(&cand.devices)
        .map(|d| d.device)
        .collect();
    ids.into_iter()
        .map(|id| {
            let b = base.devices.iter().find(|d| d.device == id);
            let c = cand.devices.iter().find(|d| d.device == id);
            DeviceDelta {
                device: id,
                base: b.map(side),
                cand: c.map(side),
                peak: Pair::new(b.map_or(0, |d| d.live_bytes), c.map_or(0, |d| d.live_bytes)),
                reserved: Pair::new(
                    b.map_or(0, |d| d.reserved_bytes),
                    c.map_or(0, |d| d.reserved_bytes),
                ),
            }
        })
        .collect()
}

/// Remarks: devices on one side only, then each side's own notes.
fn diff_notes(devices: &[DeviceDelta], base: &Profile, cand: &Profile) -> Vec<String> {
    let mut notes = Vec::new();
    for d in devices {
        match (&d.base, &d.cand) {
            (Some(_), None) => notes.push(format!("device {} is only in the base", d.device)),
            (None, Some(_)) => notes.push(format!("device {} is only in the candidate", d.device)),
            _ => {}
        }
    }
    notes.extend(base.notes.iter().map(|n| format!("base: {n}")));
    notes.extend(cand.notes.iter().map(|n| format!("candidate: {n}")));
    notes
}

/// What either side lacks (unrecorded moments, stack frames), and whether the sites can be
/// compared (both sides recorded frames, or hold nothing).
fn absences(base: &Profile, cand: &Profile) -> (Vec<Absence>, bool) {
    let sides = [("base", base), ("candidate", cand)];
    let mut absent = Vec::new();
    for (side, p) in sides {
        for d in &p.devices {
            if let Some(u) = &d.unrecorded {
                let code = if d.basis == "final_state" {
                    absence::NO_TRACE
                } else {
                    absence::NO_ACTIVITY
                };
                absent.push(Absence::new(code, Some(d.device), u.reason.clone()).on_side(side));
            }
        }
    }
    let frameless: Vec<&str> = sides
        .iter()
        .filter(|(_, p)| !p.frames && p.live_bytes() > 0)
        .map(|(side, _)| *side)
        .collect();
    let sites_compared = frameless.is_empty();
    for (side, p) in sides {
        if frameless.contains(&side) {
            absent.push(
                Absence::new(
                    absence::SITES_NOT_COMPARABLE,
                    None,
                    format!(
                        "the {side} recorded no stack frames: all its {} is `<no frames>`, so sites and categories cannot be matched; compared: the totals (peak, reserved, fragmentation) and the devices",
                        crate::units::iec(p.live_bytes())
                    ),
                )
                .on_side(side),
            );
        }
    }
    (absent, sites_compared)
}

/// The categories' changes, when both sides have categories made on the same basis and the
/// sites compare; an absence when only the bases differ.
fn compared_categories(
    base: &Profile,
    cand: &Profile,
    sites_compared: bool,
    absent: &mut Vec<Absence>,
) -> Option<Vec<CategoryDelta>> {
    match (&base.categories, &cand.categories) {
        (Some(b), Some(c)) if sites_compared && base.categories_basis == cand.categories_basis => {
            Some(category_deltas(b, c))
        }
        (Some(_), Some(_)) if sites_compared => {
            let words = |p: &Profile| match p.categories_basis {
                Some("trace") => "its trace (step phases and lifetimes)",
                Some("final_state") => "its final blocks alone (no trace)",
                _ => "traces on some devices and final blocks on others",
            };
            absent.push(Absence::new(
                absence::CATEGORIES_NOT_COMPARABLE,
                None,
                format!(
                    "not compared: the base was categorised from {}, the candidate from {}; the same memory lands in different categories that way",
                    words(base),
                    words(cand)
                ),
            ));
            None
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_needs_both_thresholds() {
        let p = Pair::new(1000, 1100); // +10%, +100 B
        assert!(gate(p, 0.05, 100).failed);
        assert!(!gate(p, 0.05, 101).failed);
        assert!(!gate(p, 0.11, 100).failed);
        assert!(!gate(p, 0.11, 101).failed);
        assert!(!gate(Pair::new(1000, 1000), 0.0, 0).failed);
        assert!(!gate(Pair::new(1000, 900), 0.0, 0).failed);
        assert!(gate(Pair::new(0, 1), 0.5, 0).failed);
    }

    #[test]
    fn statuses() {
        let t = |bytes, count| SiteTotal { bytes, count };
        assert_eq!(status(t(0, 0), t(5, 1)), Status::New);
        assert_eq!(status(t(5, 1), t(0, 0)), Status::Removed);
        assert_eq!(status(t(5, 1), t(6, 1)), Status::Grown);
        assert_eq!(status(t(5, 1), t(4, 2)), Status::Shrunk);
        assert_eq!(status(t(5, 1), t(5, 3)), Status::Unchanged);
    }
}
