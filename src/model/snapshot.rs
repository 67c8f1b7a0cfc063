//! The typed snapshot: devices, segments, blocks, trace events, settings and warnings.
//!
//! Every snapshot variant (modern dict, 2.0-era dict with block `history`, bare segment list,
//! profiler-derived, JSON) is normalized into these types by [`super::build()`].

use super::ids::{StackId, StreamId, TagsId};
use super::intern::{EventTags, Frames, Stacks, Strings, Tags};
use serde::Serialize;
use std::ops::Range;

/// Which top-level shape the file had (snapshot-format.md §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// A dict with `segments` and `device_traces` (PyTorch 2.1+).
    Modern,
    /// A PyTorch 2.0-era dict: blocks carry `history` and no `address`.
    Legacy,
    /// A bare list of segment dicts (a pickle of `torch.cuda.memory_snapshot()`).
    SegmentList,
}

/// Caching-allocator pool of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PoolKind {
    /// Requests of at most 1 MiB.
    Small,
    /// Larger requests.
    Large,
    /// `segment_type` absent or unknown.
    Unknown,
}

impl PoolKind {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            PoolKind::Small => "small",
            PoolKind::Large => "large",
            PoolKind::Unknown => "unknown",
        }
    }
}

/// Allocation state of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BlockState {
    /// Handed out to a tensor.
    ActiveAllocated,
    /// Freed by the user but still in use by another stream (`record_stream`).
    ActivePendingFree,
    /// Cached free memory.
    Inactive,
}

/// One cudaMalloc (or one contiguous mapped range of an expandable segment).
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// Device index.
    pub device: u32,
    /// Base address (int64-cast addresses from the C++ path are taken back to unsigned).
    pub address: u64,
    /// Bytes reserved.
    pub total_size: u64,
    /// `allocated_size` as recorded, if present.
    pub recorded_allocated: Option<u64>,
    /// `active_size` as recorded, if present.
    pub recorded_active: Option<u64>,
    /// `requested_size` as recorded, if present.
    pub recorded_requested: Option<u64>,
    /// Raw `cudaStream_t` handle (0 = default stream); compare for equality only.
    pub stream: u64,
    /// Small or large pool.
    pub pool: PoolKind,
    /// Owning private pool; (0, 0) = the default pools.
    pub pool_id: (u64, u64),
    /// Part of an expandable segment.
    pub expandable: bool,
    /// Stack of the cudaMalloc, if recorded.
    pub stack: StackId,
    /// Indices of its blocks in [`Snapshot::blocks`], in address order.
    pub blocks: Range<u32>,
}

impl Segment {
    /// True when the segment belongs to a private pool (CUDA graphs, MemPool).
    pub fn is_private_pool(&self) -> bool {
        self.pool_id != (0, 0)
    }
}

/// One block of a segment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Block {
    /// Address (computed as the running sum when the file has none).
    pub address: u64,
    /// Bytes, rounded by the allocator.
    pub size: u64,
    /// Bytes requested by the user; stale garbage on inactive blocks (ignore it there).
    pub requested_size: u64,
    /// Allocation state.
    pub state: BlockState,
    /// Stack of the allocation that handed the block out.
    pub stack: StackId,
    /// False when `address` was computed rather than read.
    pub address_recorded: bool,
}

/// The `action` of a trace event (snapshot-format.md §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// A block handed out; `size` = requested bytes.
    Alloc,
    /// The user freed a block.
    FreeRequested,
    /// The free took effect (after stream uses completed).
    FreeCompleted,
    /// Legacy (late-2022) single free action.
    Free,
    /// cudaMalloc of a new segment.
    SegmentAlloc,
    /// cudaFree of a segment.
    SegmentFree,
    /// Pages mapped into an expandable segment.
    SegmentMap,
    /// Pages unmapped from an expandable segment.
    SegmentUnmap,
    /// A failed allocation; `addr` holds `device_free`.
    Oom,
    /// An earlier snapshot call.
    Snapshot,
    /// 2024 nightlies' record_function marker.
    UserDefined,
    /// An annotation of an allocation.
    Annotate,
    /// Any other action name.
    Other,
}

impl Action {
    /// True for entries that change no allocator state and sit anywhere in a trace: an
    /// `annotate` (PyTorch 2.14) and actions memlens does not know (torch_npu's
    /// `workspace_snapshot`). Readers that pair neighbouring entries look past them.
    pub fn is_inert(self) -> bool {
        matches!(self, Action::Annotate | Action::Other)
    }

    /// Parses an action name.
    pub fn parse(name: &[u8]) -> Action {
        match name {
            b"alloc" => Action::Alloc,
            b"free_requested" => Action::FreeRequested,
            b"free_completed" => Action::FreeCompleted,
            b"free" => Action::Free,
            b"segment_alloc" => Action::SegmentAlloc,
            b"segment_free" => Action::SegmentFree,
            b"segment_map" => Action::SegmentMap,
            b"segment_unmap" => Action::SegmentUnmap,
            b"oom" => Action::Oom,
            b"snapshot" => Action::Snapshot,
            b"user_defined" => Action::UserDefined,
            b"annotate" => Action::Annotate,
            _ => Action::Other,
        }
    }

    /// The name as written in snapshots.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::Free => "free",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Oom => "oom",
            Action::Snapshot => "snapshot",
            Action::UserDefined => "user_defined",
            Action::Annotate => "annotate",
            Action::Other => "other",
        }
    }
}

impl TraceEvent {
    /// True when this entry ends an allocation: a completed free, or a requested one in a
    /// trace that [`Snapshot::frees_at_request`].
    #[inline]
    pub fn ends_allocation(&self, at_request: bool) -> bool {
        matches!(self.action, Action::FreeCompleted | Action::Free)
            || (at_request && self.action == Action::FreeRequested)
    }
}

/// Sentinel for an event without `time_us` (files before PyTorch 2.2).
pub const NO_TIME: i64 = i64::MIN;

/// One entry of a device's trace ring buffer (40 bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceEvent {
    /// Block or segment address; for `oom`, the device's free bytes (`device_free`).
    pub addr: u64,
    /// Bytes (requested bytes for alloc/free; segment bytes for segment actions).
    pub size: u64,
    /// The stream: its raw handle is [`Snapshot::event_stream`].
    pub stream: StreamId,
    /// Wall-clock µs since the epoch, or [`NO_TIME`].
    pub time_us: i64,
    /// Stack, or `StackId::ABSENT` when the entry had no `frames` key.
    pub stack: StackId,
    /// `compile_context`, `user_metadata`, `internal_metadata`, `forward_frames` and
    /// `pool_id`: [`Snapshot::tags`] (`TagsId::NONE` when the entry has none).
    pub tags: TagsId,
    /// What happened.
    pub action: Action,
}

impl TraceEvent {
    /// `time_us` if recorded.
    pub fn time(&self) -> Option<i64> {
        (self.time_us != NO_TIME).then_some(self.time_us)
    }

    /// `device_free` of an `oom` event.
    pub fn device_free(&self) -> Option<u64> {
        (self.action == Action::Oom).then_some(self.addr)
    }
}

/// A record_function START/END mark (`external_annotations`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Annotation {
    /// Device index, if recorded.
    pub device: Option<i64>,
    /// Scope name, e.g. `ProfilerStep#3`.
    pub name: String,
    /// `START` or `END`.
    pub stage: String,
    /// µs since the epoch, if recorded.
    pub time_us: Option<i64>,
}

/// A scalar setting value of `allocator_settings`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum SettingValue {
    /// Boolean.
    Bool(bool),
    /// Integer (`max_split_size` -1 = unlimited).
    Int(i64),
    /// Unsigned integer too large for i64.
    UInt(u64),
    /// Float (`garbage_collection_threshold`).
    Float(f64),
    /// Text.
    Text(String),
    /// A string-keyed map (`roundup_power2_divisions`).
    Map(Vec<(String, SettingValue)>),
    /// Anything else, described.
    Other(String),
}

/// Per-device data: indices into the snapshot's segment and event arrays.
#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    /// Device index.
    pub id: u32,
    /// Its segments in [`Snapshot::segments`] (sorted by address).
    pub segments: Range<usize>,
    /// Its trace in [`Snapshot::events`], oldest first.
    pub trace: Range<usize>,
    /// True when `device_traces` had a list for this device.
    pub trace_recorded: bool,
}

/// The `device` a segment of pinned host memory may carry (`-1`, the CPU's index): it belongs
/// to no GPU. A device segment with it is refused.
pub const HOST_DEVICE: u32 = u32::MAX;

/// Pinned host memory (`host_segments`, `host_traces`; PyTorch 2.14+ with
/// `_record_memory_history(record_pinned_host_memory=True)`): the CachingHostAllocator's
/// state and history, a pool of its own that belongs to no device. Its segments' blocks are in
/// [`Snapshot::blocks`] like every other block.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostMemory {
    /// `host_segments`, in file order.
    pub segments: Vec<Segment>,
    /// `host_traces`, oldest first (one list; a list of lists is joined in order).
    pub events: Vec<TraceEvent>,
    /// True when the file has `host_segments`.
    pub segments_recorded: bool,
    /// True when the file has `host_traces`.
    pub trace_recorded: bool,
}

impl HostMemory {
    /// True when the file recorded host memory but holds none of it.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty() && self.events.is_empty()
    }
}

/// A data-quality finding that does not stop the analysis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Warning {
    /// Stable machine-readable code, e.g. `ring_buffer_wrapped`.
    pub code: &'static str,
    /// Device the warning is about; `null` when it is about the whole file.
    pub device: Option<u32>,
    /// One line for a person.
    pub message: String,
}

/// A whole decoded snapshot.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Top-level shape of the file.
    pub layout: Layout,
    /// Interned strings.
    pub strings: Strings,
    /// Interned frames.
    pub frames: Frames,
    /// Interned stacks.
    pub stacks: Stacks,
    /// All segments, sorted by (device, address).
    pub segments: Vec<Segment>,
    /// All blocks; each segment owns a contiguous range.
    pub blocks: Vec<Block>,
    /// All trace events; each device owns a contiguous range.
    pub events: Vec<TraceEvent>,
    /// Raw stream handles of the events, by [`StreamId`] (`streams[0]` is 0, the default).
    pub streams: Vec<u64>,
    /// Devices with segments or a trace list, sorted by id.
    pub devices: Vec<Device>,
    /// `allocator_settings`, in file order, if present.
    pub allocator_settings: Option<Vec<(String, SettingValue)>>,
    /// `external_annotations`.
    pub annotations: Vec<Annotation>,
    /// Pinned host memory, when the file has `host_segments` or `host_traces`; no device's
    /// figures include it.
    pub host: Option<HostMemory>,
    /// Data-quality warnings found while building.
    pub warnings: Vec<Warning>,
    /// The trace entries' tags ([`TraceEvent::tags`]).
    pub tags: Tags,
    /// The stack each FX node's `fx_original_trace` spells (innermost first), by
    /// [`FxId`](super::FxId) (`StackId::ABSENT` for a node without a readable trace, and for
    /// `FxId::NONE`).
    pub fx_stacks: Vec<StackId>,
    /// The frame between a backward-pass entry's own frames and its forward frames in the
    /// stacks that join them ([`super::kinds::FORWARD_MARKER`]); `None` when no entry has
    /// `forward_frames`.
    pub forward_marker: Option<super::FrameId>,
    /// Each stack that joins an entry's own frames and its forward frames → the stack as
    /// recorded on the entry (`StackId::ABSENT` when it had no `frames` key).
    pub recorded_stacks: rustc_hash::FxHashMap<StackId, StackId>,
    /// Distinct frames and stacks the file holds (`forward_frames` lists included), before
    /// memlens adds the stacks of [`Snapshot::recorded_stacks`] and [`Snapshot::fx_stacks`].
    pub recorded_distinct: (usize, usize),
    /// Trace entries whose action memlens does not know (torch_npu's `workspace_snapshot`,
    /// later additions), per action name, sorted by name; kept as [`Action::Other`], never
    /// taken for an alloc or free.
    pub unknown_actions: Vec<(String, u64)>,
}

impl Snapshot {
    /// The tags of the trace entry `e` (compile context, metadata, forward stack, pool).
    #[inline]
    pub fn event_tags(&self, e: &TraceEvent) -> &EventTags {
        self.tags.get(e.tags)
    }

    /// The stack of the model code an FX node was traced from (`fx_original_trace`), if any.
    pub fn fx_stack(&self, fx: super::FxId) -> Option<StackId> {
        self.fx_stacks
            .get(fx.0 as usize)
            .copied()
            .filter(|s| s.is_recorded())
    }

    /// The frames of `stack` as recorded on its holder (a joined stack's own part) and its
    /// forward frames (empty when it has none), each innermost first.
    #[inline]
    pub fn split_forward(&self, stack: StackId) -> (&[super::FrameId], &[super::FrameId]) {
        let frames = self.stacks.get(stack);
        let Some(marker) = self.forward_marker else {
            return (frames, &[]);
        };
        match frames.iter().position(|&f| f == marker) {
            Some(at) => (&frames[..at], &frames[at + 1..]),
            None => (frames, &[]),
        }
    }

    /// The stack as the file recorded it on the holder: `stack` itself but for a stack that
    /// joins forward frames ([`Snapshot::split_forward`]).
    pub fn recorded_stack(&self, stack: StackId) -> StackId {
        self.recorded_stacks.get(&stack).copied().unwrap_or(stack)
    }

    /// The segments of `device`.
    pub fn device_segments(&self, device: &Device) -> &[Segment] {
        &self.segments[device.segments.clone()]
    }

    /// The trace of `device`, oldest first.
    pub fn device_trace(&self, device: &Device) -> &[TraceEvent] {
        &self.events[device.trace.clone()]
    }

    /// The segments of pinned host memory (none when the file recorded none).
    pub fn host_segments(&self) -> &[Segment] {
        self.host.as_ref().map_or(&[], |h| &h.segments)
    }

    /// The blocks of `segment`, in address order.
    pub fn segment_blocks(&self, segment: &Segment) -> &[Block] {
        &self.blocks[segment.blocks.start as usize..segment.blocks.end as usize]
    }

    /// Bytes the decoded model holds on the heap (events, blocks, segments and the interning
    /// tables), approximately: the figure the performance goals compare with the file size.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.events.capacity() * size_of::<TraceEvent>()
            + self.streams.capacity() * size_of::<u64>()
            + self.blocks.capacity() * size_of::<Block>()
            + self.segments.capacity() * size_of::<Segment>()
            + self.devices.capacity() * size_of::<Device>()
            + self.annotations.capacity() * size_of::<Annotation>()
            + self.host.as_ref().map_or(0, |h| {
                h.segments.capacity() * size_of::<Segment>()
                    + h.events.capacity() * size_of::<TraceEvent>()
            })
            + self.strings.heap_bytes()
            + self.frames.heap_bytes()
            + self.stacks.heap_bytes()
    }

    /// Every frame of a stack, innermost first, as `filename:name:line` joined by `;`
    /// (`<absent>` when the holder had no `frames` key): a stack spelled out, for comparing
    /// snapshots whose interned ids are numbered differently.
    pub fn stack_text(&self, id: StackId) -> String {
        if !id.is_recorded() {
            return "<absent>".into();
        }
        let frames = self.stacks.get(id).iter().map(|f| {
            let f = self.frames.get(*f);
            let (file, name) = (self.strings.get(f.filename), self.strings.get(f.name));
            format!("{file}:{name}:{}", f.line)
        });
        frames.collect::<Vec<_>>().join(";")
    }

    /// The raw stream handle of event `e` (0 = the default stream).
    pub fn event_stream(&self, e: &TraceEvent) -> u64 {
        self.streams.get(e.stream.0 as usize).copied().unwrap_or(0)
    }

    /// The blocks of `device` that hold memory at the end (allocated or pending free).
    pub fn live_blocks<'s>(&'s self, device: &Device) -> impl Iterator<Item = &'s Block> + 's {
        self.device_segments(device)
            .iter()
            .flat_map(move |s| self.segment_blocks(s))
            .filter(|b| b.state != BlockState::Inactive)
    }

    /// True when `device`'s trace frees at `free_requested`: it has no `free_completed` (or
    /// legacy `free`) at all, and a `free_requested` of a block that is not waiting on another
    /// stream at the end (`active_pending_free`, what `record_stream` leaves) — what
    /// `skip_actions=['free_completed']` records. Every reader that ends an allocation at its
    /// completed free ends it at the request then.
    pub fn frees_at_request(&self, device: &Device) -> bool {
        let trace = self.device_trace(device);
        if trace
            .iter()
            .any(|e| matches!(e.action, Action::FreeCompleted | Action::Free))
        {
            return false;
        }
        let pending: rustc_hash::FxHashSet<u64> = self
            .live_blocks(device)
            .filter(|b| b.state == BlockState::ActivePendingFree)
            .map(|b| b.address)
            .collect();
        trace
            .iter()
            .any(|e| e.action == Action::FreeRequested && !pending.contains(&e.addr))
    }

    /// The device with index `id`.
    pub fn device(&self, id: u32) -> Option<&Device> {
        self.devices.iter().find(|d| d.id == id)
    }

    /// A setting of `allocator_settings` by name.
    pub fn setting(&self, name: &str) -> Option<&SettingValue> {
        self.allocator_settings
            .as_ref()?
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// True when any stack holds at least one frame.
    pub fn has_frames(&self) -> bool {
        self.stacks.frame_refs() > 0
    }
}
