//! `memlens export --format perfetto`: what a Chrome trace-event file shows of a snapshot, per
//! device: the live (requested), allocated and reserved bytes as counter samples, steps and
//! annotations as spans, OOMs and segment changes as instants, and the largest allocations as
//! spans with their site. `render::perfetto` writes it as trace-event JSON; nothing there
//! computes.
//!
//! Time: a device whose every trace entry has `time_us` is placed at those microseconds (the
//! wall clock a `torch.profiler` trace of the same run uses), counted from `base_ns` (that
//! trace's `baseTimeNanoseconds`, whose `ts` count from it), the state before the first
//! entry one microsecond before it. A device whose trace lacks `time_us` (files before
//! PyTorch 2.2) is placed at its event index: entry `i` at `i + 1` µs, the state before the
//! first at 0, and a note says so.
//!
//! Times are clamped, never wrapped: a `time_us` near ±2^63 (an absurd file) gives spans that
//! end at `i64::MAX` rather than durations that wrap negative; the export stays usable for the
//! rest of the trace.
//!
//! Counter samples: with `points` > 0 and a longer window, the window is cut into
//! `points / 2` buckets and each bucket keeps the states where each of the three series is
//! lowest and highest, so every series' maximum (and `timeline`'s peak and highest reserved)
//! is a sample exactly.

use crate::analyze::pretrace::{self, Kinds};
use crate::analyze::timeline;
use crate::model::{Action, Snapshot, TraceEvent};
use crate::replay::{self, steps, DeviceReplay, Window, WindowSpec, NEVER};
use crate::vocab::sites::{site_label, SiteOptions};
use serde::Serialize;

/// Options of the export.
#[derive(Clone, Debug)]
pub struct PerfettoOptions {
    /// Most counter samples per device (0 = one per event).
    pub points: usize,
    /// The largest allocations drawn as spans (0 = none).
    pub largest: usize,
    /// Only these events.
    pub window: WindowSpec,
    /// Nanoseconds since the epoch that timestamps are counted from (a `torch.profiler`
    /// trace's `baseTimeNanoseconds`; 0: the epoch itself, timestamps are `time_us`).
    pub base_ns: i64,
}

impl Default for PerfettoOptions {
    fn default() -> Self {
        PerfettoOptions {
            points: 20_000,
            largest: 20,
            window: WindowSpec::default(),
            base_ns: 0,
        }
    }
}

/// How a device's events are placed in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeBasis {
    /// Each entry's `time_us`.
    TimeUs,
    /// The entry's index + 1, as microseconds (the trace records no `time_us`).
    EventIndex,
}

impl TimeBasis {
    /// The name written in the trace's `otherData`.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeBasis::TimeUs => "time_us",
            TimeBasis::EventIndex => "event_index",
        }
    }
}

/// The three byte counts after one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CounterPoint {
    /// Microseconds (see [`TimeBasis`]).
    pub ts: i64,
    /// After this event (-1: before the first).
    pub event_index: i64,
    /// Live requested bytes.
    pub live_requested_bytes: u64,
    /// Live bytes rounded as the allocator rounds them.
    pub allocated_bytes: u64,
    /// Reserved bytes.
    pub reserved_bytes: u64,
}

/// A named span: a step or an annotation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Span {
    /// Its name (`ProfilerStep#3`, `step 2`).
    pub name: String,
    /// Start, µs.
    pub ts: i64,
    /// Length, µs (at least 1, so that it can be seen).
    pub dur: i64,
    /// First event inside.
    pub first_event: i64,
    /// Last event inside.
    pub last_event: i64,
    /// The lane (0, 1, ...) where it nests properly with the spans before it.
    pub lane: u32,
}

/// One event worth a mark: an OOM or a segment change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Instant {
    /// The action (`oom`, `segment_alloc`, `segment_free`, `segment_map`, `segment_unmap`).
    pub action: &'static str,
    /// µs.
    pub ts: i64,
    /// Its event index.
    pub event_index: i64,
    /// Bytes (segment bytes; for an OOM the rounded request).
    pub bytes: u64,
    /// Segment address (`None` for an OOM).
    pub address: Option<u64>,
    /// For an OOM, the device's free bytes (`device_free`).
    pub device_free_bytes: Option<u64>,
}

/// One of the largest allocations alive in the window, clipped to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AllocationSpan {
    /// Unique within the device (its index in the replay).
    pub id: u64,
    /// Requested bytes.
    pub bytes: u64,
    /// Its site (`file:line:function`, or `<no frames>`).
    pub site: String,
    /// Block address.
    pub address: u64,
    /// Event index of the alloc (-1: alive before the trace began).
    pub alloc_event: i64,
    /// Event index of the free (`None`: alive at the end of the trace).
    pub free_event: Option<i64>,
    /// Start, µs (the window's start when allocated before it).
    pub ts: i64,
    /// End, µs (the window's end when freed after it).
    pub end_ts: i64,
}

/// One device's tracks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceTracks {
    /// Device index.
    pub device: u32,
    /// How its events are placed in time.
    pub time_basis: TimeBasis,
    /// The window exported.
    pub window: Window,
    /// Counter samples, in event order.
    pub counters: Vec<CounterPoint>,
    /// Highest live requested bytes in the window (`timeline`'s `peak_bytes`).
    pub peak_bytes: u64,
    /// Highest allocated bytes in the window.
    pub max_allocated_bytes: u64,
    /// Highest reserved bytes in the window (`timeline`'s `max_reserved_bytes`).
    pub max_reserved_bytes: u64,
    /// Steps of the loop (`replay::steps`).
    pub steps: Vec<Span>,
    /// `external_annotations` spans.
    pub annotations: Vec<Span>,
    /// OOMs and segment changes.
    pub instants: Vec<Instant>,
    /// The largest allocations, biggest first.
    pub allocations: Vec<AllocationSpan>,
}

/// The export.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PerfettoExport {
    /// Always [`crate::analyze::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// memlens's version, for the trace's `otherData`.
    pub generator: String,
    /// The `baseTimeNanoseconds` timestamps count from (0: the epoch).
    pub base_ns: i64,
    /// How the devices are placed in time: `time_us`, `event_index`, `mixed` (some of each)
    /// or `none` (no device has a trace).
    pub time_basis: &'static str,
    /// Devices with a trace.
    pub devices: Vec<DeviceTracks>,
    /// What a reader of the trace should know (a device placed by event index, devices
    /// without a trace).
    pub notes: Vec<String>,
}

/// Builds the tracks of every replayed device.
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &PerfettoOptions,
) -> Result<PerfettoExport, String> {
    let mut devices = Vec::new();
    let mut notes = Vec::new();
    for r in replays {
        let dev = snap.device(r.device).expect("replayed device exists");
        let trace = snap.device_trace(dev);
        let window = replay::resolve_window_in(snap, &opts.window, r, trace)?;
        let clock = Clock::of(trace, opts.base_ns / 1000);
        if clock.basis == TimeBasis::EventIndex {
            notes.push(format!(
                "device {}: the trace records no time_us (or not on every entry): events are placed at their index + 1 as microseconds, so this device does not line up with a profiler trace",
                r.device
            ));
        }
        devices.push(device_tracks(snap, r, trace, window, &clock, opts));
    }
    for d in snap.devices.iter().filter(|d| d.trace.is_empty()) {
        notes.push(format!(
            "device {} has no trace: nothing to place on a timeline (`memlens summary` gives its final state)",
            d.id
        ));
    }
    let time_basis = match devices.first() {
        None => "none",
        Some(d) if devices.iter().all(|x| x.time_basis == d.time_basis) => d.time_basis.as_str(),
        Some(_) => "mixed",
    };
    Ok(PerfettoExport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        generator: format!("memlens {}", env!("CARGO_PKG_VERSION")),
        base_ns: opts.base_ns,
        time_basis,
        devices,
        notes,
    })
}

/// Where a device's states are in time.
struct Clock<'t> {
    basis: TimeBasis,
    trace: &'t [TraceEvent],
    /// µs subtracted from every `time_us` (the base's).
    base_us: i64,
}

impl<'t> Clock<'t> {
    fn of(trace: &'t [TraceEvent], base_us: i64) -> Clock<'t> {
        let timed = !trace.is_empty() && trace.iter().all(|e| e.time().is_some());
        Clock {
            basis: if timed {
                TimeBasis::TimeUs
            } else {
                TimeBasis::EventIndex
            },
            trace,
            base_us,
        }
    }

    /// µs of the state after event `i` (-1: before the first).
    fn ts(&self, i: i64) -> i64 {
        match self.basis {
            TimeBasis::EventIndex => i + 1,
            TimeBasis::TimeUs if i < 0 => self.at(self.trace[0].time_us).saturating_sub(1),
            TimeBasis::TimeUs => self.at(self.trace[i as usize].time_us),
        }
    }

    /// A `time_us` counted from the base.
    fn at(&self, time_us: i64) -> i64 {
        match self.basis {
            TimeBasis::TimeUs => time_us.saturating_sub(self.base_us),
            TimeBasis::EventIndex => time_us,
        }
    }
}

fn device_tracks(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[TraceEvent],
    w: Window,
    clock: &Clock,
    opts: &PerfettoOptions,
) -> DeviceTracks {
    let counters: Vec<CounterPoint> = samples(r, w, opts.points)
        .into_iter()
        .map(|i| CounterPoint {
            ts: clock.ts(i),
            event_index: i,
            live_requested_bytes: r.live_at(i),
            allocated_bytes: r.rounded_at(i),
            reserved_bytes: r.reserved_at(i),
        })
        .collect();
    let all = w.first..=w.last;
    let peak_bytes = all.clone().map(|i| r.live_at(i)).max().unwrap_or(0);
    let max_allocated_bytes = all.clone().map(|i| r.rounded_at(i)).max().unwrap_or(0);
    let max_reserved_bytes = all.map(|i| r.reserved_at(i)).max().unwrap_or(0);

    let span = |name: String, first: i64, last: i64| {
        let ts = clock.ts(first);
        Span {
            name,
            ts,
            dur: clock.ts(last).saturating_sub(ts).max(1),
            first_event: first,
            last_event: last,
            lane: 0,
        }
    };
    let mut step_spans: Vec<Span> = steps::find(snap, r)
        .steps
        .into_iter()
        .filter(|s| s.last_event >= w.first && s.first_event <= w.last)
        .map(|s| span(s.name, s.first_event, s.last_event))
        .collect();
    let mut annotations: Vec<Span> = timeline::phases(snap, r.device, trace, w)
        .into_iter()
        .map(|p| match clock.basis {
            // The annotation's own times, which a profiler trace shares.
            TimeBasis::TimeUs => Span {
                name: p.name,
                ts: clock.at(p.start_us),
                dur: p.end_us.saturating_sub(p.start_us).max(1),
                first_event: p.first_event,
                last_event: p.last_event,
                lane: 0,
            },
            TimeBasis::EventIndex => span(p.name, p.first_event, p.last_event),
        })
        .collect();
    assign_lanes(&mut step_spans);
    assign_lanes(&mut annotations);

    let instants = (w.first.max(0)..=w.last)
        .filter_map(|i| {
            let e = &trace[i as usize];
            let segment = matches!(
                e.action,
                Action::SegmentAlloc
                    | Action::SegmentFree
                    | Action::SegmentMap
                    | Action::SegmentUnmap
            );
            (segment || e.action == Action::Oom).then(|| Instant {
                action: e.action.as_str(),
                ts: clock.ts(i),
                event_index: i,
                bytes: e.size,
                address: segment.then_some(e.addr),
                device_free_bytes: e.device_free(),
            })
        })
        .collect();

    DeviceTracks {
        device: r.device,
        time_basis: clock.basis,
        window: w,
        counters,
        peak_bytes,
        max_allocated_bytes,
        max_reserved_bytes,
        steps: step_spans,
        annotations,
        instants,
        allocations: largest(snap, r, trace, w, clock, opts.largest),
    }
}

/// The states sampled: every state of the window when it has at most `points` (or `points` is
/// 0); else the first, the last and, per bucket, where each series is lowest and highest.
fn samples(r: &DeviceReplay, w: Window, points: usize) -> Vec<i64> {
    let n = (w.last - w.first + 1) as usize;
    if points == 0 || n <= points {
        return (w.first..=w.last).collect();
    }
    let buckets = (points / 6).max(1);
    let series: [&dyn Fn(i64) -> u64; 3] = [&|i| r.live_at(i), &|i| r.rounded_at(i), &|i| {
        r.reserved_at(i)
    }];
    let mut keep = vec![w.first, w.last];
    for b in 0..buckets {
        let lo = w.first + (n * b / buckets) as i64;
        let hi = w.first + (n * (b + 1) / buckets) as i64 - 1;
        if lo > hi {
            continue;
        }
        for f in series {
            let (mut min_i, mut max_i) = (lo, lo);
            let (mut min_v, mut max_v) = (f(lo), f(lo));
            for i in lo + 1..=hi {
                let v = f(i);
                if v < min_v {
                    (min_i, min_v) = (i, v);
                }
                if v > max_v {
                    (max_i, max_v) = (i, v);
                }
            }
            keep.push(min_i);
            keep.push(max_i);
        }
    }
    keep.sort_unstable();
    keep.dedup();
    keep
}

/// Puts each span in the first lane where it nests inside (or follows) the spans already
/// there, so that no lane holds two spans that overlap without nesting.
fn assign_lanes(spans: &mut [Span]) {
    spans.sort_by(|a, b| {
        a.ts.cmp(&b.ts)
            .then_with(|| b.dur.cmp(&a.dur))
            .then_with(|| a.name.cmp(&b.name))
    });
    // Per lane, the ends of the spans still open, outermost first.
    let mut lanes: Vec<Vec<i64>> = Vec::new();
    for s in spans.iter_mut() {
        let end = s.ts.saturating_add(s.dur);
        let mut placed = None;
        for (k, open) in lanes.iter_mut().enumerate() {
            while open.last().is_some_and(|&e| e <= s.ts) {
                open.pop();
            }
            if !open.last().is_some_and(|&e| end > e) {
                open.push(end);
                placed = Some(k);
                break;
            }
        }
        s.lane = placed.unwrap_or_else(|| {
            lanes.push(vec![end]);
            lanes.len() - 1
        }) as u32;
    }
}

/// The `n` largest allocations alive at some state of the window, clipped to it; memory
/// alive before the trace with no stack is named as `top` names it
/// (`<before trace, no stack> likely parameters`, [`crate::analyze::pretrace`]).
fn largest(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[TraceEvent],
    w: Window,
    clock: &Clock,
    n: usize,
) -> Vec<AllocationSpan> {
    if n == 0 {
        return Vec::new();
    }
    // Alive at some state of [first, last]: start <= last and end > first.
    let mut alive: Vec<(usize, &replay::Allocation)> = r
        .allocations
        .iter()
        .enumerate()
        .filter(|(_, a)| a.start <= w.last && a.end > w.first)
        .collect();
    alive.sort_by(|(i, a), (j, b)| b.size.cmp(&a.size).then(i.cmp(j)));
    alive.truncate(n);
    let kinds = if alive.iter().any(|(_, a)| pretrace::is_pretrace(snap, a)) {
        Kinds::of(snap, r, trace)
    } else {
        Kinds::default()
    };
    alive
        .into_iter()
        .map(|(k, a)| {
            let end = if a.end == NEVER {
                w.last
            } else {
                a.end.min(w.last)
            };
            let ts = clock.ts(a.start.max(w.first));
            AllocationSpan {
                id: k as u64,
                bytes: a.size,
                site: match kinds.of_alloc(snap, a) {
                    Some(p) => p.label(),
                    None => site_label(snap, a.stack, SiteOptions::default()),
                },
                address: a.addr,
                alloc_event: a.start,
                free_event: (a.end != NEVER).then_some(a.end),
                ts,
                end_ts: clock.ts(end).max(ts.saturating_add(1)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(name: &str, ts: i64, dur: i64) -> Span {
        Span {
            name: name.into(),
            ts,
            dur,
            first_event: 0,
            last_event: 0,
            lane: 9,
        }
    }

    #[test]
    fn lanes_nest_and_overlaps_move_down() {
        // GIVEN a step [0,100), a nested phase [10,20), a phase [90,150) that overlaps the
        // step without nesting, and a step [100,200) after the first.
        let mut v = vec![
            span("step1", 0, 100),
            span("inner", 10, 10),
            span("cross", 90, 60),
            span("step2", 100, 100),
        ];
        assign_lanes(&mut v);
        let lane = |n: &str| v.iter().find(|s| s.name == n).unwrap().lane;
        // THEN the nested phase shares lane 0, the crossing one goes to lane 1, and the second
        // step follows the first in lane 0 (the crossing span is in lane 1, not in its way).
        assert_eq!(
            (lane("step1"), lane("inner"), lane("cross"), lane("step2")),
            (0, 0, 1, 0)
        );
    }
}
