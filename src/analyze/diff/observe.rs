//! What an engineer reading two runs would note, in words, each with the bytes it explains
//! (`shared/docs/reading.md` §2): a peak that moved to another phase first, then the rest by
//! the bytes they explain, largest first; observations that explain no bytes (settings,
//! allocation counts, OOMs, private pools) last, in that order.
//!
//! A category at one run's peak only is "gone" or "new" only when both peaks sit in the
//! same phase; otherwise it is absent at that peak because the peak is in another phase.
//! Fragmentation is stated as bytes (reserved but unallocated, §6), and only when its change
//! is at least 1% of the larger peak: a ratio on a small base is no headline.

use super::DiffReport;
use super::Run;
use crate::analyze::frag::pools::has_private_pool;
use crate::model::{Action, Snapshot};
use crate::units::{iec, signed_iec};
use serde::Serialize;

/// A change of reserved-but-unallocated bytes is worth saying from this share of the larger
/// peak (1%, as a fix must save to matter).
const MATERIAL_SHARE: u64 = 100;

/// One observation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Observation {
    /// What kind: `peak_moved`, `phase_peaks`, `divergence`, `category_new`, `category_gone`,
    /// `category_other_phase`, `reserved_unallocated`, `allocations`, `settings`,
    /// `private_pools`, `ooms`.
    pub code: &'static str,
    /// The observation in words (the same text as in `observations`).
    pub text: String,
    /// The bytes it explains (what orders the list); `null` for one about no bytes.
    pub bytes: Option<u64>,
}

impl Observation {
    fn new(code: &'static str, text: String, bytes: Option<u64>) -> Observation {
        Observation { code, text, bytes }
    }
}

/// `oom` entries of every device's trace.
fn ooms(s: &Snapshot) -> u64 {
    s.events.iter().filter(|e| e.action == Action::Oom).count() as u64
}

/// `alloc` entries of every device's trace.
fn allocations(s: &Snapshot) -> u64 {
    s.events
        .iter()
        .filter(|e| e.action == Action::Alloc)
        .count() as u64
}

/// The observations of `report` (its settings, steps and phases already attached), in order.
pub fn observations(base: Run, cand: Run, report: &DiffReport) -> Vec<Observation> {
    let mut out = Vec::new();
    out.extend(phase_observations(report));
    out.extend(unallocated(report));
    out.extend(category_observations(report));
    out.extend(divergence(report));
    out.extend(allocation_counts(base, cand, report));
    out.extend(settings(report));
    out.extend(pools(base, cand));
    out.extend(oom_counts(base, cand, report));
    // The moved peak frames every other sentence; the rest lead with the most bytes (a stable
    // sort keeps the order above among equals and for those about no bytes).
    out.sort_by_key(|o| {
        (
            o.code != "peak_moved",
            o.bytes.is_none(),
            std::cmp::Reverse(o.bytes.unwrap_or(0)),
        )
    });
    out
}

/// The peak moved to another phase; each phase's peak beside its counterpart.
fn phase_observations(report: &DiffReport) -> Vec<Observation> {
    let Some(p) = report.peak_phases.as_ref().filter(|p| p.moved) else {
        return Vec::new();
    };
    let mut out = vec![Observation::new(
        "peak_moved",
        format!(
            "the peak moved from {} to {}: the two peaks hold different phases' memory, so a category or site at one peak only may belong to the other phase; compare each phase's peak with its counterpart (phase by phase)",
            p.base.phase.noun(),
            p.cand.phase.noun()
        ),
        Some(report.peak.delta_bytes.unsigned_abs()),
    )];
    let widest = report
        .by_phase
        .iter()
        .filter_map(|r| Some((r, r.delta_bytes?)))
        .max_by_key(|(_, d)| d.unsigned_abs());
    if let Some((r, d)) = widest.filter(|(_, d)| *d != 0) {
        out.push(Observation::new(
            "phase_peaks",
            format!(
                "phase by phase, {} peaks {} {} in the candidate ({} → {})",
                r.phase.noun(),
                iec(d.unsigned_abs()),
                if d > 0 { "higher" } else { "lower" },
                iec(r.base_peak_bytes.unwrap_or(0)),
                iec(r.cand_peak_bytes.unwrap_or(0))
            ),
            Some(d.unsigned_abs()),
        ));
    }
    out
}

/// Reserved but unallocated bytes, when their change is material.
fn unallocated(report: &DiffReport) -> Option<Observation> {
    let f = report.reserved_unallocated;
    let larger = report.peak.base.max(report.peak.cand);
    let change = f.delta_bytes.unsigned_abs();
    (change > 0 && change * MATERIAL_SHARE >= larger).then(|| {
        Observation::new(
            "reserved_unallocated",
            format!(
                "reserved but unallocated memory {} from {} to {} ({})",
                if f.delta_bytes > 0 { "rose" } else { "fell" },
                iec(f.base),
                iec(f.cand),
                signed_iec(f.delta_bytes)
            ),
            Some(change),
        )
    })
}

/// Categories at one run's moment only: new or gone when both moments sit in one phase,
/// absent at a peak in another phase otherwise.
fn category_observations(report: &DiffReport) -> Vec<Observation> {
    let moved = report.peak_phases.as_ref().filter(|p| p.moved);
    let mut out = Vec::new();
    for c in report.categories.iter().flatten() {
        let only_cand = c.base_count == 0 && c.cand_count > 0;
        let only_base = c.cand_count == 0 && c.base_count > 0;
        let o = match (moved, only_cand, only_base) {
            (Some(p), true, _) => Observation::new(
                "category_other_phase",
                format!(
                    "category {} is at the candidate's peak ({}) and absent at the base's, which is {}: another phase, not a new allocation",
                    c.category,
                    iec(c.cand_bytes),
                    p.base.phase.place()
                ),
                Some(c.cand_bytes),
            ),
            (Some(p), _, true) => Observation::new(
                "category_other_phase",
                format!(
                    "category {} is absent at the candidate's peak, which is {} (the base's peak, {}, holds {}): another phase, not a removal",
                    c.category,
                    p.cand.phase.place(),
                    p.base.phase.place(),
                    iec(c.base_bytes)
                ),
                Some(c.base_bytes),
            ),
            (None, true, _) => Observation::new(
                "category_new",
                format!(
                    "category {} appears in the candidate ({})",
                    c.category,
                    iec(c.cand_bytes)
                ),
                Some(c.cand_bytes),
            ),
            (None, _, true) => Observation::new(
                "category_gone",
                format!(
                    "category {} is gone from the candidate (was {})",
                    c.category,
                    iec(c.base_bytes)
                ),
                Some(c.base_bytes),
            ),
            _ => continue,
        };
        out.push(o);
    }
    out
}

/// The step where the runs part most, and the site that moved its peak the way it went.
fn divergence(report: &DiffReport) -> Option<Observation> {
    let s = report.steps.as_ref()?;
    let d = s.divergence.as_ref()?;
    let top = d
        .sites
        .iter()
        .filter(|x| x.delta_bytes.signum() == d.delta_bytes.signum())
        .max_by_key(|x| x.delta_bytes.unsigned_abs())
        .map(|x| format!(", most at {} ({})", x.site, signed_iec(x.delta_bytes)))
        .unwrap_or_default();
    let phases = d
        .phases
        .as_ref()
        .filter(|p| p.moved)
        .map(|p| {
            format!(
                "; the two step peaks sit in different phases ({} in the base, {} in the candidate)",
                p.base.phase.place(),
                p.cand.phase.place()
            )
        })
        .unwrap_or_default();
    Some(Observation::new(
        "divergence",
        format!(
            "the runs part most at step {} of device {}: its peak is {} {}{top}{phases}",
            d.step,
            s.device,
            iec(d.delta_bytes.unsigned_abs()),
            if d.delta_bytes > 0 {
                "higher in the candidate"
            } else {
                "lower in the candidate"
            }
        ),
        Some(d.delta_bytes.unsigned_abs()),
    ))
}

/// A change of more than half in the number of allocations.
fn allocation_counts(base: Run, cand: Run, report: &DiffReport) -> Option<Observation> {
    let peak = report.peak.delta_bytes;
    let peak_words = if peak == 0 {
        "the same peak".to_string()
    } else {
        format!(
            "a peak {} {}",
            iec(peak.unsigned_abs()),
            if peak > 0 { "higher" } else { "lower" }
        )
    };
    let (ab, ac) = (allocations(base.snap), allocations(cand.snap));
    let similar = ac * 2 <= ab * 3 && ab * 2 <= ac * 3;
    (ab > 0 && ac > 0 && !similar).then(|| {
        let (more, ratio) = if ac > ab {
            ("more", ac as f64 / ab as f64)
        } else {
            ("fewer", ab as f64 / ac as f64)
        };
        Observation::new(
            "allocations",
            format!(
                "the candidate makes {ratio:.1}x {more} allocations ({ab} → {ac}) with {peak_words}"
            ),
            None,
        )
    })
}

/// Allocator settings that differ.
fn settings(report: &DiffReport) -> Option<Observation> {
    (!report.settings.is_empty()).then(|| {
        let list: Vec<String> = report
            .settings
            .iter()
            .map(|s| {
                format!(
                    "{} {} → {}",
                    s.key,
                    s.base.as_deref().unwrap_or("(unset)"),
                    s.cand.as_deref().unwrap_or("(unset)")
                )
            })
            .collect();
        Observation::new(
            "settings",
            format!("allocator settings differ: {}", list.join("; ")),
            None,
        )
    })
}

/// Private pools in one run only.
fn pools(base: Run, cand: Run) -> Option<Observation> {
    let text = match (has_private_pool(base.snap), has_private_pool(cand.snap)) {
        (false, true) => "the candidate uses private pools (CUDA graphs or MemPool) and the base none: a graph's pool holds its memory for the graph's lifetime (`memlens frag --by pool`)",
        (true, false) => "the base uses private pools (CUDA graphs or MemPool) and the candidate none",
        _ => return None,
    };
    Some(Observation::new("private_pools", text.into(), None))
}

/// OOMs one run hits more.
fn oom_counts(base: Run, cand: Run, report: &DiffReport) -> Option<Observation> {
    let (ob, oc) = (ooms(base.snap), ooms(cand.snap));
    let n = |k: u64| match k {
        0 => "no OOM".to_string(),
        1 => "1 OOM".to_string(),
        k => format!("{k} OOMs"),
    };
    (ob != oc).then(|| {
        Observation::new(
            "ooms",
            format!(
                "the base hits {} and the candidate {}{}",
                n(ob),
                n(oc),
                if report.settings.is_empty() {
                    String::new()
                } else {
                    " under its allocator settings (`memlens whatif BASE --set ...` predicts each setting's outcome from the base alone)".into()
                }
            ),
            None,
        )
    })
}
