//! One budget's result in words and numbers: a measured byte budget passed or broken, an
//! unmeasured one with its reason, and the reasons a profile gives for what it could not
//! measure.

use super::{Budget, BudgetResult, CheckStatus, Limit, SiteLine, NOTHING};
use crate::analyze::profile::{Profile, SiteTotal, Uncovered};

/// Sites as a broken budget lists them.
pub(super) fn lines(v: Vec<(String, SiteTotal)>) -> Vec<SiteLine> {
    v.into_iter()
        .map(|(site, t)| SiteLine {
            site,
            bytes: t.bytes as i64,
            count: t.count,
        })
        .collect()
}

/// ` (+12.5%)`: how far over its limit a budget is; nothing for a limit of 0.
pub(super) fn over_percent(over: i64, limit: u64) -> String {
    if limit == 0 {
        String::new()
    } else {
        format!(" ({:+.1}%)", over as f64 * 100.0 / limit as f64)
    }
}

/// A byte budget measured: `actual` against `limit`. With `at_least`, `actual` is a lower
/// bound (some devices unmeasured), only ever used when it already exceeds the limit.
pub(super) fn bytes_result(
    b: &Budget,
    limit: u64,
    actual: u64,
    device: Option<u32>,
    sites: Vec<SiteLine>,
    at_least: bool,
) -> BudgetResult {
    // Exact in i128 (a limit may be any u64); `over_bytes` saturates at the ends of i64.
    let over_exact = actual as i128 - limit as i128;
    let over = over_exact.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    let passed = actual <= limit;
    let on = device
        .map(|d| format!(" on device {d}"))
        .unwrap_or_default();
    let title = b.kind.title();
    let least = if at_least { "at least " } else { "" };
    let message = if passed {
        format!(
            "{title} {}{on} within {} ({} to spare)",
            crate::units::iec(actual),
            b.label,
            crate::units::iec(limit - actual)
        )
    } else {
        format!(
            "{title} {least}{}{on} exceeds {} by {least}{}{}",
            crate::units::iec(actual),
            b.label,
            crate::units::iec(actual - limit),
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
        status: if passed {
            CheckStatus::Pass
        } else {
            CheckStatus::Fail
        },
        reason: None,
        lower_bound: at_least,
        message,
        top_sites: if passed { Vec::new() } else { sites },
    }
}

/// A budget with nothing to measure: the limit, no number, the reason.
pub(super) fn unmeasured(b: &Budget, reason: String) -> BudgetResult {
    let (unit, limit_bytes, limit_ratio) = match b.limit {
        Limit::Bytes(n) => ("bytes", Some(n), None),
        Limit::Ratio(r) => ("ratio", None, Some(r)),
        Limit::Growth(g, _) => ("bytes", None, Some(g)),
    };
    BudgetResult {
        budget: b.kind,
        limit: b.label.clone(),
        unit,
        limit_bytes,
        actual_bytes: None,
        limit_ratio,
        actual_ratio: None,
        over_bytes: None,
        device: None,
        passed: false,
        status: CheckStatus::Unmeasured,
        lower_bound: false,
        message: format!("{} not measured: {reason}", b.kind.title()),
        reason: Some(reason),
        top_sites: Vec::new(),
    }
}

/// Why the peak of a profile (every device's live bytes at the moment) is not measured, when
/// it is not: no device, or the reasons of its unrecorded devices.
pub(super) fn peak_gaps(p: &Profile) -> Option<String> {
    if p.devices.is_empty() {
        return Some(NOTHING.into());
    }
    let gaps: Vec<String> = p
        .devices
        .iter()
        .flat_map(|d| {
            let unrecorded = d.unrecorded.as_ref().map(|u| u.reason.clone());
            let uncovered = d.uncovered.as_ref().map(uncovered_live);
            unrecorded.into_iter().chain(uncovered)
        })
        .collect();
    (!gaps.is_empty()).then(|| gaps.join("; "))
}

/// The reason of a device whose segments do not cover its trace, as a live-bytes budget
/// reads it: what was live before the trace in the unlisted segments is unknown.
pub(super) fn uncovered_live(u: &Uncovered) -> String {
    format!(
        "{}: its live bytes are a lower bound (what was live before the trace in unlisted segments is unknown)",
        u.reason
    )
}

/// The reason of a device whose segments do not cover its trace, as a reserved-bytes budget
/// reads it.
pub(super) fn uncovered_reserved(u: &Uncovered) -> String {
    format!(
        "{}: its reserved bytes are at least {}",
        u.reason,
        crate::units::iec(u.peak_reserved_floor)
    )
}

/// `1 step`, `3 steps`.
pub(super) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `device 0`, `devices 0 and 1`, `devices 0, 1 and 3`.
pub(super) fn devices_words(ids: &[u32]) -> String {
    match ids {
        [one] => format!("device {one}"),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(u32::to_string).collect();
            format!("devices {} and {last}", rest.join(", "))
        }
        [] => "no device".into(),
    }
}
