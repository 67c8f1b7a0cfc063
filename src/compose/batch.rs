//! `memlens batch`: one row per snapshot, and for the files of a distributed job (named by
//! rank) an imbalance report.
//!
//! In: per file a [`Profile`] at the peak and its [`OomReport`] (or the error that stopped it).
//! Out: [`FileRow`]s and, when at least two files carry a rank in their name, an
//! [`Imbalance`]: per-rank peaks, max over median, the outlier (the highest peak; lowest rank on
//! ties) and the sites that explain it — those whose bytes at the outlier's peak exceed the
//! median of that site's bytes across ranks (0 where a rank lacks the site) by the most.

use crate::analyze::profile::{Profile, SiteTotal};
use crate::compose::cross_rank::names::{coords_of_path, step_of_path};
use crate::compose::cross_rank::steps::TraceSteps;
use crate::compose::cross_rank::{setting_json, OomAt, RankFacts};
use crate::compose::oom::OomReport;
use crate::replay::{steps, DeviceReplay};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The rank in a file name: `rank3`, `rank_3`, `rank-3`, `..._r7.` / `..._r7_`, `...-r7`.
pub fn rank_of(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    let b = lower.as_bytes();
    let digits = |from: usize| -> Option<(u32, usize)> {
        let end = b[from..]
            .iter()
            .position(|c| !c.is_ascii_digit())
            .map_or(b.len(), |p| from + p);
        (end > from)
            .then(|| lower[from..end].parse().ok())
            .flatten()
            .map(|v| (v, end))
    };
    // rank[_-]?(\d+)
    let mut from = 0;
    while let Some(p) = lower[from..].find("rank") {
        let mut i = from + p + 4;
        if i < b.len() && (b[i] == b'_' || b[i] == b'-') {
            i += 1;
        }
        if let Some((v, _)) = digits(i) {
            return Some(v);
        }
        from = from + p + 4;
    }
    // _r(\d+)[._] and -r(\d+)
    for (i, w) in b.windows(2).enumerate() {
        if w[1] != b'r' || (w[0] != b'_' && w[0] != b'-') {
            continue;
        }
        if let Some((v, end)) = digits(i + 2) {
            let ok = if w[0] == b'_' {
                end < b.len() && (b[end] == b'.' || b[end] == b'_')
            } else {
                true
            };
            if ok {
                return Some(v);
            }
        }
    }
    None
}

/// One file of the batch.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileRow {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Always `file` (JSON lines mix file rows and one `imbalance` line).
    #[cfg_attr(feature = "schema", schemars(extend("const" = "file")))]
    pub kind: &'static str,
    /// The file as named.
    pub file: String,
    /// Rank from the file name, if any.
    pub rank: Option<u32>,
    /// False when the file could not be read or analyzed.
    pub ok: bool,
    /// Why not, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub error: Option<String>,
    /// Devices with memory or a trace.
    pub devices: usize,
    /// Live requested bytes at the peak of the device with the most.
    pub peak_bytes: u64,
    /// That device.
    pub peak_device: Option<u32>,
    /// Highest reserved bytes over the trace of any device (final reserved without a trace).
    pub reserved_bytes: u64,
    /// The worst device's fragmentation index at its peak.
    pub fragmentation: f64,
    /// Number of oom events.
    pub ooms: usize,
    /// `none`, or the verdict of each oom (`capacity`, `fragmentation`, `outside_pytorch`,
    /// `unknown`), distinct ones joined by `+`.
    pub oom: String,
    /// The biggest site at the peak (summed over devices).
    pub top_site: Option<String>,
    /// Its bytes.
    pub top_site_bytes: u64,
}

impl FileRow {
    /// The row of a file that failed.
    pub fn failed(file: &str, error: String) -> FileRow {
        FileRow {
            schema_version: crate::analyze::SCHEMA_VERSION,
            kind: "file",
            file: file.to_string(),
            rank: rank_of(base_name(file)),
            ok: false,
            error: Some(error),
            devices: 0,
            peak_bytes: 0,
            peak_device: None,
            reserved_bytes: 0,
            fragmentation: 0.0,
            ooms: 0,
            oom: String::new(),
            top_site: None,
            top_site_bytes: 0,
        }
    }

    /// The row of a file analyzed.
    pub fn new(file: &str, p: &Profile, oom: &OomReport) -> FileRow {
        let big = p.biggest_device();
        let top = p.top_sites(1).into_iter().next();
        let verdicts: BTreeSet<&str> = oom
            .ooms
            .iter()
            .map(|o| o.explained.verdict.as_str())
            .collect();
        FileRow {
            schema_version: crate::analyze::SCHEMA_VERSION,
            kind: "file",
            file: file.to_string(),
            rank: rank_of(base_name(file)),
            ok: true,
            error: None,
            devices: p.devices.len(),
            peak_bytes: big.map_or(0, |d| d.live_bytes),
            peak_device: big.map(|d| d.device),
            reserved_bytes: p
                .devices
                .iter()
                .map(|d| d.peak_reserved_bytes)
                .max()
                .unwrap_or(0),
            fragmentation: p.fragmentation(),
            ooms: oom.ooms.len(),
            oom: if verdicts.is_empty() {
                "none".into()
            } else {
                verdicts.into_iter().collect::<Vec<_>>().join("+")
            },
            top_site_bytes: top.as_ref().map_or(0, |t| t.1.bytes),
            top_site: top.map(|t| t.0),
        }
    }
}

fn base_name(file: &str) -> &str {
    file.rsplit(['/', '\\']).next().unwrap_or(file)
}

/// The steps the trace of a file's peak device marks, with their peaks.
pub fn trace_steps(
    snap: &crate::model::Snapshot,
    replays: &[DeviceReplay],
    device: Option<u32>,
) -> Option<TraceSteps> {
    let r = replays.iter().find(|r| Some(r.device) == device)?;
    let s = steps::find(snap, r);
    let found_by = serde_json::to_value(s.source?).ok()?.as_str()?.to_string();
    Some(TraceSteps {
        found_by,
        peaks: s
            .steps
            .iter()
            .map(|x| (x.name.clone(), x.peak_bytes))
            .collect(),
    })
}

/// What the cross-rank answer needs of a file read: its row (`None` without a rank in its
/// name), its profile at the peak, its OOM report, its snapshot (for the settings) and its
/// replays (for the steps of its trace).
pub fn rank_facts(
    row: &FileRow,
    p: &Profile,
    o: &OomReport,
    snap: &crate::model::Snapshot,
    replays: &[DeviceReplay],
) -> Option<RankFacts> {
    let rank = row.rank.filter(|_| row.ok)?;
    let first = o
        .ooms
        .iter()
        .min_by_key(|x| (x.time_us.is_none(), x.time_us, x.explained.event_index));
    Some(RankFacts {
        rank,
        file: row.file.clone(),
        peak_bytes: row.peak_bytes,
        sites: p.sites.iter().map(|(k, t)| (k.clone(), t.bytes)).collect(),
        first_oom: first.map(|x| OomAt {
            time_us: x.time_us,
            device: x.explained.device,
            requested_bytes: x.explained.requested_bytes,
            verdict: x.explained.verdict.as_str().to_string(),
        }),
        settings: snap.allocator_settings.as_ref().map(|s| {
            s.iter()
                .map(|(k, v)| (k.clone(), setting_json(v).to_string()))
                .collect()
        }),
        path_step: step_of_path(&row.file),
        coords: coords_of_path(&row.file),
        trace_steps: trace_steps(snap, replays, row.peak_device),
    })
}

/// One rank's peak.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RankPeak {
    /// Rank.
    pub rank: u32,
    /// File.
    pub file: String,
    /// Peak of its biggest device.
    pub peak_bytes: u64,
}

/// A site that explains the outlier.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ExplainingSite {
    /// Normalized site.
    pub site: String,
    /// Its bytes at the outlier's peak.
    pub outlier_bytes: u64,
    /// The median of its bytes across ranks.
    pub median_bytes: u64,
    /// outlier − median.
    pub excess_bytes: u64,
}

/// The imbalance of a rank set.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Imbalance {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Always `imbalance`.
    #[cfg_attr(feature = "schema", schemars(extend("const" = "imbalance")))]
    pub kind: &'static str,
    /// Per rank (rank, then file).
    pub ranks: Vec<RankPeak>,
    /// Median of the peaks (mean of the two middle ones for an even count).
    pub median_peak_bytes: u64,
    /// Highest peak.
    pub max_peak_bytes: u64,
    /// max / median (1 when the median is 0).
    pub max_over_median: f64,
    /// The rank with the highest peak.
    pub outlier_rank: u32,
    /// Its file.
    pub outlier_file: String,
    /// The sites that explain it, biggest excess first.
    pub sites: Vec<ExplainingSite>,
    /// Remarks (ranks seen twice, ...).
    pub notes: Vec<String>,
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    let n = v.len();
    if n == 0 {
        0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        ((v[n / 2 - 1] as u128 + v[n / 2] as u128) / 2) as u64
    }
}

/// The imbalance of the ranked files among `files` (row and sites at the peak of each file
/// analyzed); `None` with fewer than two.
pub fn imbalance(
    files: &[(&FileRow, &BTreeMap<String, SiteTotal>)],
    top: usize,
) -> Option<Imbalance> {
    let ranked = files
        .iter()
        .filter_map(|(r, sites)| {
            r.rank.filter(|_| r.ok).map(|rank| Ranked {
                rank,
                file: &r.file,
                peak_bytes: r.peak_bytes,
                sites,
            })
        })
        .collect();
    imbalance_of(ranked, top)
}

/// One run in an imbalance: its rank (or place), file, peak and sites at the peak.
#[derive(Clone, Copy, Debug)]
pub struct Ranked<'a> {
    /// The rank its name carries, or its place among the runs.
    pub rank: u32,
    /// The file, as given.
    pub file: &'a str,
    /// Live requested bytes at its peak (its biggest device).
    pub peak_bytes: u64,
    /// Its sites at the peak (the profile's): those that explain an outlier.
    pub sites: &'a BTreeMap<String, SiteTotal>,
}

/// The imbalance of `ranked` runs: the highest peak against the median, and the sites where
/// the outlier holds more than the median run (at most `top`); `None` with fewer than two.
pub fn imbalance_of(mut ranked: Vec<Ranked>, top: usize) -> Option<Imbalance> {
    if ranked.len() < 2 {
        return None;
    }
    ranked.sort_by(|a, b| a.rank.cmp(&b.rank).then_with(|| a.file.cmp(b.file)));
    let mut notes = Vec::new();
    for w in ranked.windows(2) {
        if w[0].rank == w[1].rank {
            notes.push(format!("rank {} appears in several files", w[0].rank));
        }
    }
    notes.dedup();
    let ranks: Vec<RankPeak> = ranked
        .iter()
        .map(|r| RankPeak {
            rank: r.rank,
            file: r.file.to_string(),
            peak_bytes: r.peak_bytes,
        })
        .collect();
    let mut peaks: Vec<u64> = ranks.iter().map(|r| r.peak_bytes).collect();
    let med = median(&mut peaks);
    // Highest peak; on ties the first in (rank, file) order.
    let outlier = ranked
        .iter()
        .rev()
        .max_by_key(|r| r.peak_bytes)
        .expect("two ranks");
    let keys: BTreeSet<&String> = ranked.iter().flat_map(|r| r.sites.keys()).collect();
    let mut sites: Vec<ExplainingSite> = keys
        .into_iter()
        .filter_map(|k| {
            let mut v: Vec<u64> = ranked
                .iter()
                .map(|r| r.sites.get(k).map_or(0, |t: &SiteTotal| t.bytes))
                .collect();
            let m = median(&mut v);
            let o = outlier.sites.get(k).map_or(0, |t| t.bytes);
            (o > m).then(|| ExplainingSite {
                site: k.clone(),
                outlier_bytes: o,
                median_bytes: m,
                excess_bytes: o - m,
            })
        })
        .collect();
    sites.sort_by(|a, b| {
        b.excess_bytes
            .cmp(&a.excess_bytes)
            .then_with(|| a.site.cmp(&b.site))
    });
    sites.truncate(top);
    let max = outlier.peak_bytes;
    Some(Imbalance {
        schema_version: crate::analyze::SCHEMA_VERSION,
        kind: "imbalance",
        ranks,
        median_peak_bytes: med,
        max_peak_bytes: max,
        max_over_median: if med == 0 {
            1.0
        } else {
            max as f64 / med as f64
        },
        outlier_rank: outlier.rank,
        outlier_file: outlier.file.to_string(),
        sites,
        notes,
    })
}

/// The whole batch as one JSON document (`--format json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BatchReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Per file, in the order given.
    pub files: Vec<FileRow>,
    /// Files that failed.
    pub failed: usize,
    /// The rank set's imbalance, when two or more files carry a rank.
    pub imbalance: Option<Imbalance>,
    /// The cross-rank answer of the ranked files read, when two or more files carry a rank.
    pub cross_rank: Option<super::cross_rank::CrossRank>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_from_names() {
        for (name, want) in [
            ("rank0.pickle", Some(0)),
            ("rank_3.pickle", Some(3)),
            ("snapshot-rank-12.pkl", Some(12)),
            ("RANK7.pickle", Some(7)),
            ("job_r7.pickle", Some(7)),
            ("job_r7_step3.pickle", Some(7)),
            ("job-r5", Some(5)),
            ("job_r7x.pickle", None),
            ("train.pickle", None),
            ("ranking.pickle", None),
            ("mirror.pickle", None),
        ] {
            assert_eq!(rank_of(name), want, "{name}");
        }
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3, 1, 2]), 2);
        assert_eq!(median(&mut [1, 1, 1, 9]), 1);
        assert_eq!(median(&mut [1, 3]), 2);
        assert_eq!(median(&mut []), 0);
    }
}
