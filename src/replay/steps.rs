//! Steps of a training or serving loop: from `external_annotations` (`ProfilerStep#N`),
//! from legacy `user_defined` markers, from the optimizer's steps, from the periodic
//! structure of the trace, or from the lines of the loop's frame ([`super::loops`]).

pub use super::passes::under_module_forward;
use super::{passes, DeviceReplay, Window};
use crate::model::{Action, PerStack, Snapshot, StackId, TraceEvent};
use serde::Serialize;

/// How the steps were found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StepSource {
    /// `external_annotations` START/END pairs named `ProfilerStep#N`.
    Annotations,
    /// Legacy `user_defined` trace markers.
    UserDefined,
    /// Repeats of the optimizer's `step` (allocations under `torch/optim`).
    OptimizerStep,
    /// Regular repeats of one allocation (same stack and size), see [`periodic_starts`].
    Periodic,
    /// The lines of a loop's frame jumping back to its top ([`super::loops`]).
    Loop,
}

/// One step.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Step {
    /// 1-based position among the steps found.
    pub index: usize,
    /// Its name (`ProfilerStep#3`, or `step 3`).
    pub name: String,
    /// First event inside the step.
    pub first_event: i64,
    /// Last event inside the step.
    pub last_event: i64,
    /// Live requested bytes before the step's first event.
    pub live_at_start: u64,
    /// Live requested bytes after its last event (the step boundary).
    pub live_at_end: u64,
    /// Highest live requested bytes inside the step.
    pub peak_bytes: u64,
    /// Where that peak is.
    pub peak_event: i64,
}

/// The steps of one device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceSteps {
    /// Device index.
    pub device: u32,
    /// How they were found (`null`: no steps found); `loop`: the lines of a loop's frame jumping
    /// back to its top.
    pub source: Option<StepSource>,
    /// The annotation (or frame) that marks the steps, e.g. `ProfilerStep#`.
    pub marker: Option<String>,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl DeviceSteps {
    /// No steps on `device` (a final state without a trace to find them in).
    pub fn none(device: u32) -> DeviceSteps {
        DeviceSteps {
            device,
            source: None,
            marker: None,
            steps: Vec::new(),
        }
    }

    /// The events of step `n` (1-based) as a window.
    pub fn window(&self, n: usize) -> Option<Window> {
        self.steps.get(n.checked_sub(1)?).map(|s| Window {
            first: s.first_event,
            last: s.last_event,
        })
    }
}

fn is_step_name(name: &str) -> bool {
    name.starts_with("ProfilerStep#")
}

/// Time spans `(name, start_us, end_us)` of START/END annotation pairs whose name matches.
pub fn annotation_spans(
    snap: &Snapshot,
    device: u32,
    wanted: &dyn Fn(&str) -> bool,
) -> Vec<(String, i64, i64)> {
    let mut open: Vec<(&str, i64)> = Vec::new();
    let mut out = Vec::new();
    for a in &snap.annotations {
        if a.device.is_some_and(|d| d != device as i64) || !wanted(&a.name) {
            continue;
        }
        let Some(t) = a.time_us else { continue };
        match a.stage.as_str() {
            "START" => open.push((&a.name, t)),
            "END" => {
                if let Some(p) = open.iter().rposition(|(n, _)| *n == a.name) {
                    let (n, s) = open.remove(p);
                    out.push((n.to_string(), s, t));
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|x| x.1);
    out
}

/// Event range `[first, last]` inside the time span, if any.
fn events_in(trace: &[TraceEvent], start: i64, end: i64) -> Option<(i64, i64)> {
    let first = trace.partition_point(|e| e.time().is_some_and(|t| t < start)) as i64;
    let last = trace.partition_point(|e| e.time().is_some_and(|t| t <= end)) as i64 - 1;
    (last >= first).then_some((first, last))
}

fn has_optim_frame(snap: &Snapshot, stack: StackId) -> bool {
    snap.stacks.get(stack).iter().any(|&f| {
        let fr = snap.frames.get(f);
        let file = snap.strings.get(fr.filename);
        // Optimizers subclass torch.optim.Optimizer: its `wrapper` frame is on every step.
        file.contains("torch/optim/") || file.contains("torch\\optim\\")
    })
}

/// True for the actions that release a block.
fn is_free(action: Action) -> bool {
    matches!(
        action,
        Action::FreeRequested | Action::FreeCompleted | Action::Free
    )
}

/// The loop of a trace without markers: the allocation (same stack of more than one frame,
/// same size) that repeats most often at regular intervals — at least 3 times, at least 4
/// events apart on average, gaps varying by less than 20% of their mean — with memory released
/// inside every interval (a loop iteration frees its temporaries; a set-up loop that only
/// allocates, such as building layers, is not a step), made outside any forward or backward
/// pass ([`passes::inside_a_pass`]: a repeat inside one runs over layers or blocks, not
/// steps). Ties go to the earliest allocation, so the first allocation of an iteration marks
/// it.
///
/// Returns the first event of that allocation and the events where each step starts. The most
/// frequent regular repeat is the innermost such loop: a decode step rather than a request of
/// many decode steps. A loop over identical blocks written without `nn.Module` can still pass
/// for the steps; `ProfilerStep` annotations (`torch.profiler.profile(...).step()`) avoid the
/// guess.
pub fn periodic_starts(snap: &Snapshot, trace: &[TraceEvent]) -> Option<(i64, Vec<i64>)> {
    let mut frees_before = Vec::with_capacity(trace.len() + 1);
    let mut n = 0u32;
    frees_before.push(0);
    for e in trace {
        n += u32::from(is_free(e.action));
        frees_before.push(n);
    }
    let mut keys: rustc_hash::FxHashMap<(StackId, u64), Vec<i64>> = Default::default();
    let inside = PerStack::new(&snap.stacks);
    for (i, e) in trace.iter().enumerate() {
        if e.action == Action::Alloc
            && snap.split_forward(e.stack).0.len() > 1
            && !*inside.get_or_init(e.stack, || passes::inside_a_pass(snap, e.stack))
        {
            keys.entry((e.stack, e.size)).or_default().push(i as i64);
        }
    }
    let regular = |starts: &[i64]| {
        if starts.len() < 3 {
            return false;
        }
        let gaps: Vec<f64> = starts.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        mean >= 4.0
            && var.sqrt() / mean < 0.2
            && starts
                .windows(2)
                .all(|w| frees_before[w[1] as usize] > frees_before[w[0] as usize])
    };
    keys.into_values()
        .filter(|starts| regular(starts))
        .max_by_key(|starts| (starts.len(), std::cmp::Reverse(starts[0])))
        .map(|starts| (starts[0], starts))
}

/// Steps as `(name, first event, last event)`.
type Ranges = Vec<(String, i64, i64)>;

/// Steps found by one source, with the source and the marker that told them.
type Found = Option<(Ranges, StepSource, String)>;

/// Finds the steps of a replayed device.
pub fn find(snap: &Snapshot, r: &DeviceReplay) -> DeviceSteps {
    let dev = snap.device(r.device).expect("replayed device exists");
    let trace = snap.device_trace(dev);
    // Steps guessed from repeats (a periodic allocation, a loop's lines) must not be the
    // layers of one pass ([`passes`]).
    let backward = passes::backward_passes(snap, trace);
    let not_layers = |f: &Found| {
        f.as_ref().map_or(true, |(ranges, _, _)| {
            let starts: Vec<i64> = ranges.iter().map(|r| r.1).collect();
            !passes::layer_repeats(snap, trace, &starts, &backward)
        })
    };
    let found = profiler_steps(snap, r.device, trace)
        .or_else(|| iteration_annotations(snap, r.device, trace))
        .or_else(|| legacy_markers(snap, trace))
        .or_else(|| optimizer_steps(snap, trace))
        .or_else(|| {
            Some(periodic_steps(snap, trace))
                .filter(not_layers)
                .flatten()
        })
        .or_else(|| Some(loop_steps(snap, trace)).filter(not_layers).flatten());
    let (ranges, source, marker) = match found {
        Some((ranges, source, marker)) => (ranges, Some(source), Some(marker)),
        None => (Vec::new(), None, None),
    };
    DeviceSteps {
        device: r.device,
        source,
        marker,
        steps: measure(r, ranges),
    }
}

/// Steps of `ProfilerStep#` annotations.
fn profiler_steps(snap: &Snapshot, device: u32, trace: &[TraceEvent]) -> Found {
    let mut ranges: Ranges = Vec::new();
    for (name, s, e) in annotation_spans(snap, device, &is_step_name) {
        if let Some((a, b)) = events_in(trace, s, e) {
            ranges.push((name, a, b));
        }
    }
    (!ranges.is_empty()).then(|| (ranges, StepSource::Annotations, "ProfilerStep#".to_string()))
}

/// Steps cut by other per-iteration annotations: the optimizer's step ends a step; a
/// DataLoader fetch or zero_grad starts one.
fn iteration_annotations(snap: &Snapshot, device: u32, trace: &[TraceEvent]) -> Found {
    for (prefix, ends_step) in [
        ("Optimizer.step#", true),
        ("enumerate(DataLoader)#", false),
        ("Optimizer.zero_grad#", false),
    ] {
        let mut ranges: Ranges = Vec::new();
        let spans = annotation_spans(snap, device, &|n: &str| n.starts_with(prefix));
        let n = trace.len() as i64;
        let cuts: Vec<i64> = spans
            .iter()
            .map(|&(_, s, e)| {
                let t = if ends_step { e } else { s };
                let idx = trace.partition_point(|ev| {
                    ev.time()
                        .is_some_and(|et| if ends_step { et <= t } else { et < t })
                }) as i64;
                if ends_step {
                    idx - 1
                } else {
                    idx
                }
            })
            .collect();
        let mut prev = if ends_step { -1 } else { -2 };
        for &c in &cuts {
            if ends_step {
                if c > prev {
                    ranges.push((format!("step {}", ranges.len() + 1), prev + 1, c));
                    prev = c;
                }
            } else {
                if prev >= 0 && c > prev {
                    ranges.push((format!("step {}", ranges.len() + 1), prev, c - 1));
                }
                if c < n {
                    prev = c;
                }
            }
        }
        if !ends_step && prev >= 0 && prev < n {
            ranges.push((format!("step {}", ranges.len() + 1), prev, n - 1));
        }
        if !ranges.is_empty() {
            return Some((ranges, StepSource::Annotations, prefix.to_string()));
        }
    }
    None
}

/// Steps of legacy markers: user_defined entries whose frame name is START/END (§4).
fn legacy_markers(snap: &Snapshot, trace: &[TraceEvent]) -> Found {
    let mut ranges: Ranges = Vec::new();
    let mut open: Option<(String, i64)> = None;
    for (i, e) in trace.iter().enumerate() {
        if e.action != Action::UserDefined {
            continue;
        }
        let Some(&f) = snap.stacks.get(e.stack).first() else {
            continue;
        };
        let fr = snap.frames.get(f);
        let (stage, label) = (snap.strings.get(fr.name), snap.strings.get(fr.filename));
        if !is_step_name(label) {
            continue;
        }
        match stage {
            "START" => open = Some((label.to_string(), i as i64 + 1)),
            "END" => {
                if let Some((n, a)) = open.take() {
                    if i as i64 > a {
                        ranges.push((n, a, i as i64 - 1));
                    }
                }
            }
            _ => {}
        }
    }
    (!ranges.is_empty()).then(|| {
        (
            ranges,
            StepSource::UserDefined,
            "user_defined ProfilerStep#".to_string(),
        )
    })
}

/// Steps ended by the optimizer's step: each burst of allocations under torch/optim ends one.
fn optimizer_steps(snap: &Snapshot, trace: &[TraceEvent]) -> Found {
    let optim = PerStack::new(&snap.stacks);
    let in_optim = |s: StackId| *optim.get_or_init(s, || has_optim_frame(snap, s));
    let optim_alloc = |e: &TraceEvent| e.action == Action::Alloc && in_optim(e.stack);
    let user_alloc = |e: &TraceEvent| e.action == Action::Alloc && !in_optim(e.stack);
    let marks: Vec<i64> = trace
        .iter()
        .enumerate()
        .filter(|(_, e)| optim_alloc(e))
        .map(|(i, _)| i as i64)
        .collect();
    let mut ends = Vec::new();
    for (k, &m) in marks.iter().enumerate() {
        // The last optimizer allocation before a gap of non-optimizer allocations.
        let next = marks.get(k + 1).copied();
        let gap = next.map_or(true, |n| {
            trace[(m as usize + 1)..(n as usize)].iter().any(user_alloc)
        });
        if gap {
            // Extend to just before the next non-optimizer allocation.
            let mut end = m;
            while trace.get(end as usize + 1).is_some_and(|e| !user_alloc(e)) {
                end += 1;
            }
            ends.push(end);
        }
    }
    if ends.len() < 2 {
        return None;
    }
    let mut ranges: Ranges = Vec::new();
    let mut start = 0;
    for (k, &e) in ends.iter().enumerate() {
        ranges.push((format!("step {}", k + 1), start, e));
        start = e + 1;
    }
    Some((
        ranges,
        StepSource::OptimizerStep,
        "torch/optim frames".to_string(),
    ))
}

/// Steps from each start to the next, the last one to the end of the trace.
fn from_starts(starts: &[i64], trace: &[TraceEvent], last: i64) -> Ranges {
    let mut ranges: Ranges = Vec::new();
    for (k, w) in starts.windows(2).enumerate() {
        ranges.push((format!("step {}", k + 1), w[0], w[1] - 1));
    }
    ranges.push((
        format!("step {}", starts.len()),
        last,
        trace.len() as i64 - 1,
    ));
    ranges
}

/// Steps started by a periodic stack.
fn periodic_steps(snap: &Snapshot, trace: &[TraceEvent]) -> Found {
    let (key_event, starts) = periodic_starts(snap, trace)?;
    let last = *starts.last().expect("periodic keys repeat");
    Some((
        from_starts(&starts, trace, last),
        StepSource::Periodic,
        format!("stack of event {key_event}"),
    ))
}

/// Steps started by each turn of a loop.
fn loop_steps(snap: &Snapshot, trace: &[TraceEvent]) -> Found {
    let (frame, starts) = super::loops::loop_starts(snap, trace)?;
    let last = *starts.last().expect("a loop has two starts");
    Some((
        from_starts(&starts, trace, last),
        StepSource::Loop,
        format!("loop in {frame}"),
    ))
}

/// Each range's live bytes at its start and end and its peak.
fn measure(r: &DeviceReplay, ranges: Ranges) -> Vec<Step> {
    ranges
        .into_iter()
        .enumerate()
        .map(|(k, (name, a, b))| {
            let (mut peak_event, mut peak_bytes) = (a, r.live_at(a));
            for i in a..=b {
                if r.live_at(i) > peak_bytes {
                    peak_bytes = r.live_at(i);
                    peak_event = i;
                }
            }
            Step {
                index: k + 1,
                name,
                first_event: a,
                last_event: b,
                live_at_start: r.live_at(a - 1),
                live_at_end: r.live_at(b),
                peak_bytes,
                peak_event,
            }
        })
        .collect()
}

/// The window of the steps named `phase` (`ProfilerStep#3`, `Optimizer.step#Adam.step`, or
/// any annotation name) on a device: from the first START to the last END.
pub fn phase_window(snap: &Snapshot, r: &DeviceReplay, phase: &str) -> Option<Window> {
    let dev = snap.device(r.device)?;
    let trace = snap.device_trace(dev);
    let spans = annotation_spans(snap, r.device, &|n| n == phase);
    let (a, _) = events_in(trace, spans.first()?.1, spans.first()?.2)?;
    let (_, b) = events_in(trace, spans.last()?.1, spans.last()?.2)?;
    Some(Window { first: a, last: b })
}
