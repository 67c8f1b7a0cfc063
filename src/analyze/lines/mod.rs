//! `memlens lines`: memory per user source line, every user file at once.
//!
//! Each counted allocation (live at a moment, allocated over the trace, or bytes × lifetime)
//! is charged to the user lines of its stack ([`stack`]: user frames, FX original traces in
//! place of generated code, forward frames of a backward-pass stack):
//!
//! - `self_bytes` of a line: the allocations whose innermost user line it is;
//! - `total_bytes`: the allocations whose stack holds it anywhere, each once however often the
//!   line appears in the stack (a recursion), so a training loop's line holds nearly every
//!   framed byte and a model's lines hold their layers'.
//!
//! Memory whose stack has no user line (no frames recorded, C++ or library frames only,
//! memory alive before the trace without a stack) is charged to no line: it is counted apart,
//! by reason ([`Unattributed`]), so that the self bytes of all lines add up to exactly the
//! framed bytes, and framed + unattributed to everything the cost counts.

mod source;
pub mod stack;

pub use source::{annotate, find, Reader, SourceFile, SourceLine, Sources};

use crate::analyze::pretrace::Kinds;
use crate::analyze::top::{self, Cost, Selection, TopOptions};
use crate::model::{Snapshot, StackId, Warning};
use crate::replay::{self, DeviceReplay, Moment, MomentSpec};
use crate::vocab::absence::{Judgement, RECORD_STACKS};
use rustc_hash::FxHashMap;
use serde::Serialize;
use stack::LineKey;
pub use stack::StackLines;

/// What `lines` counts per allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum LineCost {
    /// Requested bytes live at the moment (`--at`, default each device's peak).
    #[default]
    Live,
    /// Requested bytes of every allocation the trace made, freed or not (needs a trace).
    Allocated,
    /// Requested bytes × microseconds alive within the trace (`byte_us`; needs `time_us`):
    /// from the allocation (the first event for memory older than the trace) to its free, or
    /// to the last event for memory still live at the end.
    Lifetime,
}

impl LineCost {
    /// `top`'s cost that selects the same allocations with the same figures.
    fn top_cost(self) -> Cost {
        match self {
            LineCost::Live => Cost::Live,
            LineCost::Allocated => Cost::Allocated,
            LineCost::Lifetime => Cost::Lifetime,
        }
    }
}

/// Options of `lines`.
#[derive(Clone, Debug)]
pub struct LinesOptions {
    /// The moment of the live cost.
    pub at: MomentSpec,
    /// The cost.
    pub cost: LineCost,
    /// Lines text shows per device (`--top N`); JSON has them all.
    pub top: usize,
}

impl Default for LinesOptions {
    fn default() -> Self {
        LinesOptions {
            at: MomentSpec::Peak,
            cost: LineCost::Live,
            top: 20,
        }
    }
}

/// One user source line.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LineRow {
    /// The file as recorded.
    pub file: String,
    /// The line number (-1 when the file recorded none).
    pub line: i64,
    /// The function the line was recorded in (of several names for one line, the first in
    /// byte order).
    pub function: String,
    /// The cost of the allocations whose innermost user line this is.
    pub self_bytes: u64,
    /// The cost of the allocations whose stack holds this line (each once).
    pub total_bytes: u64,
    /// Allocations counted in `self_bytes`.
    pub self_allocations: u64,
    /// Allocations counted in `total_bytes`.
    pub allocations: u64,
}

/// Memory charged to no line, for one reason.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Unattributed {
    /// `no_frames` (no stack was recorded for the allocation), `before_trace` (alive before
    /// the trace began, with no stack recorded) or `no_user_frame` (frames were recorded but
    /// none of the user's: C++, torch or installed packages only).
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["no_frames", "before_trace", "no_user_frame"])))]
    pub reason: &'static str,
    /// The reason in words.
    pub why: String,
    /// Its cost.
    pub bytes: u64,
    /// Its allocations.
    pub allocations: u64,
}

/// The lines of one device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceLines {
    /// Device index.
    pub device: u32,
    /// `trace`, or `final_state` for a device without a trace (its final blocks).
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["trace", "final_state"])))]
    pub basis: &'static str,
    /// For the live cost of a traced device: the moment counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<Moment>,
    /// Unit of every cost: `bytes`, or `byte_us` for the lifetime cost.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["bytes", "byte_us"])))]
    pub unit: &'static str,
    /// Whether lines could be told (`found`, `none`: nothing counted has a user line,
    /// `cannot_judge`: the data cannot support the cost, with why and what to record).
    pub judgement: Judgement,
    /// Everything the cost counts: `framed_bytes` + `unattributed_bytes` (the live cost: the
    /// live requested bytes at the moment).
    pub counted_bytes: u64,
    /// Allocations counted.
    pub counted_allocations: u64,
    /// The cost of allocations with a user line: Σ `self_bytes` over `lines`.
    pub framed_bytes: u64,
    /// The cost of allocations with none: Σ `unattributed[].bytes`.
    pub unattributed_bytes: u64,
    /// The unattributed cost by reason, biggest first.
    pub unattributed: Vec<Unattributed>,
    /// Every line, by total, then self (biggest first), then file and line.
    pub lines: Vec<LineRow>,
    /// The hottest files' source around their hot lines, where it could be read
    /// (`--source-root`, or the recorded paths as they are); absent when none was.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub sources: Vec<SourceFile>,
    /// What the data cannot support, in words.
    pub notes: Vec<String>,
    /// `cost_overflow` when a lifetime cost passed 2^64 − 1 and was saturated there.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub warnings: Vec<Warning>,
}

/// Memory per user source line, per device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LinesReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// The cost counted.
    pub cost: LineCost,
    /// The moment asked for, as written (`peak`, `end`, `oom`, ...); the live cost only.
    pub moment: String,
    /// Devices with a trace, then devices without one.
    pub devices: Vec<DeviceLines>,
    /// Lines text shows per device.
    #[serde(skip)]
    pub top: usize,
}

/// Runs `lines` over every device; `replays` come from [`replay::replay`].
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &LinesOptions,
) -> Result<LinesReport, String> {
    let lines = StackLines::new(snap);
    let mut devices = Vec::new();
    for r in replays {
        let dev = snap.device(r.device).expect("replayed device exists");
        devices.push(traced(snap, r, snap.device_trace(dev), opts, &lines)?);
    }
    for dev in snap.devices.iter().filter(|d| d.trace.is_empty()) {
        devices.push(final_state(snap, dev, opts, &lines));
    }
    Ok(LinesReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        cost: opts.cost,
        moment: opts.at.to_string(),
        devices,
        top: opts.top,
    })
}

/// What to record for the lifetime cost.
const RECORD_TIMES: &str = "the history with a PyTorch that writes `time_us` on every entry (2.1 or later): `torch.cuda.memory._record_memory_history()`";

/// What to record for the costs that need a trace.
const RECORD_TRACE: &str = "the allocation history: `torch.cuda.memory._record_memory_history(max_entries=100000)` before the work, then `torch.cuda.memory._dump_snapshot(...)`";

/// One traced device.
fn traced(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[crate::model::TraceEvent],
    opts: &LinesOptions,
    lines: &StackLines,
) -> Result<DeviceLines, String> {
    if opts.cost == LineCost::Lifetime && !trace.iter().any(|e| e.time().is_some()) {
        return Ok(cannot_judge(
            r.device,
            "trace",
            "byte_us",
            format!("device {}: the trace records no time_us, so no allocation's lifetime in microseconds is known", r.device),
            RECORD_TIMES,
        ));
    }
    let topts = TopOptions {
        at: opts.at,
        cost: opts.cost.top_cost(),
        ..TopOptions::default()
    };
    // No pre-trace verdicts: a line needs a stack, which such memory lacks.
    let sel = top::select_with(
        snap,
        r,
        trace,
        &topts,
        std::sync::Arc::new(Kinds::default()),
    )?;
    Ok(of_selection(snap, r, trace, &sel, opts.cost, lines))
}

/// The lines of the allocations `sel` counts on a traced device, `sel` made by `top`'s
/// selection with `cost`'s [`Cost`] (its pre-trace verdicts play no part): a caller that has
/// selected a moment's live set already (the page) reuses it.
pub fn of_selection(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[crate::model::TraceEvent],
    sel: &Selection,
    cost: LineCost,
    lines: &StackLines,
) -> DeviceLines {
    let counted = sel.items.iter().map(|it| {
        let before = it
            .alloc
            .is_some_and(|i| r.allocations[i as usize].start < 0);
        (it.stack, it.bytes, before)
    });
    let mut d = tally(snap, counted, lines);
    d.device = r.device;
    d.unit = if cost == LineCost::Lifetime {
        "byte_us"
    } else {
        "bytes"
    };
    if cost == LineCost::Live {
        d.at = Some(replay::moment(trace, sel.at));
    }
    judge(snap, &mut d);
    d
}

/// A device without a trace: its final blocks, for the live cost.
fn final_state(
    snap: &Snapshot,
    dev: &crate::model::Device,
    opts: &LinesOptions,
    lines: &StackLines,
) -> DeviceLines {
    if opts.cost == LineCost::Live {
        return final_state_live(snap, dev, lines);
    }
    let unit = if opts.cost == LineCost::Lifetime {
        "byte_us"
    } else {
        "bytes"
    };
    cannot_judge(
        dev.id,
        "final_state",
        unit,
        format!("device {} has no trace: only its final blocks are known, not what was allocated or for how long", dev.id),
        RECORD_TRACE,
    )
}

/// The live lines of a device without a trace: its final blocks.
pub fn final_state_live(
    snap: &Snapshot,
    dev: &crate::model::Device,
    lines: &StackLines,
) -> DeviceLines {
    let blocks = snap
        .live_blocks(dev)
        .map(|b| (b.stack, b.requested_size, false));
    let mut d = tally(snap, blocks, lines);
    d.device = dev.id;
    d.basis = "final_state";
    d.notes.push(format!(
        "device {} has no trace: its final state is counted (the blocks live when the snapshot was taken), whatever --at says",
        dev.id
    ));
    judge(snap, &mut d);
    d
}

/// A device whose data cannot support the cost.
fn cannot_judge(
    device: u32,
    basis: &'static str,
    unit: &'static str,
    why: String,
    record: &str,
) -> DeviceLines {
    let mut d = tally_empty();
    d.device = device;
    d.basis = basis;
    d.unit = unit;
    d.judgement = Judgement::cannot_judge(why, record.to_string());
    d
}

/// The judgement of a tallied device.
fn judge(snap: &Snapshot, d: &mut DeviceLines) {
    d.judgement = if !snap.has_frames() {
        Judgement::cannot_judge(
            "no stack frames were recorded: no allocation can be traced to a source line".into(),
            RECORD_STACKS.to_string(),
        )
    } else if d.framed_bytes > 0 || !d.lines.is_empty() {
        Judgement::found(format!(
            "{} user {} hold the framed memory",
            d.lines.len(),
            if d.lines.len() == 1 { "line" } else { "lines" }
        ))
    } else if d.counted_allocations == 0 {
        Judgement::none("nothing is counted".into())
    } else {
        Judgement::none("none of the memory counted has a user frame".into())
    };
}

/// Per line: costs, counts and its function.
#[derive(Default)]
struct Acc {
    self_bytes: u64,
    total_bytes: u64,
    self_allocations: u64,
    allocations: u64,
    function: Option<crate::model::StrId>,
}

/// The device's lines from its counted allocations: (stack, cost, alive before the trace).
/// Allocations are grouped by stack first, so each distinct stack's lines are walked once.
fn tally(
    snap: &Snapshot,
    counted: impl Iterator<Item = (StackId, u64, bool)>,
    lines: &StackLines,
) -> DeviceLines {
    let sum = Saturating::default();
    let mut per_stack: FxHashMap<(StackId, bool), (u64, u64)> = FxHashMap::default();
    for (stack, bytes, before) in counted {
        let e = per_stack.entry((stack, before)).or_default();
        e.0 = sum.add(e.0, bytes);
        e.1 += 1;
    }
    let mut accs: FxHashMap<LineKey, Acc> = FxHashMap::default();
    let mut unattributed: FxHashMap<&'static str, (u64, u64)> = FxHashMap::default();
    let mut d = tally_empty();
    for (&(stack, before), &(bytes, count)) in &per_stack {
        d.counted_bytes = sum.add(d.counted_bytes, bytes);
        d.counted_allocations += count;
        let of = lines.of(stack);
        if of.is_empty() {
            let reason = match (snap.stacks.get(stack).is_empty(), before) {
                (true, true) => "before_trace",
                (true, false) => "no_frames",
                (false, _) => "no_user_frame",
            };
            let e = unattributed.entry(reason).or_default();
            e.0 = sum.add(e.0, bytes);
            e.1 += count;
            continue;
        }
        d.framed_bytes = sum.add(d.framed_bytes, bytes);
        for (i, l) in of.iter().enumerate() {
            let a = accs.entry(l.key).or_default();
            if i == 0 {
                a.self_bytes = sum.add(a.self_bytes, bytes);
                a.self_allocations += count;
            }
            a.total_bytes = sum.add(a.total_bytes, bytes);
            a.allocations += count;
            let name = |s| snap.strings.get(s);
            if a.function.map_or(true, |f| name(l.function) < name(f)) {
                a.function = Some(l.function);
            }
        }
    }
    d.unattributed = unattributed_rows(unattributed);
    d.unattributed_bytes = d.unattributed.iter().fold(0, |t, u| sum.add(t, u.bytes));
    d.lines = rows(snap, accs);
    d.warnings = sum.warning();
    d
}

/// Sums that saturate at 2^64 − 1 (a lifetime cost on a long trace), remembering that one did.
#[derive(Default)]
struct Saturating {
    saturated: std::cell::Cell<bool>,
}

impl Saturating {
    fn add(&self, a: u64, b: u64) -> u64 {
        a.checked_add(b).unwrap_or_else(|| {
            self.saturated.set(true);
            u64::MAX
        })
    }

    fn warning(&self) -> Vec<Warning> {
        self.saturated
            .get()
            .then(|| Warning {
                code: "cost_overflow",
                device: None,
                message: "the cost passed 2^64 - 1 and is shown saturated at that value (a long trace; compare lines rather than totals)".into(),
            })
            .into_iter()
            .collect()
    }
}

/// The unattributed reasons, biggest first.
fn unattributed_rows(m: FxHashMap<&'static str, (u64, u64)>) -> Vec<Unattributed> {
    let mut out: Vec<Unattributed> = m
        .into_iter()
        .map(|(reason, (bytes, allocations))| Unattributed {
            reason,
            why: match reason {
                "before_trace" => "alive before the trace began, with no stack recorded",
                "no_frames" => "no stack recorded for the allocation",
                _ => "frames recorded, none of them the user's (C++, torch or installed packages only)",
            }
            .to_string(),
            bytes,
            allocations,
        })
        .collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.reason.cmp(b.reason)));
    out
}

/// The lines in the report's order: total, then self (biggest first), then file and line.
fn rows(snap: &Snapshot, accs: FxHashMap<LineKey, Acc>) -> Vec<LineRow> {
    let mut out: Vec<LineRow> = accs
        .into_iter()
        .map(|((file, line), a)| LineRow {
            file: snap.strings.get(file).to_string(),
            line,
            function: a
                .function
                .map_or(String::new(), |f| snap.strings.get(f).to_string()),
            self_bytes: a.self_bytes,
            total_bytes: a.total_bytes,
            self_allocations: a.self_allocations,
            allocations: a.allocations,
        })
        .collect();
    out.sort_by(|a, b| {
        b.total_bytes
            .cmp(&a.total_bytes)
            .then(b.self_bytes.cmp(&a.self_bytes))
            .then_with(|| a.file.cmp(&b.file))
            .then(a.line.cmp(&b.line))
    });
    out
}

/// A device with nothing counted yet.
fn tally_empty() -> DeviceLines {
    DeviceLines {
        device: 0,
        basis: "trace",
        at: None,
        unit: "bytes",
        judgement: Judgement::none(String::new()),
        counted_bytes: 0,
        counted_allocations: 0,
        framed_bytes: 0,
        unattributed_bytes: 0,
        unattributed: Vec::new(),
        lines: Vec::new(),
        sources: Vec::new(),
        notes: Vec::new(),
        warnings: Vec::new(),
    }
}
