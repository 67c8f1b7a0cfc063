//! `memlens categories`: live memory split into parameters, optimizer state, gradients,
//! activations, KV caches, outputs, autograd temporaries, temporaries, inputs, library
//! workspaces and unknown.
//!
//! Each allocation gets the first rule that matches ([`rules`]: the rules and their order),
//! user rules (`--rules FILE`, a regex on frames) first; every category reports its rules and
//! a confidence: `high` when frames say it, `medium` when the phase of the trace or the
//! lifetime does, `low` for a guess. The phases (backward passes, optimizer calls, forward
//! passes) are in [`phases`], what one stack's frames say in [`facts`], and the split of
//! parameters from gradients older than the trace by their sizes in [`pairing`].
//!
//! A device without a trace (or with a trace that records no allocation) is
//! categorised from its final blocks by their frames alone (`basis: final_state`): no step
//! phase or lifetime is known, so those rules do not apply (but frameless blocks among framed
//! ones predate the recording: weights loaded before history was on, taken as parameters with
//! low confidence); an [`Absence`] says so.

pub mod facts;
mod judge;
pub mod pairing;
pub mod phases;
pub mod rules;

use crate::model::{Action, Snapshot, StackId};
use crate::replay::steps::{self, DeviceSteps};
use crate::replay::{self, DeviceReplay, Moment, MomentSpec};
use crate::vocab::absence::{self, Absence, Judgement};
use regex_lite::Regex;
use serde::Serialize;
use std::collections::BTreeMap;

/// The categories, in report order.
pub const CATEGORIES: [&str; 11] = [
    "parameters",
    "optimizer_state",
    "gradients",
    "activations",
    "kv_cache",
    "outputs",
    "autograd_temporaries",
    "temporaries",
    "inputs",
    "workspaces",
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
    /// Also tally the live bytes per (stack, category) ([`DeviceCategories::per_stack`]).
    pub per_stack: bool,
}

impl Default for CategoryOptions {
    fn default() -> Self {
        CategoryOptions {
            at: MomentSpec::Peak,
            rules: Vec::new(),
            per_stack: false,
        }
    }
}

/// One category's share.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["high", "medium", "low"])))]
    pub confidence: &'static str,
    /// The rules that matched, with bytes each.
    pub rules: Vec<RuleHit>,
}

/// Bytes one rule put in a category.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RuleHit {
    /// The rule, in words.
    pub rule: String,
    /// Its confidence.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["high", "medium", "low"])))]
    pub confidence: &'static str,
    /// Bytes.
    pub bytes: u64,
}

/// One device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceCategories {
    /// Device index.
    pub device: u32,
    /// The moment.
    pub at: Moment,
    /// Live requested bytes.
    pub live_requested_bytes: u64,
    /// Categories, in [`CATEGORIES`] order (parameters, optimizer_state, gradients, activations,
    /// kv_cache, outputs, autograd_temporaries, temporaries, inputs, workspaces, unknown) then
    /// user categories; empty ones omitted.
    pub categories: Vec<CategoryRow>,
    /// Remarks.
    pub notes: Vec<String>,
    /// `trace` (the moment replayed from the trace) or `final_state` (no trace, or one that
    /// records no allocation: the final blocks, by their frames alone).
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["trace", "final_state"])))]
    pub basis: &'static str,
    /// With [`CategoryOptions::per_stack`]: live bytes and allocations per (stack, category),
    /// by stack then category (not part of the JSON report).
    #[serde(skip)]
    pub per_stack: Vec<(StackId, String, u64, u64)>,
    /// Whether the live memory could be told by kind: `found` (at most half of it is
    /// `unknown`), `none` (nothing is alive) or `cannot_judge` (more than half matches no
    /// rule: why, and what to record or give).
    pub judgement: Judgement,
}

/// Live memory by kind (parameters, optimizer state, gradients, activations, temporaries, ...)
/// per device with a trace.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CategoriesReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// The moment asked for.
    pub moment: String,
    /// Per device with a trace, or with live blocks in its final state.
    pub devices: Vec<DeviceCategories>,
    /// What the snapshot lacks for this analysis, with stable codes (see [`absence`]).
    pub absent: Vec<Absence>,
    /// Over every device: `cannot_judge` when some device cannot be judged (or none has
    /// anything to categorise), `none` when nothing is alive anywhere, else `found`.
    pub judgement: Judgement,
}

/// Per category: bytes, count, and bytes per (rule, confidence).
type Tally<'a> = (u64, u64, BTreeMap<(&'a str, &'static str), u64>);

/// Runs the analysis on every replayed device, and on the final blocks of every device
/// without a trace (see the module documentation).
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &CategoryOptions,
) -> Result<CategoriesReport, String> {
    let mut devices = Vec::new();
    let mut absent = Vec::new();
    for dev in &snap.devices {
        let trace = snap.device_trace(dev);
        let Some(r) = replay::replay_or_final_state(snap, replays, dev) else {
            continue;
        };
        let r: &DeviceReplay = &r;
        // A trace without an allocation dates nothing alive: only the final blocks remain.
        let final_state = !trace.iter().any(|e| e.action == Action::Alloc);
        if final_state && !final_state_absence(snap, dev, opts, &mut absent) {
            continue;
        }
        let at = if final_state {
            r.events as i64 - 1
        } else {
            replay::resolve_in(snap, opts.at, r, trace)?
        };
        let st = if final_state {
            DeviceSteps::none(dev.id)
        } else {
            steps::find(snap, r)
        };
        let mut ctx = rules::Ctx::new(snap, trace, &st, &opts.rules, &r.allocations);
        if final_state {
            ctx = ctx.final_state();
        }
        let (rows, live, per_stack) = tally(&ctx, r, at, opts.per_stack);
        let categories = category_rows(rows, live);
        let unknown = categories
            .iter()
            .filter(|c| c.category == "unknown")
            .map(|c| c.bytes)
            .sum();
        let judgement = judge::device(live, unknown, snap.has_frames());
        let notes = device_notes(snap, dev.id, &st, final_state, live, &mut absent);
        devices.push(DeviceCategories {
            device: r.device,
            at: replay::moment(trace, at),
            live_requested_bytes: live,
            categories,
            notes,
            basis: if final_state { "final_state" } else { "trace" },
            per_stack: per_stack
                .into_iter()
                .map(|((stack, cat), (bytes, count))| {
                    (StackId(stack), cat.to_string(), bytes, count)
                })
                .collect(),
            judgement,
        });
    }
    Ok(CategoriesReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        moment: opts.at.to_string(),
        judgement: judge::overall(&devices),
        devices,
        absent,
    })
}

/// Says in `absent` why a device is categorised by its final blocks alone; false (the device
/// is left out) when the moment asked for cannot be placed without a trace.
fn final_state_absence(
    snap: &Snapshot,
    dev: &crate::model::Device,
    opts: &CategoryOptions,
    absent: &mut Vec<Absence>,
) -> bool {
    let trace = snap.device_trace(dev);
    let what = if trace.is_empty() {
        format!(
            "device {} has no trace (allocation history was not recorded)",
            dev.id
        )
    } else {
        format!(
            "the trace of device {} records no allocation ({})",
            dev.id,
            if trace.len() == 1 {
                "1 entry".to_string()
            } else {
                format!("{} entries", trace.len())
            }
        )
    };
    let code = if trace.is_empty() {
        absence::NO_TRACE
    } else {
        absence::NO_ACTIVITY
    };
    if !matches!(opts.at, MomentSpec::Peak | MomentSpec::End) {
        absent.push(Absence::new(
            absence::NO_MOMENT,
            Some(dev.id),
            format!(
                "{what}: the moment {} cannot be placed; only its final state can be categorised (--at end)",
                opts.at
            ),
        ));
        return false;
    }
    let peak = if opts.at == MomentSpec::Peak {
        "; the peak was not recorded, so these are the categories at the end"
    } else {
        ""
    };
    absent.push(Absence::new(
        code,
        Some(dev.id),
        format!(
            "{what}: its final blocks are categorised by their frames alone (no step phases or lifetimes{}){peak}",
            if snap.has_frames() {
                "; a block without frames predates the recording and is taken as a parameter"
            } else {
                ""
            }
        ),
    ));
    true
}

/// Per (stack, category): live bytes and allocations.
type StackTally<'a> = BTreeMap<(u32, &'a str), (u64, u64)>;

/// The allocations of `r` live after event `at`, classified: per category, the live bytes,
/// and per (stack, category) when `per_stack`.
fn tally<'c>(
    ctx: &'c rules::Ctx,
    r: &DeviceReplay,
    at: i64,
    per_stack_on: bool,
) -> (BTreeMap<&'c str, Tally<'c>>, u64, StackTally<'c>) {
    let mut rows: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut live = 0;
    let mut per_stack: StackTally = BTreeMap::new();
    for a in r.live_allocations(at) {
        let (cat, rule, conf) = ctx.classify(a);
        live += a.size;
        if per_stack_on {
            let t = per_stack.entry((a.stack.0, cat)).or_default();
            t.0 += a.size;
            t.1 += 1;
        }
        let e = rows.entry(cat).or_default();
        e.0 += a.size;
        e.1 += 1;
        *e.2.entry((rule, conf)).or_default() += a.size;
    }
    (rows, live, per_stack)
}

/// The rows of the tallied categories, their rules by bytes, in [`CATEGORIES`] order then
/// user categories by name.
fn category_rows(rows: BTreeMap<&str, Tally>, live: u64) -> Vec<CategoryRow> {
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
                    rule: rule.to_string(),
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
                category: category.to_string(),
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
    categories
}

/// A device's remarks: its absences so far, missing steps, missing frames (which also goes to
/// `absent`).
fn device_notes(
    snap: &Snapshot,
    device: u32,
    st: &DeviceSteps,
    final_state: bool,
    live: u64,
    absent: &mut Vec<Absence>,
) -> Vec<String> {
    let mut notes: Vec<String> = absent
        .iter()
        .filter(|a: &&Absence| a.device == Some(device))
        .map(|a| a.message.clone())
        .collect();
    if st.steps.is_empty() && !final_state {
        notes.push("no steps found: phase rules (forward/backward, kept past the step) fall back to frames only".into());
    }
    if !snap.has_frames() {
        let msg = if final_state {
            format!(
                "no stack frames recorded: nothing tells the final blocks apart, so all {} is unknown; only the total is known",
                crate::units::iec(live)
            )
        } else {
            "no stack frames recorded: only lifetime rules apply, most memory is unknown".into()
        };
        absent.push(Absence::new(absence::NO_FRAMES, Some(device), msg.clone()));
        notes.push(msg);
    }
    notes
}
