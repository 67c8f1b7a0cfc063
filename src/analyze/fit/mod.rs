//! `memlens fit`: what a device's memory is made of at a moment (the first OOM, else the
//! peak), the fixes that shrink it, cheapest first, each with the bytes it saves there, and —
//! with a capacity — the shortest list of them, in cost order, after which the moment fits
//! with a margin.
//!
//! [`anatomy`] measures the parts (from the category rules) and the setup; [`fixes`] holds
//! the catalogue, each fix a rewrite of the parts. A fix's saving is the demand (live bytes +
//! the allocator's share + an OOM's pending request) before minus after it, at the same
//! moment; the allocator's share stays as it is under every fix but the allocator setting's.

pub mod anatomy;
pub mod attention;
pub mod fixes;
mod judge;

use crate::analyze::categories::rules::Ctx;
use crate::analyze::frag::{self, FragOptions};
use crate::analyze::leaks::{self, LeaksOptions};
use crate::analyze::oom::{self, OomOptions, SnapshotOom};
use crate::analyze::phase::{self, MomentPhase};
use crate::analyze::whatif;
use crate::model::{Action, Snapshot};
use crate::replay::steps::{self, DeviceSteps};
use crate::replay::{self, DeviceReplay, Moment, MomentSpec};
use crate::vocab::absence::{self, Absence, Judgement};
use anatomy::Anatomy;
use fixes::{Fix, COSTS};
use serde::Serialize;

/// Share of the capacity kept free by a plan.
pub const MARGIN: f64 = 0.05;

/// A fix saving less than this share of the demand (and less than an OOM's shortfall) is
/// immaterial: listed apart, never among the fixes (reading.md §5: a fix must matter).
pub const MATERIAL: f64 = 0.01;

/// A material fix saving less than this share of the demand ranks after every fix that saves
/// more: it is worth doing, but it is not the first change (a setting that takes back 1% of
/// a peak held by optimizer state does not lead the list).
pub const MINOR: f64 = 0.02;

/// The least saving that counts as material for `demand`, or that closes `shortfall`.
fn material(demand: u64, shortfall: Option<u64>) -> u64 {
    let share = ((demand as f64 * MATERIAL) as u64).max(1);
    shortfall.filter(|&s| s > 0).map_or(share, |s| share.min(s))
}

/// The fixes worth offering, ranked, and the immaterial ones apart (see
/// [`DeviceFit::fixes`]): indices into `measured`.
fn rank(measured: &[Fix], demand: u64, shortfall: Option<u64>) -> (Vec<usize>, Vec<usize>) {
    let least = material(demand, shortfall);
    let minor = |f: &Fix| !f.for_verdict && (f.saves_bytes as f64) < demand as f64 * MINOR;
    let (mut material, mut small): (Vec<usize>, Vec<usize>) = (0..measured.len())
        .filter(|&i| measured[i].saves_bytes > 0 || measured[i].for_verdict)
        .partition(|&i| measured[i].for_verdict || measured[i].saves_bytes >= least);
    material.sort_by(|&i, &j| {
        let (a, b) = (&measured[i], &measured[j]);
        let class = |f: &Fix| COSTS.iter().position(|c| *c == f.cost);
        let unsure = |f: &Fix| f.confidence == "low";
        minor(a)
            .cmp(&minor(b))
            .then(class(a).cmp(&class(b)))
            .then(b.for_verdict.cmp(&a.for_verdict))
            .then(unsure(a).cmp(&unsure(b)))
            .then(b.saves_bytes.cmp(&a.saves_bytes))
            .then(a.id.cmp(b.id))
    });
    small.sort_by(|&i, &j| {
        (measured[j].saves_bytes, measured[i].id).cmp(&(measured[i].saves_bytes, measured[j].id))
    });
    (material, small)
}

/// Accumulation factors a plan tries, smallest first.
const ACCUMULATION: [u64; 3] = [2, 4, 8];

/// Options of `fit`.
#[derive(Clone, Debug, Default)]
pub struct FitOptions {
    /// The moment; `None`: each device's first OOM, else its peak.
    pub at: Option<MomentSpec>,
    /// Capacity given by the user (`--capacity`, `--gpu`).
    pub capacity_bytes: Option<u64>,
    /// Where it came from.
    pub capacity_source: Option<String>,
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PlanStep {
    /// The fix's `id`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = crate::vocab::advice::RECOMMENDATION_IDS)))]
    pub id: &'static str,
    /// What to change (with the accumulation factor the plan chose).
    pub action: String,
    /// Its cost class.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["free", "slower", "changes_results"])))]
    pub cost: &'static str,
    /// The demand after this step and every one before it.
    pub peak_after_bytes: u64,
}

/// The shortest list of fixes, in cost order, after which the moment fits.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Plan {
    /// The capacity a process may fill.
    pub capacity_bytes: u64,
    /// Where it came from (`--capacity 80GiB`, `--gpu H100`, `reserved + free at the OOM`).
    pub capacity_source: String,
    /// Kept free: [`MARGIN`] (5%) of the capacity.
    pub margin_bytes: u64,
    /// The demand the plan must reach: capacity − margin.
    pub target_bytes: u64,
    /// True when the moment fits without any fix.
    pub fits_now: bool,
    /// The fixes, in order (empty when it fits now).
    pub steps: Vec<PlanStep>,
    /// True when the demand after the steps is at most the target.
    pub fits: bool,
    /// When no list fits: how far above the target the demand stays with every fix.
    pub short_by_bytes: Option<u64>,
}

/// One device.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceFit {
    /// Device index.
    pub device: u32,
    /// `oom`, `peak`, or the moment asked for.
    pub moment: String,
    /// Where it is in the trace.
    pub at: Moment,
    /// What the memory is made of there.
    pub anatomy: Anatomy,
    /// Live + the allocator's share + an OOM's pending request.
    pub demand_bytes: u64,
    /// The one ranked list of what to change at this moment (the same ids, in the same order,
    /// as `memlens oom`'s recommendations at this OOM and the page's): the fixes whose premise
    /// the file shows and that matter — saving at least [`MATERIAL`] (1%) of the demand or an
    /// OOM's shortfall, or answering the OOM's verdict (`for_verdict`) — by cost class (free,
    /// slower, changes results; a fix saving under [`MINOR`] (2%) after all the others), within a class the verdict's own first, the conditional ones
    /// (confidence `low`) last, then by savings.
    pub fixes: Vec<Fix>,
    /// Fixes whose premise holds but that save less than [`MATERIAL`] of the demand and less
    /// than the shortfall: listed apart, by savings.
    pub immaterial_fixes: Vec<Fix>,
    /// The phase of the moment (`crate::analyze::phase`).
    pub moment_phase: MomentPhase,
    /// At an OOM: how much more memory its request needed (`memlens oom`'s shortfall); a fix
    /// that saves this much matters whatever its share.
    pub shortfall_bytes: Option<u64>,
    /// With a capacity: the plan; `null` without one.
    pub plan: Option<Plan>,
    /// Whether the moment fits the device: `found` (a shortage: the demand exceeds the
    /// capacity less its margin), `none` (it fits) or `cannot_judge` (no capacity known: why,
    /// and what to record or give).
    pub capacity: Judgement,
    /// Remarks (the trace's flags in words, what was assumed).
    pub notes: Vec<String>,
}

/// What each device's memory is made of at its first OOM (else its peak, or --at), the fixes
/// that shrink it cheapest first with the bytes each saves, and with a capacity the shortest
/// list of them after which it fits.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FitReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Per device with live memory.
    pub devices: Vec<DeviceFit>,
    /// What the snapshot lacks for this analysis.
    pub absent: Vec<Absence>,
}

/// The usable capacity of a device: the user's (but never more than what its first OOM saw
/// free plus reserved, unless the OOM implies a per-process limit), else the limit its first
/// OOM implies, else what it saw (reserved + free: what this process could hold), else the
/// capacity `oom` inferred.
fn capacity_of(device: u32, opts: &FitOptions, ooms: &[SnapshotOom]) -> Option<(u64, String)> {
    let given = opts.capacity_bytes.zip(opts.capacity_source.clone());
    let Some(first) = ooms.iter().find(|o| o.explained.device == Some(device)) else {
        return given;
    };
    // What the process could hold at its OOM bounds any capacity given: the rest was held
    // outside it (another process, the context).
    let seen = first
        .explained
        .reserved_bytes
        .zip(first.explained.device_free_bytes)
        .map(|(r, f)| r + f);
    if let Some((c, s)) = given {
        return Some(match seen {
            Some(seen) if seen < c && first.implied_limit.is_none() => (
                seen,
                format!("reserved + device free at the OOM, less than {s}: the rest was held outside this process"),
            ),
            _ => (c, s),
        });
    }
    if let Some(l) = &first.implied_limit {
        return Some((
            l.at_least_bytes,
            "the per-process limit the OOM implies (at least)".into(),
        ));
    }
    if let Some(seen) = seen {
        return Some((seen, "reserved + device free at the OOM".into()));
    }
    first
        .capacity_inferred
        .as_ref()
        .map(|c| (c.capacity_bytes, "inferred from the OOM".into()))
}

fn measure_fix(c: &fixes::Candidate, a: &Anatomy) -> Fix {
    let after = (c.rewrite)(&a.parts, a, 2).demand();
    let before = a.parts.demand();
    Fix {
        id: c.id,
        action: c.action.clone(),
        cost: c.cost,
        confidence: c.confidence,
        saves_bytes: before.saturating_sub(after),
        peak_after_bytes: after,
        evidence: c.evidence.clone(),
        premise: c.premise.clone(),
        for_verdict: c.for_verdict,
    }
}

/// The plan: fixes in list order, each applied on top of the
/// ones before, until the demand reaches the target; accumulation takes the smallest factor
/// that reaches it (else the largest).
fn plan(
    a: &Anatomy,
    cands: &[fixes::Candidate],
    order: &[usize],
    capacity: u64,
    source: String,
) -> Plan {
    let margin = (capacity as f64 * MARGIN) as u64;
    let target = capacity.saturating_sub(margin);
    let mut parts = a.parts.clone();
    let fits_now = parts.demand() <= target;
    let mut steps = Vec::new();
    if !fits_now {
        for &i in order {
            let c = &cands[i];
            let (next, action) = if c.id == "gradient_accumulation" || c.id == "micro_batch" {
                let mut chosen = None;
                for k in ACCUMULATION {
                    let q = (c.rewrite)(&parts, a, k);
                    let fits = q.demand() <= target;
                    chosen = Some((q, k));
                    if fits {
                        break;
                    }
                }
                let (q, k) = chosen.expect("factors are non-empty");
                let action = if c.id == "micro_batch" {
                    format!("run the batch in {k} chunks and concatenate the results")
                } else {
                    format!(
                        "divide the micro-batch by {k} and accumulate gradients over {k} micro-batches (same effective batch)"
                    )
                };
                (q, action)
            } else {
                ((c.rewrite)(&parts, a, 2), c.action.clone())
            };
            if next.demand() >= parts.demand() {
                continue;
            }
            parts = next;
            steps.push(PlanStep {
                id: c.id,
                action,
                cost: c.cost,
                peak_after_bytes: parts.demand(),
            });
            if parts.demand() <= target {
                break;
            }
        }
    }
    let fits = parts.demand() <= target;
    Plan {
        capacity_bytes: capacity,
        capacity_source: source,
        margin_bytes: margin,
        target_bytes: target,
        fits_now,
        steps,
        fits,
        short_by_bytes: (!fits).then(|| parts.demand() - target),
    }
}

/// Why the moment is read as a training job's, from the same parts and flags the setup line
/// reads (reading.md §4: one set of facts per part).
fn training_evidence(a: &Anatomy) -> &'static str {
    let p = &a.parts;
    match (p.gradients_bytes > 0, p.optimizer_state_bytes > 0) {
        (true, true) => "gradients and optimizer state are alive",
        (true, false) => "gradients are alive",
        (false, true) => "optimizer state is alive",
        (false, false) if a.flags.called_from_training_code => {
            "its forward passes are called from training code, though no gradients or optimizer state are alive yet"
        }
        (false, false) => "a backward pass elsewhere in the trace",
    }
}

fn notes_of(a: &Anatomy) -> Vec<String> {
    let f = &a.flags;
    let mut notes = Vec::new();
    if f.gradients_alive_in_forward {
        notes.push("gradients are alive during the forward pass: they are left from the previous backward (zero_grad runs after the forward, or with set_to_none=False)".into());
    }
    if f.evaluation_with_autograd {
        notes.push("the trace runs no backward but keeps activations: evaluation or generation ran with autograd on".into());
    }
    if f.forward_without_backward {
        notes.push(format!(
            "the trace records a training job's forward pass without its backward ({}): the moment is read as that step's forward",
            training_evidence(a)
        ));
    }
    if f.autocast {
        notes.push("the forward runs under autocast: activations are already 16-bit, and autocast keeps a 16-bit copy of each weight until the autocast region ends".into());
    }
    if f.optimizer_state_rebuilt {
        notes.push("the optimizer frees and re-allocates its state each step (out of place): both copies are alive during its call; an in-place update (foreach/fused kernels, `mul_`/`add_`) holds one".into());
    }
    notes.push("fixes are estimated from this moment's parts; the allocator's share is assumed unchanged but under the allocator setting".into());
    notes
}

/// Runs the analysis on every device with a trace, and on the final blocks of a device
/// without one (its end).
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &FitOptions,
) -> Result<FitReport, String> {
    let ooms = oom::find(
        snap,
        replays,
        &OomOptions {
            capacity_bytes: opts.capacity_bytes,
            capacity_source: opts.capacity_source.clone(),
            ..OomOptions::default()
        },
    )?
    .ooms;
    run_with(snap, replays, opts, &ooms, &|_| true)
}

/// [`run`] with the OOMs already found ([`oom::find`]), on the devices `wanted` accepts.
pub fn run_with(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &FitOptions,
    ooms: &[SnapshotOom],
    wanted: &dyn Fn(u32) -> bool,
) -> Result<FitReport, String> {
    let found = leaks::run(snap, replays, &LeaksOptions::default());
    let expandable_on = oom::expandable_setting(snap) == Some(true);
    let mut devices = Vec::new();
    let mut absent = Vec::new();
    for dev in snap.devices.iter().filter(|d| wanted(d.id)) {
        let trace = snap.device_trace(dev);
        let Some(r) = replay::replay_or_final_state(snap, replays, dev) else {
            continue;
        };
        let r: &DeviceReplay = &r;
        let final_state = !trace.iter().any(|e| e.action == Action::Alloc);
        let has_oom = trace.iter().any(|e| e.action == Action::Oom);
        let spec = opts.at.unwrap_or(if has_oom {
            MomentSpec::Oom(1)
        } else {
            MomentSpec::Peak
        });
        let at = if final_state {
            absent.push(Absence::new(
                if trace.is_empty() {
                    absence::NO_TRACE
                } else {
                    absence::NO_ACTIVITY
                },
                Some(dev.id),
                format!(
                    "device {} has no allocation in its trace: its final blocks are measured by their frames alone (no phases, no peak)",
                    dev.id
                ),
            ));
            r.events as i64 - 1
        } else {
            replay::resolve_in(snap, spec, r, trace)?
        };
        let st = if final_state {
            DeviceSteps::none(dev.id)
        } else {
            steps::find(snap, r)
        };
        let mut ctx = Ctx::new(snap, trace, &st, &[], &r.allocations);
        if final_state {
            ctx = ctx.final_state();
        }
        let pending = (at >= 0)
            .then(|| &trace[at as usize])
            .filter(|e| e.action == Action::Oom)
            .map_or(0, |e| e.size);
        let releasable = frag::run(
            snap,
            std::slice::from_ref(r),
            &FragOptions {
                at: MomentSpec::Index(at),
                ..FragOptions::default()
            },
        )
        .ok()
        .and_then(|f| f.devices.into_iter().find(|d| d.device == dev.id))
        .map_or(0, |d| d.total.releasable_bytes);
        let a = anatomy::measure(snap, r, &ctx, at, pending, releasable);
        // The OOM this moment is, when it is one: its verdict's own fixes join the list.
        let oom_here = ooms.iter().find(|o| {
            o.explained.device == Some(dev.id) && o.explained.event_index == Some(at as u64)
        });
        let retained: Vec<&leaks::Finding> = found
            .findings
            .iter()
            .filter(|f| f.device == dev.id && f.kind == "retained_graph")
            .collect();
        let retained_bytes: u64 = retained.iter().map(|f| f.live_bytes_at_end).sum();
        let retained_site = retained.first().map(|f| f.site.as_str());
        // The allocator's model, replayed under the file's settings and with expandable
        // segments, answers for the allocator setting (just before a failed request: the
        // replay, without a capacity, would serve it).
        let probe = if pending > 0 { at - 1 } else { at };
        let replayed = if expandable_on || final_state {
            None
        } else {
            whatif::unreleasable_at(snap, dev.id, probe, "expandable_segments:True")
                .map_err(|e| e.to_string())?
                .map(|(rec, exp)| {
                    let live = r.live_allocations(probe).map(|x| x.size).sum::<u64>();
                    fixes::ExpandableReplay {
                        recorded_share_bytes: rec.saturating_sub(live),
                        expandable_share_bytes: exp.saturating_sub(live),
                    }
                })
        };
        let verdict = oom_here.map(|o| fixes::OomVerdict {
            verdict: o.explained.verdict.as_str(),
            recommendations: o.explained.recommendations.clone(),
        });
        let cands = fixes::candidates(
            &a,
            expandable_on,
            replayed,
            retained_site.map(|s| (retained_bytes.min(a.parts.live()), s)),
            verdict.as_ref(),
        );
        let measured: Vec<Fix> = cands.iter().map(|c| measure_fix(c, &a)).collect();
        let shortfall = oom_here.and_then(|o| o.explained.shortfall_bytes);
        let (order, immaterial) = rank(&measured, a.parts.demand(), shortfall);
        let plan_order: Vec<usize> = order.iter().chain(&immaterial).copied().collect();
        let plan =
            capacity_of(dev.id, opts, ooms).map(|(c, s)| plan(&a, &cands, &plan_order, c, s));
        let moment = if final_state {
            "end".to_string()
        } else {
            match spec {
                MomentSpec::Oom(1) => "oom".into(),
                s => s.to_string(),
            }
        };
        devices.push(DeviceFit {
            device: dev.id,
            moment,
            at: replay::moment(trace, at),
            demand_bytes: a.parts.demand(),
            fixes: order.iter().map(|&i| measured[i].clone()).collect(),
            immaterial_fixes: immaterial.iter().map(|&i| measured[i].clone()).collect(),
            moment_phase: phase::with_ctx(&ctx, &st, at),
            shortfall_bytes: shortfall,
            capacity: judge::capacity(a.parts.demand(), plan.as_ref()),
            plan,
            notes: notes_of(&a),
            anatomy: a,
        });
    }
    Ok(FitReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        devices,
        absent,
    })
}
