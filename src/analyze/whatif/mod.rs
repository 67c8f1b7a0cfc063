//! `memlens whatif`: each device's recorded requests replayed through the allocator model
//! ([`crate::allocator`]) as recorded and under other settings: peak and end reserved, OOMs,
//! fragmentation at the peak, cudaMalloc calls, and how closely the as-recorded replay
//! reproduces the trace's own segment events.

use crate::allocator::device::Capacity;
use crate::allocator::drive::{self, Outcome, Reorder, Scenario};
use crate::allocator::fidelity;
use crate::allocator::recorded::{self, Bounds, Recorded};
use crate::allocator::settings::Settings;
use crate::model::{Action, Snapshot};
use crate::replay::DeviceReplay;
use crate::units::iec_words;
use crate::vocab::gpus;
use crate::Error;
use serde::Serialize;

pub mod stranded;

/// The settings `--suggest` tries, each on top of the file's own.
pub const SUGGESTED: &[&str] = &[
    "expandable_segments:True",
    "max_split_size_mb:128",
    "max_split_size_mb:512",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:8",
    "garbage_collection_threshold:0.6,max_split_size_mb:128",
];

/// Options of `whatif`.
#[derive(Clone, Debug, Default)]
pub struct WhatifOptions {
    /// Scenarios, each a `PYTORCH_CUDA_ALLOC_CONF`-style list applied over the file's
    /// settings.
    pub scenarios: Vec<String>,
    /// Also try [`SUGGESTED`].
    pub suggest: bool,
    /// The memory PyTorch may reserve and where that figure came from (`--capacity`,
    /// `--gpu`); `None`: what the trace implies.
    pub capacity: Option<(u64, String)>,
    /// Replay this device only (`None`: every device with a trace).
    pub only_device: Option<u32>,
}

/// Each device's recorded requests replayed through the caching allocator model as recorded and
/// under other settings.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WhatifReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Per device with a trace.
    pub devices: Vec<DeviceWhatif>,
    /// What could not be replayed, and why.
    pub notes: Vec<String>,
}

/// Settings as the report spells them.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SettingsOut {
    /// `expandable_segments`.
    pub expandable_segments: bool,
    /// `max_split_size` in bytes (`null`: unlimited).
    pub max_split_size_bytes: Option<u64>,
    /// `max_non_split_rounding` in bytes.
    pub max_non_split_rounding_bytes: u64,
    /// `roundup_power2_divisions` per band (1 MiB, 2 MiB, ... 32 GiB).
    pub roundup_power2_divisions: Vec<u32>,
    /// `garbage_collection_threshold` (0: off).
    pub garbage_collection_threshold: f64,
    /// `per_process_memory_fraction` (absent: the whole device).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_process_memory_fraction: Option<f64>,
    /// `throw_on_cudamalloc_oom` (absent: false).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub throw_on_cudamalloc_oom: bool,
    /// `graph_capture_record_stream_reuse` (absent: false).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub graph_capture_record_stream_reuse: bool,
}

impl From<&Settings> for SettingsOut {
    fn from(s: &Settings) -> Self {
        SettingsOut {
            expandable_segments: s.expandable_segments,
            max_split_size_bytes: s.max_split_size,
            max_non_split_rounding_bytes: s.max_non_split_rounding,
            roundup_power2_divisions: s.roundup_power2_divisions.to_vec(),
            garbage_collection_threshold: s.garbage_collection_threshold,
            per_process_memory_fraction: s.per_process_memory_fraction,
            throw_on_cudamalloc_oom: s.throw_on_cudamalloc_oom,
            graph_capture_record_stream_reuse: s.graph_capture_record_stream_reuse,
        }
    }
}

/// One scenario's replay.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScenarioResult {
    /// `as recorded`, or the `--set` list.
    pub label: String,
    /// What was set over the file's settings (`""` for the recorded run).
    pub set: String,
    /// The settings followed, as `PYTORCH_CUDA_ALLOC_CONF` spells them (`""`: defaults).
    pub conf: String,
    /// The settings followed.
    pub settings: SettingsOut,
    /// The most reserved at once.
    pub peak_reserved_bytes: u64,
    /// Trace index after which the peak was first reached (-1: the start state).
    pub peak_reserved_event: i64,
    /// Reserved after the last event.
    pub end_reserved_bytes: u64,
    /// Requests the allocator could not serve.
    pub ooms: u64,
    /// Trace index of the first (`null`: none).
    pub first_oom_event: Option<u32>,
    /// Trace indices of the requests that failed, the first 64.
    pub oom_events: Vec<u32>,
    /// Cached free bytes (reserved but unallocated) when reserved first reached its peak.
    pub cached_free_at_peak_bytes: u64,
    /// Cached free bytes when the first OOM happened (`null`: none).
    pub cached_free_at_first_oom_bytes: Option<u64>,
    /// Cached free / reserved at the peak.
    pub fragmentation_at_peak: f64,
    /// The most cached free bytes at once.
    pub peak_cached_free_bytes: u64,
    /// cudaMalloc calls and page maps.
    pub device_mallocs: u64,
    /// cudaFree calls and page unmaps.
    pub device_frees: u64,
    /// Peak reserved minus the recorded run's.
    pub peak_reserved_change_bytes: i64,
    /// End reserved minus the recorded run's.
    pub end_reserved_change_bytes: i64,
    /// OOMs minus the recorded run's.
    pub ooms_change: i64,
}

/// The model's agreement with the trace, replayed as recorded.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Fidelity {
    /// Segment events (segment_alloc/free/map/unmap) in the trace.
    pub segment_events_recorded: u64,
    /// Segment events of the model.
    pub segment_events_modelled: u64,
    /// Same request, action and size on both sides.
    pub segment_events_matched: u64,
    /// Matched over the larger count (1: exact).
    pub agreement: f64,
    /// Trace index of the first request whose segment events differ (`null`: none).
    pub first_difference_event: Option<u32>,
    /// Peak reserved of the trace.
    pub recorded_peak_reserved_bytes: u64,
    /// Peak reserved of the model.
    pub model_peak_reserved_bytes: u64,
    /// `alloc` entries replayed.
    pub allocs: u64,
    /// Of those, served at the recorded address.
    pub allocs_at_recorded_address: u64,
}

/// An `oom` entry of the trace.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecordedOom {
    /// Trace index.
    pub event: u32,
    /// The request, rounded.
    pub request_bytes: u64,
    /// Bytes of live blocks just before (rounded sizes).
    pub live_bytes: u64,
    /// True when live + request exceed the capacity: no layout fits it, no setting helps
    /// (`null`: capacity unknown).
    pub exceeds_capacity_when_packed: Option<bool>,
}

/// The memory the allocator may reserve, as the report states it.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CapacityOut {
    /// Bytes (`null`: unknown; nothing can run out).
    pub bytes: Option<u64>,
    /// `device` (a cudaMalloc fails when what it adds does not fit) or `per_process_limit`
    /// (reserved + the allocation is checked before each cudaMalloc or map).
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["device", "per_process_limit", null])))]
    pub kind: Option<&'static str>,
    /// Where the figure comes from.
    pub source: String,
    /// The most the trace reserved (the limit is at least this).
    pub at_least_bytes: u64,
    /// Below this reserved + allocation a cudaMalloc failed in the trace (`null`: none did).
    pub below_bytes: Option<u64>,
}

/// One device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceWhatif {
    /// Device index.
    pub device: u32,
    /// Trace entries.
    pub events: usize,
    /// Settings of the file (`PYTORCH_CUDA_ALLOC_CONF` spelling; `null` when the file records
    /// none and PyTorch's defaults are assumed).
    pub recorded_conf: Option<String>,
    /// The capacity replayed against.
    pub capacity: CapacityOut,
    /// Segments in the state before the trace.
    pub start_segments: usize,
    /// Reserved bytes before the trace.
    pub start_reserved_bytes: u64,
    /// Trace events the start state could not undo consistently.
    pub start_inconsistencies: usize,
    /// `empty_cache` calls found in the trace (releases no malloc explains).
    pub empty_cache_calls: usize,
    /// The model against the trace.
    pub fidelity: Fidelity,
    /// The trace's `oom` entries.
    pub recorded_ooms: Vec<RecordedOom>,
    /// What the scenarios say about the OOMs (or the best peak), in one sentence.
    pub verdict: String,
    /// Scenarios: the recorded one first, then the best first (fewest OOMs, lowest peak).
    pub scenarios: Vec<ScenarioResult>,
}

/// The device's memory behind a capacity: the capacity itself when it is the device's (not
/// a per-process limit), else unknown.
fn device_total(cap: Option<Capacity>) -> Option<u64> {
    cap.filter(|c| !c.fraction).map(|c| c.bytes)
}

/// `per_process_memory_fraction` of `s` applied to a device capacity: that share of it,
/// checked as a per-process limit (PyTorch's `set_per_process_memory_fraction`); the
/// capacity as it was otherwise (no fraction, or the device's memory unknown).
fn with_fraction(
    cap: Option<Capacity>,
    mut out: CapacityOut,
    s: &Settings,
) -> (Option<Capacity>, CapacityOut) {
    let (Some(f), Some(total)) = (s.per_process_memory_fraction, device_total(cap)) else {
        return (cap, out);
    };
    let bytes = (total as f64 * f) as u64;
    out.source = format!(
        "per_process_memory_fraction {f} of {} ({})",
        iec_words(total),
        out.source
    );
    out.bytes = Some(bytes);
    out.kind = Some("per_process_limit");
    (
        Some(Capacity {
            bytes,
            fraction: true,
        }),
        out,
    )
}

/// The capacity a scenario runs against: the recorded run's `cap`, or, when the scenario
/// sets another `per_process_memory_fraction` than the file's `base`, that share of the
/// device's memory `total` (the whole device when it sets none) where `total` is known.
fn scenario_capacity(
    cap: Option<Capacity>,
    total: Option<u64>,
    base: &Settings,
    s: &Settings,
) -> Option<Capacity> {
    if s.per_process_memory_fraction == base.per_process_memory_fraction {
        return cap;
    }
    match (total, s.per_process_memory_fraction) {
        (Some(t), Some(f)) => Some(Capacity {
            bytes: (t as f64 * f) as u64,
            fraction: true,
        }),
        (Some(t), None) => Some(Capacity {
            bytes: t,
            fraction: false,
        }),
        (None, _) => cap,
    }
}

/// The largest amount that is a multiple of the coarsest unit (1 GiB down to 2 MiB, else a
/// byte) lying in `[lo, hi)`: a limit set as a round figure.
fn round_in(lo: u64, hi: u64) -> u64 {
    for shift in (21..=30).rev() {
        let unit = 1u64 << shift;
        let v = lo.div_ceil(unit) * unit;
        if v < hi {
            return v;
        }
    }
    lo
}

/// The capacity replayed against: `given`, else inferred from the trace's bounds `b`. An
/// inference never goes below `proven`, the most the trace shows in use (its reserved bytes or
/// its largest allocation that succeeded): an absurd trace (an OOM that saw 0 B reserved and 0
/// B free, a failure below what succeeded) leaves the capacity unknown rather than 0 B.
fn capacity_for(
    b: &Bounds,
    given: &Option<(u64, String)>,
    proven: u64,
) -> (Option<Capacity>, CapacityOut) {
    let floor = b.lower.max(proven);
    let mut out = CapacityOut {
        bytes: None,
        kind: None,
        source: String::new(),
        at_least_bytes: b.lower,
        below_bytes: b.upper,
    };
    let cap = if let Some((bytes, source)) = given {
        out.source = source.clone();
        Some(Capacity {
            bytes: *bytes,
            fraction: false,
        })
    } else if let Some(d) = b.device.filter(|&d| b.upper.is_some() && d < floor) {
        out.source = format!(
            "unknown: the trace is inconsistent (its OOM saw {} reserved + free, below the {} \
             it shows in use), so no capacity can be inferred: pass --capacity or --gpu",
            iec_words(d),
            iec_words(floor)
        );
        None
    } else if let Some(upper) = b.upper.filter(|&u| floor > 0 && floor < u) {
        match b.device {
            Some(d) if d < upper && d >= floor => {
                out.source = "inferred: reserved + the device's free memory at the OOM".into();
                Some(Capacity {
                    bytes: d,
                    fraction: false,
                })
            }
            _ => {
                out.source = format!(
                    "inferred: a per-process limit of at least {} and below {} (where a \
                     cudaMalloc failed); the roundest figure between is taken",
                    iec_words(b.lower),
                    iec_words(upper)
                );
                Some(Capacity {
                    bytes: round_in(floor, upper),
                    fraction: true,
                })
            }
        }
    } else if let Some(upper) = b.upper {
        out.source = format!(
            "unknown: the trace is inconsistent (a cudaMalloc failed below {} while it shows {} \
             in use), so no capacity can be inferred: pass --capacity or --gpu",
            iec_words(upper),
            iec_words(floor)
        );
        None
    } else {
        out.source = "unknown: nothing in the trace ran short and no --capacity or --gpu was \
                      given, so no scenario can run out of memory"
            .into();
        None
    };
    if let Some(c) = cap {
        out.bytes = Some(c.bytes);
        out.kind = Some(if c.fraction {
            "per_process_limit"
        } else {
            "device"
        });
    }
    (cap, out)
}

fn result(label: String, set: String, s: &Settings, o: &Outcome) -> ScenarioResult {
    ScenarioResult {
        label,
        set,
        conf: s.conf_string(),
        settings: s.into(),
        peak_reserved_bytes: o.peak_reserved,
        peak_reserved_event: o.peak_event,
        end_reserved_bytes: o.end_reserved,
        ooms: o.ooms,
        first_oom_event: o.oom_events.first().copied(),
        oom_events: o.oom_events.clone(),
        cached_free_at_peak_bytes: o.cached_free_at_peak,
        cached_free_at_first_oom_bytes: o.cached_free_at_first_oom,
        fragmentation_at_peak: if o.peak_reserved == 0 {
            0.0
        } else {
            o.cached_free_at_peak as f64 / o.peak_reserved as f64
        },
        peak_cached_free_bytes: o.peak_cached_free,
        device_mallocs: o.device_mallocs,
        device_frees: o.device_frees,
        peak_reserved_change_bytes: 0,
        end_reserved_change_bytes: 0,
        ooms_change: 0,
    }
}

/// Parses every scenario of `opts` (over the file's `base` settings) before any replay, so
/// a bad `--set` fails at once.
pub fn scenarios(opts: &WhatifOptions, base: &Settings) -> Result<Vec<(String, Settings)>, Error> {
    let mut out: Vec<(String, Settings)> = Vec::new();
    let suggested = if opts.suggest { SUGGESTED } else { &[] };
    for set in opts
        .scenarios
        .iter()
        .map(String::as_str)
        .chain(suggested.iter().copied())
    {
        let mut s = base.clone();
        s.apply(set)
            .map_err(|e| Error::Usage(format!("--set {e}")))?;
        if !out.iter().any(|(l, _)| l == set) {
            out.push((set.to_string(), s));
        }
    }
    Ok(out)
}

fn verdict(d: &DeviceWhatif) -> String {
    let base = &d.scenarios[0];
    if let Some(first) = d.recorded_ooms.first() {
        if d.recorded_ooms
            .iter()
            .all(|o| o.exceeds_capacity_when_packed == Some(true))
        {
            return format!(
                "no allocator setting avoids this OOM; the request exceeds what is free even \
                 when packed ({} live + {} requested > {} capacity at event {})",
                iec_words(first.live_bytes),
                iec_words(first.request_bytes),
                iec_words(d.capacity.bytes.unwrap_or(0)),
                first.event
            );
        }
        if d.capacity.bytes.is_none() {
            return "the capacity is unknown: pass --capacity or --gpu to judge the OOM".into();
        }
        return match d.scenarios.iter().skip(1).find(|s| s.ooms == 0) {
            Some(s) => format!(
                "{} avoids the OOM: the OOM at event {} does not happen; peak reserved {} → {}",
                s.label,
                first.event,
                iec_words(base.peak_reserved_bytes),
                iec_words(s.peak_reserved_bytes)
            ),
            None if d.scenarios.len() > 1 => {
                format!("no setting tried avoids the OOM at event {}", first.event)
            }
            None => "no other setting was tried (--set or --suggest)".into(),
        };
    }
    match d.scenarios.get(1) {
        Some(best) if best.peak_reserved_bytes < base.peak_reserved_bytes => format!(
            "no OOM recorded; {} lowers peak reserved {} → {}",
            best.label,
            iec_words(base.peak_reserved_bytes),
            iec_words(best.peak_reserved_bytes)
        ),
        Some(_) => "no OOM recorded; no setting tried lowers peak reserved".into(),
        None => "no OOM recorded; no other setting was tried (--set or --suggest)".into(),
    }
}

/// The settings the file ran with: recorded, else PyTorch's defaults (expandable when its
/// segments are).
pub fn file_settings(snap: &Snapshot) -> Settings {
    Settings::recorded(snap).unwrap_or_else(|| {
        let mut s = Settings::default();
        s.expandable_segments = snap.segments.iter().any(|s| s.expandable);
        s
    })
}

/// Replays every device with a trace as recorded and under each scenario of `opts`.
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &WhatifOptions,
) -> Result<WhatifReport, Error> {
    let recorded_settings = Settings::recorded(snap);
    let base = file_settings(snap);
    let tried = scenarios(opts, &base)?;
    let mut notes = Vec::new();
    let mut devices = Vec::new();
    for dev in &snap.devices {
        if opts.only_device.is_some_and(|d| d != dev.id) {
            continue;
        }
        let trace = snap.device_trace(dev);
        if trace.is_empty() {
            if !snap.device_segments(dev).is_empty() {
                notes.push(format!(
                    "device {} has no trace: there are no requests to replay",
                    dev.id
                ));
            }
            continue;
        }
        let replay = replays.iter().find(|r| r.device == dev.id);
        let mut d = device_whatif(snap, dev, replay, opts, &base, &tried);
        d.recorded_conf = recorded_settings.as_ref().map(Settings::conf_string);
        d.verdict = verdict(&d);
        devices.push(d);
    }
    if devices.is_empty() && notes.is_empty() {
        notes.push("no device has a trace: there are no requests to replay".into());
    }
    if recorded_settings.is_none() && !devices.is_empty() {
        notes.insert(
            0,
            "the file records no allocator settings: PyTorch's defaults are assumed \
             (expandable segments if any segment is expandable)"
                .to_string(),
        );
    }
    Ok(WhatifReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        devices,
        notes,
    })
}

/// One traced device replayed as recorded (with the file's settings `base`) and under each
/// scenario `tried`; its recorded settings and verdict are left for the caller.
fn device_whatif(
    snap: &Snapshot,
    dev: &crate::model::Device,
    replay: Option<&DeviceReplay>,
    opts: &WhatifOptions,
    base: &Settings,
    tried: &[(String, Settings)],
) -> DeviceWhatif {
    let trace = snap.device_trace(dev);
    let mut rec = recorded::read(snap, dev, base);
    let va_bytes = va_bytes(&rec, &opts.capacity);
    let largest_alloc = trace
        .iter()
        .filter(|e| e.action == Action::Alloc)
        .map(|e| e.size)
        .max()
        .unwrap_or(0);
    let as_recorded = |rec: &Recorded| {
        let (cap, capacity) = capacity_for(&rec.bounds, &opts.capacity, largest_alloc);
        let total = device_total(cap);
        let (cap, capacity) = with_fraction(cap, capacity, base);
        let sc = Scenario {
            settings: base.clone(),
            capacity: cap,
            va_bytes,
            follow_recorded: true,
            probe: None,
            repack_start: false,
            reorder: Reorder::default(),
        };
        (cap, (capacity, total), drive::run(snap, rec, &sc))
    };
    let (mut cap, mut capacity, mut recorded_run) = as_recorded(&rec);
    if !recorded_run.empty_cache_inferred.is_empty() {
        // Releases the model did not need were empty_cache calls: they bound nothing.
        rec.exclude(&recorded_run.empty_cache_inferred);
        (cap, capacity, recorded_run) = as_recorded(&rec);
    }
    let a = fidelity::compare(&rec.segs, &recorded_run.events);
    let fidelity = Fidelity {
        segment_events_recorded: a.recorded,
        segment_events_modelled: a.modelled,
        segment_events_matched: a.matched,
        agreement: a.ratio(),
        first_difference_event: a.first_difference,
        recorded_peak_reserved_bytes: rec.peak_reserved.0,
        model_peak_reserved_bytes: recorded_run.peak_reserved,
        allocs: recorded_run.allocs,
        allocs_at_recorded_address: recorded_run.allocs_at_recorded_address,
    };
    let recorded_ooms = trace
        .iter()
        .enumerate()
        .filter(|(_, e)| e.action == Action::Oom)
        .map(|(i, e)| {
            let live = replay.map_or(0, |r| r.rounded_at(i as i64 - 1));
            RecordedOom {
                event: i as u32,
                request_bytes: e.size,
                live_bytes: live,
                exceeds_capacity_when_packed: cap.map(|c| live + e.size > c.bytes),
            }
        })
        .collect();
    let as_recorded = result("as recorded".into(), String::new(), base, &recorded_run);
    let (capacity, total) = capacity;
    let results = scenario_results(snap, &rec, base, tried, as_recorded, (cap, total, va_bytes));
    DeviceWhatif {
        device: dev.id,
        events: trace.len(),
        recorded_conf: None,
        capacity,
        start_segments: rec.start.segments.len(),
        start_reserved_bytes: rec.start_reserved,
        start_inconsistencies: rec.start.inconsistencies,
        empty_cache_calls: rec.empty_cache_at.len() + rec.empty_cache_before.len(),
        fidelity,
        recorded_ooms,
        verdict: String::new(),
        scenarios: results,
    }
}

/// The run `as_recorded` then one per scenario `tried` (under `limits`: the capacity, the
/// device's memory when known, and an expandable segment's address range), each with its change from the first; the scenarios
/// sorted by ooms, then peak reserved, then label.
fn scenario_results(
    snap: &Snapshot,
    rec: &Recorded,
    base: &Settings,
    tried: &[(String, Settings)],
    as_recorded: ScenarioResult,
    limits: (Option<Capacity>, Option<u64>, u64),
) -> Vec<ScenarioResult> {
    let (cap, total, va_bytes) = limits;
    let mut results = vec![as_recorded];
    for (set, s) in tried {
        let o = drive::run(
            snap,
            rec,
            &Scenario {
                settings: s.clone(),
                capacity: scenario_capacity(cap, total, base, s),
                va_bytes,
                follow_recorded: false,
                probe: None,
                // Under another segment kind, the memory allocated before the trace
                // would have been too: its recorded segments are not kept.
                repack_start: s.expandable_segments != base.expandable_segments,
                reorder: Reorder::default(),
            },
        );
        results.push(result(set.clone(), set.clone(), s, &o));
    }
    let (b_peak, b_end, b_ooms) = (
        results[0].peak_reserved_bytes as i64,
        results[0].end_reserved_bytes as i64,
        results[0].ooms as i64,
    );
    for r in &mut results {
        r.peak_reserved_change_bytes = r.peak_reserved_bytes as i64 - b_peak;
        r.end_reserved_change_bytes = r.end_reserved_bytes as i64 - b_end;
        r.ooms_change = r.ooms as i64 - b_ooms;
    }
    results[1..].sort_by(|x, y| {
        (x.ooms, x.peak_reserved_bytes, &x.label).cmp(&(y.ooms, y.peak_reserved_bytes, &y.label))
    });
    results
}

/// The address range one expandable segment reserves: 1⅛ × the GPU's memory (the given
/// capacity, else the device memory the trace's last OOM saw, else 1 TiB).
fn va_bytes(rec: &Recorded, given: &Option<(u64, String)>) -> u64 {
    let gpu = given
        .as_ref()
        .map(|g| g.0)
        .or_else(|| {
            rec.bounds
                .device
                .map(|d| gpus::infer_capacity(d).map_or(d, |c| c.capacity_bytes))
        })
        .unwrap_or(1 << 40);
    gpu + gpu / 8
}

/// What the allocator keeps reserved on device `device` after trace index `probe` (-1: the
/// start state) once its cache is released (as under memory pressure before an OOM),
/// replayed without a capacity: `(recorded, with conf)`. The recorded run starts from the
/// recorded state before the trace; the run with `conf` applied over the file's settings
/// rebuilds that state under them (its live blocks requested again), as a run with them
/// from the start would hold it. `None` when the device has no trace.
pub fn unreleasable_at(
    snap: &Snapshot,
    device: u32,
    probe: i64,
    conf: &str,
) -> Result<Option<(u64, u64)>, Error> {
    let changes = [stranded::Change::Conf(conf.to_string())];
    Ok(
        stranded::probed(snap, device, probe, &changes, true)?.and_then(|runs| {
            runs[0]
                .unreleasable_at_probe
                .zip(runs[1].unreleasable_at_probe)
        }),
    )
}
