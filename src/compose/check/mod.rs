//! `memlens check`: budgets on snapshots (peak, reserved, fragmentation, leaked bytes, growth
//! against a baseline), each passed, broken or unmeasured, with the top sites behind a broken
//! one.
//!
//! In: a file's [`Profile`], its never-freed bytes ([`Leaked`]), optionally a [`Baseline`] (the
//! baseline's profile and the [`DiffReport`] against it), and resolved [`Budget`]s (percentages
//! of the capacity already turned into bytes by the caller). Out: a [`CheckReport`].
//!
//! Which number each budget reads, per file:
//! - `max_peak`: live requested bytes at the moment (default: the peak) of the device with the
//!   most, so a per-GPU budget holds on every GPU;
//! - `max_reserved`: the highest reserved bytes over the trace of any device (final reserved
//!   without a trace);
//! - `max_frag`: the worst device's fragmentation index (1 − largest free block / free) at the
//!   moment, among devices holding segments then (a device without a trace: its final state);
//! - `max_leaked`: the live bytes at the end of the trace of every finding of the leaks
//!   analysis (sites that grow step after step: leaks and retained graphs), summed over
//!   devices;
//! - `baseline`: the peak (summed over devices) against the baseline's, failing when it grew by
//!   at least `min_growth` and by at least `min_abs_bytes` (`diff`'s growth gate).
//!
//! A budget is never passed on nothing measured. Each one is [`CheckStatus::Unmeasured`] when
//! the file lacks what it reads (`no device` below means no device with segments or a trace):
//! - `max_peak`: no device, or a device whose live bytes at the moment were not recorded
//!   ([`crate::analyze::profile::Unrecorded`]): it has no trace (at any moment but `end`, which the
//!   final state is), or at `peak` its trace records no alloc or free (PyTorch 2.0's single
//!   `snapshot` entry), so the peak was not recorded. The final state is no peak; it is only a
//!   lower bound of one. Or a device whose segments do not cover its trace: what was live
//!   before the trace in the unlisted segments is unknown, so its live bytes are a lower bound;
//! - `max_reserved`: no device (the final segments are a device's reserved bytes without a
//!   trace), or a device whose segments do not cover its trace
//!   ([`crate::analyze::profile::Uncovered`]: its reserved bytes have only a floor);
//! - `max_frag`: no device holds segments at the moment, or a device's segments do not cover
//!   its trace;
//! - `max_leaked`: no device, or a device the leaks analysis cannot judge: no trace, no steps
//!   found in its trace, or fewer steps than it needs
//!   ([`crate::analyze::leaks::LeaksOptions::steps_needed`]: one warm-up + 3);
//! - `baseline`: either side's peak is unmeasured by the `max_peak` rule.
//!
//! What was measured still breaks a budget: when some devices are unmeasured but a measured
//! one, or a lower bound (an unrecorded device's final state at `peak`; the leaked bytes of the
//! devices that could be judged; the reserved floor or live bytes of a device whose segments
//! do not cover its trace), already exceeds the limit, the budget fails ("at least") and
//! the unmeasured devices become notes. The reason of an unmeasured budget names each device
//! and what it lacks.

mod results;

use crate::analyze::diff::{self, DiffReport, Status};
use crate::analyze::profile::{sorted_sites, DeviceProfile, Profile, SiteTotal};
use results::{
    bytes_result, devices_words, lines, peak_gaps, plural, uncovered_live, uncovered_reserved,
    unmeasured,
};
use serde::Serialize;
use std::collections::BTreeMap;

/// The reason of a budget on a file without any device holding segments or a trace.
const NOTHING: &str = "no device has segments or a trace: nothing to measure";

/// Which budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    /// `--max-peak`.
    MaxPeak,
    /// `--max-reserved`.
    MaxReserved,
    /// `--max-frag`.
    MaxFrag,
    /// `--max-leaked`.
    MaxLeaked,
    /// `--baseline`.
    Baseline,
}

impl BudgetKind {
    /// The JSON (and JUnit test case) name.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetKind::MaxPeak => "max_peak",
            BudgetKind::MaxReserved => "max_reserved",
            BudgetKind::MaxFrag => "max_frag",
            BudgetKind::MaxLeaked => "max_leaked",
            BudgetKind::Baseline => "baseline",
        }
    }

    /// What it measures, in words.
    pub fn title(self) -> &'static str {
        match self {
            BudgetKind::MaxPeak => "peak",
            BudgetKind::MaxReserved => "reserved",
            BudgetKind::MaxFrag => "fragmentation",
            BudgetKind::MaxLeaked => "leaked",
            BudgetKind::Baseline => "growth over baseline",
        }
    }
}

/// The outcome of a budget (JSON `status`), and of a file or the report, which take the worst
/// of their budgets: `fail` before `unmeasured` before `pass`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Measured and within the limit (a file or the report: every budget passed).
    Pass,
    /// Measured over the limit, or a lower bound of the number already over it (a file or the
    /// report: at least one budget failed).
    Fail,
    /// The file lacks what the budget reads (a trace, steps, segments; see the module doc), so
    /// it neither holds nor breaks; the exit status is 1 unless `--allow-unmeasured` (a file or
    /// the report: none failed, at least one unmeasured).
    Unmeasured,
}

impl CheckStatus {
    /// The JSON name: `pass`, `fail` or `unmeasured`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Fail => "fail",
            CheckStatus::Unmeasured => "unmeasured",
        }
    }

    /// The worst of `statuses` (`pass` for none).
    fn worst(statuses: impl IntoIterator<Item = CheckStatus>) -> CheckStatus {
        statuses
            .into_iter()
            .fold(CheckStatus::Pass, |acc, s| match (acc, s) {
                (CheckStatus::Fail, _) | (_, CheckStatus::Fail) => CheckStatus::Fail,
                (CheckStatus::Unmeasured, _) | (_, CheckStatus::Unmeasured) => {
                    CheckStatus::Unmeasured
                }
                _ => CheckStatus::Pass,
            })
    }
}

/// A limit: bytes or a ratio.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// Bytes.
    Bytes(u64),
    /// A ratio 0..1 (fragmentation).
    Ratio(f64),
    /// Growth over the baseline: at least this fraction and at least these bytes.
    Growth(f64, u64),
}

/// One budget to hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    /// Which.
    pub kind: BudgetKind,
    /// The limit, resolved.
    pub limit: Limit,
    /// The limit as the user wrote it (`40GiB`, `50% of 79.11 GiB`).
    pub label: String,
}

/// What the leaks analysis found, as `--max-leaked` reads it. The default has no device
/// measured, so a budget on it is unmeasured, never passed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Leaked {
    /// Σ live bytes at the end of the trace over every finding (of the measured devices).
    pub bytes: u64,
    /// Per normalized site (count = findings).
    pub sites: BTreeMap<String, SiteTotal>,
    /// What limited the leaks analysis on the measured devices.
    pub notes: Vec<String>,
    /// Devices the leaks analysis could judge: a trace with at least
    /// [`crate::analyze::leaks::LeaksOptions::steps_needed`] steps.
    pub measured_devices: Vec<u32>,
    /// One reason per other device with segments or a trace, saying why it could not be
    /// judged: no trace, no steps found in its trace, or too few steps.
    pub unmeasured: Vec<String>,
}

/// The baseline side of `--baseline`: the baseline's own profile (whose peak must be measured
/// too) and the diff of the file against it.
#[derive(Clone, Copy, Debug)]
pub struct Baseline<'a> {
    /// The baseline measured at the same moment.
    pub profile: &'a Profile,
    /// The file against the baseline.
    pub diff: &'a DiffReport,
}

/// A site behind a budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SiteLine {
    /// Normalized site.
    pub site: String,
    /// Bytes (for `baseline`: the growth).
    pub bytes: i64,
    /// Allocations.
    pub count: u64,
}

/// One budget's result on one file.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BudgetResult {
    /// Which budget (`--max-peak`, `--max-reserved`, `--max-frag`, `--max-leaked`,
    /// `--baseline`).
    pub budget: BudgetKind,
    /// The limit as written.
    pub limit: String,
    /// `bytes` or `ratio`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["bytes", "ratio"])))]
    pub unit: &'static str,
    /// The limit in `unit` (bytes; for `baseline` the baseline's peak).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub limit_bytes: Option<u64>,
    /// The measured bytes (absent when unmeasured).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub actual_bytes: Option<u64>,
    /// The limit as a ratio.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "f64"))]
    pub limit_ratio: Option<f64>,
    /// The measured ratio (for `baseline`: the growth, absent when the baseline is 0; absent
    /// when unmeasured).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "f64"))]
    pub actual_ratio: Option<f64>,
    /// Bytes over the limit (negative: under); for `baseline` the growth in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "i64"))]
    pub over_bytes: Option<i64>,
    /// The device measured, when one device decides; `null` when unmeasured.
    pub device: Option<u32>,
    /// True when the budget was measured and holds (false when unmeasured).
    pub passed: bool,
    /// `pass` (measured, within the limit), `fail` (measured over it, or a lower bound already
    /// over it) or `unmeasured` (the file lacks what the budget reads: a trace, steps,
    /// segments; see `reason`).
    pub status: CheckStatus,
    /// With `unmeasured`: what the file lacks, per device.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub reason: Option<String>,
    /// True when `actual_bytes` is only a lower bound, already over the limit, because some
    /// devices could not be measured (they are in the notes); left out when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lower_bound: bool,
    /// One line for a person.
    pub message: String,
    /// The biggest sites behind the number (for `baseline`: the grown and new sites).
    pub top_sites: Vec<SiteLine>,
}

/// One file.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileCheck {
    /// The file as named.
    pub file: String,
    /// True when every budget was measured and holds.
    pub passed: bool,
    /// The worst of its budgets' statuses: `fail`, else `unmeasured`, else `pass`.
    pub status: CheckStatus,
    /// Per budget, in the order given.
    pub budgets: Vec<BudgetResult>,
    /// What limits the answer.
    pub notes: Vec<String>,
}

/// Budgets (peak, reserved, fragmentation, leaked, growth over a baseline) checked on each
/// snapshot: each passed, failed or unmeasured (the file lacks what the budget reads).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CheckReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// The moment measured.
    pub moment: String,
    /// Device capacity used for percentages.
    pub capacity_bytes: Option<u64>,
    /// The baseline file, if any.
    pub baseline: Option<String>,
    /// True when every file passes (every budget measured and held); false when any budget
    /// failed or is unmeasured, even with `allow_unmeasured`.
    pub passed: bool,
    /// The worst of the files' statuses: `fail` if any budget failed, else `unmeasured` if any
    /// is unmeasured, else `pass`.
    pub status: CheckStatus,
    /// Files broken (at least one budget failed).
    pub failed_files: usize,
    /// Files with at least one budget unmeasured.
    pub unmeasured_files: usize,
    /// True when unmeasured budgets were accepted (`--allow-unmeasured`): they then leave the
    /// exit status 0.
    pub allow_unmeasured: bool,
    /// Per file.
    pub files: Vec<FileCheck>,
}

impl CheckReport {
    /// True when the check succeeds (exit status 0): no budget failed, and none is unmeasured
    /// unless `allow_unmeasured`.
    pub fn succeeded(&self) -> bool {
        self.failed_files == 0 && (self.unmeasured_files == 0 || self.allow_unmeasured)
    }
}

/// Evaluates `budgets` on one file; `top` sites are listed behind each broken budget.
pub fn evaluate(
    file: &str,
    p: &Profile,
    leaked: &Leaked,
    baseline: Option<Baseline<'_>>,
    budgets: &[Budget],
    top: usize,
) -> FileCheck {
    let mut results = Vec::new();
    let mut notes = p.notes.clone();
    for b in budgets {
        let r = match (b.kind, b.limit) {
            (BudgetKind::MaxPeak, Limit::Bytes(limit)) => max_peak(b, limit, p, top, &mut notes),
            (BudgetKind::MaxReserved, Limit::Bytes(limit)) => {
                max_reserved(b, limit, p, top, &mut notes)
            }
            (BudgetKind::MaxLeaked, Limit::Bytes(limit)) => {
                max_leaked(b, limit, leaked, top, &mut notes)
            }
            (BudgetKind::MaxFrag, Limit::Ratio(limit)) => max_frag(b, limit, p, top, &mut notes),
            (BudgetKind::Baseline, Limit::Growth(min_growth, min_abs)) => match baseline {
                Some(base) => against_baseline(b, (min_growth, min_abs), p, base, top),
                None => continue,
            },
            _ => continue,
        };
        results.push(r);
    }
    notes.dedup();
    let status = CheckStatus::worst(results.iter().map(|r| r.status));
    FileCheck {
        file: file.to_string(),
        passed: status == CheckStatus::Pass,
        status,
        budgets: results,
        notes,
    }
}

/// The `top` sites of a device (none without one).
fn device_sites(d: Option<&DeviceProfile>, top: usize) -> Vec<SiteLine> {
    d.map(|d| lines(sorted_sites(&d.sites, top)))
        .unwrap_or_default()
}

/// `--max-peak`: the biggest device's live bytes at the moment against `limit`.
fn max_peak(
    b: &Budget,
    limit: u64,
    p: &Profile,
    top: usize,
    notes: &mut Vec<String>,
) -> BudgetResult {
    match peak_gaps(p) {
        None => {
            let d = p.biggest_device();
            bytes_result(
                b,
                limit,
                d.map_or(0, |d| d.live_bytes),
                d.map(|d| d.device),
                device_sites(d, top),
                false,
            )
        }
        Some(reason) => {
            // Recorded devices count as measured, unrecorded ones at `peak` as a lower
            // bound: either already over the limit breaks the budget.
            let d = p
                .devices
                .iter()
                .rev()
                .filter(|d| d.unrecorded.as_ref().map_or(true, |u| u.lower_bound))
                .max_by_key(|d| d.live_bytes);
            match d {
                Some(d) if d.live_bytes > limit => {
                    for d in &p.devices {
                        notes.extend(d.unrecorded.as_ref().map(|u| {
                            if u.lower_bound {
                                format!("{}: its final state is a lower bound", u.reason)
                            } else {
                                u.reason.clone()
                            }
                        }));
                        notes.extend(d.uncovered.as_ref().map(uncovered_live));
                    }
                    bytes_result(
                        b,
                        limit,
                        d.live_bytes,
                        Some(d.device),
                        device_sites(Some(d), top),
                        d.unrecorded.is_some() || d.uncovered.is_some(),
                    )
                }
                _ => unmeasured(b, reason),
            }
        }
    }
}

/// `--max-reserved`: the highest reserved bytes of a device against `limit`.
fn max_reserved(
    b: &Budget,
    limit: u64,
    p: &Profile,
    top: usize,
    notes: &mut Vec<String>,
) -> BudgetResult {
    // Per device the highest reserved bytes, or their floor where the segments do
    // not cover the trace: a floor already over the limit breaks the budget ("at
    // least"), one under it leaves the budget unmeasured, never passed.
    let reserved = |d: &DeviceProfile| {
        d.uncovered
            .as_ref()
            .map_or(d.peak_reserved_bytes, |u| u.peak_reserved_floor)
    };
    let d = p.devices.iter().rev().max_by_key(|d| reserved(d));
    let gaps: Vec<String> = p
        .devices
        .iter()
        .filter_map(|d| d.uncovered.as_ref().map(uncovered_reserved))
        .collect();
    match d {
        None => unmeasured(b, NOTHING.into()),
        Some(d) if gaps.is_empty() || reserved(d) > limit => {
            notes.extend(gaps);
            bytes_result(
                b,
                limit,
                reserved(d),
                Some(d.device),
                device_sites(Some(d), top),
                d.uncovered.is_some(),
            )
        }
        Some(_) => unmeasured(b, gaps.join("; ")),
    }
}

/// `--max-leaked`: the bytes retained per step against `limit`.
fn max_leaked(
    b: &Budget,
    limit: u64,
    leaked: &Leaked,
    top: usize,
    notes: &mut Vec<String>,
) -> BudgetResult {
    notes.extend(leaked.notes.iter().cloned());
    let sites = || lines(sorted_sites(&leaked.sites, top));
    if leaked.measured_devices.is_empty() && leaked.unmeasured.is_empty() {
        unmeasured(b, NOTHING.into())
    } else if leaked.unmeasured.is_empty() {
        bytes_result(b, limit, leaked.bytes, None, sites(), false)
    } else if leaked.bytes > limit {
        notes.extend(leaked.unmeasured.iter().cloned());
        bytes_result(b, limit, leaked.bytes, None, sites(), true)
    } else {
        unmeasured(b, leaked.unmeasured.join("; "))
    }
}

/// `--max-frag`: the most fragmented device's fragmentation against `limit`.
fn max_frag(
    b: &Budget,
    limit: f64,
    p: &Profile,
    top: usize,
    notes: &mut Vec<String>,
) -> BudgetResult {
    // A device whose segments do not cover its trace has no fragmentation to
    // measure (the unlisted segments' free blocks are unknown either way): the
    // others may still break the budget, never pass it.
    let gaps: Vec<String> = p
        .devices
        .iter()
        .filter_map(|d| {
            d.uncovered
                .as_ref()
                .map(|u| format!("{}: its fragmentation is not measured", u.reason))
        })
        .collect();
    let d = p
        .devices
        .iter()
        .rev()
        .filter(|d| d.reserved_bytes > 0 && d.uncovered.is_none())
        .max_by(|a, b| a.fragmentation.total_cmp(&b.fragmentation));
    match d {
        None if p.devices.is_empty() => unmeasured(b, NOTHING.into()),
        _ if !gaps.is_empty() && d.map_or(true, |d| d.fragmentation <= limit) => {
            unmeasured(b, gaps.join("; "))
        }
        None => unmeasured(
            b,
            format!(
                "no device holds segments at the moment ({}): nothing to measure",
                p.moment
            ),
        ),
        Some(d) => {
            notes.extend(gaps);
            let actual = d.fragmentation;
            let passed = actual <= limit;
            let on = format!(" on device {}", d.device);
            BudgetResult {
                budget: b.kind,
                limit: b.label.clone(),
                unit: "ratio",
                limit_bytes: None,
                actual_bytes: None,
                limit_ratio: Some(limit),
                actual_ratio: Some(actual),
                over_bytes: None,
                device: Some(d.device),
                passed,
                status: if passed {
                    CheckStatus::Pass
                } else {
                    CheckStatus::Fail
                },
                reason: None,
                lower_bound: false,
                message: if passed {
                    format!(
                        "fragmentation {:.1}%{on} within {}",
                        actual * 100.0,
                        b.label
                    )
                } else {
                    format!(
                        "fragmentation {:.1}%{on} exceeds {} by {:.1} points",
                        actual * 100.0,
                        b.label,
                        (actual - limit) * 100.0
                    )
                },
                top_sites: if passed {
                    Vec::new()
                } else {
                    device_sites(Some(d), top)
                },
            }
        }
    }
}

/// `--baseline`: the file's peak growth over the baseline's against the gate `growth`
/// (minimum growth, minimum bytes); unmeasured when either peak is.
fn against_baseline(
    b: &Budget,
    growth: (f64, u64),
    p: &Profile,
    baseline: Baseline<'_>,
    top: usize,
) -> BudgetResult {
    let (min_growth, min_abs) = growth;
    let Baseline {
        profile: base,
        diff: d,
    } = baseline;
    let gaps: Vec<String> = [("file", p), ("baseline", base)]
        .into_iter()
        .filter_map(|(side, prof)| {
            peak_gaps(prof).map(|g| format!("the {side}'s peak is not measured: {g}"))
        })
        .collect();
    if !gaps.is_empty() {
        return unmeasured(b, gaps.join("; "));
    }
    let g = diff::gate(d.peak, min_growth, min_abs);
    let growth = crate::units::signed_percent(d.peak.delta_bytes, d.peak.base);
    let message = format!(
        "peak {} vs baseline {}: {} ({growth}); fails at {} and {}",
        crate::units::iec(d.peak.cand),
        crate::units::iec(d.peak.base),
        crate::units::signed_iec(d.peak.delta_bytes),
        b.label,
        crate::units::iec(min_abs),
    );
    BudgetResult {
        budget: b.kind,
        limit: b.label.clone(),
        unit: "bytes",
        limit_bytes: Some(d.peak.base),
        actual_bytes: Some(d.peak.cand),
        limit_ratio: Some(min_growth),
        actual_ratio: g.growth,
        over_bytes: Some(d.peak.delta_bytes),
        device: None,
        passed: !g.failed,
        status: if g.failed {
            CheckStatus::Fail
        } else {
            CheckStatus::Pass
        },
        reason: None,
        lower_bound: false,
        message,
        top_sites: d
            .sites
            .iter()
            .filter(|s| matches!(s.status, Status::New | Status::Grown))
            .take(top)
            .map(|s| SiteLine {
                site: s.site.clone(),
                bytes: s.delta_bytes,
                count: s.cand_count,
            })
            .collect(),
    }
}

/// Gathers the per-file results into the report; `allow_unmeasured` accepts unmeasured
/// budgets (see [`CheckReport::succeeded`]).
pub fn report(
    moment: &str,
    capacity_bytes: Option<u64>,
    baseline: Option<String>,
    files: Vec<FileCheck>,
    allow_unmeasured: bool,
) -> CheckReport {
    let failed_files = files
        .iter()
        .filter(|f| f.status == CheckStatus::Fail)
        .count();
    let unmeasured_files = files
        .iter()
        .filter(|f| {
            f.budgets
                .iter()
                .any(|b| b.status == CheckStatus::Unmeasured)
        })
        .count();
    let status = CheckStatus::worst(files.iter().map(|f| f.status));
    CheckReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        moment: moment.to_string(),
        capacity_bytes,
        baseline,
        passed: status == CheckStatus::Pass,
        status,
        failed_files,
        unmeasured_files,
        allow_unmeasured,
        files,
    }
}

/// The leaks analysis ([`crate::analyze::leaks`]) as `--max-leaked` reads it: the live bytes at the
/// end of every finding (leaks and retained graphs), summed, per normalized site; which devices
/// it could judge, and why it could not judge the others (no trace, no steps found, too few
/// steps); the leaks analysis's own remarks on the judged devices become notes.
pub fn leaked(
    snap: &crate::model::Snapshot,
    replays: &[crate::replay::DeviceReplay],
    opts: &crate::analyze::profile::ProfileOptions,
) -> Leaked {
    let lopts = crate::analyze::leaks::LeaksOptions {
        sites: opts.sites,
        ..crate::analyze::leaks::LeaksOptions::default()
    };
    let report = crate::analyze::leaks::run(snap, replays, &lopts);
    let root = crate::analyze::profile::snapshot_root(snap);
    let mut out = Leaked::default();
    for f in &report.findings {
        out.bytes += f.live_bytes_at_end;
        let key =
            crate::analyze::profile::normalize_label(&f.site, root.as_deref(), opts.ignore_lines);
        let e = out.sites.entry(key).or_default();
        e.bytes += f.live_bytes_at_end;
        e.count += 1;
    }
    let needed = lopts.steps_needed();
    let (mut no_trace, mut no_steps) = (Vec::new(), Vec::new());
    let mut too_short = Vec::new();
    for dev in &snap.devices {
        if snap.device_trace(dev).is_empty() {
            if !snap.device_segments(dev).is_empty() {
                no_trace.push(dev.id);
            }
            continue;
        }
        let Some(d) = report.devices.iter().find(|d| d.steps.device == dev.id) else {
            continue;
        };
        let n = d.steps.steps.len();
        if n == 0 {
            no_steps.push(dev.id);
        } else if n < needed {
            too_short.push(format!(
                "the trace of device {} is too short: {} found, at least {} needed ({} warm-up + {}) to tell growth from noise",
                dev.id,
                plural(n, "step"),
                needed,
                lopts.warmup,
                lopts.min_steps
            ));
        } else {
            out.measured_devices.push(dev.id);
            out.notes
                .extend(d.notes.iter().map(|n| format!("leaks: {n}")));
        }
    }
    if !no_trace.is_empty() {
        out.unmeasured.push(format!(
            "no trace on {}: nothing says what was freed",
            devices_words(&no_trace)
        ));
    }
    if !no_steps.is_empty() {
        out.unmeasured.push(format!(
            "no steps found in the trace of {} (no ProfilerStep annotations, user_defined markers, optimizer steps, periodic structure or repeating loop lines)",
            devices_words(&no_steps)
        ));
    }
    out.unmeasured.extend(too_short);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_status_wins() {
        use CheckStatus::*;
        assert_eq!(CheckStatus::worst([]), Pass);
        assert_eq!(CheckStatus::worst([Pass, Pass]), Pass);
        assert_eq!(CheckStatus::worst([Pass, Unmeasured, Pass]), Unmeasured);
        assert_eq!(CheckStatus::worst([Unmeasured, Fail, Pass]), Fail);
        assert_eq!(CheckStatus::worst([Fail, Unmeasured]), Fail);
    }

    #[test]
    fn devices_are_listed_in_words() {
        assert_eq!(devices_words(&[3]), "device 3");
        assert_eq!(devices_words(&[0, 1]), "devices 0 and 1");
        assert_eq!(devices_words(&[0, 1, 3]), "devices 0, 1 and 3");
        assert_eq!(plural(1, "step"), "1 step");
        assert_eq!(plural(0, "step"), "0 steps");
    }

    /// GIVEN no measured device, WHEN a leaked budget reads the default `Leaked`, THEN it is
    /// unmeasured, never passed on nothing.
    #[test]
    fn the_default_leaked_is_unmeasured() {
        let p = Profile {
            moment: "peak".into(),
            root: None,
            devices: Vec::new(),
            sites: BTreeMap::new(),
            categories: None,
            notes: Vec::new(),
            frames: false,
            categories_basis: None,
            pretrace: BTreeMap::new(),
        };
        let b = Budget {
            kind: BudgetKind::MaxLeaked,
            limit: Limit::Bytes(1 << 30),
            label: "1.00 GiB".into(),
        };
        let f = evaluate("f", &p, &Leaked::default(), None, &[b], 5);
        assert_eq!(f.status, CheckStatus::Unmeasured);
        assert!(!f.passed);
        assert_eq!(f.budgets[0].reason.as_deref(), Some(NOTHING));
        let r = report("peak", None, None, vec![f.clone()], false);
        assert!(!r.succeeded());
        assert_eq!((r.failed_files, r.unmeasured_files), (0, 1));
        assert!(report("peak", None, None, vec![f], true).succeeded());
    }
}
