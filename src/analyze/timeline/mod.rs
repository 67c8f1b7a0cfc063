//! `memlens timeline`: live requested, rounded and reserved bytes over the trace, with phases.
//!
//! A device without a trace has no timeline: its final state, the one moment recorded, is
//! reported instead ([`FinalState`]), with an [`Absence`] saying so; a trace without any
//! allocation or free (a lone `snapshot` marker) is drawn, flat, with an absence too.

use crate::vocab::absence::{self, Absence};

use crate::model::Snapshot;
use crate::replay::{self, DeviceReplay, Moment, Window, WindowSpec};
use crate::units::iec;
use serde::Serialize;

/// Options of `timeline`.
#[derive(Clone, Debug)]
pub struct TimelineOptions {
    /// Most points per device (0 = all); local maxima are kept exactly.
    pub points: usize,
    /// Limit to these events.
    pub window: WindowSpec,
}

impl Default for TimelineOptions {
    fn default() -> Self {
        TimelineOptions {
            points: 2000,
            window: WindowSpec::default(),
        }
    }
}

/// One state of the timeline.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Point {
    /// After this event (-1: before the first).
    pub event_index: i64,
    /// Its time, when recorded (`null` otherwise).
    pub time_us: Option<i64>,
    /// Live requested bytes.
    pub live_requested_bytes: u64,
    /// Live bytes rounded as the allocator rounds them (an estimate from the trace).
    pub allocated_bytes: u64,
    /// Reserved bytes.
    pub reserved_bytes: u64,
}

/// A named span from `external_annotations` (START/END pairs), e.g. `ProfilerStep#3`.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Phase {
    /// Annotation name.
    pub name: String,
    /// First event inside the span.
    pub first_event: i64,
    /// Last event inside the span.
    pub last_event: i64,
    /// START time.
    pub start_us: i64,
    /// END time.
    pub end_us: i64,
}

/// One device's timeline.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceTimeline {
    /// Device index.
    pub device: u32,
    /// Number of events in the trace.
    pub events: usize,
    /// The window shown.
    pub window: Window,
    /// The peak of live requested bytes inside the window.
    pub peak: Moment,
    /// Live requested bytes at the peak.
    pub peak_bytes: u64,
    /// The largest reserved bytes inside the window.
    pub max_reserved_bytes: u64,
    /// True when points were dropped to fit `points`.
    pub downsampled: bool,
    /// The states, in event order.
    pub points: Vec<Point>,
    /// Annotation spans overlapping the window.
    pub phases: Vec<Phase>,
}

/// The one recorded moment of a device without a trace: its final state.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FinalState {
    /// Device index.
    pub device: u32,
    /// Live requested bytes of its final blocks.
    pub live_requested_bytes: u64,
    /// Bytes of its live blocks (as the allocator rounded them).
    pub allocated_bytes: u64,
    /// Reserved bytes (its segments).
    pub reserved_bytes: u64,
}

/// Live, allocated and reserved bytes over the trace, per device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TimelineReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Devices with a trace.
    pub devices: Vec<DeviceTimeline>,
    /// Devices without a trace (no timeline can be drawn).
    pub devices_without_trace: Vec<u32>,
    /// The final state of each device without a trace, in `devices_without_trace` order.
    pub final_states: Vec<FinalState>,
    /// What the snapshot lacks for a timeline, with stable codes (see [`absence`]).
    pub absent: Vec<Absence>,
}

/// Builds the timeline of every replayed device.
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &TimelineOptions,
) -> Result<TimelineReport, String> {
    let mut devices = Vec::new();
    let mut absent = Vec::new();
    for r in replays {
        let dev = snap.device(r.device).expect("replayed device exists");
        let trace = snap.device_trace(dev);
        if !crate::analyze::profile::records_activity(trace) {
            absent.push(Absence::new(
                absence::NO_ACTIVITY,
                Some(r.device),
                format!(
                    "the trace of device {} records no allocation or free ({}): the timeline is flat at the final state's {} live, {} reserved",
                    r.device,
                    if trace.len() == 1 { "1 entry".to_string() } else { format!("{} entries", trace.len()) },
                    iec(r.live_at(-1)),
                    iec(r.reserved_at(-1))
                ),
            ));
        }
        let window = replay::resolve_window_in(snap, &opts.window, r, trace)?;
        let point = |i: i64| Point {
            event_index: i,
            time_us: replay::moment(trace, i).time_us,
            live_requested_bytes: r.live_at(i),
            allocated_bytes: r.rounded_at(i),
            reserved_bytes: r.reserved_at(i),
        };
        let indices = downsample(r, window, opts.points);
        let downsampled = indices.len() < (window.last - window.first + 1) as usize;
        let peak = r.peak_in(window);
        let max_reserved_bytes = (window.first..=window.last)
            .map(|i| r.reserved_at(i))
            .max()
            .unwrap_or(0);
        devices.push(DeviceTimeline {
            device: r.device,
            events: r.events,
            window,
            peak: replay::moment(trace, peak),
            peak_bytes: r.live_at(peak),
            max_reserved_bytes,
            downsampled,
            points: indices.into_iter().map(point).collect(),
            phases: phases(snap, r.device, trace, window),
        });
    }
    let devices_without_trace: Vec<u32> = snap
        .devices
        .iter()
        .filter(|d| d.trace.is_empty())
        .map(|d| d.id)
        .collect();
    let mut final_states = Vec::new();
    for &id in &devices_without_trace {
        let dev = snap.device(id).expect("listed device exists");
        let (live, allocated) = snap
            .live_blocks(dev)
            .fold((0u64, 0u64), |(l, a), b| (l + b.requested_size, a + b.size));
        let reserved: u64 = snap.device_segments(dev).iter().map(|s| s.total_size).sum();
        absent.push(Absence::new(
            absence::NO_TRACE,
            Some(id),
            format!(
                "device {id} has no trace (allocation history was not recorded): there is no timeline to draw; its final state holds {} live (requested) in {} reserved (`memlens top`, `memlens frag` and `memlens categories` read it)",
                iec(live),
                iec(reserved)
            ),
        ));
        final_states.push(FinalState {
            device: id,
            live_requested_bytes: live,
            allocated_bytes: allocated,
            reserved_bytes: reserved,
        });
    }
    Ok(TimelineReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        devices,
        devices_without_trace,
        final_states,
        absent,
    })
}

/// Picks at most `points` states of the window: per bucket its lowest and highest live
/// bytes (so every bucket's maximum is exact), plus the first, last and the peak.
fn downsample(r: &DeviceReplay, w: Window, points: usize) -> Vec<i64> {
    let n = (w.last - w.first + 1) as usize;
    if points == 0 || n <= points {
        return (w.first..=w.last).collect();
    }
    let buckets = (points / 2).max(1);
    let mut keep = vec![w.first, w.last, r.peak_in(w)];
    for b in 0..buckets {
        let lo = w.first + (n * b / buckets) as i64;
        let hi = w.first + (n * (b + 1) / buckets) as i64 - 1;
        if lo > hi {
            continue;
        }
        let (mut min_i, mut max_i) = (lo, lo);
        for i in lo..=hi {
            let v = r.live_at(i);
            if v < r.live_at(min_i) {
                min_i = i;
            }
            if v > r.live_at(max_i) {
                max_i = i;
            }
        }
        keep.push(min_i);
        keep.push(max_i);
    }
    keep.sort_unstable();
    keep.dedup();
    keep
}

/// The `external_annotations` START/END spans of `device` that overlap window `w`, with the
/// events inside each (by time), ordered by first event, start and name.
pub fn phases(
    snap: &Snapshot,
    device: u32,
    trace: &[crate::model::TraceEvent],
    w: Window,
) -> Vec<Phase> {
    let mut open: Vec<(&str, i64)> = Vec::new();
    let mut out = Vec::new();
    for a in &snap.annotations {
        if a.device.is_some_and(|d| d != device as i64) {
            continue;
        }
        let Some(t) = a.time_us else { continue };
        match a.stage.as_str() {
            "START" => open.push((&a.name, t)),
            "END" => {
                if let Some(pos) = open.iter().rposition(|(n, _)| *n == a.name) {
                    let (name, start) = open.remove(pos);
                    // Events inside [start, end] by time.
                    let first =
                        trace.partition_point(|e| e.time().is_some_and(|et| et < start)) as i64;
                    let last =
                        trace.partition_point(|e| e.time().is_some_and(|et| et <= t)) as i64 - 1;
                    if last >= first && last >= w.first && first <= w.last {
                        out.push(Phase {
                            name: name.to_string(),
                            first_event: first,
                            last_event: last,
                            start_us: start,
                            end_us: t,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    out.sort_by(|a, b| {
        (a.first_event, a.start_us, &a.name).cmp(&(b.first_event, b.start_us, &b.name))
    });
    out
}
