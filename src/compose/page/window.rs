//! The page's timeline for one window of one device, at the detail of the pixels that show
//! it: what `memlens serve` answers when the page zooms (`/api/window`). The window's samples
//! are per-column extremes while it holds more events than columns, and every event when it
//! holds fewer (then each event is listed too); its bands are chosen for the window (in a
//! window of few events the largest allocations made or freed inside it are among them), and
//! its frames and stacks travel with it.

use super::bands::{self, BandOptions, Bands, LiveIndex};
use super::frames::{FrameInfo, FrameTable};
use super::notes::NoteSource;
use super::{MomentView, PageOptions, Traced};
use crate::analyze::pretrace::Kinds;
use crate::model::{Action, Snapshot};
use crate::replay::{self, DeviceReplay, Moment, Window};
use serde::Serialize;
use std::sync::Arc;

/// What the page asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowRequest {
    /// Device index.
    pub device: u32,
    /// First state shown (-1: before the first event).
    pub first: i64,
    /// Last state shown.
    pub last: i64,
    /// Plot columns (device pixels) the window is drawn on: the downsampling's buckets.
    pub columns: usize,
}

/// The timeline of one window, with the frames of its bands.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WindowView {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Device index.
    pub device: u32,
    /// The window, clamped to the trace.
    pub window: Window,
    /// The peak of live requested bytes inside the window.
    pub peak: Moment,
    /// Live requested bytes at that peak.
    pub peak_bytes: u64,
    /// The largest reserved bytes inside the window.
    pub max_reserved_bytes: u64,
    /// The stacked bands.
    #[serde(flatten)]
    pub bands: Bands,
    /// Every trace event of the window, once it holds no more events than columns (absent
    /// otherwise): what the page names when the cursor is over an event's column.
    pub every_event: Option<WindowEvents>,
    /// Frames of the bands' and events' stacks (indices are this response's own).
    pub frames: Vec<FrameInfo>,
    /// Stacks as indices into `frames`, innermost first.
    pub stacks: Vec<Vec<u32>>,
}

/// The trace events of a window, as columns.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WindowEvents {
    /// Event index.
    pub index: Vec<i64>,
    /// What happened (`alloc`, `free_requested`, `free_completed`, `segment_alloc`, ...).
    pub action: Vec<Action>,
    /// Block or segment address (`device_free` for an `oom`).
    pub address: Vec<u64>,
    /// Bytes: requested for blocks, the segment's for segment events.
    pub size: Vec<u64>,
    /// Stack index into the response's `stacks`.
    pub stack: Vec<u32>,
}

/// Most columns a request may ask for.
pub const MAX_COLUMNS: usize = 16_384;

/// The live index of each replayed device of a snapshot, and the likely kinds of its memory
/// older than the trace without a stack ([`Kinds::of`]): made once, they let each window find
/// its allocations and label them without a pass over all of them.
#[derive(Clone, Debug, Default)]
pub struct WindowIndex {
    devices: Vec<IndexedDevice>,
}

/// What [`WindowIndex`] keeps of one device.
#[derive(Clone, Debug)]
struct IndexedDevice {
    device: u32,
    live: LiveIndex,
    kinds: Arc<Kinds>,
    notes: Arc<NoteSource>,
}

impl WindowIndex {
    /// The index of `replays` (of `snap`).
    pub fn new(snap: &Snapshot, replays: &[DeviceReplay]) -> WindowIndex {
        WindowIndex {
            devices: replays
                .iter()
                .map(|r| {
                    let trace = snap
                        .device(r.device)
                        .map_or(&[][..], |d| snap.device_trace(d));
                    IndexedDevice {
                        device: r.device,
                        live: LiveIndex::new(r),
                        kinds: Arc::new(Kinds::of(snap, r, trace)),
                        notes: Arc::new(NoteSource::of(snap, r, trace)),
                    }
                })
                .collect(),
        }
    }

    fn device(&self, device: u32) -> Option<&IndexedDevice> {
        self.devices.iter().find(|d| d.device == device)
    }

    /// The likely kinds of `device`'s pre-trace memory without a stack and its allocations'
    /// notes, when indexed.
    pub fn made(&self, device: u32) -> Option<(Arc<Kinds>, Arc<NoteSource>)> {
        self.device(device)
            .map(|d| (d.kinds.clone(), d.notes.clone()))
    }
}

/// The window `req` of `snap`, or why it cannot be shown (unknown device, a window outside
/// the trace, no columns). `index` is [`WindowIndex::new`] of `replays`.
pub fn window(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    index: &WindowIndex,
    req: &WindowRequest,
) -> Result<WindowView, String> {
    let r = replays
        .iter()
        .find(|r| r.device == req.device)
        .ok_or_else(|| format!("device {} has no trace", req.device))?;
    if req.columns == 0 || req.columns > MAX_COLUMNS {
        return Err(format!("columns must be 1..={MAX_COLUMNS}"));
    }
    let full = r.full_window();
    if req.first > req.last {
        return Err(format!("first {} is after last {}", req.first, req.last));
    }
    let w = Window {
        first: req.first.max(full.first),
        last: req.last.min(full.last),
    };
    if w.first > w.last {
        return Err(format!(
            "window {}..{} is outside the trace ({}..{})",
            req.first, req.last, full.first, full.last
        ));
    }
    let dev = snap
        .devices
        .iter()
        .find(|d| d.id == req.device)
        .expect("a replayed device is a device of the snapshot");
    let trace = snap.device_trace(dev);
    let mut table = FrameTable::default();
    let opts = BandOptions {
        buckets: req.columns,
        ..BandOptions::default()
    };
    let known = match index.device(req.device) {
        Some(d) => bands::Known {
            index: Some(&d.live),
            kinds: Some(&d.kinds),
            notes: Some(&d.notes),
        },
        None => bands::Known::default(),
    };
    let bands = bands::bands(snap, r, trace, w, opts, known, &mut table);
    let peak_at = r.peak_in(w);
    let max_reserved_bytes = (w.first..=w.last)
        .map(|i| r.reserved_at(i))
        .max()
        .unwrap_or(0);
    let held = (w.last - w.first.max(0) + 1).max(0) as usize;
    let every_event = (held <= req.columns).then(|| {
        let mut ev = WindowEvents::default();
        for i in w.first.max(0)..=w.last {
            let e = &trace[i as usize];
            ev.index.push(i);
            ev.action.push(e.action);
            ev.address.push(e.addr);
            ev.size.push(e.size);
            ev.stack.push(table.stack(snap, e.stack));
        }
        ev
    });
    let (frames, stacks) = table.into_parts();
    Ok(WindowView {
        schema_version: crate::analyze::SCHEMA_VERSION,
        device: req.device,
        window: w,
        peak: replay::moment(trace, peak_at),
        peak_bytes: r.live_at(peak_at),
        max_reserved_bytes,
        bands,
        every_event,
        frames,
        stacks,
    })
}

/// One moment of one device, as the page's state, top and flame sections show it, with its
/// own frames and stacks: what `memlens serve` answers for `/api/moment`.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MomentPage {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Device index.
    pub device: u32,
    /// The moment.
    pub moment: MomentView,
    /// Frames of its stacks (indices are this response's own).
    pub frames: Vec<FrameInfo>,
    /// Stacks as indices into `frames`, innermost first.
    pub stacks: Vec<Vec<u32>>,
}

/// The state after event `at` of `device` (named `name` on the page), or why it cannot be
/// shown (unknown device, an event outside the trace). `made`: the device's pre-trace
/// verdicts and notes when made already ([`WindowIndex::made`]); made here otherwise.
pub fn moment(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    made: Option<(Arc<Kinds>, Arc<NoteSource>)>,
    device: u32,
    at: i64,
    name: &str,
    opts: &PageOptions,
) -> Result<MomentPage, String> {
    let r = replays
        .iter()
        .find(|r| r.device == device)
        .ok_or_else(|| format!("device {device} has no trace"))?;
    let full = r.full_window();
    if !full.contains(at) {
        return Err(format!(
            "event {at} is outside the trace ({}..{})",
            full.first, full.last
        ));
    }
    let dev = snap
        .devices
        .iter()
        .find(|d| d.id == device)
        .expect("a replayed device is a device of the snapshot");
    let mut table = FrameTable::default();
    let trace = snap.device_trace(dev);
    let (kinds, notes) = made.unwrap_or_else(|| {
        (
            Arc::new(Kinds::of(snap, r, trace)),
            Arc::new(NoteSource::of(snap, r, trace)),
        )
    });
    let moment = super::moment_view(
        snap,
        Some(Traced {
            replay: r,
            kinds,
            notes,
        }),
        dev,
        name.to_string(),
        at,
        opts,
        &mut table,
    )?;
    let (frames, stacks) = table.into_parts();
    Ok(MomentPage {
        schema_version: crate::analyze::SCHEMA_VERSION,
        device,
        moment,
        frames,
        stacks,
    })
}
