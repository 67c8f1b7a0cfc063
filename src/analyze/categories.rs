//! `memlens categories`: live memory split into parameters, optimizer state, gradients,
//! activations, autograd temporaries, temporaries, inputs and unknown.
//!
//! Each allocation gets the first rule that matches, user rules (`--rules FILE`, a regex on
//! frames) first; every category reports its rules and a confidence: `high` when frames say
//! it, `medium` when the step phase or lifetime does, `low` for a guess.

use super::leaks::under_forward;
use crate::model::{Snapshot, StackId};
use crate::replay::steps::{self, DeviceSteps};
use crate::replay::{self, Allocation, DeviceReplay, Moment, MomentSpec, NEVER};
use regex::Regex;
use serde::Serialize;
use std::collections::BTreeMap;

/// The categories, in report order.
pub const CATEGORIES: [&str; 8] = [
    "parameters",
    "optimizer_state",
    "gradients",
    "activations",
    "autograd_temporaries",
    "temporaries",
    "inputs",
    "unknown",
];

/// A user rule: frames matching `pattern` (as `filename:line:name`) → `category`.
#[derive(Clone, Debug)]
pub struct UserRule {
    /// Category name (one of [`CATEGORIES`] or a new one).
    pub category: String,
    /// The regex.
    pub pattern: Regex,
}

/// Parses a rules file: one `category: regex` per line; `#` comments and blank lines skipped.
pub fn parse_rules(text: &str) -> Result<Vec<UserRule>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((cat, re)) = line.split_once(':') else {
            return Err(format!(
                "line {}: expected `category: regex`, found {line:?}",
                i + 1
            ));
        };
        let cat = cat.trim();
        if cat.is_empty() || !cat.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "line {}: category {cat:?} must be a word (letters, digits, _)",
                i + 1
            ));
        }
        let pattern =
            Regex::new(re.trim()).map_err(|e| format!("line {}: bad regex: {e}", i + 1))?;
        out.push(UserRule {
            category: cat.to_string(),
            pattern,
        });
    }
    Ok(out)
}

/// Options of `categories`.
#[derive(Clone, Debug)]
pub struct CategoryOptions {
    /// The moment.
    pub at: MomentSpec,
    /// User rules, tried first.
    pub rules: Vec<UserRule>,
}

impl Default for CategoryOptions {
    fn default() -> Self {
        CategoryOptions {
            at: MomentSpec::Peak,
            rules: Vec::new(),
        }
    }
}

/// One category's share.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CategoryRow {
    /// Category name.
    pub category: String,
    /// Live requested bytes.
    pub bytes: u64,
    /// Allocations.
    pub count: u64,
    /// Share of the live bytes.
    pub share: f64,
    /// `high`, `medium` or `low`: the weakest rule that put bytes here, weighted by bytes.
    pub confidence: &'static str,
    /// The rules that matched, with bytes each.
    pub rules: Vec<RuleHit>,
}

/// Bytes one rule put in a category.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RuleHit {
    /// The rule, in words.
    pub rule: String,
    /// Its confidence.
    pub confidence: &'static str,
    /// Bytes.
    pub bytes: u64,
}

/// One device.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DeviceCategories {
    /// Device index.
    pub device: u32,
    /// The moment.
    pub at: Moment,
    /// Live requested bytes.
    pub live_requested_bytes: u64,
    /// Categories, in [`CATEGORIES`] order then user categories; empty ones omitted.
    pub categories: Vec<CategoryRow>,
    /// Remarks.
    pub notes: Vec<String>,
}

/// The report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CategoriesReport {
    /// Always [`super::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The moment asked for.
    pub moment: String,
    /// Per device with a trace.
    pub devices: Vec<DeviceCategories>,
}

struct Ctx<'a> {
    snap: &'a Snapshot,
    steps: &'a DeviceSteps,
    /// Per step: first event under autograd backward, if any.
    backward_from: Vec<Option<i64>>,
    /// Per step: first allocation under a module's forward, if any.
    forward_from: Vec<Option<i64>>,
    events: i64,
}

fn frames_text(snap: &Snapshot, stack: StackId) -> impl Iterator<Item = (String, &str, &str)> + '_ {
    snap.stacks.get(stack).iter().map(move |&f| {
        let fr = snap.frames.get(f);
        let file = snap.strings.get(fr.filename);
        let name = snap.strings.get(fr.name);
        (format!("{file}:{}:{name}", fr.line), file, name)
    })
}

fn any_frame(snap: &Snapshot, stack: StackId, pred: impl Fn(&str, &str) -> bool) -> bool {
    frames_text(snap, stack).any(|(_, file, name)| pred(file, name))
}

fn is_backward(file: &str, name: &str) -> bool {
    (file.contains("torch/autograd/")
        && (name == "backward" || name == "_engine_run_backward" || name == "grad"))
        || (file.ends_with("torch/_tensor.py") && name == "backward")
}

fn is_param_setup(file: &str, name: &str) -> bool {
    (file.contains("torch/nn/modules/module.py")
        && matches!(
            name,
            "_apply" | "convert" | "cuda" | "to" | "load_state_dict" | "_load_from_state_dict"
        ))
        || file.contains("torch/nn/parameter.py")
        || file.contains("torch/nn/init.py")
        || name == "reset_parameters"
}

fn is_input_copy(file: &str, name: &str) -> bool {
    file.contains("torch/utils/data/")
        || name == "pin_memory"
        || name == "collate"
        || name == "default_collate"
}

impl Ctx<'_> {
    fn step_of(&self, event: i64) -> Option<usize> {
        self.steps
            .steps
            .iter()
            .position(|s| s.first_event <= event && event <= s.last_event)
    }

    fn classify(&self, a: &Allocation, rules: &[UserRule]) -> (String, String, &'static str) {
        let snap = self.snap;
        let s = a.stack;
        for r in rules {
            if frames_text(snap, s).any(|(t, _, _)| r.pattern.is_match(&t)) {
                return (
                    r.category.clone(),
                    format!("user rule {}: {}", r.category, r.pattern.as_str()),
                    "high",
                );
            }
        }
        let step = if a.start >= 0 {
            self.step_of(a.start)
        } else {
            None
        };
        let step_end = step.map(|k| self.steps.steps[k].last_event);
        let outlives_step = a.end == NEVER || step_end.is_some_and(|e| a.end > e);
        let has_frames = !snap.stacks.get(s).is_empty();
        if any_frame(snap, s, |f, _| f.contains("torch/optim/")) {
            return if outlives_step {
                (
                    "optimizer_state".into(),
                    "allocated under torch/optim and kept past its step".into(),
                    "high",
                )
            } else {
                (
                    "temporaries".into(),
                    "allocated under torch/optim and freed within its step".into(),
                    "high",
                )
            };
        }
        let in_backward = step.is_some_and(|k| self.backward_from[k].is_some_and(|b| a.start >= b));
        if any_frame(snap, s, is_backward) || (!has_frames && in_backward) {
            let how = if has_frames {
                "frames under autograd backward"
            } else {
                "no Python frames, made during backward (the autograd thread)"
            };
            let conf = if has_frames { "high" } else { "medium" };
            return if outlives_step {
                (
                    "gradients".into(),
                    format!("{how}, kept past its step"),
                    conf,
                )
            } else {
                (
                    "autograd_temporaries".into(),
                    format!("{how}, freed within its step"),
                    conf,
                )
            };
        }
        if any_frame(snap, s, is_param_setup) {
            return (
                "parameters".into(),
                "allocated by module setup (.to/.cuda/_apply, nn.init, load_state_dict)".into(),
                "high",
            );
        }
        if any_frame(snap, s, is_input_copy) {
            return (
                "inputs".into(),
                "allocated by data loading (torch.utils.data, pin_memory, collate)".into(),
                "high",
            );
        }
        let first_step = self.steps.steps.first().map(|s| s.first_event);
        if (a.start < 0 || first_step.is_some_and(|f| a.start < f)) && a.end == NEVER {
            return (
                "parameters".into(),
                "allocated before the first step and never freed".into(),
                "low",
            );
        }
        if under_forward(snap, s) {
            return (
                "activations".into(),
                "allocated under a module's forward".into(),
                "high",
            );
        }
        if let Some(k) = step {
            let before_backward = self.backward_from[k].map_or(true, |b| a.start < b);
            if before_backward && a.end > a.start + 2 {
                // Before the step's first module forward, user code alone (a `.to(device)`
                // of the batch) allocates the inputs.
                let user_only = has_frames && !any_frame(snap, s, |f, _| super::sites::is_torch(f));
                if user_only && self.forward_from[k].is_some_and(|f| a.start < f) {
                    return (
                        "inputs".into(),
                        "allocated by user code before the step's first module forward".into(),
                        "medium",
                    );
                }
                return (
                    "activations".into(),
                    "allocated in the forward part of a step and kept for backward".into(),
                    "medium",
                );
            }
        }
        if a.end != NEVER && a.end - a.start <= 2 {
            return (
                "temporaries".into(),
                "freed within two events of its allocation".into(),
                "medium",
            );
        }
        let _ = self.events;
        ("unknown".into(), "no rule matched".into(), "low")
    }
}

/// Per category: bytes, count, and bytes per (rule, confidence).
type Tally = (u64, u64, BTreeMap<(String, &'static str), u64>);

/// Runs the analysis on every replayed device.
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &CategoryOptions,
) -> Result<CategoriesReport, String> {
    let mut devices = Vec::new();
    for r in replays {
        let dev = snap.device(r.device).expect("replayed device exists");
        let trace = snap.device_trace(dev);
        let at = replay::resolve(opts.at, r, trace)?;
        let st = steps::find(snap, r);
        let backward_from = st
            .steps
            .iter()
            .map(|s| {
                (s.first_event..=s.last_event).find(|&i| {
                    let e = &trace[i as usize];
                    e.action == crate::model::Action::Alloc && any_frame(snap, e.stack, is_backward)
                })
            })
            .collect();
        let forward_from = st
            .steps
            .iter()
            .map(|s| {
                (s.first_event..=s.last_event).find(|&i| {
                    let e = &trace[i as usize];
                    e.action == crate::model::Action::Alloc && under_forward(snap, e.stack)
                })
            })
            .collect();
        let ctx = Ctx {
            snap,
            steps: &st,
            backward_from,
            forward_from,
            events: r.events as i64,
        };
        let mut rows: BTreeMap<String, Tally> = BTreeMap::new();
        let mut live = 0;
        for a in r.live_allocations(at) {
            let (cat, rule, conf) = ctx.classify(a, &opts.rules);
            live += a.size;
            let e = rows.entry(cat).or_default();
            e.0 += a.size;
            e.1 += 1;
            *e.2.entry((rule, conf)).or_default() += a.size;
        }
        let order = |c: &str| {
            CATEGORIES
                .iter()
                .position(|x| *x == c)
                .unwrap_or(CATEGORIES.len())
        };
        let mut categories: Vec<CategoryRow> = rows
            .into_iter()
            .map(|(category, (bytes, count, hits))| {
                let mut rules: Vec<RuleHit> = hits
                    .into_iter()
                    .map(|((rule, confidence), bytes)| RuleHit {
                        rule,
                        confidence,
                        bytes,
                    })
                    .collect();
                rules.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.rule.cmp(&b.rule)));
                let weight = |c: &str| {
                    rules
                        .iter()
                        .filter(|h| h.confidence == c)
                        .map(|h| h.bytes)
                        .sum::<u64>()
                };
                let confidence = if weight("high") * 2 >= bytes {
                    "high"
                } else if (weight("high") + weight("medium")) * 2 >= bytes {
                    "medium"
                } else {
                    "low"
                };
                CategoryRow {
                    share: if live == 0 {
                        0.0
                    } else {
                        bytes as f64 / live as f64
                    },
                    category,
                    bytes,
                    count,
                    confidence,
                    rules,
                }
            })
            .collect();
        categories.sort_by(|a, b| {
            order(&a.category)
                .cmp(&order(&b.category))
                .then_with(|| a.category.cmp(&b.category))
        });
        let mut notes = Vec::new();
        if st.steps.is_empty() {
            notes.push("no steps found: phase rules (forward/backward, kept past the step) fall back to frames only".into());
        }
        if !snap.has_frames() {
            notes.push(
                "no stack frames recorded: only lifetime rules apply, most memory is unknown"
                    .into(),
            );
        }
        devices.push(DeviceCategories {
            device: r.device,
            at: replay::moment(trace, at),
            live_requested_bytes: live,
            categories,
            notes,
        });
    }
    Ok(CategoriesReport {
        schema_version: super::SCHEMA_VERSION,
        moment: opts.at.to_string(),
        devices,
    })
}
