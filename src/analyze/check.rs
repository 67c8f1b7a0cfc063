//! `memlens check`: budgets on snapshots (peak, reserved, fragmentation, leaked bytes, growth
//! against a baseline), each passed or broken, with the top sites behind a broken one.
//!
//! In: a file's [`Profile`], its never-freed bytes ([`Leaked`]), optionally its [`DiffReport`]
//! against a baseline, and resolved [`Budget`]s (percentages of the capacity already turned into
//! bytes by the caller). Out: a [`CheckReport`].
//!
//! Which number each budget reads, per file:
//! - `max_peak`: live requested bytes at the moment (default: the peak) of the device with the
//!   most, so a per-GPU budget holds on every GPU;
//! - `max_reserved`: the highest reserved bytes over the trace of any device (final reserved
//!   without a trace);
//! - `max_frag`: the worst device's fragmentation index (1 − largest free block / free) at the
//!   moment;
//! - `max_leaked`: the live bytes at the end of the trace of every finding of the leaks
//!   analysis (sites that grow step after step: leaks and retained graphs), summed over
//!   devices;
//! - `baseline`: the peak (summed over devices) against the baseline's, failing when it grew by
//!   at least `min_growth` and by at least `min_abs_bytes` (`diff`'s growth gate).

use super::diff::{self, DiffReport, Status};
use super::profile::{sorted_sites, Profile, SiteTotal};
use serde::Serialize;
use std::collections::BTreeMap;

/// Which budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
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

/// What the leaks analysis found, as `--max-leaked` reads it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Leaked {
    /// Σ live bytes at the end of the trace over every finding.
    pub bytes: u64,
    /// Per normalized site (count = findings).
    pub sites: BTreeMap<String, SiteTotal>,
    /// What limited the leaks analysis.
    pub notes: Vec<String>,
}

/// A site behind a budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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
pub struct BudgetResult {
    /// Which.
    pub budget: BudgetKind,
    /// The limit as written.
    pub limit: String,
    /// `bytes` or `ratio`.
    pub unit: &'static str,
    /// The limit in `unit` (bytes; for `baseline` the baseline's peak).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
    /// The measured bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual_bytes: Option<u64>,
    /// The limit as a ratio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_ratio: Option<f64>,
    /// The measured ratio (for `baseline`: the growth, absent when the baseline is 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual_ratio: Option<f64>,
    /// Bytes over the limit (negative: under); for `baseline` the growth in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_bytes: Option<i64>,
    /// The device measured, when one device decides.
    pub device: Option<u32>,
    /// True when the budget holds.
    pub passed: bool,
    /// One line for a person.
    pub message: String,
    /// The biggest sites behind the number (for `baseline`: the grown and new sites).
    pub top_sites: Vec<SiteLine>,
}

/// One file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileCheck {
    /// The file as named.
    pub file: String,
    /// True when every budget holds.
    pub passed: bool,
    /// Per budget, in the order given.
    pub budgets: Vec<BudgetResult>,
    /// What limits the answer.
    pub notes: Vec<String>,
}

/// The report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckReport {
    /// Always [`super::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The moment measured.
    pub moment: String,
    /// Device capacity used for percentages.
    pub capacity_bytes: Option<u64>,
    /// The baseline file, if any.
    pub baseline: Option<String>,
    /// True when every file passes.
    pub passed: bool,
    /// Files broken.
    pub failed_files: usize,
    /// Per file.
    pub files: Vec<FileCheck>,
}

fn lines(v: Vec<(String, SiteTotal)>) -> Vec<SiteLine> {
    v.into_iter()
        .map(|(site, t)| SiteLine {
            site,
            bytes: t.bytes as i64,
            count: t.count,
        })
        .collect()
}

fn over_percent(over: i64, limit: u64) -> String {
    if limit == 0 {
        String::new()
    } else {
        format!(" ({:+.1}%)", over as f64 * 100.0 / limit as f64)
    }
}

fn bytes_result(
    b: &Budget,
    limit: u64,
    actual: u64,
    device: Option<u32>,
    sites: Vec<SiteLine>,
) -> BudgetResult {
    let over = actual as i64 - limit as i64;
    let passed = actual <= limit;
    let on = device
        .map(|d| format!(" on device {d}"))
        .unwrap_or_default();
    let title = b.kind.title();
    let message = if passed {
        format!(
            "{title} {}{on} within {} ({} to spare)",
            crate::units::iec(actual),
            b.label,
            crate::units::iec((-over) as u64)
        )
    } else {
        format!(
            "{title} {}{on} exceeds {} by {}{}",
            crate::units::iec(actual),
            b.label,
            crate::units::iec(over as u64),
            over_percent(over, limit)
        )
    };
    BudgetResult {
        budget: b.kind,
        limit: b.label.clone(),
        unit: "bytes",
        limit_bytes: Some(limit),
        actual_bytes: Some(actual),
        limit_ratio: None,
        actual_ratio: None,
        over_bytes: Some(over),
        device,
        passed,
        message,
        top_sites: if passed { Vec::new() } else { sites },
    }
}

/// Evaluates `budgets` on one file; `top` sites are listed behind each broken budget.
pub fn evaluate(
    file: &str,
    p: &Profile,
    leaked: &Leaked,
    baseline: Option<&DiffReport>,
    budgets: &[Budget],
    top: usize,
) -> FileCheck {
    let mut results = Vec::new();
    let mut notes = p.notes.clone();
    let device_sites = |d: Option<&super::profile::DeviceProfile>| {
        d.map(|d| lines(sorted_sites(&d.sites, top)))
            .unwrap_or_default()
    };
    for b in budgets {
        let r = match (b.kind, b.limit) {
            (BudgetKind::MaxPeak, Limit::Bytes(limit)) => {
                let d = p.biggest_device();
                bytes_result(
                    b,
                    limit,
                    d.map_or(0, |d| d.live_bytes),
                    d.map(|d| d.device),
                    device_sites(d),
                )
            }
            (BudgetKind::MaxReserved, Limit::Bytes(limit)) => {
                let d = p.devices.iter().rev().max_by_key(|d| d.peak_reserved_bytes);
                bytes_result(
                    b,
                    limit,
                    d.map_or(0, |d| d.peak_reserved_bytes),
                    d.map(|d| d.device),
                    device_sites(d),
                )
            }
            (BudgetKind::MaxLeaked, Limit::Bytes(limit)) => {
                if p.devices.iter().any(|d| d.basis == "final_state") {
                    notes.push("devices without a trace count no leaked bytes: nothing says what was freed".into());
                }
                notes.extend(leaked.notes.iter().cloned());
                bytes_result(
                    b,
                    limit,
                    leaked.bytes,
                    None,
                    lines(sorted_sites(&leaked.sites, top)),
                )
            }
            (BudgetKind::MaxFrag, Limit::Ratio(limit)) => {
                let d = p
                    .devices
                    .iter()
                    .rev()
                    .max_by(|a, b| a.fragmentation.total_cmp(&b.fragmentation));
                let actual = d.map_or(0.0, |d| d.fragmentation);
                let passed = actual <= limit;
                let on = d
                    .map(|d| format!(" on device {}", d.device))
                    .unwrap_or_default();
                BudgetResult {
                    budget: b.kind,
                    limit: b.label.clone(),
                    unit: "ratio",
                    limit_bytes: None,
                    actual_bytes: None,
                    limit_ratio: Some(limit),
                    actual_ratio: Some(actual),
                    over_bytes: None,
                    device: d.map(|d| d.device),
                    passed,
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
                    top_sites: if passed { Vec::new() } else { device_sites(d) },
                }
            }
            (BudgetKind::Baseline, Limit::Growth(min_growth, min_abs)) => {
                let Some(d) = baseline else { continue };
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
            _ => continue,
        };
        results.push(r);
    }
    notes.dedup();
    FileCheck {
        file: file.to_string(),
        passed: results.iter().all(|r| r.passed),
        budgets: results,
        notes,
    }
}

/// Gathers the per-file results into the report.
pub fn report(
    moment: &str,
    capacity_bytes: Option<u64>,
    baseline: Option<String>,
    files: Vec<FileCheck>,
) -> CheckReport {
    let failed_files = files.iter().filter(|f| !f.passed).count();
    CheckReport {
        schema_version: super::SCHEMA_VERSION,
        moment: moment.to_string(),
        capacity_bytes,
        baseline,
        passed: failed_files == 0,
        failed_files,
        files,
    }
}

/// The leaks analysis ([`super::leaks`]) as `--max-leaked` reads it: the live bytes at the
/// end of every finding (leaks and retained graphs), summed, per normalized site; the leaks
/// analysis's own remarks (too few steps, ...) become notes.
pub fn leaked(
    snap: &crate::model::Snapshot,
    replays: &[crate::replay::DeviceReplay],
    opts: &super::profile::ProfileOptions,
) -> Leaked {
    let report = super::leaks::run(
        snap,
        replays,
        &super::leaks::LeaksOptions {
            sites: opts.sites,
            ..super::leaks::LeaksOptions::default()
        },
    );
    let root = super::profile::snapshot_root(snap);
    let mut out = Leaked::default();
    for f in &report.findings {
        out.bytes += f.live_bytes_at_end;
        let key = super::profile::normalize_label(&f.site, root.as_deref(), opts.ignore_lines);
        let e = out.sites.entry(key).or_default();
        e.bytes += f.live_bytes_at_end;
        e.count += 1;
    }
    for d in &report.devices {
        out.notes
            .extend(d.notes.iter().map(|n| format!("leaks: {n}")));
    }
    out
}
