//! Memory older than the trace that no stack names, and what the category rules make of it.
//!
//! An allocation alive before the trace's first event (the replay's `start < 0`: history was
//! turned on late, or the ring buffer wrapped) whose stack is empty has no site. Site tables
//! used to show it as `<no frames>`, mixed with the frameless allocations made *during* the
//! trace (the autograd engine's thread under `stacks="python"`), though `categories` already
//! says what it likely is (rule 7 of [`crate::analyze::categories::rules`]: never freed, so
//! `parameters`, or `gradients` when its size pairs with a parameter's). Here each such
//! allocation gets that verdict from [`Ctx::classify`] itself — not a second guess, so `top`
//! and `categories` agree — and site tables label it
//! `<before trace, no stack> likely parameters` ([`Pretrace::label`]); a frameless allocation
//! made during the trace keeps `<no frames>`.
//!
//! Used by the analyses that build site rows (`top` and what reads it — `oom`, the page —
//! `flame`, and [`crate::analyze::profile`] for `diff`, `check` and `batch`); it sits above
//! `categories` and beside `sites`, which knows nothing of it.

use crate::analyze::categories::rules::Ctx;
use crate::model::{Action, Snapshot, TraceEvent};
use crate::replay::steps::{self, DeviceSteps};
use crate::replay::{Allocation, DeviceReplay};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// The label of pre-trace memory without a stack, before its likely kind (fits a table's
/// site column at 80 columns with the longest kind it can get).
pub const LABEL: &str = "<before trace, no stack>";

/// What a site row of pre-trace, stackless memory says about it (flattened into the row's
/// JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Pretrace {
    /// Always true: the row's allocations were alive before the trace's first event and no
    /// stack was recorded for them (the stable key of such a row).
    pub predates_trace: bool,
    /// The category the rules of `memlens categories` give them (`parameters`, `gradients`,
    /// `temporaries`); absent when no rule names one (`unknown`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub likely_kind: Option<String>,
    /// That rule's confidence: `high`, `medium` or `low`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["high", "medium", "low"])))]
    pub kind_confidence: &'static str,
    /// Why, in words: the facts and the category rule that decided.
    pub evidence: String,
}

impl Pretrace {
    /// `<before trace, no stack> likely parameters`, or [`LABEL`] alone without a kind.
    pub fn label(&self) -> String {
        match &self.likely_kind {
            Some(k) => format!("{LABEL} likely {k}"),
            None => LABEL.to_string(),
        }
    }
}

/// True when `a` was alive before the trace's first event and no stack was recorded for it.
pub fn is_pretrace(snap: &Snapshot, a: &Allocation) -> bool {
    a.start < 0 && snap.stacks.get(a.stack).is_empty()
}

/// The verdicts of one device's pre-trace, stackless allocations.
#[derive(Clone, Debug, Default)]
pub struct Kinds {
    /// One entry per likely kind (`None`: unknown), in order of first use.
    table: Vec<Pretrace>,
    /// Per allocation, by (address, end): its entry. Everything the rules read of such an
    /// allocation (no frames, start -1) is in its address (size pairing) and end (never
    /// freed), so allocations sharing both share a verdict.
    by_alloc: FxHashMap<(u64, i64), u32>,
}

impl Kinds {
    /// The verdicts of every pre-trace, stackless allocation of replay `r`, as
    /// `memlens categories` gives them (default rules; no user rule can match an empty stack).
    /// Costs the rules' passes over the trace only when the replay holds such an allocation.
    pub fn of(snap: &Snapshot, r: &DeviceReplay, trace: &[TraceEvent]) -> Kinds {
        let candidates: Vec<&Allocation> = r
            .allocations
            .iter()
            .filter(|a| is_pretrace(snap, a))
            .collect();
        let mut out = Kinds::default();
        if candidates.is_empty() {
            return out;
        }
        // As `categories::run` sets the rules up for this device.
        let final_state = !trace.iter().any(|e| e.action == Action::Alloc);
        let st = if final_state {
            DeviceSteps::none(r.device)
        } else {
            steps::find(snap, r)
        };
        let mut ctx = Ctx::new(snap, trace, &st, &[], &r.allocations);
        if final_state {
            ctx = ctx.final_state();
        }
        for a in candidates {
            let (category, rule, confidence) = ctx.classify(a);
            let kind = (category != "unknown").then_some(category);
            let id = match out
                .table
                .iter()
                .position(|p| p.likely_kind.as_deref() == kind)
            {
                Some(i) => {
                    let p = &mut out.table[i];
                    if !p.evidence.contains(rule) {
                        p.evidence
                            .push_str(&format!("; or: {rule} ({confidence} confidence)"));
                        p.kind_confidence = weaker(p.kind_confidence, confidence);
                    }
                    i
                }
                None => {
                    out.table.push(Pretrace {
                        predates_trace: true,
                        likely_kind: kind.map(str::to_string),
                        kind_confidence: confidence,
                        evidence: format!(
                            "alive before the trace's first event and no stack recorded; category rule: {rule} ({confidence} confidence)"
                        ),
                    });
                    out.table.len() - 1
                }
            };
            out.by_alloc.insert((a.addr, a.end), id as u32);
        }
        out
    }

    /// True when the device holds no pre-trace, stackless allocation.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The entry of `a`, when it is a pre-trace, stackless allocation.
    pub fn id(&self, snap: &Snapshot, a: &Allocation) -> Option<u32> {
        if self.table.is_empty() || !is_pretrace(snap, a) {
            return None;
        }
        self.by_alloc.get(&(a.addr, a.end)).copied()
    }

    /// Entry `id` ([`Kinds::id`]).
    pub fn get(&self, id: u32) -> &Pretrace {
        &self.table[id as usize]
    }

    /// The verdict of `a`, when it is a pre-trace, stackless allocation.
    pub fn of_alloc(&self, snap: &Snapshot, a: &Allocation) -> Option<&Pretrace> {
        self.id(snap, a).map(|i| self.get(i))
    }
}

/// The weaker of two confidences.
fn weaker(a: &'static str, b: &'static str) -> &'static str {
    let rank = |c: &str| match c {
        "high" => 2,
        "medium" => 1,
        _ => 0,
    };
    if rank(b) < rank(a) {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(kind: Option<&str>) -> Pretrace {
        Pretrace {
            predates_trace: true,
            likely_kind: kind.map(str::to_string),
            kind_confidence: "low",
            evidence: String::new(),
        }
    }

    #[test]
    fn labels_name_the_kind_and_fit_a_table() {
        assert_eq!(
            verdict(Some("parameters")).label(),
            "<before trace, no stack> likely parameters"
        );
        assert_eq!(verdict(None).label(), LABEL);
        // The site column of an 80-column `top` table holds 42 characters.
        for k in ["parameters", "gradients"] {
            assert!(verdict(Some(k)).label().chars().count() <= 42, "{k}");
        }
        // No `:`: site normalization (`diff`, `--ignore-lines`) leaves it whole.
        assert!(!verdict(Some("parameters")).label().contains(':'));
    }

    #[test]
    fn the_weaker_confidence_wins() {
        assert_eq!(weaker("high", "low"), "low");
        assert_eq!(weaker("low", "medium"), "low");
        assert_eq!(weaker("medium", "high"), "medium");
    }

    #[test]
    fn only_predates_trace_is_written() {
        let v = serde_json::to_value(verdict(None)).unwrap();
        assert_eq!(v["predates_trace"], true);
        assert!(v.get("likely_kind").is_none());
    }
}
