//! `memlens leaks`: memory that grows step after step — leaks and retained autograd graphs,
//! one finding per cause.
//!
//! Per device: find the steps, take each call site's live bytes (and live tensors) at every
//! step boundary after the warm-up, and keep the sites that grow steadily (least-squares
//! slope, fit R², still growing in the last steps; `growth.rs`). Parameters, optimizer state
//! made in the first step and caches that fill once plateau, so they are not flagged. The
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
//! in each device's notes and as [`Absence`]s with a stable code.

mod cause;
mod growth;
mod words;

use crate::analyze::top::AnnotationCount;
use crate::model::{Snapshot, StackId, StrId};
use crate::replay::steps::{self, DeviceSteps};
use crate::replay::DeviceReplay;
use crate::units::iec;
use crate::vocab::absence::{self, Absence};
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct GrowingSite {
    /// Call site (`filename:line:name`).
    pub site: String,
    /// `saved` (a tensor the retained graph's forward pass saved), `input` (the forward pass's
    /// input, made just before it), `loss` (what the loss computed from its output saved,
    /// outside any module's forward) or `kept` (a leak's tensor).
    #[schemars(extend("enum" = ["saved", "input", "loss", "kept"]))]
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct Finding {
    /// `retained_graph` or `leak`.
    #[schemars(extend("enum" = ["retained_graph", "leak"]))]
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
    #[schemars(extend("enum" = ["module_forward", "autograd_annotation", "kept_intermediates", null]))]
    pub graph_evidence: Option<&'static str>,
    /// Why this kind, in words.
    pub why: String,
    /// The growing sites it groups, biggest growth first.
    pub sites: Vec<GrowingSite>,
}

/// The steps of a device in a few numbers.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct DeviceLeaks {
    /// The steps found.
    #[serde(flatten)]
    pub steps: DeviceSteps,
    /// Why no answer could be given, when so.
    pub notes: Vec<String>,
    /// The steps in a few numbers; `null` without steps.
    pub summary: Option<StepSummary>,
}

/// Memory that grows step after step: leaks and retained autograd graphs, with the steps found
/// per device.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct LeaksReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[schemars(extend("const" = 1))]
    pub schema_version: u32,
    /// Findings, biggest growth first; empty when none.
    pub findings: Vec<Finding>,
    /// Per device: the steps and what limited the analysis.
    pub devices: Vec<DeviceLeaks>,
    /// Devices with enough steps to judge (a device not listed could not be judged either way).
    pub judged_devices: Vec<u32>,
    /// What the snapshot lacks for this analysis, with stable codes (see [`absence`]).
    pub absent: Vec<Absence>,
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

/// `N live blocks holding X`: what a device's final state still says.
fn final_state_words(snap: &Snapshot, dev: &crate::model::Device) -> String {
    let (n, bytes) = snap
        .live_blocks(dev)
        .fold((0u64, 0u64), |(n, b), x| (n + 1, b + x.requested_size));
    format!(
        "its final state holds {} in {} live block{} (`memlens top` and `memlens categories` show what and where)",
        iec(bytes),
        n,
        if n == 1 { "" } else { "s" }
    )
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

/// Runs the analysis on every replayed device (and says why the others cannot be judged).
pub fn run(snap: &Snapshot, replays: &[DeviceReplay], opts: &LeaksOptions) -> LeaksReport {
    let mut findings = Vec::new();
    let mut devices = Vec::new();
    let mut absent = Vec::new();
    let mut judged = Vec::new();
    for dev in &snap.devices {
        let Some(r) = replays.iter().find(|r| r.device == dev.id) else {
            if snap.device_trace(dev).is_empty() && !snap.device_segments(dev).is_empty() {
                let msg = format!(
                    "device {} has no trace (allocation history was not recorded): growth between steps cannot be measured; {}",
                    dev.id,
                    final_state_words(snap, dev)
                );
                absent.push(Absence::new(absence::NO_TRACE, Some(dev.id), msg.clone()));
                devices.push(DeviceLeaks {
                    steps: DeviceSteps {
                        device: dev.id,
                        source: None,
                        marker: None,
                        steps: Vec::new(),
                    },
                    notes: vec![msg],
                    summary: None,
                });
            }
            continue;
        };
        let st = steps::find(snap, r);
        let trace = snap.device_trace(dev);
        let mut notes = Vec::new();
        if !crate::analyze::profile::records_activity(trace) {
            let msg = format!(
                "the trace of device {} records no allocation or free ({}: a `snapshot` marker or a history of max_entries=1): growth between steps cannot be measured; {}",
                r.device,
                if trace.len() == 1 { "1 entry".to_string() } else { format!("{} entries", trace.len()) },
                final_state_words(snap, dev)
            );
            absent.push(Absence::new(
                absence::NO_ACTIVITY,
                Some(r.device),
                msg.clone(),
            ));
            notes.push(msg);
            devices.push(DeviceLeaks {
                summary: summarize(&st),
                steps: st,
                notes,
            });
            continue;
        }
        let n = st.steps.len();
        if n < opts.steps_needed() {
            let msg = format!(
                "{} steps found{}; at least {} are needed ({} warm-up + {}) to tell growth from noise, so no finding is made",
                n,
                if st.source.is_none() { " (no ProfilerStep annotations, user_defined markers, optimizer steps, periodic structure or repeating loop lines)" } else { "" },
                opts.steps_needed(),
                opts.warmup,
                opts.min_steps
            );
            let msg = if n == 0 {
                format!(
                    "{msg}; over the whole trace, live bytes went from {} to {} (`memlens timeline` plots them)",
                    iec(r.live_at(-1)),
                    iec(r.live_at(r.events as i64 - 1))
                )
            } else {
                msg
            };
            let code = if n == 0 {
                absence::NO_STEPS
            } else {
                absence::TOO_FEW_STEPS
            };
            absent.push(Absence::new(code, Some(r.device), msg.clone()));
            notes.push(msg);
            devices.push(DeviceLeaks {
                summary: summarize(&st),
                steps: st,
                notes,
            });
            continue;
        }
        judged.push(r.device);
        if !snap.has_frames() {
            notes.push(
                "no stack frames recorded: growth can be measured but not attributed to code"
                    .into(),
            );
        }
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
        for c in cause::group(&scope, &series, &triggers, &weak) {
            findings.push(finding(snap, r.device, n, &series, &c));
        }
        devices.push(DeviceLeaks {
            summary: summarize(&st),
            steps: st,
            notes,
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
        devices,
        judged_devices: judged,
        absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::json_to_pickle;
    use crate::model::build;

    /// A loop of 6 ProfilerSteps keeping, per step, one tensor of a module's forward at
    /// train.py:20 and one tensor made directly at train.py:21, the line's first when `leak_first`.
    fn two_lines(leak_first: bool) -> LeaksReport {
        let graph = r#"[{"name": "forward", "filename": "/u/model.py", "line": 5}, {"name": "main", "filename": "/u/train.py", "line": 20}]"#;
        let line = r#"[{"name": "main", "filename": "/u/train.py", "line": 21}]"#;
        let (mut trace, mut ann) = (Vec::new(), Vec::new());
        for step in 0..6u64 {
            let t0 = 1000 * step;
            ann.push(format!(
                r#"{{"name": "ProfilerStep#{step}", "stage": "START", "time_us": {t0}}}"#
            ));
            let mut t = t0;
            let mut alloc = |addr: u64, frames: &str, trace: &mut Vec<String>| {
                t += 1;
                trace.push(format!(r#"{{"action": "alloc", "addr": {addr}, "size": 1048576, "stream": 0, "time_us": {t}, "frames": {frames}}}"#));
            };
            let base = (step + 1) << 24;
            let order = if leak_first {
                [(base, line), (base | 1 << 20, graph)]
            } else {
                [(base, graph), (base | 1 << 20, line)]
            };
            for (addr, frames) in order {
                alloc(addr, frames, &mut trace);
            }
            // a temporary of the forward, freed within the step
            alloc(base | 2 << 20, graph, &mut trace);
            trace.push(format!(r#"{{"action": "free_completed", "addr": {}, "size": 1048576, "stream": 0, "time_us": {}}}"#, base | 2 << 20, t0 + 8));
            ann.push(format!(
                r#"{{"name": "ProfilerStep#{step}", "stage": "END", "time_us": {}}}"#,
                t0 + 9
            ));
        }
        leaks_of(&trace, &ann)
    }

    /// `leaks` with the default options on device 0's `trace` entries and the
    /// `external_annotations` `ann` (JSON objects as text).
    fn leaks_of(trace: &[String], ann: &[String]) -> LeaksReport {
        let json = format!(
            r#"{{"device_traces": [[{}]], "external_annotations": [{}]}}"#,
            trace.join(","),
            ann.join(",")
        );
        let snap = build(
            &json_to_pickle(json.as_bytes()).unwrap(),
            Default::default(),
        )
        .unwrap();
        let replays = crate::replay::replay(&snap);
        run(&snap, &replays, &LeaksOptions::default())
    }

    /// GIVEN a tensor kept at a loop line just before a retained graph's forward, WHEN leaks
    /// runs, THEN it is that graph's input: one finding. GIVEN it is kept after the forward
    /// (a list of outputs), THEN it is a leak of its own: two findings.
    #[test]
    fn a_kept_tensor_joins_the_graph_only_as_its_input() {
        let r = two_lines(true);
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
        let f = &r.findings[0];
        assert_eq!(f.kind, "retained_graph");
        // the line to change is the graph's own (its input does not move it)
        assert_eq!(f.site, "/u/model.py:5:forward");
        assert_eq!(f.bytes_per_step, 2 << 20);
        assert_eq!(f.tensors_per_step, 2.0);
        let roles: Vec<(&str, &str)> = f.sites.iter().map(|s| (s.site.as_str(), s.role)).collect();
        assert!(
            roles.contains(&("/u/train.py:21:main", "input")),
            "{roles:?}"
        );
        assert!(
            roles.contains(&("/u/model.py:5:forward", "saved")),
            "{roles:?}"
        );
        let r = two_lines(false);
        let kinds: Vec<(&str, &str)> = r
            .findings
            .iter()
            .map(|f| (f.kind, f.site.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("retained_graph", "/u/model.py:5:forward"),
                ("leak", "/u/train.py:21:main")
            ]
        );
    }

    /// A loop of 6 ProfilerSteps making, each step, the tensors `made` (frames as JSON text,
    /// innermost first; size; whether the step frees it), in order, after a retained graph's
    /// forward pass at train.py:20 (a 1 MiB activation of model.py:5 kept, a temporary freed).
    fn after_a_graph(made: &[(&str, u64, bool)]) -> LeaksReport {
        let graph = r#"[{"name": "forward", "filename": "/u/model.py", "line": 5}, {"name": "_call_impl", "filename": "/e/site-packages/torch/nn/modules/module.py", "line": 1747}, {"name": "main", "filename": "/u/train.py", "line": 20}]"#;
        let (mut trace, mut ann) = (Vec::new(), Vec::new());
        for step in 0..6u64 {
            let t0 = 1000 * step;
            ann.push(format!(
                r#"{{"name": "ProfilerStep#{step}", "stage": "START", "time_us": {t0}}}"#
            ));
            let mut t = t0;
            let base = (step + 1) << 28;
            let mut freed = Vec::new();
            let all = [(graph, 1 << 20, false), (graph, 1 << 20, true)];
            for (i, &(frames, size, free)) in all.iter().chain(made).enumerate() {
                t += 1;
                let addr = base | (i as u64) << 22;
                trace.push(format!(r#"{{"action": "alloc", "addr": {addr}, "size": {size}, "stream": 0, "time_us": {t}, "frames": {frames}}}"#));
                if free {
                    freed.push((addr, size));
                }
            }
            for (addr, size) in freed {
                t += 1;
                trace.push(format!(r#"{{"action": "free_completed", "addr": {addr}, "size": {size}, "stream": 0, "time_us": {t}}}"#));
            }
            ann.push(format!(
                r#"{{"name": "ProfilerStep#{step}", "stage": "END", "time_us": {}}}"#,
                t + 1
            ));
        }
        leaks_of(&trace, &ann)
    }

    /// A finding's kind and site, and each of its sites with its role (by site).
    type Shape<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>);

    /// The findings' kinds and sites, and each site's role (by site).
    fn shape(r: &LeaksReport) -> Vec<Shape<'_>> {
        r.findings
            .iter()
            .map(|f| {
                let mut roles: Vec<(&str, &str)> =
                    f.sites.iter().map(|s| (s.site.as_str(), s.role)).collect();
                roles.sort();
                (f.kind, f.site.as_str(), roles)
            })
            .collect()
    }

    /// GIVEN a retained graph's forward pass at train.py:20 and, at train.py:21, a loss computed
    /// from its output outside any module's forward that keeps a 1 MiB tensor and the 4-byte
    /// loss every step — `F.cross_entropy`, an `nn.CrossEntropyLoss` module, or raw tensor code
    /// — WHEN leaks runs, THEN it is one finding of the graph, with that site as its `loss`.
    #[test]
    fn a_loss_computed_after_the_forward_joins_its_graph() {
        let functional = r#"[{"name": "cross_entropy", "filename": "/e/site-packages/torch/nn/functional.py", "line": 3479}, {"name": "main", "filename": "/u/train.py", "line": 21}]"#;
        let module = r#"[{"name": "cross_entropy", "filename": "/e/site-packages/torch/nn/functional.py", "line": 3479}, {"name": "forward", "filename": "/e/site-packages/torch/nn/modules/loss.py", "line": 1310}, {"name": "_call_impl", "filename": "/e/site-packages/torch/nn/modules/module.py", "line": 1747}, {"name": "main", "filename": "/u/train.py", "line": 21}]"#;
        let raw = r#"[{"name": "main", "filename": "/u/train.py", "line": 21}]"#;
        let want = vec![(
            "retained_graph",
            "/u/model.py:5:forward",
            vec![
                ("/u/model.py:5:forward", "saved"),
                ("/u/train.py:21:main", "loss"),
            ],
        )];
        for frames in [functional, module] {
            let r = after_a_graph(&[(frames, 1 << 20, false), (frames, 4, false)]);
            assert_eq!(shape(&r), want, "{frames}");
            let f = &r.findings[0];
            assert_eq!(f.bytes_per_step, (2 << 20) + 4);
            assert_eq!(f.tensors_per_step, 3.0);
            assert_eq!(f.live_bytes_at_end, 6 * ((2 << 20) + 4));
            assert!(f
                .fix
                .contains("what the loss computed at /u/train.py:21:main saved"));
        }
        // raw tensor code: the line keeps what it saved and makes the loss value (freed here)
        let r = after_a_graph(&[(raw, 1 << 20, false), (raw, 1 << 20, true), (raw, 4, true)]);
        assert_eq!(shape(&r), want);
        assert_eq!(r.findings[0].bytes_per_step, 2 << 20);
        // a slow one (its line grows too slowly to be a finding) joins too
        let r = after_a_graph(&[(functional, 4096, false), (functional, 4, false)]);
        assert_eq!(shape(&r), want);
        assert_eq!(r.findings[0].bytes_per_step, (1 << 20) + 4100);
    }

    /// GIVEN tensors kept every step after a retained graph's forward pass that no loss
    /// computation made — a list of `F.softmax` outputs, a list of tensors made at a line that
    /// makes no loss value, a list of loss values — WHEN leaks runs, THEN they stay a leak of
    /// their own (the loss values, too slow to be a finding, are in none).
    #[test]
    fn what_no_loss_computation_made_stays_a_leak() {
        let softmax = r#"[{"name": "softmax", "filename": "/e/site-packages/torch/nn/functional.py", "line": 2140}, {"name": "main", "filename": "/u/train.py", "line": 21}]"#;
        let raw = r#"[{"name": "main", "filename": "/u/train.py", "line": 21}]"#;
        let leak = |r: &LeaksReport| {
            let kinds: Vec<(&str, &str)> = r
                .findings
                .iter()
                .map(|f| (f.kind, f.site.as_str()))
                .collect();
            assert_eq!(
                kinds,
                [
                    ("retained_graph", "/u/model.py:5:forward"),
                    ("leak", "/u/train.py:21:main")
                ]
            );
            assert_eq!(r.findings[0].bytes_per_step, 1 << 20);
        };
        leak(&after_a_graph(&[(softmax, 1 << 20, false)]));
        leak(&after_a_graph(&[
            (raw, 1 << 20, false),
            (raw, 1 << 20, true),
        ]));
        // a list of loss values (scalars only) is not a graph's
        let r = after_a_graph(&[(raw, 4, false)]);
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.findings[0].bytes_per_step, 1 << 20);
    }

    /// GIVEN a loop whose per-step tensor is annotated as packed into the autograd graph but
    /// allocated outside any module forward, WHEN leaks runs, THEN it is a retained graph and
    /// the finding and its site list the annotation with its tensors and bytes; an annotate
    /// made before the tensor at that address existed marks nothing (it is attached to the
    /// allocation live at the address, not to the address).
    #[test]
    fn annotate_events_mark_retained_graphs() {
        let leaks = |annotate_first: bool| {
            let mut trace = Vec::new();
            let mut ann = Vec::new();
            let frames = r#"[{"name": "train_step", "filename": "/home/u/train.py", "line": 9}]"#;
            for step in 0..6u64 {
                let t0 = 1000 * step;
                ann.push(format!(
                    r#"{{"name": "ProfilerStep#{step}", "stage": "START", "time_us": {t0}}}"#
                ));
                let addr = 1 << 20 | step << 12;
                let alloc = format!(
                    r#"{{"action": "alloc", "addr": {addr}, "size": 1048576, "stream": 0, "time_us": {}, "frames": {frames}}}"#,
                    t0 + 1
                );
                let note = format!(
                    r#"{{"action": "annotate", "addr": {addr}, "size": 0, "stream": 0, "time_us": {}, "user_metadata": "packed into the autograd graph"}}"#,
                    t0 + 2
                );
                if annotate_first {
                    trace.extend([note, alloc]);
                } else {
                    trace.extend([alloc, note]);
                }
                ann.push(format!(
                    r#"{{"name": "ProfilerStep#{step}", "stage": "END", "time_us": {}}}"#,
                    t0 + 3
                ));
            }
            leaks_of(&trace, &ann)
        };
        let r = leaks(false);
        assert_eq!(r.findings.len(), 1, "{:?}", r.devices);
        let f = &r.findings[0];
        assert_eq!(f.kind, "retained_graph");
        assert_eq!(f.graph_evidence, Some(cause::AUTOGRAD_ANNOTATION));
        assert_eq!(f.bytes_per_step, 1 << 20);
        assert_eq!(f.site, "/home/u/train.py:9:train_step");
        let want = vec![AnnotationCount {
            text: "packed into the autograd graph".into(),
            count: 6,
            bytes: 6 << 20,
        }];
        assert_eq!(f.annotations, want);
        assert_eq!(f.sites[0].annotations, want);
        // annotated before the tensor was made: nothing to attach to, no evidence
        let r = leaks(true);
        assert_eq!(r.findings.len(), 1, "{:?}", r.devices);
        assert_eq!(r.findings[0].kind, "leak");
        assert!(r.findings[0].annotations.is_empty());
    }
}
