//! Ranks grouped by their parallel coordinates (tp, cp, ep, dp, pp): per dimension, each
//! coordinate's ranks and their peaks, how far the groups' medians lie apart against how far
//! ranks of one group do, and the ranks that stand out within their pipeline stage.
//!
//! Why the stage. Pipeline stages hold different layers (the first the embedding, the last the
//! head and the loss) and, under 1F1B, different numbers of micro-batches in flight, so their
//! peaks differ by design; tensor, context and data parallel ranks of one stage do the same
//! work on equal shards and should not. A rank is therefore judged (the cross-rank rule)
//! against the other ranks of its stage.

use super::names::Topology;
use super::{stands_out, threshold, RankFacts, MIN_RANKS};

use serde::Serialize;
use std::collections::BTreeMap;

/// The ranks by parallel coordinates (`cross_rank.parallel`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Parallel {
    /// `topology` (`--topology FILE`) or `names` (the files' paths, `tp1_pp0`).
    pub source: String,
    /// Ranks placed (with coordinates).
    pub ranks_placed: usize,
    /// Per dimension with at least two coordinates among the ranks, in `tp, cp, ep, dp, pp`
    /// order.
    pub by_axis: Vec<AxisGroups>,
    /// Pipeline stages with at least 4 ranks, judged.
    pub stages_judged: usize,
    /// Ranks whose peak stands out among the ranks of their pipeline stage, biggest excess
    /// first (empty without a `pp` dimension).
    pub stage_outliers: Vec<StageOutlier>,
    /// The dimension whose groups' medians lie furthest apart, by more than a tenth of the
    /// placed ranks' median peak and 1 MiB (the first in `tp, cp, ep, dp, pp` order on ties):
    /// what the peaks follow. `null` when none does.
    pub widest_axis: Option<String>,
}

/// One dimension's groups.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AxisGroups {
    /// `tp`, `cp`, `ep`, `dp` or `pp`.
    pub axis: String,
    /// One group per coordinate, ascending.
    pub groups: Vec<CoordGroup>,
    /// Highest group median − lowest: how much the dimension separates peaks.
    pub between_bytes: u64,
    /// The widest group (its highest peak − its lowest): how much ranks of one coordinate
    /// differ.
    pub within_bytes: u64,
}

/// The ranks at one coordinate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CoordGroup {
    /// The coordinate.
    pub value: u32,
    /// Its ranks.
    pub ranks: usize,
    /// The median of their peaks.
    pub median_peak_bytes: u64,
    /// The lowest peak.
    pub min_peak_bytes: u64,
    /// The highest.
    pub max_peak_bytes: u64,
    /// Its rank (the lowest on ties).
    pub max_rank: u32,
}

/// A rank that stands out within its pipeline stage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StageOutlier {
    /// Rank.
    pub rank: u32,
    /// Its stage (`pp` coordinate).
    pub stage: u32,
    /// Its peak.
    pub peak_bytes: u64,
    /// The median peak of its stage's ranks.
    pub stage_median_bytes: u64,
    /// Peak − that median.
    pub excess_bytes: u64,
    /// Ranks in the stage.
    pub stage_ranks: usize,
}

/// The grouping of `ranks` (sorted by rank) by `topology`, else by the coordinates their
/// names carry; `None` when no dimension has two coordinates. Ranks without coordinates
/// (beyond the topology, or named without them) are left out and said in `cannot_judge`.
pub fn parallel(
    ranks: &[&RankFacts],
    topology: Option<&Topology>,
    cannot_judge: &mut Vec<String>,
) -> Option<Parallel> {
    let placed: Vec<(&RankFacts, BTreeMap<String, u32>)> = ranks
        .iter()
        .filter_map(|r| {
            let c = match topology {
                Some(t) => t.coords(r.rank)?,
                None => r.coords.clone(),
            };
            (!c.is_empty()).then_some((*r, c))
        })
        .collect();
    let by_axis: Vec<AxisGroups> = super::names::AXES
        .iter()
        .filter_map(|axis| axis_groups(axis, &placed))
        .collect();
    if by_axis.is_empty() {
        return None;
    }
    if placed.len() < ranks.len() {
        cannot_judge.push(format!(
            "parallel coordinates of {} of {} ranks: {}",
            ranks.len() - placed.len(),
            ranks.len(),
            if topology.is_some() {
                "beyond the topology's ranks"
            } else {
                "their paths name none"
            }
        ));
    }
    let mut stages: BTreeMap<u32, Vec<&RankFacts>> = BTreeMap::new();
    for (r, c) in &placed {
        if let Some(&s) = c.get("pp") {
            stages.entry(s).or_default().push(r);
        }
    }
    let mut stage_outliers = Vec::new();
    let mut stages_judged = 0;
    if stages.len() >= 2 {
        let small = stages.values().filter(|v| v.len() < MIN_RANKS).count();
        if small > 0 {
            cannot_judge.push(format!(
                "which ranks stand out within their pipeline stage: {small} of {} stages have fewer than {MIN_RANKS} ranks",
                stages.len()
            ));
        }
        for (stage, members) in &stages {
            if members.len() < MIN_RANKS {
                continue;
            }
            stages_judged += 1;
            let peaks: Vec<u64> = members.iter().map(|r| r.peak_bytes).collect();
            let t = threshold(&peaks);
            for r in members.iter().filter(|r| stands_out(r.peak_bytes, t)) {
                stage_outliers.push(StageOutlier {
                    rank: r.rank,
                    stage: *stage,
                    peak_bytes: r.peak_bytes,
                    stage_median_bytes: t.0,
                    excess_bytes: r.peak_bytes - t.0,
                    stage_ranks: members.len(),
                });
            }
        }
    }
    stage_outliers.sort_by(|a, b| {
        b.excess_bytes
            .cmp(&a.excess_bytes)
            .then(a.rank.cmp(&b.rank))
    });
    // What a difference must exceed to be followed: a tenth of the placed ranks' median peak
    // and 1 MiB, as for a rank to stand out.
    let peaks: Vec<u64> = placed.iter().map(|(r, _)| r.peak_bytes).collect();
    let floor = (threshold(&peaks).0 / 10).max(super::MIN_EXCESS_BYTES);
    let widest_axis = by_axis
        .iter()
        .filter(|a| a.between_bytes > floor)
        .rev()
        .max_by_key(|a| a.between_bytes)
        .map(|a| a.axis.clone());
    Some(Parallel {
        widest_axis,
        source: if topology.is_some() {
            "topology"
        } else {
            "names"
        }
        .to_string(),
        ranks_placed: placed.len(),
        by_axis,
        stages_judged,
        stage_outliers,
    })
}

/// The groups of one dimension; `None` with fewer than two coordinates.
fn axis_groups(axis: &str, placed: &[(&RankFacts, BTreeMap<String, u32>)]) -> Option<AxisGroups> {
    let mut by: BTreeMap<u32, Vec<(u32, u64)>> = BTreeMap::new();
    for (r, c) in placed {
        if let Some(&v) = c.get(axis) {
            by.entry(v).or_default().push((r.rank, r.peak_bytes));
        }
    }
    if by.len() < 2 {
        return None;
    }
    let groups: Vec<CoordGroup> = by
        .into_iter()
        .map(|(value, v)| {
            let peaks: Vec<u64> = v.iter().map(|x| x.1).collect();
            let (max_rank, max) = v
                .iter()
                .copied()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .unwrap_or((0, 0));
            CoordGroup {
                value,
                ranks: v.len(),
                median_peak_bytes: threshold(&peaks).0,
                min_peak_bytes: peaks.iter().copied().min().unwrap_or(0),
                max_peak_bytes: max,
                max_rank,
            }
        })
        .collect();
    let medians = groups.iter().map(|g| g.median_peak_bytes);
    let between = medians.clone().max().unwrap_or(0) - medians.min().unwrap_or(0);
    let within = groups
        .iter()
        .map(|g| g.max_peak_bytes - g.min_peak_bytes)
        .max()
        .unwrap_or(0);
    Some(AxisGroups {
        axis: axis.to_string(),
        groups,
        between_bytes: between,
        within_bytes: within,
    })
}
