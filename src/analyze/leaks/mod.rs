//! `memlens leaks`: memory that grows step after step — leaks and retained autograd graphs.
//!
//! Per device: find the steps, take each call site's live bytes at every step boundary after
//! the warm-up, and flag the sites that keep growing (least-squares slope, fit R², still
//! growing in the last steps). Growth under a module's `forward` is a retained graph (the
//! classic `total_loss += loss`); elsewhere it is a leak (a list that grows, a cache that
//! never evicts). Parameters, optimizer state made in the first step and caches that fill once
//! plateau, so they are not flagged.

use super::sites::{self, SiteOptions};
use crate::model::{Snapshot, StackId};
use crate::replay::steps::{self, DeviceSteps};
use crate::replay::{DeviceReplay, NEVER};
use rustc_hash::FxHashMap;
use serde::Serialize;

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

/// One finding.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Finding {
    /// `retained_graph` or `leak`.
    pub kind: &'static str,
    /// Device index.
    pub device: u32,
    /// Call site.
    pub site: String,
    /// Growth per step (least-squares slope over the step boundaries after the warm-up).
    pub bytes_per_step: u64,
    /// Steps in the trace.
    pub steps: usize,
    /// The site's live bytes at the end of the trace.
    pub live_bytes_at_end: u64,
    /// The site's live bytes at each step boundary after the warm-up.
    pub live_bytes_at_boundaries: Vec<u64>,
    /// R² of the linear fit (1 = perfectly steady growth).
    pub fit_r2: f64,
    /// What to do about it, in words.
    pub fix: String,
}

/// Steps and notes of one device.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DeviceLeaks {
    /// The steps found.
    #[serde(flatten)]
    pub steps: DeviceSteps,
    /// Why no answer could be given, when so.
    pub notes: Vec<String>,
}

/// The report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LeaksReport {
    /// Always [`super::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Findings, biggest growth first; empty when none.
    pub findings: Vec<Finding>,
    /// Per device: the steps and what limited the analysis.
    pub devices: Vec<DeviceLeaks>,
}

/// True when a stack runs under a module's forward (where autograd saves tensors for
/// backward); `annotate` events saying "autograd graph" are the other evidence.
pub fn under_forward(snap: &Snapshot, stack: StackId) -> bool {
    steps::under_module_forward(snap, stack)
}

fn fit(v: &[u64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mx = (n - 1.0) / 2.0;
    let my = v.iter().map(|&y| y as f64).sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (i, &y) in v.iter().enumerate() {
        let (dx, dy) = (i as f64 - mx, y as f64 - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    let slope = if sxx == 0.0 { 0.0 } else { sxy / sxx };
    let r2 = if syy == 0.0 {
        0.0
    } else {
        sxy * sxy / (sxx * syy)
    };
    (slope, r2)
}

/// Runs the analysis on every replayed device.
pub fn run(snap: &Snapshot, replays: &[DeviceReplay], opts: &LeaksOptions) -> LeaksReport {
    let mut findings = Vec::new();
    let mut devices = Vec::new();
    for r in replays {
        let st = steps::find(snap, r);
        let mut notes = Vec::new();
        let n = st.steps.len();
        if n < opts.steps_needed() {
            notes.push(format!(
                "{} steps found{}; at least {} are needed ({} warm-up + {}) to tell growth from noise, so no finding is made",
                n,
                if st.source.is_none() { " (no ProfilerStep annotations, user_defined markers, optimizer steps or periodic structure)" } else { "" },
                opts.steps_needed(),
                opts.warmup,
                opts.min_steps
            ));
            devices.push(DeviceLeaks { steps: st, notes });
            continue;
        }
        if !snap.has_frames() {
            notes.push(
                "no stack frames recorded: growth can be measured but not attributed to code"
                    .into(),
            );
        }
        let bounds: Vec<i64> = st.steps[opts.warmup..]
            .iter()
            .map(|s| s.last_event)
            .collect();
        let b = bounds.len();
        // Per site: a difference array over the boundaries.
        // Per stack: its site's index and whether it runs under a module's forward.
        let mut labels: FxHashMap<StackId, (usize, bool)> = FxHashMap::default();
        let mut names: Vec<String> = Vec::new();
        let mut index: FxHashMap<String, usize> = FxHashMap::default();
        let mut diff: Vec<Vec<i64>> = Vec::new();
        let mut at_end: Vec<u64> = Vec::new();
        let mut forward: Vec<bool> = Vec::new();
        let end = r.events as i64 - 1;
        // `annotate` events (2026+) mark allocations packed into the autograd graph.
        let trace = snap.device_trace(snap.device(r.device).expect("replayed device exists"));
        let in_graph: rustc_hash::FxHashSet<u64> = trace
            .iter()
            .filter(|e| {
                e.action == crate::model::Action::Annotate
                    && snap.strings.get(e.user_metadata).contains("autograd")
            })
            .map(|e| e.addr)
            .collect();
        for a in &r.allocations {
            let lo = bounds.partition_point(|&x| x < a.start);
            let hi = if a.end == NEVER {
                b
            } else {
                bounds.partition_point(|&x| x < a.end)
            };
            let alive_at_end = a.live_at(end);
            if lo >= hi && !alive_at_end {
                continue;
            }
            let (k, under) = *labels.entry(a.stack).or_insert_with(|| {
                let label = sites::site_label(snap, a.stack, opts.sites);
                let k = *index.entry(label.clone()).or_insert_with(|| {
                    names.push(label);
                    diff.push(vec![0; b + 1]);
                    at_end.push(0);
                    forward.push(false);
                    names.len() - 1
                });
                (k, under_forward(snap, a.stack))
            });
            if lo < hi {
                diff[k][lo] += a.size as i64;
                diff[k][hi] -= a.size as i64;
            }
            if alive_at_end {
                at_end[k] += a.size;
                forward[k] |= under || in_graph.contains(&a.addr);
            }
        }
        for (k, d) in diff.iter().enumerate() {
            let mut acc = 0i64;
            let v: Vec<u64> = d[..b]
                .iter()
                .map(|x| {
                    acc += x;
                    acc.max(0) as u64
                })
                .collect();
            let (slope, r2) = fit(&v);
            let rises = v.windows(2).filter(|w| w[1] > w[0]).count();
            let falls = v.windows(2).filter(|w| w[1] < w[0]).count();
            let tail = (b / 3).max(1);
            let still_growing = v[b - 1] > v[b - 1 - tail];
            if slope < opts.min_bytes_per_step as f64
                || r2 < 0.8
                || falls * 4 > rises
                || !still_growing
            {
                continue;
            }
            let kind = if forward[k] { "retained_graph" } else { "leak" };
            let per = slope.round() as u64;
            let fix = if kind == "retained_graph" {
                format!(
                    "tensors made in the forward pass at {} stay alive with their autograd graph after each step: accumulate `loss.item()` (or `loss.detach()`) instead of the tensor, and run evaluation under `torch.inference_mode()`",
                    names[k]
                )
            } else {
                format!(
                    "tensors allocated at {} every step are never released: a Python list or dict that grows, a cache without eviction, or a loss accumulated as a tensor (`total += loss` keeps each step's autograd graph and the tensors it saved, even outside a module's forward); keep `.item()` / `.detach().cpu()` copies, or bound the container",
                    names[k]
                )
            };
            findings.push(Finding {
                kind,
                device: r.device,
                site: names[k].clone(),
                bytes_per_step: per,
                steps: n,
                live_bytes_at_end: at_end[k],
                live_bytes_at_boundaries: v,
                fit_r2: (r2 * 1e6).round() / 1e6,
                fix,
            });
        }
        devices.push(DeviceLeaks { steps: st, notes });
    }
    findings.sort_by(|a, b| {
        b.bytes_per_step
            .cmp(&a.bytes_per_step)
            .then_with(|| (a.device, &a.site).cmp(&(b.device, &b.site)))
    });
    LeaksReport {
        schema_version: super::SCHEMA_VERSION,
        findings,
        devices,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::json_to_pickle;
    use crate::model::build;

    /// GIVEN a loop whose per-step tensor is annotated as packed into the autograd graph but
    /// allocated outside any module forward, WHEN leaks runs, THEN it is a retained graph.
    #[test]
    fn annotate_events_mark_retained_graphs() {
        let mut trace = Vec::new();
        let mut ann = Vec::new();
        let frames = r#"[{"name": "train_step", "filename": "/home/u/train.py", "line": 9}]"#;
        for step in 0..6u64 {
            let t0 = 1000 * step;
            ann.push(format!(
                r#"{{"name": "ProfilerStep#{step}", "stage": "START", "time_us": {t0}}}"#
            ));
            let addr = 1 << 20 | step << 12;
            trace.push(format!(r#"{{"action": "alloc", "addr": {addr}, "size": 1048576, "stream": 0, "time_us": {}, "frames": {frames}}}"#, t0 + 1));
            trace.push(format!(r#"{{"action": "annotate", "addr": {addr}, "size": 0, "stream": 0, "time_us": {}, "user_metadata": "packed into the autograd graph"}}"#, t0 + 2));
            ann.push(format!(
                r#"{{"name": "ProfilerStep#{step}", "stage": "END", "time_us": {}}}"#,
                t0 + 3
            ));
        }
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
        let r = run(&snap, &replays, &LeaksOptions::default());
        assert_eq!(r.findings.len(), 1, "{:?}", r.devices);
        assert_eq!(r.findings[0].kind, "retained_graph");
        assert_eq!(r.findings[0].bytes_per_step, 1 << 20);
        assert_eq!(r.findings[0].site, "/home/u/train.py:9:train_step");
    }
}
