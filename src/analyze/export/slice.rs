//! `memlens slice`: a window of a snapshot as a snapshot of its own, which PyTorch's viewer
//! (MemoryViz.js), `pickle.load` and memlens all read.
//!
//! In: a snapshot, its replays and a window. Out ([`plan`], then [`write`]): a modern
//! snapshot dict (snapshot-format.md §1) written with `pickle::write` (protocol 4, data
//! opcodes only):
//!
//! - `segments`: the allocator state at the window's end (`replay::state`), per device, as
//!   segments with their blocks; `allocated_size`, `active_size` and `requested_size` are
//!   summed from the blocks (invariants I1–I5 hold by construction). A block re-created by
//!   undoing a free carries `round_size(requested)` bytes, as `memlens frag --at` shows it.
//! - `device_traces`: per device (list index = device id), the trace entries of the window,
//!   from event `max(A, 0)` through event `B`, with their frames, stream, `time_us`,
//!   `compile_context` and `user_metadata` as recorded; an `oom` entry's `device_free`.
//! - `allocator_settings` as recorded; `external_annotations` whose time falls within the
//!   window's first and last `time_us` (all of them when the window has no time).
//!
//! Frames, frame lists and key strings are written once and memoized, as CPython's pickler
//! shares them. Devices without a trace keep their final state. Pinned host memory is on no
//! device and is left out.

use crate::model::{
    Action, Annotation, BlockState, PoolKind, SettingValue, Snapshot, StackId, StrId, TraceEvent,
};
use crate::pickle::write::{MemoId, Writer};
use crate::replay::state::{state_at, AllocatorState};
use crate::replay::{self, DeviceReplay, Window, WindowSpec};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::io::{Result, Write};

/// Device ids above this are refused: `device_traces` is a list indexed by device.
const MAX_DEVICE: u32 = 4096;

/// What the slice holds of one device.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SlicedDevice {
    /// Device index.
    pub device: u32,
    /// The states of the trace the window spans (its trace entries are max(first, 0) through
    /// last); `null` for a device without a trace (its final state is kept).
    pub window: Option<Window>,
    /// Trace entries kept.
    pub entries: usize,
    /// Segments at the window's end.
    pub segments: usize,
    /// Blocks at the window's end.
    pub blocks: usize,
    /// Reserved bytes at the window's end (Σ segment sizes).
    pub reserved_bytes: u64,
    /// Bytes of `active_allocated` blocks there.
    pub allocated_bytes: u64,
    /// Requested bytes of non-inactive blocks there.
    pub requested_bytes: u64,
    /// Trace events that could not be undone consistently while rebuilding the state.
    pub inconsistencies: usize,
}

/// What `memlens slice` wrote: per device, the window of the trace kept and the totals of the
/// allocator state at its end (the slice's segments and blocks). The slice itself is a snapshot
/// pickle, not JSON.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SliceReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// The snapshot sliced, as named.
    pub file: String,
    /// The slice written.
    pub output: String,
    /// What the slice holds, per device.
    pub devices: Vec<SlicedDevice>,
    /// What a reader should know.
    pub notes: Vec<String>,
}

/// What [`plan`] decided: per device, the window and the state at its end.
pub struct SlicePlan {
    devices: Vec<(SlicedDevice, AllocatorState)>,
    /// What the slice holds, per device.
    pub summary: Vec<SlicedDevice>,
    /// What a reader should know (host memory left out).
    pub notes: Vec<String>,
}

/// Resolves the window on every device and rebuilds the allocator state at its end.
pub fn plan(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    window: &WindowSpec,
) -> std::result::Result<SlicePlan, String> {
    let mut devices = Vec::new();
    for dev in &snap.devices {
        if dev.id > MAX_DEVICE {
            return Err(format!(
                "device {}: a device index above {MAX_DEVICE} cannot be written as a device_traces list",
                dev.id
            ));
        }
        let trace = snap.device_trace(dev);
        let (w, st) = match replays.iter().find(|r| r.device == dev.id) {
            Some(r) => {
                let w = replay::resolve_window_in(snap, window, r, trace)?;
                (Some(w), state_at(snap, dev, w.last))
            }
            None => (None, state_at(snap, dev, -1)),
        };
        let (mut blocks, mut allocated, mut requested) = (0, 0, 0);
        for s in &st.segments {
            blocks += s.blocks.len();
            for b in &s.blocks {
                if b.state == BlockState::ActiveAllocated {
                    allocated += b.size;
                }
                if b.state != BlockState::Inactive {
                    requested += b.requested;
                }
            }
        }
        let d = SlicedDevice {
            device: dev.id,
            window: w,
            entries: w.map_or(0, |w| (w.last - w.first.max(0) + 1).max(0) as usize),
            segments: st.segments.len(),
            blocks,
            reserved_bytes: st.segments.iter().map(|s| s.size).sum(),
            allocated_bytes: allocated,
            requested_bytes: requested,
            inconsistencies: st.inconsistencies,
        };
        devices.push((d, st));
    }
    let mut notes = Vec::new();
    if snap.host.as_ref().is_some_and(|h| !h.is_empty()) {
        notes.push(
            "pinned host memory (host_segments, host_traces) is on no device and is left out of the slice".to_string(),
        );
    }
    Ok(SlicePlan {
        summary: devices.iter().map(|(d, _)| d.clone()).collect(),
        devices,
        notes,
    })
}

/// Writes the slice that `plan` describes as a protocol-4 pickle.
pub fn write<W: Write>(snap: &Snapshot, plan: &SlicePlan, out: W) -> Result<W> {
    let mut p = Pickler {
        w: Writer::new(out)?,
        snap,
        keys: FxHashMap::default(),
        strs: FxHashMap::default(),
        frames: FxHashMap::default(),
        stacks: FxHashMap::default(),
    };
    p.w.empty_dict()?;
    p.w.mark()?;
    p.key("segments")?;
    p.segments(plan)?;
    p.key("device_traces")?;
    p.traces(plan)?;
    if let Some(settings) = &snap.allocator_settings {
        p.key("allocator_settings")?;
        p.settings(settings)?;
    }
    p.key("external_annotations")?;
    let kept = annotations_in(snap, plan);
    p.w.list(kept, |w, a| annotation(w, a))?;
    p.w.end_batch(true)?;
    p.w.finish()
}

/// The annotations whose time falls within the windows' first and last `time_us`.
fn annotations_in<'s>(snap: &'s Snapshot, plan: &SlicePlan) -> Vec<&'s Annotation> {
    let mut span: Option<(i64, i64)> = None;
    for (d, _) in &plan.devices {
        let (Some(w), Some(dev)) = (d.window, snap.device(d.device)) else {
            continue;
        };
        let trace = snap.device_trace(dev);
        let times = (w.first.max(0)..=w.last).filter_map(|i| trace[i as usize].time());
        for t in times {
            span = Some(span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
    }
    snap.annotations
        .iter()
        .filter(|a| match (span, a.time_us) {
            (Some((lo, hi)), Some(t)) => lo <= t && t <= hi,
            _ => true,
        })
        .collect()
}

fn annotation<W: Write>(w: &mut Writer<W>, a: &Annotation) -> Result<()> {
    w.empty_dict()?;
    w.mark()?;
    w.str("name")?;
    w.str(&a.name)?;
    w.str("stage")?;
    w.str(&a.stage)?;
    if let Some(d) = a.device {
        w.str("device")?;
        w.int(d as i128)?;
    }
    if let Some(t) = a.time_us {
        w.str("time_us")?;
        w.int(t as i128)?;
    }
    w.end_batch(true)
}

/// The writer and what it has memoized.
struct Pickler<'s, W: Write> {
    w: Writer<W>,
    snap: &'s Snapshot,
    keys: FxHashMap<&'static str, MemoId>,
    strs: FxHashMap<StrId, MemoId>,
    frames: FxHashMap<crate::model::FrameId, MemoId>,
    stacks: FxHashMap<StackId, MemoId>,
}

impl<W: Write> Pickler<'_, W> {
    /// A key (or any fixed string), written once and then fetched from the memo.
    fn key(&mut self, k: &'static str) -> Result<()> {
        match self.keys.get(k) {
            Some(&id) => self.w.get(id),
            None => {
                self.w.str(k)?;
                let id = self.w.memoize()?;
                self.keys.insert(k, id);
                Ok(())
            }
        }
    }

    /// An interned string, written once.
    fn interned(&mut self, s: StrId) -> Result<()> {
        match self.strs.get(&s) {
            Some(&id) => self.w.get(id),
            None => {
                self.w.str(self.snap.strings.get(s))?;
                let id = self.w.memoize()?;
                self.strs.insert(s, id);
                Ok(())
            }
        }
    }

    /// A stack as its list of frame dicts (innermost first), each list and frame written once;
    /// an absent stack as `[]`.
    fn stack(&mut self, stack: StackId) -> Result<()> {
        let stack = if stack.is_recorded() {
            stack
        } else {
            StackId::EMPTY
        };
        if let Some(&id) = self.stacks.get(&stack) {
            return self.w.get(id);
        }
        let frames = self.snap.stacks.get(stack);
        self.w.empty_list()?;
        let id = self.w.memoize()?;
        self.stacks.insert(stack, id);
        for batch in frames.chunks(crate::pickle::write::BATCH) {
            self.w.mark()?;
            for &f in batch {
                if let Some(&fid) = self.frames.get(&f) {
                    self.w.get(fid)?;
                    continue;
                }
                let fr = *self.snap.frames.get(f);
                self.w.empty_dict()?;
                let fid = self.w.memoize()?;
                self.frames.insert(f, fid);
                self.w.mark()?;
                self.key("name")?;
                self.interned(fr.name)?;
                self.key("filename")?;
                self.interned(fr.filename)?;
                self.key("line")?;
                self.w.int(fr.line as i128)?;
                if let Some(fx) = self.snap.frames.fx(fr.fx).copied() {
                    for (key, text) in [
                        ("fx_node_op", fx.op),
                        ("fx_node_name", fx.name),
                        ("fx_node_target", fx.target),
                        ("fx_original_trace", fx.original_trace),
                    ] {
                        self.key(key)?;
                        self.interned(text)?;
                    }
                }
                self.w.end_batch(true)?;
            }
            self.w.end_batch(false)?;
        }
        Ok(())
    }

    fn segments(&mut self, plan: &SlicePlan) -> Result<()> {
        self.w.empty_list()?;
        for (d, st) in &plan.devices {
            let dev = self.snap.device(d.device).expect("planned device exists");
            let recorded = self.snap.device_segments(dev);
            for batch in st.segments.chunks(crate::pickle::write::BATCH) {
                self.w.mark()?;
                for s in batch {
                    // The cudaMalloc's stack, when the final state has the segment.
                    let stack = recorded
                        .binary_search_by_key(&s.address, |r| r.address)
                        .map_or(StackId::EMPTY, |k| recorded[k].stack);
                    self.segment(d.device, s, stack)?;
                }
                self.w.end_batch(false)?;
            }
        }
        Ok(())
    }

    fn segment(
        &mut self,
        device: u32,
        s: &crate::replay::state::SegmentAt,
        stack: StackId,
    ) -> Result<()> {
        let (mut allocated, mut active, mut requested) = (0u64, 0u64, 0u64);
        for b in &s.blocks {
            if b.state == BlockState::ActiveAllocated {
                allocated += b.size;
            }
            if b.state != BlockState::Inactive {
                active += b.size;
                requested += b.requested;
            }
        }
        self.w.empty_dict()?;
        self.w.mark()?;
        self.key("device")?;
        self.w.int(device as i128)?;
        self.key("address")?;
        self.w.int(s.address as i128)?;
        self.key("total_size")?;
        self.w.int(s.size as i128)?;
        self.key("allocated_size")?;
        self.w.int(allocated as i128)?;
        self.key("active_size")?;
        self.w.int(active as i128)?;
        self.key("requested_size")?;
        self.w.int(requested as i128)?;
        self.key("stream")?;
        self.w.int(s.stream as i128)?;
        match s.pool {
            PoolKind::Small => {
                self.key("segment_type")?;
                self.key("small")?;
            }
            PoolKind::Large => {
                self.key("segment_type")?;
                self.key("large")?;
            }
            PoolKind::Unknown => {}
        }
        self.key("segment_pool_id")?;
        self.w.int(s.pool_id.0 as i128)?;
        self.w.int(s.pool_id.1 as i128)?;
        self.w.tuple2()?;
        self.key("is_expandable")?;
        self.w.bool(s.expandable)?;
        self.key("frames")?;
        self.stack(stack)?;
        self.key("blocks")?;
        self.w.empty_list()?;
        for batch in s.blocks.chunks(crate::pickle::write::BATCH) {
            self.w.mark()?;
            for b in batch {
                self.block(b)?;
            }
            self.w.end_batch(false)?;
        }
        self.w.end_batch(true)
    }

    fn block(&mut self, b: &crate::replay::state::BlockAt) -> Result<()> {
        self.w.empty_dict()?;
        self.w.mark()?;
        self.key("address")?;
        self.w.int(b.address as i128)?;
        self.key("size")?;
        self.w.int(b.size as i128)?;
        self.key("requested_size")?;
        self.w.int(b.requested as i128)?;
        self.key("state")?;
        self.key(match b.state {
            BlockState::ActiveAllocated => "active_allocated",
            BlockState::ActivePendingFree => "active_pending_free",
            BlockState::Inactive => "inactive",
        })?;
        self.key("frames")?;
        self.stack(b.stack)?;
        self.w.end_batch(true)
    }

    fn traces(&mut self, plan: &SlicePlan) -> Result<()> {
        let last = plan.devices.iter().map(|(d, _)| d.device).max();
        self.w.empty_list()?;
        let Some(last) = last else {
            return Ok(());
        };
        for batch in (0..=last)
            .collect::<Vec<u32>>()
            .chunks(crate::pickle::write::BATCH)
        {
            self.w.mark()?;
            for &id in batch {
                let entries: &[TraceEvent] = match plan
                    .devices
                    .iter()
                    .find(|(d, _)| d.device == id)
                    .and_then(|(d, _)| Some((d.window?, self.snap.device(id)?)))
                {
                    // A window that ends before the first event (`--to` a peak at the
                    // start: state -1) holds no entries.
                    Some((w, dev)) if w.last >= w.first.max(0) => {
                        &self.snap.device_trace(dev)[w.first.max(0) as usize..=w.last as usize]
                    }
                    Some(_) => &[],
                    None => &[],
                };
                self.w.empty_list()?;
                for chunk in entries.chunks(crate::pickle::write::BATCH) {
                    self.w.mark()?;
                    for e in chunk {
                        self.entry(e)?;
                    }
                    self.w.end_batch(false)?;
                }
            }
            self.w.end_batch(false)?;
        }
        Ok(())
    }

    fn entry(&mut self, e: &TraceEvent) -> Result<()> {
        self.w.empty_dict()?;
        self.w.mark()?;
        self.key("action")?;
        self.key(e.action.as_str())?;
        if e.action == Action::Oom {
            self.key("device_free")?;
        } else {
            self.key("addr")?;
        }
        self.w.int(e.addr as i128)?;
        self.key("size")?;
        self.w.int(e.size as i128)?;
        self.key("stream")?;
        self.w.int(self.snap.event_stream(e) as i128)?;
        if let Some(t) = e.time() {
            self.key("time_us")?;
            self.w.int(t as i128)?;
        }
        let tags = *self.snap.event_tags(e);
        if tags.compile_context != StrId::EMPTY {
            self.key("compile_context")?;
            self.interned(tags.compile_context)?;
        }
        if tags.user_metadata != StrId::EMPTY {
            self.key("user_metadata")?;
            self.interned(tags.user_metadata)?;
        }
        if tags.internal_metadata != StrId::EMPTY {
            self.key("internal_metadata")?;
            self.interned(tags.internal_metadata)?;
        }
        if tags.pool_id != (0, 0) {
            self.key("pool_id")?;
            self.w.int(tags.pool_id.0 as i128)?;
            self.w.int(tags.pool_id.1 as i128)?;
            self.w.tuple2()?;
        }
        if tags.forward_stack.is_recorded() {
            // Written back as traceback lines, outermost first, as PyTorch writes them.
            self.key("forward_frames")?;
            self.w.empty_list()?;
            let frames = self.snap.stacks.get(tags.forward_stack);
            for batch in frames.rchunks(crate::pickle::write::BATCH).rev() {
                self.w.mark()?;
                for &f in batch.iter().rev() {
                    let fr = self.snap.frames.get(f);
                    let line = format!(
                        "  File \"{}\", line {}, in {}",
                        self.snap.strings.get(fr.filename),
                        fr.line,
                        self.snap.strings.get(fr.name)
                    );
                    self.w.str(&line)?;
                }
                self.w.end_batch(false)?;
            }
        }
        let recorded = self.snap.recorded_stack(e.stack);
        if recorded.is_recorded() {
            self.key("frames")?;
            self.stack(recorded)?;
        }
        self.w.end_batch(true)
    }

    fn settings(&mut self, settings: &[(String, SettingValue)]) -> Result<()> {
        self.w.empty_dict()?;
        if settings.is_empty() {
            return Ok(());
        }
        self.w.mark()?;
        for (k, v) in settings {
            self.w.str(k)?;
            self.setting(v)?;
        }
        self.w.end_batch(true)
    }

    fn setting(&mut self, v: &SettingValue) -> Result<()> {
        match v {
            SettingValue::Bool(b) => self.w.bool(*b),
            SettingValue::Int(i) => self.w.int(*i as i128),
            SettingValue::UInt(u) => self.w.int(*u as i128),
            SettingValue::Float(f) => self.w.float(*f),
            SettingValue::Text(s) | SettingValue::Other(s) => self.w.str(s),
            SettingValue::Map(m) => self.settings(m),
        }
    }
}
