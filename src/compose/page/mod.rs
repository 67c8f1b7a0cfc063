//! `memlens report`: everything the HTML page shows, computed by the other analyses and
//! gathered into one value. The page only draws it: the band layout of the timeline
//! (`bands.rs`), the segments and blocks at each moment (`state.rs`) and the flamegraph trees
//! per frame view (`tree.rs`) are computed here, with frames and stacks written once
//! (`frames.rs`).

pub mod bands;
pub mod frames;
pub mod header;
pub mod lines;
pub mod notes;
pub mod pools;
pub mod state;
pub mod tree;
pub mod window;

use crate::analyze::categories::{self, CategoriesReport, CategoryOptions};
use crate::analyze::fit::{self, DeviceFit, FitOptions};
use crate::analyze::frag::{self, DeviceFrag, FragOptions};
use crate::analyze::leaks::{self, LeaksOptions, LeaksReport};
use crate::analyze::lines::{self as source_lines, DeviceLines, Sources, StackLines};
use crate::analyze::oom::OomOptions;
use crate::analyze::pinners;
use crate::analyze::pretrace::Kinds;
use crate::analyze::profile::{Keyer, ProfileOptions};
use crate::analyze::summary::{self, SummaryReport};
use crate::analyze::timeline::{self, Phase, TimelineOptions};
use crate::analyze::top::{self, DeviceTop, TopOptions};
use crate::compose::oom::{self, OomReport};
use crate::model::{Action, Layout, Snapshot, StackId};
use crate::replay::{
    self, state as replay_state, DeviceReplay, Moment, MomentSpec, Window, WindowSpec,
};
use bands::{BandOptions, Bands};
use frames::{FrameInfo, FrameTable};
use lines::{MomentLines, SourceOptions};
use notes::NoteSource;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::Serialize;
use state::StateView;
use std::sync::Arc;
use tree::FlameTrees;

/// Options of `report`.
#[derive(Clone, Debug)]
pub struct PageOptions {
    /// A moment to show besides the peak, the OOMs and the end (`--at`).
    pub at: Option<MomentSpec>,
    /// The part of the trace the timeline shows (`--window`); the peak is this window's.
    pub window: WindowSpec,
    /// Bands and downsampling of the timeline.
    pub bands: BandOptions,
    /// Site rows per moment in the top table.
    pub sites: usize,
    /// Most OOM events shown as moments of their own (all are in the OOM section).
    pub oom_moments: usize,
    /// Capacity, for the OOM verdicts.
    pub oom: OomOptions,
    /// Where the hot files' source is read for the lines panel (none by default).
    pub source: SourceOptions,
}

impl Default for PageOptions {
    fn default() -> Self {
        PageOptions {
            at: None,
            window: WindowSpec::default(),
            bands: BandOptions::default(),
            sites: 200,
            oom_moments: 8,
            oom: OomOptions {
                sites: 10,
                ..OomOptions::default()
            },
            source: SourceOptions::default(),
        }
    }
}

/// Something a section cannot show, and why.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "PageAbsence"))]
pub struct Absence {
    /// Stable code: `no_trace`, `single_entry_trace` (one entry: no timeline), `no_frames`,
    /// `no_devices`, `no_segments`.
    pub code: &'static str,
    /// The device it is about, if one.
    pub device: Option<u32>,
    /// One sentence for a person: what is absent, why, and what the page shows instead.
    pub message: String,
}

/// The timeline of one device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TimelineView {
    /// Events in the trace.
    pub events: usize,
    /// The window shown.
    pub window: Window,
    /// The peak of live requested bytes inside the window (as `memlens timeline`).
    pub peak: Moment,
    /// Live requested bytes at the peak.
    pub peak_bytes: u64,
    /// The largest reserved bytes inside the window.
    pub max_reserved_bytes: u64,
    /// Annotation spans (`ProfilerStep#N`, ...) overlapping the window.
    pub phases: Vec<Phase>,
    /// The stacked bands.
    #[serde(flatten)]
    pub bands: Bands,
}

/// One row of the top table, with its stack for the page's frame toggles.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TopView {
    /// `memlens top --at MOMENT --full-stacks` for this device.
    #[serde(flatten)]
    pub top: DeviceTop,
    /// Index in the top-level `stacks` of each row's biggest stack, in the order of `sites`.
    pub row_stacks: Vec<u32>,
}

/// Everything shown at one moment of one device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MomentView {
    /// `peak`, `oom:K`, `end`, or `at` (the `--at` moment).
    pub name: String,
    /// The state after this event.
    pub at: Moment,
    /// Live requested bytes then.
    pub live_bytes: u64,
    /// Reserved bytes then.
    pub reserved_bytes: u64,
    /// Segments and blocks.
    pub state: StateView,
    /// `memlens frag` at the moment.
    pub frag: DeviceFrag,
    /// `memlens top` at the moment.
    pub top: TopView,
    /// `memlens top --by metadata` at the moment (live bytes by the `user_metadata` of their
    /// `alloc` entries), when some entry of the trace carries user metadata; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_metadata: Option<DeviceTop>,
    /// The flamegraph of the same live set.
    pub flame: FlameTrees,
    /// `memlens lines --at MOMENT` of the same live set (the live cost), its hottest lines
    /// and, where source was read, the hot files around their hot lines.
    pub lines: MomentLines,
}

/// One device's sections.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DevicePage {
    /// Device index.
    pub device: u32,
    /// The timeline; `null` without a trace.
    pub timeline: Option<TimelineView>,
    /// The moments of the state, top and flame sections, in this order: `peak`, the first OOMs
    /// (at most 8), `end`, then `at` (`--at`, unless it is one of those); a device without a
    /// trace has `end` only (its final state).
    pub moments: Vec<MomentView>,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PageReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// The memlens version that wrote it.
    pub memlens_version: &'static str,
    /// The file's top-level shape.
    pub layout: Layout,
    /// The GPU capacity given (`--capacity`, `--gpu`); `null` when not given.
    pub capacity_bytes: Option<u64>,
    /// The capacity the header shows: the one given, else the one an OOM implies (as
    /// `memlens oom` infers it); `null` when neither.
    pub capacity_shown: Option<header::ShownCapacity>,
    /// The device the page opens on: the first OOM's, else the one with the highest peak;
    /// `null`: the first.
    pub first_device: Option<u32>,
    /// `memlens summary`.
    pub summary: SummaryReport,
    /// `memlens oom`, when the snapshot holds an OOM; `null` otherwise.
    pub oom: Option<OomReport>,
    /// `memlens leaks`.
    pub leaks: LeaksReport,
    /// What to change on each device, from the one ranked list `memlens fit` and `memlens
    /// oom` give: at the device's first OOM (the same entries as `oom.fit`), else at its peak
    /// (its end without a trace). By device.
    pub advice: Vec<DeviceFit>,
    /// `memlens categories` at the peak.
    pub categories: CategoriesReport,
    /// Per device.
    pub devices: Vec<DevicePage>,
    /// The private-pools panel (`memlens frag --by pool` per replayed device, each series
    /// thinned to [`pools::POOL_POINTS`] points), when the snapshot has a private pool;
    /// absent otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<frag::pools::DevicePools>,
    /// What the page cannot show, and why.
    pub absent: Vec<Absence>,
    /// Frames of every stack shown, each once; `frame` columns of the flamegraphs index it.
    pub frames: Vec<FrameInfo>,
    /// Stacks shown, each once, as indices in `frames`, innermost first; bands, blocks and top
    /// rows index it.
    pub stacks: Vec<Vec<u32>>,
    /// The common directory of the snapshot's user files, which the page strips from the
    /// paths of sites as the text reports do; `null` when there is none.
    pub site_root: Option<String>,
}

/// Gathers the page of `snap`. The device sections (timeline, moments) and the whole-file
/// reports (OOM, leaks, categories, summary) are computed side by side (`rayon::join`): on a
/// large trace each is a good part of the page's time, and `memlens serve` waits for both.
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &PageOptions,
) -> Result<PageReport, String> {
    let (reports, pages) = rayon::join(
        || whole_file_reports(snap, replays, opts),
        || device_pages(snap, replays, opts),
    );
    let pools = pools::panel(snap, replays);
    let (oom, advice, leaks, categories, summary) = reports?;
    let (devices, absent, table) = pages?;
    let (frames, stacks) = table.into_parts();
    Ok(PageReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        memlens_version: env!("CARGO_PKG_VERSION"),
        layout: snap.layout,
        capacity_bytes: opts.oom.capacity_bytes,
        capacity_shown: header::capacity(&opts.oom, oom.as_ref()),
        first_device: header::first_device(oom.as_ref(), replays),
        summary,
        oom,
        advice,
        leaks,
        categories,
        devices,
        pools,
        absent,
        frames,
        stacks,
        site_root: crate::analyze::profile::snapshot_root(snap),
    })
}

/// `oom` (with `fit`, when the trace holds an OOM), the advice of every device, `leaks`,
/// `categories` and `summary`.
type WholeFile = (
    Option<OomReport>,
    Vec<DeviceFit>,
    LeaksReport,
    CategoriesReport,
    SummaryReport,
);

fn whole_file_reports(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &PageOptions,
) -> Result<WholeFile, String> {
    let has_oom = snap.events.iter().any(|e| e.action == Action::Oom);
    let oom = if has_oom {
        let mut r = oom::run(snap, replays, &opts.oom)?;
        let capacity = opts
            .oom
            .capacity_bytes
            .zip(opts.oom.capacity_source.clone());
        oom::attach_fit(snap, replays, &mut r, capacity)?;
        Some(r)
    } else {
        None
    };
    let advice = advice(snap, replays, opts, oom.as_ref())?;
    let leaks = leaks::run(snap, replays, &LeaksOptions::default());
    let categories = categories::run(snap, replays, &CategoryOptions::default())?;
    Ok((oom, advice, leaks, categories, summary::run(snap)))
}

/// Every device's ranked fixes: the OOM report's where it has them (its first OOM), else
/// `fit` at the device's peak, so the page advises on every snapshot from the one engine.
fn advice(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &PageOptions,
    oom: Option<&OomReport>,
) -> Result<Vec<DeviceFit>, String> {
    let mut out: Vec<DeviceFit> = oom.map(|r| r.fit.clone()).unwrap_or_default();
    let covered: Vec<u32> = out.iter().map(|d| d.device).collect();
    let ooms = oom.map_or(&[][..], |r| &r.ooms[..]);
    let fit_opts = FitOptions {
        at: None,
        capacity_bytes: opts.oom.capacity_bytes,
        capacity_source: opts.oom.capacity_source.clone(),
    };
    let rest = fit::run_with(snap, replays, &fit_opts, ooms, &|d| !covered.contains(&d))?;
    out.extend(rest.devices);
    out.sort_by_key(|d| d.device);
    Ok(out)
}

/// Each device's sections, what the page cannot show and why, and the frames they name.
fn device_pages(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &PageOptions,
) -> Result<(Vec<DevicePage>, Vec<Absence>, FrameTable), String> {
    let mut table = FrameTable::default();
    let timelines = timeline::run(
        snap,
        replays,
        &TimelineOptions {
            points: 2,
            window: opts.window.clone(),
        },
    )?;
    let mut devices = Vec::new();
    let mut absent = Vec::new();
    // Each source file is read once for the whole page.
    let mut sources = opts.source.sources();
    for dev in &snap.devices {
        let trace = snap.device_trace(dev);
        let page = match replays.iter().find(|r| r.device == dev.id) {
            Some(r) => {
                let t = timelines
                    .devices
                    .iter()
                    .find(|t| t.device == dev.id)
                    .expect("every replay has a timeline");
                // The likely kinds of pre-trace memory without a stack and the allocations'
                // notes, once per device.
                let traced = Traced {
                    replay: r,
                    kinds: Arc::new(Kinds::of(snap, r, trace)),
                    notes: Arc::new(NoteSource::of(snap, r, trace)),
                };
                let known = bands::Known {
                    index: None,
                    kinds: Some(&traced.kinds),
                    notes: Some(&traced.notes),
                };
                let bands = bands::bands(snap, r, trace, t.window, opts.bands, known, &mut table);
                // The moments' costly parts side by side, then named in order.
                let parts: Vec<MomentParts> = moments(snap, r, trace, t.window, opts)?
                    .into_par_iter()
                    .map(|(name, at)| moment_parts(snap, Some(traced.clone()), dev, name, at, opts))
                    .collect::<Result<_, _>>()?;
                let moments = parts
                    .into_iter()
                    .map(|p| p.view(snap, &mut table, Some(&traced), sources.as_mut()))
                    .collect();
                // One entry is no history: the notes say there is no timeline, and the page
                // draws none (the state at the moments stays).
                let single = crate::model::validate::single_entry_trace(trace);
                if single {
                    absent.push(Absence {
                        code: "single_entry_trace",
                        device: Some(dev.id),
                        message: format!(
                            "device {}'s trace holds one entry ({}): history was recorded in 'state' mode or with max_entries=1, so there is no timeline; the allocator state is shown at its moments",
                            dev.id,
                            trace[0].action.as_str()
                        ),
                    });
                }
                DevicePage {
                    device: dev.id,
                    timeline: (!single).then(|| TimelineView {
                        events: t.events,
                        window: t.window,
                        peak: t.peak,
                        peak_bytes: t.peak_bytes,
                        max_reserved_bytes: t.max_reserved_bytes,
                        phases: t.phases.clone(),
                        bands,
                    }),
                    moments,
                }
            }
            None => {
                absent.push(Absence {
                    code: "no_trace",
                    device: Some(dev.id),
                    message: format!(
                        "device {} has no trace (allocation history was not recorded, or was recorded for other devices): no timeline, peak or OOM moment, and no leak search; its final segments and blocks are shown as the end state",
                        dev.id
                    ),
                });
                DevicePage {
                    device: dev.id,
                    timeline: None,
                    moments: vec![moment_parts(snap, None, dev, "end".into(), -1, opts)?.view(
                        snap,
                        &mut table,
                        None,
                        sources.as_mut(),
                    )],
                }
            }
        };
        if dev.segments.is_empty() && !trace.is_empty() {
            absent.push(Absence {
                code: "no_segments",
                device: Some(dev.id),
                message: format!(
                    "device {} has a trace but no segments (the allocator state was not saved): blocks at a moment are rebuilt from the trace alone",
                    dev.id
                ),
            });
        }
        devices.push(page);
    }
    if snap.devices.is_empty() {
        absent.push(Absence {
            code: "no_devices",
            device: None,
            message: if snap.host.is_some() {
                "the snapshot holds no device segment and no device trace entry, only pinned host memory: its figures are in the summary; there is no device timeline, state or flamegraph to draw".into()
            } else {
                "the snapshot holds no segment and no trace entry: there is nothing to draw".into()
            },
        });
    } else if !snap.has_frames() {
        absent.push(Absence {
            code: "no_frames",
            device: None,
            message: "no stack frames were recorded (history without context, or stacks disabled): every allocation is <no frames>, so sites, stacks and the flamegraph cannot name code".into(),
        });
    }
    Ok((devices, absent, table))
}

/// The moments of a traced device: the window's peak, its first OOMs, the end, `--at`.
fn moments(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[crate::model::TraceEvent],
    window: Window,
    opts: &PageOptions,
) -> Result<Vec<(String, i64)>, String> {
    let _ = snap;
    let mut out = vec![("peak".to_string(), r.peak_in(window))];
    for (k, (i, _)) in trace
        .iter()
        .enumerate()
        .filter(|(_, e)| e.action == Action::Oom)
        .take(opts.oom_moments)
        .enumerate()
    {
        out.push((format!("oom:{}", k + 1), i as i64));
    }
    out.push(("end".to_string(), trace.len() as i64 - 1));
    if let Some(spec) = opts.at {
        let at = replay::resolve_in(snap, spec, r, trace)?;
        if !out.iter().any(|(_, i)| *i == at) {
            out.push(("at".to_string(), at));
        }
    }
    Ok(out)
}

/// A traced device's replay and what the page makes of it once: the likely kinds of its
/// pre-trace memory without a stack ([`Kinds::of`]) and its allocations' annotations and
/// metadata ([`NoteSource::of`]).
#[derive(Clone)]
pub struct Traced<'a> {
    /// The device's replay.
    pub replay: &'a DeviceReplay,
    /// Its pre-trace kinds.
    pub kinds: Arc<Kinds>,
    /// Its notes.
    pub notes: Arc<NoteSource>,
}

/// The state, fragmentation, top rows and flame of one moment (`r` absent: the final state
/// of a device without a trace).
pub(super) fn moment_view(
    snap: &Snapshot,
    r: Option<Traced<'_>>,
    dev: &crate::model::Device,
    name: String,
    at: i64,
    opts: &PageOptions,
    table: &mut FrameTable,
) -> Result<MomentView, String> {
    let parts = moment_parts(snap, r.clone(), dev, name, at, opts)?;
    let mut sources = opts.source.sources();
    Ok(parts.view(snap, table, r.as_ref(), sources.as_mut()))
}

/// What a moment's sections show before its stacks and frames are named in the page's table:
/// the costly part (the state rebuilt, `frag`, `top`), which moments compute side by side.
struct MomentParts {
    name: String,
    moment: Moment,
    st: replay_state::AllocatorState,
    frag: DeviceFrag,
    top: DeviceTop,
    by_metadata: Option<DeviceTop>,
    weights: FxHashMap<StackId, u64>,
    /// Weights of pre-trace memory without a stack, by its label (a flame node of its own).
    labelled: FxHashMap<String, u64>,
    live_bytes: u64,
    reserved_bytes: u64,
    /// `lines` of the same live set, every line (cut when viewed).
    lines: DeviceLines,
}

/// The costly part of moment `at` of `dev` (`r`: its replay and pre-trace kinds; absent: the
/// final state).
fn moment_parts(
    snap: &Snapshot,
    r: Option<Traced<'_>>,
    dev: &crate::model::Device,
    name: String,
    at: i64,
    opts: &PageOptions,
) -> Result<MomentParts, String> {
    let trace = snap.device_trace(dev);
    let moment = replay::moment(trace, at);
    let st = replay_state::state_at(snap, dev, at);
    let frag_opts = FragOptions {
        at: MomentSpec::Index(at),
        ..FragOptions::default()
    };
    let mut frag = frag::analyze_state(&st, moment, &frag_opts);
    let keyer = Keyer::new(snap, ProfileOptions::default());
    frag.pinners = Some(pinners::device_pinners(
        snap,
        &st,
        moment,
        r.as_ref().map(|t| t.replay),
        &keyer,
        frag.reading.matters,
    ));
    let top_opts = TopOptions {
        at: MomentSpec::Index(at),
        limit: opts.sites,
        full_stacks: true,
        stack_ends: Some(frames::PAGE_FRAMES_EACH_END),
        ..TopOptions::default()
    };
    let mut weights: FxHashMap<StackId, u64> = FxHashMap::default();
    let mut labelled: FxHashMap<String, u64> = FxHashMap::default();
    let by_metadata = match &r {
        Some(t) if t.notes.has_user_metadata() => {
            let md_opts = TopOptions {
                at: MomentSpec::Index(at),
                by: top::GroupBy::Metadata,
                limit: opts.sites,
                ..TopOptions::default()
            };
            Some(top::device_top_with(
                snap,
                t.replay,
                trace,
                &md_opts,
                t.kinds.clone(),
            )?)
        }
        _ => None,
    };
    // Each moment its own cache of stack lines: moments are computed side by side.
    let stack_lines = StackLines::new(snap);
    let (top, live_bytes, reserved_bytes, lines) = match r {
        Some(Traced {
            replay: r, kinds, ..
        }) => {
            let top = top::device_top_with(snap, r, trace, &top_opts, kinds.clone())?;
            let sel = top::select_with(snap, r, trace, &top_opts, kinds.clone())?;
            let lines = source_lines::of_selection(
                snap,
                r,
                trace,
                &sel,
                source_lines::LineCost::Live,
                &stack_lines,
            );
            for it in sel.items {
                match it.pretrace {
                    Some(id) => *labelled.entry(kinds.get(id).label()).or_default() += it.bytes,
                    None => *weights.entry(it.stack).or_default() += it.bytes,
                }
            }
            (top, r.live_at(at), r.reserved_at(at), lines)
        }
        None => {
            let mut all = top::run(snap, &[], &top_opts)?;
            let pos = all
                .final_state_devices
                .iter()
                .position(|d| d.device == dev.id)
                .expect("a device without a trace has a final-state top");
            for b in snap.live_blocks(dev) {
                *weights.entry(b.stack).or_default() += b.requested_size;
            }
            let reserved = snap.device_segments(dev).iter().map(|s| s.total_size).sum();
            (
                all.final_state_devices.swap_remove(pos),
                weights.values().sum(),
                reserved,
                source_lines::final_state_live(snap, dev, &stack_lines),
            )
        }
    };
    Ok(MomentParts {
        name,
        moment,
        st,
        frag,
        top,
        by_metadata,
        weights,
        labelled,
        live_bytes,
        reserved_bytes,
        lines,
    })
}

impl MomentParts {
    /// The moment's view, its stacks and frames named in `table` (in the order a sequential
    /// pass names them, so the page is the same however the parts were computed); with
    /// `traced`, its blocks' notes; with `sources`, its hot files' source.
    fn view(
        self,
        snap: &Snapshot,
        table: &mut FrameTable,
        traced: Option<&Traced>,
        sources: Option<&mut Sources>,
    ) -> MomentView {
        let block_notes = traced.map(|t| state::BlockNotes {
            replay: t.replay,
            trace: snap.device_trace(
                snap.device(t.replay.device)
                    .expect("a replayed device is a device of the snapshot"),
            ),
            notes: &t.notes,
        });
        let row_stacks = self
            .top
            .sites
            .iter()
            .map(|s| table.stack(snap, s.stack))
            .collect();
        MomentView {
            name: self.name,
            at: self.moment,
            live_bytes: self.live_bytes,
            reserved_bytes: self.reserved_bytes,
            state: state::view(snap, &self.st, table, block_notes),
            frag: self.frag,
            top: TopView {
                top: self.top,
                row_stacks,
            },
            by_metadata: self.by_metadata,
            flame: tree::trees(snap, &self.weights, &self.labelled, table),
            lines: lines::view(self.lines, sources),
        }
    }
}
