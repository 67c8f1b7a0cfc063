//! `memlens report A B ...`: the page of several runs. Each run's timeline on axes shared by
//! all (event index, time since start, step), its steps, and its peak by site and category;
//! the run whose peak stands out (`batch`'s imbalance); and for two runs the comparison itself:
//! `memlens diff` (settings, steps, where the runs part, observations), their difference along
//! each axis, and both live sets at the moments a person can click (`moments.rs`).

pub mod moments;
pub mod series;

use crate::analyze::diff::{self, runs::Run, DiffOptions, DiffReport};
use crate::analyze::profile::{self, Profile, ProfileOptions, SiteTotal};
use crate::compose::batch::{self, Imbalance, Ranked};
use crate::model::{Action, Snapshot};
use crate::replay::steps::{self, StepSource};
use crate::replay::{DeviceReplay, Moment, MomentSpec};
use moments::{MomentPair, Side};
use rayon::prelude::*;
use serde::Serialize;
use series::{Axis, Coords, DifferenceSeries, RunPoint};
use std::collections::BTreeMap;

/// Options of the runs page.
#[derive(Clone, Debug)]
pub struct RunsOptions {
    /// How sites are keyed (the moment is always each run's peak).
    pub profile: ProfileOptions,
    /// Site rows per run and per moment pair.
    pub sites: usize,
    /// Most steps given a moment pair of their own.
    pub step_moments: usize,
    /// Moment pairs along the event axis, and along the time axis.
    pub even_moments: usize,
}

impl Default for RunsOptions {
    fn default() -> Self {
        RunsOptions {
            profile: ProfileOptions {
                at: MomentSpec::Peak,
                categories: true,
                ..ProfileOptions::default()
            },
            sites: 25,
            step_moments: 32,
            even_moments: 24,
        }
    }
}

/// One run as given: its file name and what was loaded from it.
#[derive(Clone, Copy)]
pub struct RunInput<'a> {
    /// The file, as given.
    pub file: &'a str,
    /// The snapshot.
    pub snap: &'a Snapshot,
    /// The replay of each of its devices with a trace.
    pub replays: &'a [DeviceReplay],
}

/// A key with its live bytes and allocations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NamedTotal {
    /// The site, or category.
    pub name: String,
    /// Live requested bytes.
    pub bytes: u64,
    /// Live allocations.
    pub count: u64,
}

/// One step of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepMark {
    /// Its name (`ProfilerStep#3`, `step 3`).
    pub name: String,
    /// First event inside it.
    pub first_event: i64,
    /// Last event inside it.
    pub last_event: i64,
    /// Where its peak is.
    pub peak_event: i64,
    /// Live requested bytes at its peak.
    pub peak_bytes: u64,
}

/// One run: its figures, timeline and peak.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunView {
    /// The file, as given.
    pub file: String,
    /// The rank its name carries (`rank3`, `_r3`), if any.
    pub rank: Option<u32>,
    /// The device drawn: the one with the highest peak (or `--device`).
    pub device: u32,
    /// Events in its trace (0: no trace; the run has no line).
    pub events: usize,
    /// Its peak of live requested bytes.
    pub peak: Moment,
    /// Live requested bytes at the peak.
    pub peak_bytes: u64,
    /// The most reserved bytes.
    pub max_reserved_bytes: u64,
    /// `alloc` entries in its trace.
    pub allocations: u64,
    /// From its first to its last event, µs (absent without times).
    pub duration_us: Option<i64>,
    /// How its steps were found.
    pub step_source: Option<StepSource>,
    /// Its steps.
    pub steps: Vec<StepMark>,
    /// Its line (see [`series::points`]).
    pub points: Vec<RunPoint>,
    /// Live bytes per category at the peak (each device at its own), biggest first.
    pub categories: Vec<NamedTotal>,
    /// The biggest sites at the peak (each device at its own).
    pub sites: Vec<NamedTotal>,
    /// Sites at the peak in all.
    pub sites_total: usize,
}

/// What the page shows of two runs side by side.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PairView {
    /// `memlens diff BASE CAND` (at each run's peak, with settings, steps and observations).
    pub diff: DiffReport,
    /// The candidate minus the base along each axis both runs have.
    pub difference: Vec<DifferenceSeries>,
    /// The moments a person can click, both live sets compared at each.
    pub moments: Vec<MomentPair>,
}

/// The page of several runs.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunsPage {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// The memlens version that wrote it.
    pub memlens_version: &'static str,
    /// The runs, in the order given (the first of two is the base).
    pub runs: Vec<RunView>,
    /// The axes every run with a trace can be drawn on (`event` always).
    pub axes: Vec<Axis>,
    /// The run whose peak stands out against the median (ranks from the file names, else
    /// places in the order given); `null` with one run.
    pub imbalance: Option<Imbalance>,
    /// Index in `runs` of that run.
    pub outlier: Option<usize>,
    /// With exactly two runs, the comparison; `null` otherwise.
    pub pair: Option<PairView>,
    /// What limits the page, in words.
    pub notes: Vec<String>,
}

/// A run measured: its profile at the peak, the device drawn, its steps and coordinates.
struct Measured<'a> {
    input: RunInput<'a>,
    profile: Profile,
    device: Option<(&'a crate::model::Device, &'a DeviceReplay)>,
    steps: steps::DeviceSteps,
    coords: Coords,
}

fn measure<'a>(input: RunInput<'a>, opts: &ProfileOptions) -> Result<Measured<'a>, String> {
    let profile = profile::profile(input.snap, input.replays, opts)?;
    let device = profile
        .devices
        .iter()
        .filter(|d| d.basis == "trace")
        .rev()
        .max_by_key(|d| d.live_bytes)
        .and_then(|d| {
            Some((
                input.snap.device(d.device)?,
                input.replays.iter().find(|r| r.device == d.device)?,
            ))
        });
    let (steps, coords) = match device {
        Some((dev, r)) => {
            let s = steps::find(input.snap, r);
            let c = Coords::new(input.snap.device_trace(dev), &s.steps);
            (s, c)
        }
        None => (
            steps::DeviceSteps {
                device: 0,
                source: None,
                marker: None,
                steps: Vec::new(),
            },
            Coords::default(),
        ),
    };
    Ok(Measured {
        input,
        profile,
        device,
        steps,
        coords,
    })
}

fn named(map: &BTreeMap<String, SiteTotal>, n: usize) -> Vec<NamedTotal> {
    profile::sorted_sites(map, n)
        .into_iter()
        .map(|(name, t)| NamedTotal {
            name,
            bytes: t.bytes,
            count: t.count,
        })
        .collect()
}

fn view(m: &Measured, opts: &RunsOptions) -> RunView {
    let p = &m.profile;
    let big = p.biggest_device();
    let (events, points, allocations, duration_us) = match m.device {
        Some((dev, r)) => {
            let trace = m.input.snap.device_trace(dev);
            (
                trace.len(),
                series::points(r, &m.coords, series::RUN_POINTS),
                trace.iter().filter(|e| e.action == Action::Alloc).count() as u64,
                trace
                    .first()
                    .and_then(|a| a.time())
                    .zip(trace.last().and_then(|b| b.time()))
                    .map(|(a, b)| b - a),
            )
        }
        None => (0, Vec::new(), 0, None),
    };
    RunView {
        file: m.input.file.to_string(),
        rank: batch::rank_of(base_name(m.input.file)),
        device: big.map_or(0, |d| d.device),
        events,
        peak: big.map_or(
            Moment {
                event_index: -1,
                time_us: None,
            },
            |d| d.at,
        ),
        peak_bytes: big.map_or(0, |d| d.live_bytes),
        max_reserved_bytes: big.map_or(0, |d| d.peak_reserved_bytes),
        allocations,
        duration_us,
        step_source: m.steps.source,
        steps: m
            .steps
            .steps
            .iter()
            .map(|s| StepMark {
                name: s.name.clone(),
                first_event: s.first_event,
                last_event: s.last_event,
                peak_event: s.peak_event,
                peak_bytes: s.peak_bytes,
            })
            .collect(),
        points,
        categories: p
            .categories
            .as_ref()
            .map_or(Vec::new(), |c| named(c, usize::MAX)),
        sites: named(&p.sites, opts.sites),
        sites_total: p.sites.len(),
    }
}

fn base_name(file: &str) -> &str {
    file.rsplit(['/', '\\']).next().unwrap_or(file)
}

/// The imbalance of the runs, ranked by their names when every name carries a distinct rank,
/// else by their places; and the index of its outlier.
fn imbalance(measured: &[Measured], views: &[RunView], sites: usize) -> Option<(Imbalance, usize)> {
    let ranks: Vec<Option<u32>> = views.iter().map(|v| v.rank).collect();
    let mut distinct: Vec<u32> = ranks.iter().flatten().copied().collect();
    distinct.sort_unstable();
    distinct.dedup();
    let by_name = distinct.len() == views.len();
    let rank = |i: usize| {
        if by_name {
            ranks[i].unwrap_or(0)
        } else {
            i as u32
        }
    };
    let ranked = measured
        .iter()
        .zip(views)
        .enumerate()
        .map(|(i, (m, v))| Ranked {
            rank: rank(i),
            file: &v.file,
            peak_bytes: v.peak_bytes,
            sites: &m.profile.sites,
        })
        .collect();
    let im = batch::imbalance_of(ranked, sites)?;
    let at = (0..views.len())
        .find(|&i| rank(i) == im.outlier_rank && views[i].file == im.outlier_file)?;
    Some((im, at))
}

/// Gathers the page of `runs` (at least one).
pub fn run(runs: &[RunInput], opts: &RunsOptions) -> Result<RunsPage, String> {
    let measured: Vec<Measured> = runs
        .par_iter()
        .map(|r| measure(*r, &opts.profile).map_err(|m| format!("{}: {m}", r.file)))
        .collect::<Result<_, _>>()?;
    let views: Vec<RunView> = measured.par_iter().map(|m| view(m, opts)).collect();
    let mut notes = Vec::new();
    for v in views.iter().filter(|v| v.events == 0) {
        notes.push(format!(
            "{} has no trace: its peak is its final state and it has no line",
            v.file
        ));
    }
    let traced: Vec<&Measured> = measured.iter().filter(|m| m.device.is_some()).collect();
    let axes: Vec<Axis> = [Axis::Event, Axis::Time, Axis::Step]
        .into_iter()
        .filter(|&a| !traced.is_empty() && traced.iter().all(|m| m.coords.has(a)))
        .collect();
    let (imbalance, outlier) = match imbalance(&measured, &views, opts.sites) {
        Some((im, at)) => (Some(im), Some(at)),
        None => (None, None),
    };
    let pair = match measured.as_slice() {
        [b, c] => Some(pair(b, c, &axes, opts)),
        _ => None,
    };
    Ok(RunsPage {
        schema_version: crate::analyze::SCHEMA_VERSION,
        memlens_version: env!("CARGO_PKG_VERSION"),
        runs: views,
        axes,
        imbalance,
        outlier,
        pair,
        notes,
    })
}

/// Two runs compared: `diff` with its explanation, the difference along each axis, the
/// moment pairs.
fn pair(b: &Measured, c: &Measured, axes: &[Axis], opts: &RunsOptions) -> PairView {
    let popts = &opts.profile;
    let mut report = diff::run(
        &b.profile,
        &c.profile,
        popts.key,
        popts.ignore_lines,
        &DiffOptions::default(),
    );
    diff::runs::explain(&mut report, as_run(b), as_run(c), popts);
    let (difference, moments) = match (b.device, c.device) {
        (Some((bd, br)), Some((cd, cr))) => {
            let (bs, cs) = (as_side(b, bd, br), as_side(c, cd, cr));
            let difference = axes
                .par_iter()
                .map(|&a| series::difference((br, &b.coords), (cr, &c.coords), a))
                .collect();
            let limits = (opts.sites, opts.step_moments, opts.even_moments);
            (difference, moments::pairs(bs, cs, axes, popts, limits))
        }
        _ => (Vec::new(), Vec::new()),
    };
    PairView {
        diff: report,
        difference,
        moments,
    }
}

fn as_run<'a>(m: &Measured<'a>) -> Run<'a> {
    Run {
        snap: m.input.snap,
        replays: m.input.replays,
    }
}

fn as_side<'a>(
    m: &'a Measured<'a>,
    device: &'a crate::model::Device,
    replay: &'a DeviceReplay,
) -> Side<'a> {
    Side {
        snap: m.input.snap,
        device,
        replay,
        steps: &m.steps.steps,
        coords: &m.coords,
    }
}
