//! Each run's timeline on the axes runs are aligned by (event index, time since the first
//! event, step), thinned to what a chart can show with every peak kept, and the difference of
//! two runs on a grid shared by both.

use crate::model::TraceEvent;
use crate::replay::steps::Step;
use crate::replay::DeviceReplay;
use serde::Serialize;

/// Most points of one run's line on the page.
pub const RUN_POINTS: usize = 1000;

/// Buckets of the difference of two runs along one axis.
pub const DIFFERENCE_POINTS: usize = 600;

/// What runs are aligned by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// The event index of the trace.
    Event,
    /// Microseconds since the run's first event.
    Time,
    /// Steps: step k spans `[k-1, k)`, each event placed by its position inside its step.
    Step,
}

/// Where each event of one run lies on each axis.
#[derive(Clone, Debug, Default)]
pub struct Coords {
    /// Microseconds since the first event, per event (never decreasing); `None` when some
    /// event has no time.
    pub time_us: Option<Vec<i64>>,
    /// Position on the step axis per event (`None` outside every step); empty without steps.
    pub step_x: Vec<Option<f64>>,
}

impl Coords {
    /// The coordinates of `trace`'s events, `steps` the run's steps.
    pub fn new(trace: &[TraceEvent], steps: &[Step]) -> Coords {
        let time_us = trace.first().and_then(|e| e.time()).and_then(|t0| {
            let mut last = 0;
            trace
                .iter()
                .map(|e| {
                    e.time().map(|t| {
                        last = last.max(t - t0);
                        last
                    })
                })
                .collect::<Option<Vec<i64>>>()
        });
        let mut step_x = Vec::new();
        if !steps.is_empty() {
            step_x = vec![None; trace.len()];
            for (k, s) in steps.iter().enumerate() {
                let (first, last) = (s.first_event.max(0), s.last_event.max(0));
                let span = (last - first + 1) as f64;
                for i in first..=last.min(trace.len() as i64 - 1) {
                    step_x[i as usize] = Some(k as f64 + (i - first) as f64 / span);
                }
            }
        }
        Coords { time_us, step_x }
    }

    /// Event `i`'s position on `axis`, when it has one.
    pub fn x(&self, axis: Axis, i: usize) -> Option<f64> {
        match axis {
            Axis::Event => Some(i as f64),
            Axis::Time => self.time_us.as_ref().map(|t| t[i] as f64),
            Axis::Step => self.step_x.get(i).copied().flatten(),
        }
    }

    /// Whether the run can be drawn on `axis`.
    pub fn has(&self, axis: Axis) -> bool {
        match axis {
            Axis::Event => true,
            Axis::Time => self.time_us.is_some(),
            Axis::Step => !self.step_x.is_empty(),
        }
    }

    /// The last event at or before `t` µs since the first (-1: none).
    pub fn event_at_time(&self, t: i64) -> i64 {
        self.time_us
            .as_ref()
            .map_or(-1, |v| v.partition_point(|&x| x <= t) as i64 - 1)
    }
}

/// One point of a run's line: a run of consecutive events drawn at its first event's place
/// with its highest live and reserved bytes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunPoint {
    /// The first event of the run of events.
    pub event: i64,
    /// Its time since the run's first event, µs (absent without times).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_us: Option<i64>,
    /// Its place on the step axis: that of the first of its events inside a step (absent when
    /// none is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_x: Option<f64>,
    /// The highest live requested bytes of the run of events.
    pub live_bytes: u64,
    /// The highest reserved bytes of the run of events.
    pub reserved_bytes: u64,
}

/// The run's line in at most `max` points: the events in runs of `ceil(n / (max - 1))`, the
/// state before the first event counted in the first, the last event a point of its own (the
/// state at the end). Every peak of live and reserved bytes is a point at its height.
pub fn points(r: &DeviceReplay, c: &Coords, max: usize) -> Vec<RunPoint> {
    let n = r.live.len();
    if n == 0 {
        return Vec::new();
    }
    let run = if n <= max {
        1
    } else {
        n.div_ceil(max.max(2) - 1)
    };
    let point = |first: usize, last: usize| {
        let mut live = r.live[first..last].iter().copied().max().unwrap_or(0);
        let mut reserved = r.reserved[first..last].iter().copied().max().unwrap_or(0);
        if first == 0 {
            live = live.max(r.live_at(-1));
            reserved = reserved.max(r.reserved_at(-1));
        }
        RunPoint {
            event: first as i64,
            time_us: c.time_us.as_ref().map(|t| t[first]),
            step_x: (first..last).find_map(|i| c.x(Axis::Step, i)),
            live_bytes: live,
            reserved_bytes: reserved,
        }
    };
    let body = if n > max { n - 1 } else { n };
    let mut out: Vec<RunPoint> = (0..body)
        .step_by(run)
        .map(|first| point(first, (first + run).min(body)))
        .collect();
    if body < n {
        out.push(point(n - 1, n));
    }
    out
}

/// One bucket of the difference of two runs along an axis.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DifferencePoint {
    /// Where the bucket starts on the axis.
    pub x: f64,
    /// The base's highest live requested bytes in the bucket (its state there when no event
    /// of its falls in the bucket).
    pub base_bytes: u64,
    /// The candidate's, likewise.
    pub cand_bytes: u64,
    /// `cand_bytes - base_bytes`.
    pub delta_bytes: i64,
}

/// The difference of two runs along one axis: buckets where both runs are still running.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DifferenceSeries {
    /// The axis.
    pub axis: Axis,
    /// The axis's extent (the longer run's).
    pub x_max: f64,
    /// Width of one bucket on the axis.
    pub bucket: f64,
    /// The buckets, in order; a bucket past either run's last event is left out.
    pub points: Vec<DifferencePoint>,
}

/// The extent of `axis` for a run (its last event's place, the number of its steps).
pub fn extent(r: &DeviceReplay, c: &Coords, axis: Axis) -> f64 {
    match axis {
        Axis::Step => c
            .step_x
            .iter()
            .flatten()
            .fold(0f64, |m, &x| m.max(x.ceil())),
        _ => r
            .live
            .len()
            .checked_sub(1)
            .and_then(|i| c.x(axis, i))
            .unwrap_or(0.0),
    }
}

/// Per bucket of `[0, x_max]` cut in `n`, a run's highest live bytes (carried into empty
/// buckets from the last event before them); `None` after its last event on the axis.
fn bucket_maxima(
    r: &DeviceReplay,
    c: &Coords,
    axis: Axis,
    x_max: f64,
    n: usize,
) -> Vec<Option<u64>> {
    let mut high: Vec<Option<u64>> = vec![None; n];
    let mut last_in: Vec<Option<u64>> = vec![None; n];
    let mut final_bucket = None;
    for i in 0..r.live.len() {
        let Some(x) = c.x(axis, i) else { continue };
        let b = if x_max > 0.0 {
            ((x / x_max * n as f64) as usize).min(n - 1)
        } else {
            0
        };
        high[b] = Some(high[b].map_or(r.live[i], |h| h.max(r.live[i])));
        last_in[b] = Some(r.live[i]);
        final_bucket = Some(b);
    }
    let Some(end) = final_bucket else {
        return vec![None; n];
    };
    let mut carry = r.live_at(-1);
    for b in 0..=end {
        match (high[b], last_in[b]) {
            (Some(_), Some(l)) => carry = l,
            _ => high[b] = Some(carry),
        }
    }
    high
}

/// The candidate minus the base along `axis`, in [`DIFFERENCE_POINTS`] buckets.
pub fn difference(
    base: (&DeviceReplay, &Coords),
    cand: (&DeviceReplay, &Coords),
    axis: Axis,
) -> DifferenceSeries {
    let n = DIFFERENCE_POINTS;
    let x_max = extent(base.0, base.1, axis).max(extent(cand.0, cand.1, axis));
    let b = bucket_maxima(base.0, base.1, axis, x_max, n);
    let c = bucket_maxima(cand.0, cand.1, axis, x_max, n);
    let bucket = x_max / n as f64;
    let points = (0..n)
        .filter_map(|k| {
            let (x, y) = (b[k]?, c[k]?);
            Some(DifferencePoint {
                x: k as f64 * bucket,
                base_bytes: x,
                cand_bytes: y,
                delta_bytes: y as i64 - x as i64,
            })
        })
        .collect();
    DifferenceSeries {
        axis,
        x_max,
        bucket,
        points,
    }
}
