//! `memlens leaks`: memory that grows step after step — leaks and retained autograd graphs,
//! one finding per cause.
//!
//! The rules (`shared/docs/reading.md` §3), each applied in one place:
//!
//! 1. **Steps are iterations of the loop, not layers**: ProfilerStep annotations, optimizer
//!    steps, or a repeat made outside every forward and backward pass
//!    ([`crate::replay::passes`]); the same site hit once per layer under one `backward()` call
//!    is not a step.
//! 2. **Growth is measured at the same phase of consecutive steps** — each step's end — after
//!    the warm-up steps (`--warmup`: the first step allocates optimizer state and fills
//!    caches), over at least [`LeaksOptions::min_steps`] boundaries, and must be steady
//!    (`growth.rs`). So a step's gradients (made in its backward, replaced or accumulated in
//!    place by the next) and the optimizer state (made once) are never growth: only what
//!    every step adds and no step releases is.
//! 3. **Without enough steps there is no judgement either way** (`judge.rs`): `cannot_judge`,
//!    with why and what to record — never "no leak found".
//!
//! Per device: find the steps, take each call site's live bytes (and live tensors) at every
//! step boundary after the warm-up, and keep the sites that grow steadily (least-squares
//! slope, fit R², still growing in the last steps; `growth.rs`). The
//! growing sites are then grouped into causes by the user frame their kept tensors share
//! (`cause.rs`): a retained graph (`total_loss += loss`, a validation loss computed with grad
//! enabled) keeps a tensor at every line its forward pass saved one, and is one finding naming
//! the line that ran that forward pass, the whole growth per step and the tensors it keeps —
//! its input, made just before it, and what the loss computed from its output saved (outside
//! any module's forward: `F.cross_entropy` in the loop body) included.
//! Growth under a module's `forward` (or among a computation's intermediates) is a retained
//! graph; elsewhere it is a leak (a list that grows, a cache that never evicts). The words of a
//! finding are written in `words.rs`.
//!
//! What the trace lacks (no trace, no allocation recorded, too few steps, no frames) is said
//! in each device's notes and as [`Absence`]s with a stable code, and decides the device's
//! [`Judgement`].

mod cause;
mod growth;
mod judge;
mod words;

use crate::analyze::top::AnnotationCount;
use crate::model::{Snapshot, StackId, StrId};
use crate::replay::steps::{self, DeviceSteps};
use crate::replay::DeviceReplay;
use crate::vocab::absence::{self, Absence, Judgement};
use crate::vocab::sites::{self, SiteOptions};
use rustc_hash::FxHashMap;
use serde::Serialize;

pub use cause::{AUTOGRAD_ANNOTATION, KEPT_INTERMEDIATES, MODULE_FORWARD};

/// Options of `leaks`.
#[derive(Clone, Copy, Debug)]
pub struct LeaksOptions {
    /// Steps skipped before measuring growth (optimizer state, caches filled in step 1).
    pub warmup: usize,
    /// Smallest growth per step worth a finding.
    pub min_bytes_per_step: u64,
    /// Fewest step boundaries after the warm-up needed to call growth.
    pub min_steps: usize,
    /// Site attribution.
    pub sites: SiteOptions,
}

impl LeaksOptions {
    /// Steps a device's trace must have for the analysis to judge it: the warm-up plus
    /// `min_steps` boundaries; with fewer, no finding can be made either way.
    pub fn steps_needed(&self) -> usize {
        self.warmup + self.min_steps
    }
}

impl Default for LeaksOptions {
    fn default() -> Self {
        LeaksOptions {
            warmup: 1,
            min_bytes_per_step: 64 << 10,
            min_steps: 3,
            sites: SiteOptions::default(),
        }
    }
}

/// `notes` (text → allocations, bytes) as rows, most bytes first.
fn annotation_counts(
    snap: &Snapshot,
    notes: &FxHashMap<StrId, (u64, u64)>,
) -> Vec<AnnotationCount> {
    let mut v: Vec<AnnotationCount> = notes
        .iter()
        .map(|(t, &(count, bytes))| AnnotationCount {
            text: snap.strings.get(*t).to_string(),
            count,
            bytes,
        })
        .collect();
    v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.text.cmp(&b.text)));
    v
}

/// The annotation texts of a finding's sites taken together, most bytes first.
fn merged_annotations(sites: &[GrowingSite]) -> Vec<AnnotationCount> {
    let mut by_text: std::collections::BTreeMap<&str, (u64, u64)> = Default::default();
    for a in sites.iter().flat_map(|s| &s.annotations) {
        let e = by_text.entry(&a.text).or_default();
        e.0 += a.count;
        e.1 += a.bytes;
    }
    let mut v: Vec<AnnotationCount> = by_text
        .into_iter()
        .map(|(text, (count, bytes))| AnnotationCount {
            text: text.to_string(),
            count,
            bytes,
        })
        .collect();
    v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.text.cmp(&b.text)));
    v
}

/// One growing call site of a finding.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GrowingSite {
    /// Call site (`filename:line:name`).
    pub site: String,
    /// `saved` (a tensor the retained graph's forward pass saved), `input` (the forward pass's
    /// input, made just before it), `loss` (what the loss computed from its output saved,
    /// outside any module's forward) or `kept` (a leak's tensor).
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["saved", "input", "loss", "kept"])))]
    pub role: &'static str,
    /// Its growth per step (least-squares slope over the boundaries after the warm-up).
    pub bytes_per_step: u64,
    /// Its live tensors added per step (slope of the count, two decimals).
    pub tensors_per_step: f64,
    /// Its live bytes at the end of the trace.
    pub live_bytes_at_end: u64,
    /// Its live tensors at the end of the trace.
    pub tensors_at_end: u64,
    /// The `annotate` texts attached to its tensors alive at the end, each with how many
    /// carry it and their requested bytes; most bytes first. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<AnnotationCount>,
}

/// One finding: one cause of growth.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Finding {
    /// `retained_graph` or `leak`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["retained_graph", "leak"])))]
    pub kind: &'static str,
    /// Device index.
    pub device: u32,
    /// The line to change: the user frame every tensor of the cause was made under (the loop
    /// body's line that ran the forward pass, or the call site itself when there is one), as
    /// `filename:line:name`; `<no frames>` without frames.
    pub site: String,
    /// Growth per step of all its sites together (least-squares slope over the step
    /// boundaries after the warm-up).
    pub bytes_per_step: u64,
    /// Steps in the trace.
    pub steps: usize,
    /// Live bytes of its sites at the end of the trace (what `check --max-leaked` sums).
    pub live_bytes_at_end: u64,
    /// Live bytes of its sites at each step boundary after the warm-up.
    pub live_bytes_at_boundaries: Vec<u64>,
    /// R² of the linear fit (1 = perfectly steady growth).
    pub fit_r2: f64,
    /// What to do about it, in words.
    pub fix: String,
    /// The `annotate` texts of its sites' tensors alive at the end, taken together, most
    /// bytes first. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<AnnotationCount>,
    /// Live tensors of its sites added per step (slope of the count, two decimals).
    pub tensors_per_step: f64,
    /// Live tensors of its sites at the end of the trace.
    pub tensors_at_end: u64,
    /// Why it is a retained graph: `module_forward` (made under a module's forward),
    /// `autograd_annotation` (the trace marks them packed into the graph) or
    /// `kept_intermediates` (several lines of one computation keep a tensor each step while
    /// its other tensors are freed); `null` for a leak.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["module_forward", "autograd_annotation", "kept_intermediates", null])))]
    pub graph_evidence: Option<&'static str>,
    /// Why this kind, in words.
    pub why: String,
    /// The growing sites it groups, biggest growth first.
    pub sites: Vec<GrowingSite>,
}

/// The steps of a device in a few numbers.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepSummary {
    /// Steps found.
    pub steps: usize,
    /// Name of the first step.
    pub first_step: String,
    /// Name of the last step.
    pub last_step: String,
    /// First event of the first step.
    pub first_event: i64,
    /// Last event of the last step.
    pub last_event: i64,
    /// Live requested bytes before the first step.
    pub live_at_start: u64,
    /// Live requested bytes after the last step.
    pub live_at_end: u64,
    /// `live_at_end − live_at_start`.
    pub delta_bytes: i64,
    /// The highest live requested bytes inside any step.
    pub highest_peak_bytes: u64,
    /// The step where that is (the first, on ties).
    pub highest_peak_step: String,
}

/// Steps and notes of one device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceLeaks {
    /// The steps found.
    #[serde(flatten)]
    pub steps: DeviceSteps,
    /// Why no answer could be given, when so.
    pub notes: Vec<String>,
    /// The steps in a few numbers; `null` without steps.
    pub summary: Option<StepSummary>,
    /// What this device's analysis concluded: `found`, `none` (judged: nothing grows) or
    /// `cannot_judge` (why, and what to record).
    pub judgement: Judgement,
    /// Leaks alone (growth kept outside an autograd graph): `found`, `none`, or `cannot_judge`
    /// (the device's growth could not be judged, or grows at stacks without frames, which
    /// cannot tell a leak from a retained graph).
    pub leak: Judgement,
    /// Retained autograd graphs alone, judged as [`DeviceLeaks::leak`].
    pub retained_graph: Judgement,
}

/// Memory that grows step after step: leaks and retained autograd graphs, with the steps found
/// per device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LeaksReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Findings, biggest growth first; empty when none.
    pub findings: Vec<Finding>,
    /// Per device: the steps and what limited the analysis.
    pub devices: Vec<DeviceLeaks>,
    /// Devices with enough steps to judge (a device not listed could not be judged either way).
    pub judged_devices: Vec<u32>,
    /// What the snapshot lacks for this analysis, with stable codes (see [`absence`]).
    pub absent: Vec<Absence>,
    /// What the analysis concluded over every device: `found` (some device grows), `none`
    /// (every device judged, nothing grows) or `cannot_judge` (why, and what to record).
    pub judgement: Judgement,
    /// Leaks alone over every device (`found` when some device has one, `none` when every
    /// device was judged without one, else `cannot_judge`).
    pub leak: Judgement,
    /// Retained autograd graphs alone over every device, gathered as [`LeaksReport::leak`].
    pub retained_graph: Judgement,
}

/// True when a stack runs under a module's forward (where autograd saves tensors for
/// backward); `annotate` events saying "autograd graph" are the other evidence.
pub fn under_forward(snap: &Snapshot, stack: StackId) -> bool {
    growth::under_forward(snap, stack)
}

/// The steps in a few numbers (`None` without steps).
fn summarize(st: &DeviceSteps) -> Option<StepSummary> {
    let (first, last) = (st.steps.first()?, st.steps.last()?);
    let top = st
        .steps
        .iter()
        .rev()
        .max_by_key(|s| s.peak_bytes)
        .expect("steps are not empty");
    Some(StepSummary {
        steps: st.steps.len(),
        first_step: first.name.clone(),
        last_step: last.name.clone(),
        first_event: first.first_event,
        last_event: last.last_event,
        live_at_start: first.live_at_start,
        live_at_end: last.live_at_end,
        delta_bytes: last.live_at_end as i64 - first.live_at_start as i64,
        highest_peak_bytes: top.peak_bytes,
        highest_peak_step: top.name.clone(),
    })
}

/// The finding of one cause.
fn finding(
    snap: &Snapshot,
    device: u32,
    steps: usize,
    series: &[growth::SiteSeries],
    c: &cause::Cause,
) -> Finding {
    let graph = c.graph;
    let member = if graph.is_some() { "saved" } else { "kept" };
    let all: Vec<(usize, &'static str)> = c
        .members
        .iter()
        .map(|&m| (m, member))
        .chain(c.inputs.iter().map(|&m| (m, "input")))
        .chain(c.losses.iter().map(|&m| (m, "loss")))
        .collect();
    let b = series[all[0].0].bytes.len();
    let (mut bytes, mut counts) = (vec![0u64; b], vec![0u64; b]);
    let (mut end_bytes, mut end_count) = (0, 0);
    let mut sites: Vec<GrowingSite> = Vec::new();
    for &(m, role) in &all {
        let s = &series[m];
        for i in 0..b {
            bytes[i] += s.bytes[i];
            counts[i] += s.counts[i];
        }
        end_bytes += s.end_bytes;
        end_count += s.end_count;
        sites.push(GrowingSite {
            site: s.label.clone(),
            role,
            bytes_per_step: growth::fit(&s.bytes).0.max(0.0).round() as u64,
            tensors_per_step: two_decimals(growth::fit(&s.counts).0.max(0.0)),
            live_bytes_at_end: s.end_bytes,
            tensors_at_end: s.end_count,
            annotations: annotation_counts(snap, &s.notes),
        });
    }
    sites.sort_by(|x, y| {
        y.bytes_per_step
            .cmp(&x.bytes_per_step)
            .then_with(|| x.site.cmp(&y.site))
    });
    let (slope, r2) = growth::fit(&bytes);
    let tensors_per_step = two_decimals(growth::fit(&counts).0.max(0.0));
    let site = match c.frame {
        Some(f) => sites::format_frame(snap, snap.frames.get(f)),
        None => series[c.members[0]].label.clone(),
    };
    let labels =
        |v: &[usize]| -> Vec<&str> { v.iter().map(|&m| series[m].label.as_str()).collect() };
    let (inputs, losses) = (labels(&c.inputs), labels(&c.losses));
    let lines = c.growing;
    Finding {
        kind: if graph.is_some() {
            "retained_graph"
        } else {
            "leak"
        },
        device,
        fix: words::fix(graph.is_some(), &site, tensors_per_step, &inputs, &losses),
        why: words::why(graph, lines, !losses.is_empty()),
        site,
        bytes_per_step: slope.max(0.0).round() as u64,
        steps,
        live_bytes_at_end: end_bytes,
        live_bytes_at_boundaries: bytes,
        fit_r2: (r2 * 1e6).round() / 1e6,
        tensors_per_step,
        tensors_at_end: end_count,
        graph_evidence: graph,
        annotations: merged_annotations(&sites),
        sites,
    }
}

fn two_decimals(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The causes of growth on one judged device (`st` holds enough steps), as findings.
fn device_findings(
    snap: &Snapshot,
    r: &DeviceReplay,
    st: &DeviceSteps,
    opts: &LeaksOptions,
) -> Vec<Finding> {
    let n = st.steps.len();
    let measured = &st.steps[opts.warmup..];
    let bounds: Vec<i64> = measured.iter().map(|s| s.last_event).collect();
    let step_starts: Vec<i64> = measured.iter().map(|s| s.first_event).collect();
    let series = growth::measure(snap, r, &bounds, step_starts[0], opts.sites);
    let (mut triggers, mut weak) = (Vec::new(), Vec::new());
    for (k, s) in series.iter().enumerate() {
        let g = growth::growth(&s.bytes);
        if !g.steady {
            continue;
        }
        if g.slope >= opts.min_bytes_per_step as f64 {
            triggers.push(k);
        } else {
            weak.push(k);
        }
    }
    let scope = cause::Scope {
        snap,
        replay: r,
        step_starts: &step_starts,
        step_ends: &bounds,
        last: *bounds.last().expect("enough steps"),
        opts: opts.sites,
    };
    cause::group(&scope, &series, &triggers, &weak)
        .iter()
        .map(|c| finding(snap, r.device, n, &series, c))
        .collect()
}

/// Runs the analysis on every replayed device (and says why the others cannot be judged).
pub fn run(snap: &Snapshot, replays: &[DeviceReplay], opts: &LeaksOptions) -> LeaksReport {
    let mut findings = Vec::new();
    let mut devices = Vec::new();
    let mut absent = Vec::new();
    let mut judged = Vec::new();
    for dev in &snap.devices {
        let Some(r) = replays.iter().find(|r| r.device == dev.id) else {
            if snap.device_trace(dev).is_empty() && !snap.device_segments(dev).is_empty() {
                let (a, judgement) = judge::no_trace(snap, dev, opts);
                devices.push(DeviceLeaks {
                    steps: DeviceSteps::none(dev.id),
                    notes: vec![a.message.clone()],
                    summary: None,
                    leak: judgement.clone(),
                    retained_graph: judgement.clone(),
                    judgement,
                });
                absent.push(a);
            }
            continue;
        };
        let st = steps::find(snap, r);
        if let Some((a, judgement)) = judge::unjudged(snap, r, dev, &st, opts) {
            devices.push(DeviceLeaks {
                summary: summarize(&st),
                steps: st,
                notes: vec![a.message.clone()],
                leak: judgement.clone(),
                retained_graph: judgement.clone(),
                judgement,
            });
            absent.push(a);
            continue;
        }
        judged.push(r.device);
        let mut notes = Vec::new();
        if !snap.has_frames() {
            notes.push(
                "no stack frames recorded: growth can be measured but not attributed to code"
                    .into(),
            );
        }
        let found = device_findings(snap, r, &st, opts);
        let judgement = judge::judged(st.steps.len(), found.len());
        let leak = judge::of_kind(&judgement, &found, "leak");
        let retained_graph = judge::of_kind(&judgement, &found, "retained_graph");
        findings.extend(found);
        devices.push(DeviceLeaks {
            summary: summarize(&st),
            steps: st,
            notes,
            judgement,
            leak,
            retained_graph,
        });
    }
    if !snap.has_frames() && !judged.is_empty() {
        absent.push(Absence::new(
            absence::NO_FRAMES,
            None,
            "no stack frames recorded: growth can be measured but not attributed to code (findings name `<no frames>`)".into(),
        ));
    }
    findings.sort_by(|a, b| {
        b.bytes_per_step
            .cmp(&a.bytes_per_step)
            .then_with(|| (a.device, &a.site).cmp(&(b.device, &b.site)))
    });
    LeaksReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        findings,
        judgement: judge::overall(&devices, opts, |d| &d.judgement),
        leak: judge::overall(&devices, opts, |d| &d.leak),
        retained_graph: judge::overall(&devices, opts, |d| &d.retained_graph),
        devices,
        judged_devices: judged,
        absent,
    }
}

#[cfg(test)]
mod tests;
