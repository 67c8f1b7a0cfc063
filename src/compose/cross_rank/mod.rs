//! The cross-rank answer of a rank set (issue 55): which ranks stand out against the median and
//! the site that makes each one's difference, per site the median and spread across ranks with
//! the ranks that stand out, the first rank to run out of memory and when, and the allocator
//! settings that differ between ranks.
//!
//! In: one [`RankFacts`] per rank file that was read (from its profile at the peak, its OOM
//! report and its snapshot's settings). Out: a [`CrossRank`], whose every statement follows
//! from one rule, [`stands_out`], or says why it cannot be judged.
//!
//! The rule. A value stands out when it exceeds the median of the ranks by more than all of:
//! three scaled median absolute deviations (a robust z-score above 3: the usual cut for "not
//! the same population"), a tenth of the median (ranks of one job differ by a few percent for
//! harmless reasons: uneven last batches, a rank that also logs), and 1 MiB (below which no
//! one changes a configuration). Judged only with at least [`MIN_RANKS`] ranks: with fewer,
//! a median and a spread say nothing of which rank is odd.

pub mod names;
pub mod parallel;
pub mod steps;

use crate::model::SettingValue;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Fewest ranks for a median and a spread to single one out.
pub const MIN_RANKS: usize = 4;

/// The smallest excess over the median that counts (1 MiB).
pub const MIN_EXCESS_BYTES: u64 = 1 << 20;

/// What one rank's file says, as the cross-rank answer needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct RankFacts {
    /// The rank from the file name.
    pub rank: u32,
    /// The file, as named.
    pub file: String,
    /// Live requested bytes at the peak of its biggest device.
    pub peak_bytes: u64,
    /// Bytes per site at that peak (summed over devices, as `batch` keys sites).
    pub sites: BTreeMap<String, u64>,
    /// Its first OOM event, if any.
    pub first_oom: Option<OomAt>,
    /// Its allocator settings, each value as JSON text; `None` when the file records none.
    pub settings: Option<BTreeMap<String, String>>,
    /// The training step its path names ([`names::step_of_path`]).
    pub path_step: Option<u64>,
    /// The parallel coordinates its path names ([`names::coords_of_path`]).
    pub coords: BTreeMap<String, u32>,
    /// The steps its trace marks, with their peaks; `None` without steps.
    pub trace_steps: Option<steps::TraceSteps>,
}

/// One allocator setting's value as JSON (a map as an object): how the dataset's
/// `allocator_settings` column writes it and how ranks' settings are compared.
pub fn setting_json(v: &SettingValue) -> serde_json::Value {
    match v {
        SettingValue::Map(m) => serde_json::Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), setting_json(v)))
                .collect(),
        ),
        other => serde_json::to_value(other).unwrap_or(serde_json::Value::Null),
    }
}

/// An OOM event of a rank: when, where, what was asked, and its verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OomAt {
    /// `time_us` of the event (PyTorch's wall clock, microseconds since the epoch); `null`
    /// when the file has no times.
    pub time_us: Option<i64>,
    /// The device.
    pub device: Option<u32>,
    /// The request, as "Tried to allocate" prints it.
    pub requested_bytes: Option<u64>,
    /// `capacity`, `fragmentation`, `outside_pytorch` or `unknown`.
    pub verdict: String,
}

/// The cross-rank answer (`batch --format json`'s `cross_rank`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CrossRank {
    /// Ranks read (files with a rank in their name that were read).
    pub ranks: usize,
    /// The median of their peaks.
    pub median_peak_bytes: u64,
    /// How far above the median a peak must be to stand out ([`stands_out`]'s threshold for
    /// the peaks); `null` when not judged.
    pub peak_threshold_bytes: Option<u64>,
    /// The ranks whose peak stands out, biggest excess first; empty when none does or when
    /// not judged (then `cannot_judge` says why).
    pub outliers: Vec<OutlierRank>,
    /// Sites where some rank stands out, biggest excess first (at most `--sites`).
    pub sites: Vec<SiteSpread>,
    /// How many sites have a rank that stands out (`sites` may list fewer).
    pub sites_with_outliers: usize,
    /// The first rank to run out of memory; `null` when no rank did, or when their times
    /// cannot be compared (`cannot_judge` says so).
    pub first_oom: Option<FirstOom>,
    /// Ranks with at least one OOM event.
    pub ranks_with_oom: usize,
    /// Allocator settings whose value is not the same on every rank, by key.
    pub settings_differ: Vec<SettingDiff>,
    /// What could not be judged, and why.
    pub cannot_judge: Vec<String>,
    /// When the files come from several steps (their paths name them): the step the answer
    /// above is about, the one with the most ranks (the latest of those); the first OOM is
    /// over every file.
    pub at_step: Option<u64>,
    /// The step × rank peak matrix, where steps exist (in paths or traces).
    pub steps: Option<steps::StepMatrix>,
    /// The ranks grouped by parallel coordinates, when a topology or the paths give them.
    pub parallel: Option<parallel::Parallel>,
}

/// The cross-rank answer as the last line of `batch --format jsonl` (after the file lines and
/// the imbalance line): `kind` `cross_rank`, then [`CrossRank`]'s fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CrossRankLine {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Always `cross_rank`.
    #[cfg_attr(feature = "schema", schemars(extend("const" = "cross_rank")))]
    pub kind: &'static str,
    /// The answer.
    #[serde(flatten)]
    pub answer: CrossRank,
}

impl CrossRankLine {
    /// The line of `answer`.
    pub fn new(answer: &CrossRank) -> CrossRankLine {
        CrossRankLine {
            schema_version: crate::analyze::SCHEMA_VERSION,
            kind: "cross_rank",
            answer: answer.clone(),
        }
    }
}

/// A rank whose peak stands out.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OutlierRank {
    /// Its rank.
    pub rank: u32,
    /// Its file.
    pub file: String,
    /// Its peak.
    pub peak_bytes: u64,
    /// Peak − median.
    pub excess_bytes: u64,
    /// Peak / median (0 when the median is 0).
    pub over_median: f64,
    /// The site that makes most of the difference: the largest excess of this rank's bytes
    /// over the site's median across ranks; `null` when no site holds more than its median.
    pub site: Option<String>,
    /// That site's bytes on this rank.
    pub site_bytes: u64,
    /// That site's median across ranks.
    pub site_median_bytes: u64,
}

/// One site across ranks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SiteSpread {
    /// The site, keyed as `batch` and `diff` key sites.
    pub site: String,
    /// Median of its bytes across ranks (0 on a rank without it).
    pub median_bytes: u64,
    /// Least.
    pub min_bytes: u64,
    /// Most.
    pub max_bytes: u64,
    /// The ranks where it stands out, most bytes first (at most 8; `outlier_ranks` counts
    /// them all).
    pub outliers: Vec<RankBytes>,
    /// How many ranks stand out at this site.
    pub outlier_ranks: usize,
}

/// A rank and its bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RankBytes {
    /// Rank.
    pub rank: u32,
    /// Bytes.
    pub bytes: u64,
}

/// The first rank to run out of memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FirstOom {
    /// Its rank.
    pub rank: u32,
    /// Its file.
    pub file: String,
    /// Its first OOM.
    pub oom: OomAt,
    /// The next ranks to run out, in order, with how long after the first (µs; at most 8).
    pub then: Vec<RankAfter>,
}

/// A rank that ran out of memory after the first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RankAfter {
    /// Rank.
    pub rank: u32,
    /// Microseconds after the first rank's OOM.
    pub after_us: i64,
}

/// One allocator setting that is not the same on every rank.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SettingDiff {
    /// The setting (`expandable_segments`, `max_split_size`, ...).
    pub key: String,
    /// Each value (JSON text; `null`: the rank's file does not record the key) and its ranks,
    /// the most common value first.
    pub values: Vec<SettingValueRanks>,
}

/// A setting's value and the ranks that have it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SettingValueRanks {
    /// The value as JSON text; `null` where the key is absent.
    pub value: Option<String>,
    /// The ranks, ascending.
    pub ranks: Vec<u32>,
}

/// Listed outlier ranks per site, and later OOM ranks.
const LISTED: usize = 8;

/// The median (mean of the middle two for an even count; 0 for none).
fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    let n = v.len();
    match n {
        0 => 0,
        _ if n % 2 == 1 => v[n / 2],
        _ => ((v[n / 2 - 1] as u128 + v[n / 2] as u128) / 2) as u64,
    }
}

/// The threshold of [`stands_out`] for values `v` (median, threshold).
pub fn threshold(v: &[u64]) -> (u64, u64) {
    let mut sorted = v.to_vec();
    let med = median(&mut sorted);
    let mut dev: Vec<u64> = v.iter().map(|&x| x.abs_diff(med)).collect();
    let mad = median(&mut dev);
    // 1.4826 × MAD estimates the standard deviation of a normal population.
    let robust = (3.0 * 1.4826 * mad as f64).ceil() as u64;
    (med, robust.max(med / 10).max(MIN_EXCESS_BYTES))
}

/// Whether `x` stands out among values whose median and threshold are `(med, thr)`.
pub fn stands_out(x: u64, (med, thr): (u64, u64)) -> bool {
    x > med.saturating_add(thr)
}

/// The step with the most ranks (the latest of those) when the paths name at least two.
fn answer_step(ranks: &[&RankFacts]) -> Option<u64> {
    let mut per_step: BTreeMap<u64, usize> = BTreeMap::new();
    for s in ranks.iter().filter_map(|r| r.path_step) {
        *per_step.entry(s).or_default() += 1;
    }
    if per_step.len() < 2 {
        return None;
    }
    per_step
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))
        .map(|(s, _)| s)
}

/// The cross-rank answer of `ranks` (any order); `top` bounds the sites listed; `topology`
/// places ranks by parallel coordinates (else their paths do, when they name them).
pub fn cross_rank(all: &[RankFacts], top: usize, topology: Option<&names::Topology>) -> CrossRank {
    let mut every: Vec<&RankFacts> = all.iter().collect();
    every.sort_by(|a, b| a.rank.cmp(&b.rank).then_with(|| a.file.cmp(&b.file)));
    let step_matrix = steps::step_matrix(&every);
    let at_step = answer_step(&every);
    let ranks: Vec<&RankFacts> = match at_step {
        Some(s) => every
            .iter()
            .copied()
            .filter(|r| r.path_step == Some(s))
            .collect(),
        None => every.clone(),
    };
    let n = ranks.len();
    let mut cannot_judge = Vec::new();
    let peaks: Vec<u64> = ranks.iter().map(|r| r.peak_bytes).collect();
    let (median_peak, peak_thr) = threshold(&peaks);
    let judged = n >= MIN_RANKS;
    if !judged {
        cannot_judge.push(format!(
            "which ranks stand out: {n} rank{} read, and a median and a spread need at least {MIN_RANKS}",
            if n == 1 { "" } else { "s" }
        ));
    }
    // Per site: every rank's bytes (0 where absent), its median and threshold.
    let keys: BTreeSet<&String> = ranks.iter().flat_map(|r| r.sites.keys()).collect();
    let mut spreads: Vec<(u64, SiteSpread)> = Vec::new();
    let mut site_medians: BTreeMap<&str, u64> = BTreeMap::new();
    let mut sites_with_outliers = 0;
    for k in keys {
        let v: Vec<u64> = ranks
            .iter()
            .map(|r| r.sites.get(k).copied().unwrap_or(0))
            .collect();
        let t = threshold(&v);
        site_medians.insert(k, t.0);
        if !judged {
            continue;
        }
        let mut out: Vec<RankBytes> = ranks
            .iter()
            .zip(&v)
            .filter(|(_, &b)| stands_out(b, t))
            .map(|(r, &b)| RankBytes {
                rank: r.rank,
                bytes: b,
            })
            .collect();
        if out.is_empty() {
            continue;
        }
        sites_with_outliers += 1;
        out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.rank.cmp(&b.rank)));
        let excess = out[0].bytes - t.0;
        let outlier_ranks = out.len();
        out.truncate(LISTED);
        spreads.push((
            excess,
            SiteSpread {
                site: k.clone(),
                median_bytes: t.0,
                min_bytes: v.iter().copied().min().unwrap_or(0),
                max_bytes: v.iter().copied().max().unwrap_or(0),
                outliers: out,
                outlier_ranks,
            },
        ));
    }
    spreads.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.site.cmp(&b.1.site)));
    let sites: Vec<SiteSpread> = spreads.into_iter().take(top).map(|(_, s)| s).collect();
    let mut outliers: Vec<OutlierRank> = if judged {
        ranks
            .iter()
            .filter(|r| stands_out(r.peak_bytes, (median_peak, peak_thr)))
            .map(|r| {
                let site = r
                    .sites
                    .iter()
                    .map(|(k, &b)| (k, b, site_medians.get(k.as_str()).copied().unwrap_or(0)))
                    .filter(|(_, b, m)| b > m)
                    .max_by(|a, b| (a.1 - a.2).cmp(&(b.1 - b.2)).then_with(|| b.0.cmp(a.0)));
                OutlierRank {
                    rank: r.rank,
                    file: r.file.clone(),
                    peak_bytes: r.peak_bytes,
                    excess_bytes: r.peak_bytes - median_peak,
                    over_median: if median_peak == 0 {
                        0.0
                    } else {
                        r.peak_bytes as f64 / median_peak as f64
                    },
                    site: site.map(|s| s.0.clone()),
                    site_bytes: site.map_or(0, |s| s.1),
                    site_median_bytes: site.map_or(0, |s| s.2),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    outliers.sort_by(|a, b| {
        b.excess_bytes
            .cmp(&a.excess_bytes)
            .then(a.rank.cmp(&b.rank))
    });
    let (first_oom, ranks_with_oom) = first_oom(&every, &mut cannot_judge);
    let settings_differ = settings_differ(&ranks, &mut cannot_judge);
    let parallel = parallel::parallel(&ranks, topology, &mut cannot_judge);
    CrossRank {
        ranks: n,
        median_peak_bytes: median_peak,
        peak_threshold_bytes: judged.then_some(peak_thr),
        outliers,
        sites,
        sites_with_outliers,
        first_oom,
        ranks_with_oom,
        settings_differ,
        cannot_judge,
        at_step,
        steps: step_matrix,
        parallel,
    }
}

/// The first rank to run out of memory, by its first OOM event's time.
fn first_oom(ranks: &[&RankFacts], cannot_judge: &mut Vec<String>) -> (Option<FirstOom>, usize) {
    let oomed: Vec<(&RankFacts, &OomAt)> = ranks
        .iter()
        .filter_map(|r| r.first_oom.as_ref().map(|o| (*r, o)))
        .collect();
    let count = oomed.len();
    if count == 0 {
        return (None, 0);
    }
    let mut timed: Vec<(i64, &RankFacts, &OomAt)> = oomed
        .iter()
        .filter_map(|(r, o)| o.time_us.map(|t| (t, *r, *o)))
        .collect();
    if timed.len() < count {
        cannot_judge.push(format!(
            "which rank ran out of memory first: {} of the {count} ranks with an OOM have no event times",
            count - timed.len()
        ));
        return (None, count);
    }
    timed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.rank.cmp(&b.1.rank)));
    let (t0, r0, o0) = timed[0];
    let then = timed[1..]
        .iter()
        .take(LISTED)
        .map(|(t, r, _)| RankAfter {
            rank: r.rank,
            after_us: t - t0,
        })
        .collect();
    (
        Some(FirstOom {
            rank: r0.rank,
            file: r0.file.clone(),
            oom: o0.clone(),
            then,
        }),
        count,
    )
}

/// The settings not the same on every rank (a key absent on some ranks counts as a value).
fn settings_differ(ranks: &[&RankFacts], cannot_judge: &mut Vec<String>) -> Vec<SettingDiff> {
    let recorded: Vec<(&RankFacts, &BTreeMap<String, String>)> = ranks
        .iter()
        .filter_map(|r| r.settings.as_ref().map(|s| (*r, s)))
        .collect();
    if recorded.len() < ranks.len() {
        cannot_judge.push(format!(
            "whether allocator settings differ: {} of {} ranks' files do not record them (PyTorch before 2.5)",
            ranks.len() - recorded.len(),
            ranks.len()
        ));
    }
    if recorded.len() < 2 {
        return Vec::new();
    }
    let keys: BTreeSet<&String> = recorded.iter().flat_map(|(_, s)| s.keys()).collect();
    let mut out = Vec::new();
    for k in keys {
        let mut by_value: BTreeMap<Option<&String>, Vec<u32>> = BTreeMap::new();
        for (r, s) in &recorded {
            by_value.entry(s.get(k)).or_default().push(r.rank);
        }
        if by_value.len() < 2 {
            continue;
        }
        let mut values: Vec<SettingValueRanks> = by_value
            .into_iter()
            .map(|(v, ranks)| SettingValueRanks {
                value: v.cloned(),
                ranks,
            })
            .collect();
        values.sort_by(|a, b| {
            b.ranks
                .len()
                .cmp(&a.ranks.len())
                .then_with(|| a.value.cmp(&b.value))
        });
        out.push(SettingDiff {
            key: k.clone(),
            values,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn facts(rank: u32, peak: u64, sites: &[(&str, u64)]) -> RankFacts {
        RankFacts {
            rank,
            file: format!("rank{rank}.pickle"),
            peak_bytes: peak,
            sites: sites.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            first_oom: None,
            settings: None,
            path_step: None,
            coords: BTreeMap::new(),
            trace_steps: None,
        }
    }

    #[test]
    fn the_rule_by_hand() {
        // median 100 MiB, deviations 0,0,1,1,50 MiB -> MAD 1 MiB; 3 × 1.4826 MiB = 4.45 MiB <
        // a tenth of the median (10 MiB): the threshold is 10 MiB.
        let v = [100 * MIB, 100 * MIB, 99 * MIB, 101 * MIB, 150 * MIB];
        let t = threshold(&v);
        assert_eq!(t, (100 * MIB, 10 * MIB));
        assert!(stands_out(150 * MIB, t));
        assert!(!stands_out(110 * MIB, t));
        assert!(stands_out(110 * MIB + 1, t));
        // Tiny values: the 1 MiB floor.
        assert_eq!(threshold(&[0, 0, 0, 10]).1, MIB);
    }

    #[test]
    fn one_odd_rank_is_named_with_its_site() {
        let mut ranks: Vec<RankFacts> = (0..8)
            .map(|r| {
                facts(
                    r,
                    1000 * MIB,
                    &[
                        ("model.py:10 forward", 900 * MIB),
                        ("opt.py:5 step", 100 * MIB),
                    ],
                )
            })
            .collect();
        ranks[5] = facts(
            5,
            1600 * MIB,
            &[
                ("model.py:10 forward", 900 * MIB),
                ("opt.py:5 step", 100 * MIB),
                ("log.py:3 gather", 600 * MIB),
            ],
        );
        let x = cross_rank(&ranks, 5, None);
        assert_eq!(x.ranks, 8);
        assert_eq!(x.median_peak_bytes, 1000 * MIB);
        assert_eq!(x.outliers.len(), 1);
        let o = &x.outliers[0];
        assert_eq!((o.rank, o.excess_bytes), (5, 600 * MIB));
        assert_eq!(o.site.as_deref(), Some("log.py:3 gather"));
        assert_eq!((o.site_bytes, o.site_median_bytes), (600 * MIB, 0));
        assert_eq!(x.sites.len(), 1);
        assert_eq!(x.sites[0].site, "log.py:3 gather");
        assert_eq!(
            x.sites[0].outliers,
            vec![RankBytes {
                rank: 5,
                bytes: 600 * MIB
            }]
        );
        assert_eq!(x.sites_with_outliers, 1);
        assert!(x
            .cannot_judge
            .iter()
            .any(|c| c.contains("allocator settings")));
    }

    #[test]
    fn an_even_spread_has_no_outlier_and_few_ranks_cannot_be_judged() {
        let ranks: Vec<RankFacts> = (0..6)
            .map(|r| facts(r, (1000 + r as u64 * 10) * MIB, &[]))
            .collect();
        let x = cross_rank(&ranks, 5, None);
        assert!(x.outliers.is_empty());
        assert!(x.peak_threshold_bytes.is_some());
        let x = cross_rank(&ranks[..3], 5, None);
        assert!(x.outliers.is_empty());
        assert_eq!(x.peak_threshold_bytes, None);
        assert!(x.cannot_judge[0].starts_with("which ranks stand out: 3 ranks read"));
    }

    #[test]
    fn first_oom_and_settings() {
        let mut ranks: Vec<RankFacts> = (0..4).map(|r| facts(r, 10 * MIB, &[])).collect();
        let oom = |t| OomAt {
            time_us: Some(t),
            device: Some(0),
            requested_bytes: Some(MIB),
            verdict: "capacity".into(),
        };
        ranks[2].first_oom = Some(oom(1_000_500));
        ranks[3].first_oom = Some(oom(1_000_000));
        for (i, r) in ranks.iter_mut().enumerate() {
            let mut s = BTreeMap::new();
            s.insert("expandable_segments".to_string(), (i != 1).to_string());
            s.insert("max_split_size".to_string(), "-1".to_string());
            r.settings = Some(s);
        }
        let x = cross_rank(&ranks, 5, None);
        let f = x.first_oom.unwrap();
        assert_eq!(f.rank, 3);
        assert_eq!(
            f.then,
            vec![RankAfter {
                rank: 2,
                after_us: 500
            }]
        );
        assert_eq!(x.ranks_with_oom, 2);
        assert_eq!(x.settings_differ.len(), 1);
        let d = &x.settings_differ[0];
        assert_eq!(d.key, "expandable_segments");
        assert_eq!(d.values[0].value.as_deref(), Some("true"));
        assert_eq!(d.values[0].ranks, vec![0, 2, 3]);
        assert_eq!(d.values[1].ranks, vec![1]);
        assert!(x.cannot_judge.is_empty(), "{:?}", x.cannot_judge);
        // Without times, the order cannot be judged.
        ranks[2].first_oom.as_mut().unwrap().time_us = None;
        let x = cross_rank(&ranks, 5, None);
        assert_eq!(x.first_oom, None);
        assert!(x.cannot_judge.iter().any(|c| c.contains("no event times")));
    }
}
