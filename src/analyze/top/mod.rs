//! `memlens top`: live bytes (or another cost) per call site, biggest first.

mod meta;

use crate::analyze::pretrace::{Kinds, Pretrace};
use crate::model::{FrameId, Snapshot, StackId, TraceEvent, Warning};
use crate::replay::{self, DeviceReplay, Moment, MomentSpec, Window, WindowSpec, NEVER};
use crate::vocab::sites::{self, SiteOptions, NO_FRAMES};
pub use meta::AnnotationCount;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// How allocations are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The site ([`sites`]: the innermost user frame, else the autograd node or C++
    /// function) and its context.
    #[default]
    Site,
    /// The whole stack (interpreter noise removed).
    Stack,
    /// The site's file.
    File,
    /// The site's file and function.
    Function,
    /// The `user_metadata` of the allocation's `alloc` entry: the whole string, or with
    /// [`TopOptions::metadata_key`] the value of that key of its JSON (`--by metadata:KEY`).
    Metadata,
}

/// What is counted per group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Cost {
    /// Requested bytes live at the chosen moment.
    #[default]
    Live,
    /// Requested bytes allocated during the window (whether freed or not).
    Allocated,
    /// Bytes × lifetime inside the window (µs when the trace has times, else events).
    Lifetime,
    /// Requested bytes allocated in the window and never freed by the end of the trace.
    NeverFreed,
}

/// Options of `top`.
#[derive(Clone, Debug)]
pub struct TopOptions {
    /// The moment for `Cost::Live`.
    pub at: MomentSpec,
    /// The window every cost is limited to.
    pub window: WindowSpec,
    /// Grouping.
    pub by: GroupBy,
    /// Cost.
    pub cost: Cost,
    /// Rows per device; the rest is summed into `other`.
    pub limit: usize,
    /// Site attribution options.
    pub sites: SiteOptions,
    /// Attach the group's biggest stack to each row.
    pub full_stacks: bool,
    /// Flamegraphs only: keep the allocator's own C++ frames (`--allocator-frames`); without,
    /// they are folded into the frame that called them.
    pub allocator_frames: bool,
    /// With `full_stacks`: a stack longer than twice this keeps only its innermost and
    /// outermost this many frames, with one `… N frames not shown` between them (the page's
    /// rows: a 300,000-frame stack must not put 300,000 strings into it). `None`: whole.
    pub stack_ends: Option<usize>,
    /// With [`GroupBy::Metadata`]: the JSON key whose value groups (`--by metadata:phase`);
    /// `None` groups by the whole string.
    pub metadata_key: Option<String>,
}

impl Default for TopOptions {
    fn default() -> Self {
        TopOptions {
            at: MomentSpec::Peak,
            window: WindowSpec::default(),
            by: GroupBy::Site,
            cost: Cost::Live,
            limit: 20,
            sites: SiteOptions::default(),
            full_stacks: false,
            allocator_frames: false,
            stack_ends: None,
            metadata_key: None,
        }
    }
}

/// One group's row.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SiteRow {
    /// The group's label (site, file, function or the stack's site).
    pub site: String,
    /// With `--by site`: the library frame or C++ function between the site and the
    /// allocations, when one says more than the site alone (`einops/_backends.py:291:einsum`
    /// under a user's `model.py:39:forward`; the C++ function inside an autograd node). Rows
    /// are grouped by site and context. Absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub context: Option<String>,
    /// The cost (bytes for live/allocated/never_freed; bytes × µs or bytes × events for
    /// lifetime, see `unit`).
    pub bytes: u64,
    /// Allocations in the group.
    pub count: u64,
    /// Share of the device's total cost, 0..1.
    pub share: f64,
    /// The stack, innermost first, for `--by stack` (and `--full-stacks`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<String>"))]
    pub frames: Option<Vec<String>>,
    /// The group's biggest stack (the `other` row: the first group's), for views that link
    /// a row to its frames; not in the JSON.
    #[serde(skip)]
    pub stack: StackId,
    /// For memory alive before the trace with no stack recorded ([`crate::analyze::pretrace`]): its likely
    /// kind by the category rules and the evidence (`predates_trace`, `likely_kind`,
    /// `kind_confidence`, `evidence` in the JSON). Absent otherwise.
    #[serde(flatten)]
    pub pretrace: Option<Pretrace>,
    /// The `annotate` texts (`torch.cuda.memory._annotate_memory`) attached to the group's
    /// allocations, each with the number of allocations and their requested bytes; most
    /// bytes first. Absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub annotations: Vec<AnnotationCount>,
}

/// The rows of one device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceTop {
    /// Device index.
    pub device: u32,
    /// `trace` or `final_state` (a device without a trace has only its final blocks).
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["trace", "final_state"])))]
    pub basis: &'static str,
    /// The moment the live cost refers to.
    pub at: Moment,
    /// The window costs are limited to.
    pub window: Window,
    /// Live requested bytes at `at`.
    pub live_requested_bytes: u64,
    /// Of those, the bytes freed by the program but not yet reusable: a `free_requested`
    /// without its `free_completed` (blocks used on other streams, `record_stream`, wait for
    /// that work). Counted in the live cost, since the memory is still held; 0 for other costs.
    pub pending_free_bytes: u64,
    /// Σ cost over all groups.
    pub total: u64,
    /// Unit of `bytes` and `total`: `bytes`, `byte_us` or `byte_events`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["bytes", "byte_us", "byte_events"])))]
    pub unit: &'static str,
    /// Number of groups.
    pub groups: usize,
    /// The biggest groups.
    pub sites: Vec<SiteRow>,
    /// Everything past the limit, summed (`null` when nothing is left over).
    pub other: Option<SiteRow>,
    /// What the data cannot support, in words.
    pub notes: Vec<String>,
    /// The phase of the moment `at` (`crate::analyze::phase`), for the live cost of a traced
    /// device in `memlens top`; absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moment_phase: Option<crate::analyze::phase::MomentPhase>,
    /// Figures that could not be held exactly: `cost_overflow` when a cost (bytes × lifetime
    /// on a long trace) passed 2^64 − 1 and was saturated there. Absent when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// What was live at a moment (or another cost) per call site, biggest first, per device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TopReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Grouping used.
    pub by: GroupBy,
    /// With `--by metadata:KEY`: the key of the metadata's JSON the rows are labelled by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata_key: Option<String>,
    /// Cost used.
    pub cost: Cost,
    /// The moment asked for, as the user wrote it (`peak`, `end`, `oom`, ...).
    pub moment: String,
    /// Devices with a trace.
    pub devices: Vec<DeviceTop>,
    /// Devices without a trace, from their final blocks (`--at end` semantics).
    pub final_state_devices: Vec<DeviceTop>,
    /// A device whose peak is at least twice every other device's
    /// ([`crate::vocab::devices::imbalance`]); absent with one device or none far ahead.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "crate::vocab::devices::Imbalance")
    )]
    pub device_imbalance: Option<crate::vocab::devices::Imbalance>,
}

/// One allocation's contribution to a cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostItem {
    /// Its stack.
    pub stack: StackId,
    /// Its cost (bytes, or bytes × lifetime).
    pub bytes: u64,
    /// For an allocation alive before the trace with no stack: its entry in the selection's
    /// [`Kinds`] ([`crate::analyze::pretrace`]).
    pub pretrace: Option<u32>,
    /// Its index in the replay's allocations (`None`: a final-state block).
    pub alloc: Option<u32>,
}

impl CostItem {
    /// An item of `stack` that does not predate the trace.
    fn new(stack: StackId, bytes: u64) -> CostItem {
        CostItem {
            stack,
            bytes,
            pretrace: None,
            alloc: None,
        }
    }
}

/// The allocations a cost counts, for one device.
#[derive(Clone, Debug)]
pub struct Selection {
    /// The moment (live cost) as an event index.
    pub at: i64,
    /// The window.
    pub window: Window,
    /// The counted allocations.
    pub items: Vec<CostItem>,
    /// Unit of `bytes`: `bytes`, `byte_us` or `byte_events`.
    pub unit: &'static str,
    /// The likely kinds of the device's memory older than the trace without a stack, which
    /// items' `pretrace` refer to.
    pub pretrace: std::sync::Arc<Kinds>,
}

/// Runs `top` over all devices; `replays` come from [`replay::replay`].
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &TopOptions,
) -> Result<TopReport, String> {
    let mut devices = Vec::new();
    for r in replays {
        let dev = snap.device(r.device).expect("replayed device exists");
        let trace = snap.device_trace(dev);
        let mut d = device_top(snap, r, trace, opts)?;
        if opts.cost == Cost::Live && !trace.is_empty() {
            d.moment_phase = Some(crate::analyze::phase::of(snap, r, d.at.event_index));
        }
        devices.push(d);
    }
    let mut final_state_devices = Vec::new();
    for dev in snap.devices.iter().filter(|d| d.trace.is_empty()) {
        let items: Vec<CostItem> = snap
            .live_blocks(dev)
            .map(|b| CostItem::new(b.stack, b.requested_size))
            .collect();
        let live: u64 = items.iter().map(|i| i.bytes).sum();
        let pending: Vec<CostItem> = snap
            .live_blocks(dev)
            .filter(|b| b.state == crate::model::BlockState::ActivePendingFree)
            .map(|b| CostItem::new(b.stack, b.requested_size))
            .collect();
        let mut d = group(snap, items, &Kinds::default(), opts, live, "bytes", None);
        d.device = dev.id;
        d.basis = "final_state";
        add_pending_note(snap, &mut d, pending, &Kinds::default(), opts);
        d.notes.push(format!(
            "device {} has no trace: only its final state is known (no peak, no timeline); record history with torch.cuda.memory._record_memory_history(max_entries=100000)",
            dev.id
        ));
        add_frame_note(snap, &mut d);
        final_state_devices.push(d);
    }
    Ok(TopReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        by: opts.by,
        metadata_key: opts
            .metadata_key
            .clone()
            .filter(|_| opts.by == GroupBy::Metadata),
        cost: opts.cost,
        moment: opts.at.to_string(),
        devices,
        final_state_devices,
        device_imbalance: crate::vocab::devices::imbalance(snap, replays),
    })
}

/// The allocations `opts.cost` counts on one device, at `opts.at` within `opts.window`.
pub fn select(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[TraceEvent],
    opts: &TopOptions,
) -> Result<Selection, String> {
    let kinds = std::sync::Arc::new(Kinds::of(snap, r, trace));
    select_with(snap, r, trace, opts, kinds)
}

/// [`select`] with the device's pre-trace verdicts already made ([`Kinds::of`]: a caller
/// selecting at many moments makes them once).
pub fn select_with(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[TraceEvent],
    opts: &TopOptions,
    kinds: std::sync::Arc<Kinds>,
) -> Result<Selection, String> {
    let window = replay::resolve_window_in(snap, &opts.window, r, trace)?;
    let at = match opts.at {
        MomentSpec::Peak => r.peak_in(window),
        spec => replay::resolve_in(snap, spec, r, trace)?,
    };
    if opts.cost == Cost::Live && !window.contains(at) {
        return Err(format!(
            "device {}: the moment {at} lies outside the window {}:{}",
            r.device, window.first, window.last
        ));
    }
    let time = |i: i64| -> Option<i64> {
        let i = i.clamp(0, trace.len() as i64 - 1);
        trace.get(i as usize).and_then(|e| e.time())
    };
    let timed = trace.iter().any(|e| e.time().is_some());
    let mut unit = "bytes";
    let item = |i: usize, a: &replay::Allocation, bytes: u64| CostItem {
        stack: a.stack,
        bytes,
        pretrace: kinds.id(snap, a),
        alloc: Some(i as u32),
    };
    let all = || r.allocations.iter().enumerate();
    let items: Vec<CostItem> = match opts.cost {
        Cost::Live => all()
            .filter(|(_, a)| a.live_at(at))
            .map(|(i, a)| item(i, a, a.size))
            .collect(),
        Cost::Allocated => all()
            .filter(|(_, a)| a.start >= 0 && window.contains(a.start))
            .map(|(i, a)| item(i, a, a.size))
            .collect(),
        Cost::NeverFreed => all()
            .filter(|(_, a)| a.end == NEVER && window.contains(a.start))
            .map(|(i, a)| item(i, a, a.size))
            .collect(),
        Cost::Lifetime => {
            unit = if timed { "byte_us" } else { "byte_events" };
            all()
                .filter_map(|(i, a)| {
                    let from = a.start.max(window.first);
                    let to = a.end.min(window.last + 1);
                    if from >= to {
                        return None;
                    }
                    let span = if timed {
                        let end = if a.end == NEVER || a.end > window.last {
                            time(window.last)
                        } else {
                            time(to)
                        };
                        (end.unwrap_or(0) - time(from.max(0)).unwrap_or(0)).max(0) as u128
                    } else {
                        (to - from) as u128
                    };
                    Some(item(
                        i,
                        a,
                        (a.size as u128 * span).min(u64::MAX as u128) as u64,
                    ))
                })
                .collect()
        }
    };
    Ok(Selection {
        at,
        window,
        items,
        unit,
        pretrace: kinds,
    })
}

/// `top` of one replayed device.
pub fn device_top(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[TraceEvent],
    opts: &TopOptions,
) -> Result<DeviceTop, String> {
    let kinds = std::sync::Arc::new(Kinds::of(snap, r, trace));
    device_top_with(snap, r, trace, opts, kinds)
}

/// [`device_top`] with the device's pre-trace verdicts already made ([`select_with`]).
pub fn device_top_with(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[TraceEvent],
    opts: &TopOptions,
    kinds: std::sync::Arc<Kinds>,
) -> Result<DeviceTop, String> {
    let Selection {
        at,
        window,
        items,
        unit,
        pretrace: kinds,
    } = select_with(snap, r, trace, opts, kinds)?;
    let notes = replay::annotations::attach(r, trace, snap);
    let ctx = meta::Ctx {
        r,
        trace,
        notes: &notes,
    };
    let mut d = group(snap, items, &kinds, opts, r.live_at(at), unit, Some(&ctx));
    d.device = r.device;
    d.at = replay::moment(trace, at);
    d.window = window;
    if opts.cost == Cost::Live {
        let pending = r
            .live_allocations(at)
            .filter(|a| a.free_requested.is_some_and(|f| f <= at))
            .map(|a| CostItem {
                stack: a.stack,
                bytes: a.size,
                pretrace: kinds.id(snap, a),
                alloc: None,
            })
            .collect();
        add_pending_note(snap, &mut d, pending, &kinds, opts);
    }
    if r.allocations
        .iter()
        .any(|a| a.origin != replay::Origin::Trace)
        && window.first < 0
    {
        let initial = r.initial_bytes;
        if initial > 0 {
            d.notes.push(format!(
                "{} were allocated before the trace began (ring buffer wrapped or history started late); their sites come from their frees or final blocks",
                crate::units::iec(initial)
            ));
        }
    }
    let said: Vec<String> = d
        .sites
        .iter()
        .filter_map(|s| {
            s.pretrace
                .as_ref()
                .map(|p| format!("{}: {}", s.site, p.evidence))
        })
        .collect();
    d.notes.extend(said);
    add_frame_note(snap, &mut d);
    Ok(d)
}

/// Sets `pending_free_bytes` from the live allocations already freed by the program, and names
/// their sites in a note.
fn add_pending_note(
    snap: &Snapshot,
    d: &mut DeviceTop,
    pending: Vec<CostItem>,
    kinds: &Kinds,
    opts: &TopOptions,
) {
    if pending.is_empty() {
        return;
    }
    d.pending_free_bytes = pending.iter().map(|p| p.bytes).sum();
    let blocks = pending.len();
    let mut per_site: FxHashMap<String, u64> = FxHashMap::default();
    for p in &pending {
        let site = match p.pretrace {
            Some(id) => kinds.get(id).label(),
            None => sites::site_label(snap, p.stack, opts.sites),
        };
        *per_site.entry(site).or_default() += p.bytes;
    }
    let mut rows: Vec<(String, u64)> = per_site.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let named: Vec<String> = rows
        .iter()
        .take(3)
        .map(|(site, b)| format!("{site} ({})", crate::units::iec(*b)))
        .collect();
    let more = if rows.len() > 3 {
        format!(" and {} more sites", rows.len() - 3)
    } else {
        String::new()
    };
    d.notes.push(format!(
        "{} of the live memory ({blocks} block{}) was freed by the program but still waits for work on other streams (record_stream) before the allocator may reuse it: {}{more}",
        crate::units::iec(d.pending_free_bytes),
        if blocks == 1 { "" } else { "s" },
        named.join(", ")
    ));
}

fn add_frame_note(snap: &Snapshot, d: &mut DeviceTop) {
    if !snap.has_frames() {
        let older = if d.sites.iter().any(|s| s.pretrace.is_some()) {
            format!(
                " (what was alive before the trace: {}, with its likely kind)",
                crate::analyze::pretrace::LABEL
            )
        } else {
            String::new()
        };
        d.notes.push(format!("no stack frames were recorded (history without context): every allocation is <no frames>{older}"));
    }
}

fn group(
    snap: &Snapshot,
    items: Vec<CostItem>,
    kinds: &Kinds,
    opts: &TopOptions,
    live: u64,
    unit: &'static str,
    ctx: Option<&meta::Ctx>,
) -> DeviceTop {
    // Group by stack first (cheap), then map each distinct stack to its label.
    // Sums saturate: a lifetime cost (bytes × µs) can pass 2^64 on a long trace, and is then
    // reported as the most a u64 holds, with a warning (bytes of one file cannot: see
    // `model::bounds`).
    let saturated = std::cell::Cell::new(false);
    let add = |a: u64, b: u64| {
        a.checked_add(b).unwrap_or_else(|| {
            saturated.set(true);
            u64::MAX
        })
    };
    // Memory older than the trace without a stack is grouped by its likely kind instead.
    let mut per_stack: FxHashMap<meta::ItemKey, (u64, u64)> = FxHashMap::default();
    for it in &items {
        let e = per_stack
            .entry(meta::item_key(snap, it, opts, ctx))
            .or_default();
        e.0 = add(e.0, it.bytes);
        e.1 += 1;
        if it.bytes == u64::MAX {
            saturated.set(true);
        }
    }
    // Per group: bytes, count, and its biggest stack (ties to the smaller id: file order).
    type Key = (String, Option<String>);
    type Group = (u64, u64, StackId, u64, Option<u32>);
    let mut groups: FxHashMap<Key, Group> = FxHashMap::default();
    let mut key_of: FxHashMap<meta::ItemKey, Key> = FxHashMap::default();
    for ((stack, pre, md), (bytes, count)) in per_stack {
        let key = match (pre, opts.by) {
            (_, GroupBy::Metadata) => (meta::label(snap, md, opts), None),
            (Some(id), _) => (kinds.get(id).label(), None),
            (None, _) => label(snap, stack, opts),
        };
        let pre = pre.filter(|_| opts.by != GroupBy::Metadata);
        key_of.insert((stack, pre, md), key.clone());
        let e = groups.entry(key).or_insert((0, 0, stack, 0, pre));
        e.0 = add(e.0, bytes);
        e.1 += count;
        if bytes > e.3 || (bytes == e.3 && stack < e.2) {
            e.2 = stack;
            e.3 = bytes;
        }
    }
    let total: u64 = groups.values().fold(0, |t, g| add(t, g.0));
    let mut rows: Vec<(Key, u64, u64, StackId, Option<u32>)> = groups
        .into_iter()
        .map(|(k, (b, c, s, _, pre))| (k, b, c, s, pre))
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let n = rows.len();
    let share = |b: u64| {
        if total == 0 {
            0.0
        } else {
            b as f64 / total as f64
        }
    };
    let mut annotated = meta::annotations(snap, &items, opts, ctx, &key_of);
    let mut sites = Vec::new();
    let mut other: Option<SiteRow> = None;
    for (i, ((key, context), bytes, count, stack, pre)) in rows.into_iter().enumerate() {
        if i < opts.limit {
            let frames = (opts.by == GroupBy::Stack || opts.full_stacks).then(|| {
                let shown = sites::shown_frames(snap, stack, stack_view(opts));
                let text = |f: &FrameId| sites::format_frame(snap, snap.frames.get(*f));
                match opts.stack_ends {
                    Some(k) if shown.len() > 2 * k => {
                        let mut out: Vec<String> = shown[..k].iter().map(text).collect();
                        out.push(sites::elided_label((shown.len() - 2 * k) as u64));
                        out.extend(shown[shown.len() - k..].iter().map(text));
                        out
                    }
                    _ => shown.iter().map(text).collect(),
                }
            });
            let annotations = annotated
                .remove(&(key.clone(), context.clone()))
                .unwrap_or_default();
            let site = if opts.by == GroupBy::Stack && pre.is_none() {
                sites::site_label(snap, stack, opts.sites)
            } else {
                key
            };
            sites.push(SiteRow {
                site,
                context,
                bytes,
                count,
                share: share(bytes),
                frames,
                stack,
                pretrace: pre.map(|id| kinds.get(id).clone()),
                annotations,
            });
        } else {
            let o = other.get_or_insert(SiteRow {
                site: String::new(),
                context: None,
                bytes: 0,
                count: 0,
                share: 0.0,
                frames: None,
                stack,
                pretrace: None,
                annotations: Vec::new(),
            });
            o.bytes = add(o.bytes, bytes);
            o.count += count;
        }
    }
    if let Some(o) = other.as_mut() {
        o.site = other_label(n - opts.limit);
        o.share = share(o.bytes);
    }
    DeviceTop {
        device: 0,
        basis: "trace",
        at: Moment {
            event_index: -1,
            time_us: None,
        },
        window: Window {
            first: -1,
            last: -1,
        },
        live_requested_bytes: live,
        pending_free_bytes: 0,
        total,
        unit,
        groups: n,
        sites,
        other,
        notes: Vec::new(),
        moment_phase: None,
        warnings: overflow_warning(saturated.get(), unit),
    }
}

/// The `other` row's label for `k` groups past the limit.
fn other_label(k: usize) -> String {
    format!("<{k} other {}>", if k == 1 { "group" } else { "groups" })
}

/// `cost_overflow` when a sum saturated.
fn overflow_warning(saturated: bool, unit: &str) -> Vec<Warning> {
    saturated
        .then(|| Warning {
            code: "cost_overflow",
            device: None,
            message: format!("the {unit} cost passed 2^64 - 1 and is shown saturated at that value (a long trace; compare shares rather than totals)"),
        })
        .into_iter()
        .collect()
}

/// The frames `--by stack` and `--full-stacks` show: every kind `--frames` names, the
/// allocator's own included (a full stack), in call order.
fn stack_view(opts: &TopOptions) -> sites::StackView {
    sites::StackView {
        frames: opts.sites.frames,
        allocator: true,
    }
}

/// The group of `stack`: its label, and with `--by site` the site's context.
fn label(snap: &Snapshot, stack: StackId, opts: &TopOptions) -> (String, Option<String>) {
    match opts.by {
        GroupBy::Site => {
            let s = sites::site_of(snap, stack, opts.sites);
            (s.label, s.context)
        }
        GroupBy::Stack => {
            let frames = sites::shown_frames(snap, stack, stack_view(opts));
            if frames.is_empty() {
                return (NO_FRAMES.to_string(), None);
            }
            let joined = frames
                .iter()
                .map(|f| sites::format_frame(snap, snap.frames.get(*f)))
                .collect::<Vec<_>>()
                .join(" < ");
            (joined, None)
        }
        GroupBy::Metadata => (String::new(), None),
        GroupBy::File | GroupBy::Function => {
            let s = sites::site_of(snap, stack, opts.sites);
            let Some(f) = s.python_frame() else {
                return (s.label, None);
            };
            let fr = snap.frames.get(f);
            let file = snap.strings.get(fr.filename);
            let key = if opts.by == GroupBy::File {
                file.to_string()
            } else {
                format!("{file}:{}", snap.strings.get(fr.name))
            };
            (key, None)
        }
    }
}
