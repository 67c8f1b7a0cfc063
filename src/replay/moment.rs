//! Moments (`--at peak|end|oom|EVENT_INDEX|TIME_US`) and windows (`--window A:B`).

use super::DeviceReplay;
use crate::model::{Action, TraceEvent};
use serde::Serialize;

/// A point of a device's timeline: the state right after event `event_index` (-1: before
/// the first event).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Moment {
    /// Event index, -1 for the state before the first event.
    pub event_index: i64,
    /// `time_us` of that event, when recorded.
    pub time_us: Option<i64>,
}

/// Values above this are taken as `time_us` (µs since the epoch), below as event indices.
const TIME_THRESHOLD: i64 = 1_000_000_000_000;

/// A moment as the user names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MomentSpec {
    /// Where live requested bytes are highest.
    Peak,
    /// After the last event.
    End,
    /// Before the first event.
    Start,
    /// At the k-th (1-based) `oom` event.
    Oom(usize),
    /// After event N.
    Index(i64),
    /// After the last event at or before this `time_us`.
    Time(i64),
    /// At the peak of live bytes inside step N (1-based) of the device's steps
    /// ([`super::steps::find`]): the same moment of two runs of one loop (`step:N`).
    Step(usize),
    /// After the last event at most this many µs after the trace's first event (`time:12.5s`,
    /// `time:300ms`): the same moment of two runs by time since start.
    Since(i64),
}

impl std::fmt::Display for MomentSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MomentSpec::Peak => f.write_str("peak"),
            MomentSpec::End => f.write_str("end"),
            MomentSpec::Start => f.write_str("start"),
            MomentSpec::Oom(1) => f.write_str("oom"),
            MomentSpec::Oom(k) => write!(f, "oom:{k}"),
            MomentSpec::Index(i) => write!(f, "index:{i}"),
            MomentSpec::Time(t) => write!(f, "time:{t}"),
            MomentSpec::Step(k) => write!(f, "step:{k}"),
            MomentSpec::Since(us) => write!(f, "time:{}s", *us as f64 / 1e6),
        }
    }
}

impl std::str::FromStr for MomentSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "moment {s:?}: expected peak, end, start, oom, oom:K, step:N, an event index, a time_us, index:N, time:T (time_us) or time:SECONDSs (since the first event, e.g. time:12.5s, time:300ms)"
            )
        };
        // Numbers are digits (and a leading minus where one may be negative): Rust's parsers
        // would take `+1`, and a moment with spaces in it is a typo to point out, not to read.
        if s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == '+') {
            return Err(bad());
        }
        match s {
            "peak" => return Ok(MomentSpec::Peak),
            "end" => return Ok(MomentSpec::End),
            "start" => return Ok(MomentSpec::Start),
            "oom" => return Ok(MomentSpec::Oom(1)),
            _ => {}
        }
        if let Some(k) = s.strip_prefix("oom:") {
            return match k.parse::<usize>() {
                Ok(k) if k >= 1 => Ok(MomentSpec::Oom(k)),
                _ => Err(bad()),
            };
        }
        if let Some(v) = s.strip_prefix("index:").or_else(|| s.strip_prefix("i:")) {
            return v.parse().map(MomentSpec::Index).map_err(|_| bad());
        }
        if let Some(k) = s.strip_prefix("step:") {
            return match k.parse::<usize>() {
                Ok(k) if k >= 1 => Ok(MomentSpec::Step(k)),
                _ => Err(bad()),
            };
        }
        if let Some(v) = s.strip_prefix("time:").or_else(|| s.strip_prefix("t:")) {
            let since = |num: &str, scale: f64| -> Result<MomentSpec, String> {
                match num.parse::<f64>() {
                    Ok(x) if x.is_finite() && x >= 0.0 && x * scale < 9e18 => {
                        Ok(MomentSpec::Since((x * scale).round() as i64))
                    }
                    _ => Err(bad()),
                }
            };
            if let Some(ms) = v.strip_suffix("ms") {
                return since(ms, 1e3);
            }
            if let Some(us) = v.strip_suffix("us") {
                return since(us, 1.0);
            }
            if let Some(sec) = v.strip_suffix('s') {
                return since(sec, 1e6);
            }
            return v.parse().map(MomentSpec::Time).map_err(|_| bad());
        }
        match s.parse::<i64>() {
            Ok(v) if v >= TIME_THRESHOLD => Ok(MomentSpec::Time(v)),
            Ok(v) => Ok(MomentSpec::Index(v)),
            Err(_) => Err(bad()),
        }
    }
}

/// An inclusive range of states, from after event `first` to after event `last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Window {
    /// First state (-1: before the first event).
    pub first: i64,
    /// Last state.
    pub last: i64,
}

impl Window {
    /// True when the state after event `i` is inside.
    pub fn contains(&self, i: i64) -> bool {
        self.first <= i && i <= self.last
    }
}

/// A window as the user names it: `A:B` with either side empty for open, or a step
/// (`--step N`) or an annotated phase (`--phase NAME`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct WindowSpec {
    /// Start, if bounded.
    pub from: Option<MomentSpec>,
    /// End, if bounded.
    pub to: Option<MomentSpec>,
    /// Only this step (1-based) of the loop.
    pub step: Option<usize>,
    /// Only the span of this annotation (first START to last END).
    pub phase: Option<String>,
}

impl std::str::FromStr for WindowSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let Some((a, b)) = s
            .split_once(':')
            .filter(|(a, _)| !a.contains("time") && !a.contains("index"))
        else {
            return Err(format!(
                "window {s:?}: expected A:B (event indices or time_us; either side may be empty)"
            ));
        };
        let side = |x: &str| -> Result<Option<MomentSpec>, String> {
            if x.trim().is_empty() {
                Ok(None)
            } else {
                x.parse().map(Some)
            }
        };
        Ok(WindowSpec {
            from: side(a)?,
            to: side(b)?,
            ..WindowSpec::default()
        })
    }
}

/// Resolves `spec` to an event index of a device's trace, `snap` giving the steps of
/// `step:N`.
pub fn resolve_in(
    snap: &crate::model::Snapshot,
    spec: MomentSpec,
    replay: &DeviceReplay,
    trace: &[TraceEvent],
) -> Result<i64, String> {
    match spec {
        MomentSpec::Step(k) => {
            let steps = super::steps::find(snap, replay);
            steps.steps.get(k - 1).map(|s| s.peak_event).ok_or_else(|| {
                format!(
                    "device {}: step {k} does not exist ({} steps found)",
                    replay.device,
                    steps.steps.len()
                )
            })
        }
        spec => resolve(spec, replay, trace),
    }
}

/// Resolves `spec` to an event index of a device's trace (`step:N` needs the snapshot's
/// steps: [`resolve_in`]).
pub fn resolve(
    spec: MomentSpec,
    replay: &DeviceReplay,
    trace: &[TraceEvent],
) -> Result<i64, String> {
    let n = trace.len() as i64;
    match spec {
        MomentSpec::Peak => Ok(replay.peak),
        MomentSpec::End => Ok(n - 1),
        MomentSpec::Start => Ok(-1),
        MomentSpec::Oom(k) => trace
            .iter()
            .enumerate()
            .filter(|(_, e)| e.action == Action::Oom)
            .nth(k - 1)
            .map(|(i, _)| i as i64)
            .ok_or_else(|| {
                let found = trace.iter().filter(|e| e.action == Action::Oom).count();
                format!(
                    "device {}: the trace has {found} oom event(s), not {k}",
                    replay.device
                )
            }),
        MomentSpec::Index(i) if (-1..n).contains(&i) => Ok(i),
        MomentSpec::Index(i) => Err(format!(
            "device {}: event index {i} is outside the trace (-1..{})",
            replay.device,
            n - 1
        )),
        MomentSpec::Step(k) => Err(format!(
            "device {}: step:{k} is resolved with the snapshot's steps (resolve_in)",
            replay.device
        )),
        MomentSpec::Since(us) => {
            let Some(t0) = trace.iter().find_map(|e| e.time()) else {
                return Err(format!(
                    "device {}: the trace records no time_us",
                    replay.device
                ));
            };
            resolve(MomentSpec::Time(t0.saturating_add(us)), replay, trace).map_err(|_| {
                let last = trace.iter().rev().find_map(|e| e.time()).unwrap_or(t0);
                format!(
                    "device {}: {spec} is past the trace's end (it spans {} after its first event)",
                    replay.device,
                    MomentSpec::Since(last.saturating_sub(t0))
                        .to_string()
                        .trim_start_matches("time:")
                )
            })
        }
        MomentSpec::Time(t) => {
            // Times are non-decreasing: the last recorded one is the trace's end.
            let Some(last) = trace.iter().rev().find_map(|e| e.time()) else {
                return Err(format!(
                    "device {}: the trace records no time_us",
                    replay.device
                ));
            };
            if t > last {
                return Err(format!(
                    "device {}: time_us {t} is past the trace's end (its last event is at {last})",
                    replay.device
                ));
            }
            // Times are non-decreasing; take the last event at or before t.
            let mut at = -1;
            for (i, e) in trace.iter().enumerate() {
                match e.time() {
                    Some(et) if et > t => break,
                    _ => at = i as i64,
                }
            }
            Ok(at)
        }
    }
}

/// Resolves a window; `None` sides are open; `snap` is needed for steps and phases.
pub fn resolve_window_in(
    snap: &crate::model::Snapshot,
    spec: &WindowSpec,
    replay: &DeviceReplay,
    trace: &[TraceEvent],
) -> Result<Window, String> {
    let mut w = resolve_window(spec, replay, trace)?;
    if let Some(n) = spec.step {
        let steps = super::steps::find(snap, replay);
        let s = steps.window(n).ok_or_else(|| {
            format!(
                "device {}: step {n} does not exist ({} steps found)",
                replay.device,
                steps.steps.len()
            )
        })?;
        w = intersect(w, s, replay.device)?;
    }
    if let Some(p) = &spec.phase {
        let s = super::steps::phase_window(snap, replay, p).ok_or_else(|| {
            format!(
                "device {}: no annotation named {p:?} spans any event",
                replay.device
            )
        })?;
        w = intersect(w, s, replay.device)?;
    }
    Ok(w)
}

fn intersect(a: Window, b: Window, device: u32) -> Result<Window, String> {
    let w = Window {
        first: a.first.max(b.first),
        last: a.last.min(b.last),
    };
    if w.first > w.last {
        return Err(format!(
            "device {device}: the window, step and phase do not overlap"
        ));
    }
    Ok(w)
}

/// Resolves the `A:B` part of a window; `None` sides are open.
pub fn resolve_window(
    spec: &WindowSpec,
    replay: &DeviceReplay,
    trace: &[TraceEvent],
) -> Result<Window, String> {
    let first = match spec.from {
        Some(m) => resolve(m, replay, trace)?,
        None => -1,
    };
    let last = match spec.to {
        Some(m) => resolve(m, replay, trace)?,
        None => trace.len() as i64 - 1,
    };
    if first > last {
        return Err(format!("window {first}:{last} is empty (start after end)"));
    }
    Ok(Window { first, last })
}
