//! The step × rank peak matrix: each rank's peak per training step, where steps exist. Steps
//! come from the paths when the files were dumped at several steps (torchtitan's
//! `iteration_N/rankR_…`: one file per step and rank), otherwise from each rank's trace
//! (`ProfilerStep#N` annotations, markers, the optimizer's steps, repeats; see
//! `replay::steps`), aligned by step name: annotated steps by their number, steps found by
//! repeats by their position in the trace.

use super::{stands_out, threshold, RankFacts, MIN_RANKS};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Most steps kept: the last ones.
pub const MAX_STEPS: usize = 32;

/// The steps a rank's trace marks (its biggest device's), as the matrix needs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceSteps {
    /// How they were found (`annotations`, `user_defined`, `optimizer_step`, `periodic`,
    /// `loop`).
    pub found_by: String,
    /// (step name, highest live requested bytes inside the step), in trace order.
    pub peaks: Vec<(String, u64)>,
}

/// The step × rank peak matrix (`cross_rank.steps`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepMatrix {
    /// `path`: the files' paths name the step (one file per step and rank); `trace`: each
    /// rank's trace marks its steps.
    pub source: String,
    /// With `trace`: how the ranks' steps were found, each way once (`annotations`,
    /// `user_defined`, `optimizer_step`, `periodic`, `loop`).
    pub found_by: Vec<String>,
    /// Steps that at least two ranks have (the matrix keeps the last [`MAX_STEPS`] of them).
    pub steps_found: usize,
    /// Steps only one rank has, left out (a rank whose trace reaches further back).
    pub steps_of_one_rank: usize,
    /// The steps kept, in order (the matrix's columns).
    pub steps: Vec<String>,
    /// One row per rank with one of `steps`, ascending: its peak at each step of `steps`
    /// (`null`: the rank has no such step).
    pub ranks: Vec<StepRow>,
    /// Per step of `steps`: the peaks across ranks.
    pub columns: Vec<StepColumn>,
}

/// One rank's peaks per step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepRow {
    /// Rank.
    pub rank: u32,
    /// Its peak at each step (bytes), `null` where it has none.
    pub peaks: Vec<Option<u64>>,
}

/// One step across ranks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepColumn {
    /// The step.
    pub step: String,
    /// Ranks with this step.
    pub ranks: usize,
    /// The median of their peaks.
    pub median_bytes: u64,
    /// The highest peak.
    pub max_bytes: u64,
    /// Its rank (the lowest on ties).
    pub max_rank: u32,
    /// Ranks whose peak at this step stands out (the cross-rank rule; empty with fewer than
    /// 4 ranks at the step).
    pub outlier_ranks: Vec<u32>,
}

/// A step name's order: its number (the digits it ends with), then the name.
fn step_key(name: &str) -> (u64, String) {
    let digits: String = name
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    (digits.parse().unwrap_or(u64::MAX), name.to_string())
}

/// The matrix of `ranks` (sorted by rank); `None` when no step is had by two ranks.
pub fn step_matrix(ranks: &[&RankFacts]) -> Option<StepMatrix> {
    let path_steps: BTreeSet<u64> = ranks.iter().filter_map(|r| r.path_step).collect();
    // (rank, step key) -> peak; the highest where a rank has one step twice.
    let mut cells: BTreeMap<(u32, (u64, String)), u64> = BTreeMap::new();
    let mut found_by = BTreeSet::new();
    let source = if path_steps.len() >= 2 {
        for r in ranks {
            if let Some(s) = r.path_step {
                let c = cells.entry((r.rank, (s, s.to_string()))).or_insert(0);
                *c = (*c).max(r.peak_bytes);
            }
        }
        "path"
    } else {
        for r in ranks {
            if let Some(t) = &r.trace_steps {
                if t.peaks.is_empty() {
                    continue;
                }
                found_by.insert(t.found_by.clone());
                for (name, peak) in &t.peaks {
                    let c = cells.entry((r.rank, step_key(name))).or_insert(0);
                    *c = (*c).max(*peak);
                }
            }
        }
        "trace"
    };
    let with_steps: BTreeSet<u32> = cells.keys().map(|(r, _)| *r).collect();
    if with_steps.len() < 2 {
        return None;
    }
    let mut held: BTreeMap<&(u64, String), usize> = BTreeMap::new();
    for (_, s) in cells.keys() {
        *held.entry(s).or_default() += 1;
    }
    let steps_of_one_rank = held.values().filter(|&&n| n < 2).count();
    let all: Vec<&(u64, String)> = held
        .into_iter()
        .filter(|(_, n)| *n >= 2)
        .map(|(s, _)| s)
        .collect();
    if all.is_empty() {
        return None;
    }
    let steps_found = all.len();
    let kept: Vec<&(u64, String)> = all
        .into_iter()
        .skip(steps_found.saturating_sub(MAX_STEPS))
        .collect();
    let rows: Vec<StepRow> = with_steps
        .iter()
        .map(|&rank| StepRow {
            rank,
            peaks: kept
                .iter()
                .map(|s| cells.get(&(rank, (*s).clone())).copied())
                .collect(),
        })
        .filter(|r: &StepRow| r.peaks.iter().any(Option::is_some))
        .collect();
    let columns = kept
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let v: Vec<(u32, u64)> = rows
                .iter()
                .filter_map(|r| r.peaks[i].map(|p| (r.rank, p)))
                .collect();
            let peaks: Vec<u64> = v.iter().map(|x| x.1).collect();
            let t = threshold(&peaks);
            let (max_rank, max_bytes) = v
                .iter()
                .copied()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .unwrap_or((0, 0));
            StepColumn {
                step: s.1.clone(),
                ranks: v.len(),
                median_bytes: t.0,
                max_bytes,
                max_rank,
                outlier_ranks: if v.len() >= MIN_RANKS {
                    v.iter()
                        .filter(|x| stands_out(x.1, t))
                        .map(|x| x.0)
                        .collect()
                } else {
                    Vec::new()
                },
            }
        })
        .collect();
    Some(StepMatrix {
        source: source.to_string(),
        found_by: found_by.into_iter().collect(),
        steps_found,
        steps_of_one_rank,
        steps: kept.iter().map(|s| s.1.clone()).collect(),
        ranks: rows,
        columns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: u32, steps: &[(u64, u64)]) -> RankFacts {
        RankFacts {
            rank,
            file: format!("rank{rank}.pickle"),
            peak_bytes: steps.iter().map(|s| s.1).max().unwrap_or(0),
            sites: BTreeMap::new(),
            first_oom: None,
            settings: None,
            path_step: None,
            coords: BTreeMap::new(),
            trace_steps: Some(TraceSteps {
                found_by: "annotations".into(),
                peaks: steps
                    .iter()
                    .map(|(n, b)| (format!("ProfilerStep#{n}"), *b))
                    .collect(),
            }),
        }
    }

    #[test]
    fn steps_of_one_rank_are_left_out_and_names_align_by_number() {
        // Rank 0's trace reaches back to step 8; rank 1's starts at 10. Step 10 sorts after 9.
        let a = rank(0, &[(8, 5), (9, 6), (10, 7), (11, 8)]);
        let b = rank(1, &[(10, 70), (11, 80)]);
        let m = step_matrix(&[&a, &b]).unwrap();
        assert_eq!(m.steps, ["ProfilerStep#10", "ProfilerStep#11"]);
        assert_eq!((m.steps_found, m.steps_of_one_rank), (2, 2));
        assert_eq!(m.ranks[1].peaks, [Some(70), Some(80)]);
        assert_eq!(m.columns[1].max_rank, 1);
        assert_eq!(m.columns[1].median_bytes, 44, "floor((8 + 80) / 2)");
        assert!(
            m.columns[1].outlier_ranks.is_empty(),
            "two ranks: not judged"
        );
        // No step two ranks have: no matrix.
        let c = rank(2, &[(1, 1)]);
        assert_eq!(step_matrix(&[&a, &c]), None);
    }
}
