//! `memlens summary`: per-device totals of the final allocator state and of the trace.

use crate::model::{
    Action, BlockState, HostMemory, Layout, PoolKind, SettingValue, Snapshot, TraceEvent, Warning,
};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

/// The whole summary of one snapshot.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SummaryReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Top-level shape of the file.
    pub layout: Layout,
    /// One entry per device with segments or a non-empty trace, by device id.
    pub devices: Vec<DeviceSummary>,
    /// `allocator_settings` as recorded, in file order (absent before PyTorch 2.3: `null`).
    #[serde(serialize_with = "ordered_map")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<BTreeMap<String, SettingJson<'static>>>")
    )]
    pub allocator_settings: Option<Vec<(String, SettingValue)>>,
    /// Number of `external_annotations` entries.
    pub annotations: usize,
    /// Distinct frames and stacks recorded.
    pub distinct_frames: usize,
    /// Distinct stacks recorded (the empty stack included).
    pub distinct_stacks: usize,
    /// Pinned host memory (`host_segments`, `host_traces`: PyTorch 2.14+ with
    /// `record_pinned_host_memory=True`), a pool of its own that no device's figures include;
    /// `null` when the file records none.
    pub host: Option<HostSummary>,
    /// The accelerator the snapshot was taken on, where its frames or allocator settings say
    /// it ([`crate::vocab::devices::device_type`]); absent when nothing says (no key of the
    /// format names it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_type: Option<crate::vocab::devices::DeviceType>,
    /// Data-quality warnings.
    pub warnings: Vec<Warning>,
    /// Trace entries (every device and pinned host memory) whose action memlens does not know
    /// (torch_npu's `workspace_snapshot`, actions added after this release), per action name,
    /// by name: kept, never taken for an allocation or a free. Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_actions: Vec<UnknownAction>,
}

/// Entries of one unknown action.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct UnknownAction {
    /// The action as written.
    pub action: String,
    /// Entries with it.
    pub entries: u64,
}

/// Totals of pinned host memory: the final state of its segments, and its trace.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HostSummary {
    /// Number of `host_segments`.
    pub segments: usize,
    /// Number of their blocks.
    pub blocks: usize,
    /// Σ segment total_size: pinned memory the host allocator holds.
    pub reserved_bytes: u64,
    /// Σ block size over active_allocated blocks.
    pub allocated_bytes: u64,
    /// Σ requested_size over active_allocated blocks.
    pub requested_bytes: u64,
    /// Σ block size over active_pending_free blocks (freed, awaiting stream work).
    pub pending_free_bytes: u64,
    /// Σ block size over inactive (cached) blocks.
    pub inactive_bytes: u64,
    /// Largest inactive block, 0 if none.
    pub largest_inactive_block_bytes: u64,
    /// Number of `host_traces` entries.
    pub trace_entries: usize,
    /// Trace statistics.
    pub trace: TraceSummary,
    /// The most live requested bytes over the trace: what was live before it (the final
    /// live blocks less the trace's allocations plus its frees) and after each entry; `null`
    /// without an alloc or free in the trace.
    pub peak_live_bytes: Option<u64>,
}

/// Trace entries recorded inside one compiled region (`compile_context`, with
/// `_record_memory_history(compile_context=True)`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CompileContextSummary {
    /// The region as recorded, e.g. `Torch-Compiled Region: 0/0`.
    pub context: String,
    /// Trace entries recorded in it.
    pub entries: u64,
    /// `alloc` entries among them.
    pub allocs: u64,
    /// Σ size of those allocations (requested bytes).
    pub alloc_bytes: u64,
}

/// Totals for one device.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceSummary {
    /// Device index.
    pub device: u32,
    /// Number of segments.
    pub segments: usize,
    /// Number of blocks.
    pub blocks: usize,
    /// Σ segment total_size.
    pub reserved_bytes: u64,
    /// Σ block size over active_allocated blocks.
    pub allocated_bytes: u64,
    /// Σ requested_size over active_allocated blocks.
    pub requested_bytes: u64,
    /// allocated − requested: lost to the allocator's rounding.
    pub rounding_waste_bytes: u64,
    /// Σ block size over active_pending_free blocks.
    pub pending_free_bytes: u64,
    /// Σ block size over inactive (cached free) blocks.
    pub inactive_bytes: u64,
    /// Largest inactive block, 0 if none.
    pub largest_inactive_block_bytes: u64,
    /// Number of entries in this device's trace list.
    pub trace_entries: usize,
    /// Segments that are ranges of expandable segments.
    pub expandable_segments: usize,
    /// Segments in private pools (CUDA graphs, MemPool).
    pub private_pool_segments: usize,
    /// Per pool kind, private pool id and stream.
    pub pools: Vec<PoolSummary>,
    /// Trace statistics.
    pub trace: TraceSummary,
    /// Requested bytes the trace leaves live at its end in no segment of the final state (the
    /// segment list is empty or partial: warning `segments_do_not_cover_trace`); left out
    /// when 0, which is when the segments cover the trace.
    #[serde(skip_serializing_if = "is_zero")]
    pub uncovered_live_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Requested bytes `dev`'s trace leaves live outside its segments: measured only where the
/// load found the segments short of the trace (warning `segments_do_not_cover_trace`).
fn uncovered_live_bytes(snap: &Snapshot, dev: &crate::model::Device) -> u64 {
    let warned = snap
        .warnings
        .iter()
        .any(|w| w.code == "segments_do_not_cover_trace" && w.device == Some(dev.id));
    if warned {
        crate::model::coverage::coverage(snap, dev).uncovered_bytes
    } else {
        0
    }
}

/// Totals for one (pool kind, pool id, stream).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PoolSummary {
    /// small / large.
    pub pool: PoolKind,
    /// Private pool id; [0, 0] for the default pools.
    pub pool_id: [u64; 2],
    /// Raw stream handle.
    pub stream: u64,
    /// Number of segments.
    pub segments: usize,
    /// Σ total_size.
    pub reserved_bytes: u64,
    /// Σ active_allocated block sizes.
    pub allocated_bytes: u64,
    /// Σ inactive block sizes.
    pub inactive_bytes: u64,
    /// Largest inactive block.
    pub largest_inactive_block_bytes: u64,
}

/// Counts and time span of a device's trace.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TraceSummary {
    /// Entries per action name (actions with no entries omitted).
    pub by_action: BTreeMap<&'static str, u64>,
    /// time_us of the first entry with a time.
    pub first_time_us: Option<i64>,
    /// time_us of the last entry with a time.
    pub last_time_us: Option<i64>,
    /// Entries that carry a stack.
    pub entries_with_frames: usize,
    /// Entries per compiled region (`compile_context` other than empty or `N/A`), most
    /// allocated bytes first; empty when none was recorded.
    pub compile_contexts: Vec<CompileContextSummary>,
}

fn ordered_map<S: Serializer>(
    v: &Option<Vec<(String, SettingValue)>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    match v {
        None => s.serialize_none(),
        Some(pairs) => {
            let mut m = s.serialize_map(Some(pairs.len()))?;
            for (k, v) in pairs {
                m.serialize_entry(k, &SettingJson(v))?;
            }
            m.end()
        }
    }
}

/// A setting as JSON: a map setting (`Vec` of pairs in the model) written as an object.
struct SettingJson<'a>(&'a SettingValue);

/// The schema of [`SettingJson`]'s output: a scalar, or an object of settings.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for SettingJson<'_> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AllocatorSetting".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let value = generator.subschema_for::<Self>();
        schemars::json_schema!({
            "description": "One allocator setting: boolean, integer (`max_split_size` -1 = \
                unlimited), float, text, or a string-keyed map of settings \
                (`roundup_power2_divisions`).",
            "type": ["boolean", "integer", "number", "string", "object"],
            "additionalProperties": value,
        })
    }
}

impl Serialize for SettingJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self.0 {
            SettingValue::Map(pairs) => {
                let mut m = s.serialize_map(Some(pairs.len()))?;
                for (k, v) in pairs {
                    m.serialize_entry(k, &SettingJson(v))?;
                }
                m.end()
            }
            other => other.serialize(s),
        }
    }
}

/// Summarizes `snap`.
pub fn run(snap: &Snapshot) -> SummaryReport {
    let devices = snap
        .devices
        .iter()
        .map(|dev| {
            let mut d = DeviceSummary {
                device: dev.id,
                segments: dev.segments.len(),
                blocks: 0,
                reserved_bytes: 0,
                allocated_bytes: 0,
                requested_bytes: 0,
                rounding_waste_bytes: 0,
                pending_free_bytes: 0,
                inactive_bytes: 0,
                largest_inactive_block_bytes: 0,
                trace_entries: dev.trace.len(),
                expandable_segments: 0,
                private_pool_segments: 0,
                pools: Vec::new(),
                trace: trace_summary(snap, snap.device_trace(dev)),
                uncovered_live_bytes: uncovered_live_bytes(snap, dev),
            };
            let mut pools: BTreeMap<(PoolKind, (u64, u64), u64), PoolSummary> = BTreeMap::new();
            for s in snap.device_segments(dev) {
                let p = pools
                    .entry((s.pool, s.pool_id, s.stream))
                    .or_insert_with(|| PoolSummary {
                        pool: s.pool,
                        pool_id: [s.pool_id.0, s.pool_id.1],
                        stream: s.stream,
                        segments: 0,
                        reserved_bytes: 0,
                        allocated_bytes: 0,
                        inactive_bytes: 0,
                        largest_inactive_block_bytes: 0,
                    });
                p.segments += 1;
                p.reserved_bytes += s.total_size;
                d.reserved_bytes += s.total_size;
                d.expandable_segments += s.expandable as usize;
                d.private_pool_segments += s.is_private_pool() as usize;
                let blocks = snap.segment_blocks(s);
                d.blocks += blocks.len();
                for b in blocks {
                    match b.state {
                        BlockState::ActiveAllocated => {
                            d.allocated_bytes += b.size;
                            d.requested_bytes += b.requested_size;
                            p.allocated_bytes += b.size;
                        }
                        BlockState::ActivePendingFree => d.pending_free_bytes += b.size,
                        BlockState::Inactive => {
                            d.inactive_bytes += b.size;
                            p.inactive_bytes += b.size;
                            d.largest_inactive_block_bytes =
                                d.largest_inactive_block_bytes.max(b.size);
                            p.largest_inactive_block_bytes =
                                p.largest_inactive_block_bytes.max(b.size);
                        }
                    }
                }
            }
            d.rounding_waste_bytes = d.allocated_bytes.saturating_sub(d.requested_bytes);
            d.pools = pools.into_values().collect();
            d
        })
        .collect();
    SummaryReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        layout: snap.layout,
        devices,
        allocator_settings: snap.allocator_settings.clone(),
        annotations: snap.annotations.len(),
        distinct_frames: snap.recorded_distinct.0,
        distinct_stacks: snap.recorded_distinct.1,
        host: snap.host.as_ref().map(|h| host_summary(snap, h)),
        warnings: snap.warnings.clone(),
        device_type: crate::vocab::devices::device_type(snap),
        unknown_actions: snap
            .unknown_actions
            .iter()
            .map(|(action, entries)| UnknownAction {
                action: action.clone(),
                entries: *entries,
            })
            .collect(),
    }
}

fn trace_summary(snap: &Snapshot, trace: &[TraceEvent]) -> TraceSummary {
    let mut counts = [0u64; 13];
    let mut with_frames = 0;
    let mut contexts: BTreeMap<&str, CompileContextSummary> = BTreeMap::new();
    for e in trace {
        counts[e.action as usize] += 1;
        with_frames += (!snap.split_forward(e.stack).0.is_empty()) as usize;
        let context = snap.strings.get(snap.event_tags(e).compile_context);
        if !context.is_empty() && context != "N/A" {
            let c = contexts
                .entry(context)
                .or_insert_with(|| CompileContextSummary {
                    context: context.to_string(),
                    entries: 0,
                    allocs: 0,
                    alloc_bytes: 0,
                });
            c.entries += 1;
            if e.action == Action::Alloc {
                c.allocs += 1;
                c.alloc_bytes += e.size;
            }
        }
    }
    let by_action = ALL_ACTIONS
        .iter()
        .filter(|a| counts[**a as usize] > 0)
        .map(|a| (a.as_str(), counts[*a as usize]))
        .collect();
    let mut compile_contexts: Vec<CompileContextSummary> = contexts.into_values().collect();
    compile_contexts.sort_by(|a, b| {
        b.alloc_bytes
            .cmp(&a.alloc_bytes)
            .then_with(|| a.context.cmp(&b.context))
    });
    TraceSummary {
        by_action,
        first_time_us: trace.iter().find_map(|e| e.time()),
        last_time_us: trace.iter().rev().find_map(|e| e.time()),
        entries_with_frames: with_frames,
        compile_contexts,
    }
}

fn host_summary(snap: &Snapshot, h: &HostMemory) -> HostSummary {
    let mut s = HostSummary {
        segments: h.segments.len(),
        blocks: 0,
        reserved_bytes: 0,
        allocated_bytes: 0,
        requested_bytes: 0,
        pending_free_bytes: 0,
        inactive_bytes: 0,
        largest_inactive_block_bytes: 0,
        trace_entries: h.events.len(),
        trace: trace_summary(snap, &h.events),
        peak_live_bytes: None,
    };
    let mut live_end = 0u64;
    for seg in &h.segments {
        s.reserved_bytes += seg.total_size;
        let blocks = snap.segment_blocks(seg);
        s.blocks += blocks.len();
        for b in blocks {
            match b.state {
                BlockState::ActiveAllocated => {
                    s.allocated_bytes += b.size;
                    s.requested_bytes += b.requested_size;
                    live_end += b.requested_size;
                }
                BlockState::ActivePendingFree => {
                    s.pending_free_bytes += b.size;
                    live_end += b.requested_size;
                }
                BlockState::Inactive => {
                    s.inactive_bytes += b.size;
                    s.largest_inactive_block_bytes = s.largest_inactive_block_bytes.max(b.size);
                }
            }
        }
    }
    s.peak_live_bytes = host_peak(&h.events, live_end, !h.segments.is_empty());
    s
}

/// The most live bytes over `trace`, as the replay counts them (an allocation lives from its
/// `alloc` to its `free_completed`): the state before the trace is what the final live bytes
/// (when the final segments were recorded) imply, never below what the trace itself frees.
fn host_peak(trace: &[TraceEvent], live_end: u64, have_end: bool) -> Option<u64> {
    let mut net: i128 = 0;
    let mut lowest: i128 = 0;
    let mut highest: i128 = 0;
    let mut moved = false;
    for e in trace {
        match e.action {
            Action::Alloc => net += e.size as i128,
            Action::FreeCompleted | Action::Free => net -= e.size as i128,
            _ => continue,
        }
        moved = true;
        lowest = lowest.min(net);
        highest = highest.max(net);
    }
    if !moved {
        return None;
    }
    let before = if have_end {
        (live_end as i128 - net).max(-lowest)
    } else {
        -lowest
    };
    Some((before + highest).max(0) as u64)
}

const ALL_ACTIONS: [Action; 13] = [
    Action::Alloc,
    Action::FreeRequested,
    Action::FreeCompleted,
    Action::Free,
    Action::SegmentAlloc,
    Action::SegmentFree,
    Action::SegmentMap,
    Action::SegmentUnmap,
    Action::Oom,
    Action::Snapshot,
    Action::UserDefined,
    Action::Annotate,
    Action::Other,
];
