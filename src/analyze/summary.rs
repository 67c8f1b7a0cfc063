//! `memlens summary`: per-device totals of the final allocator state and of the trace.

use crate::model::{Action, BlockState, Layout, PoolKind, SettingValue, Snapshot, Warning};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;

/// The whole summary of one snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct SummaryReport {
    /// Always [`super::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Top-level shape of the file.
    pub layout: Layout,
    /// One entry per device with segments or a non-empty trace, by device id.
    pub devices: Vec<DeviceSummary>,
    /// `allocator_settings` as recorded (absent before PyTorch 2.3).
    #[serde(serialize_with = "ordered_map")]
    pub allocator_settings: Option<Vec<(String, SettingValue)>>,
    /// Number of `external_annotations` entries.
    pub annotations: usize,
    /// Distinct frames and stacks recorded.
    pub distinct_frames: usize,
    /// Distinct stacks recorded (the empty stack included).
    pub distinct_stacks: usize,
    /// Data-quality warnings.
    pub warnings: Vec<Warning>,
}

/// Totals for one device.
#[derive(Debug, Clone, Serialize, PartialEq)]
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
}

/// Totals for one (pool kind, pool id, stream).
#[derive(Debug, Clone, Serialize, PartialEq)]
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
pub struct TraceSummary {
    /// Entries per action name.
    pub by_action: BTreeMap<&'static str, u64>,
    /// time_us of the first entry with a time.
    pub first_time_us: Option<i64>,
    /// time_us of the last entry with a time.
    pub last_time_us: Option<i64>,
    /// Entries that carry a stack.
    pub entries_with_frames: usize,
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

struct SettingJson<'a>(&'a SettingValue);

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
                trace: trace_summary(snap, dev),
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
        schema_version: super::SCHEMA_VERSION,
        layout: snap.layout,
        devices,
        allocator_settings: snap.allocator_settings.clone(),
        annotations: snap.annotations.len(),
        distinct_frames: snap.frames.len(),
        distinct_stacks: snap.stacks.len(),
        warnings: snap.warnings.clone(),
    }
}

fn trace_summary(snap: &Snapshot, dev: &crate::model::Device) -> TraceSummary {
    let trace = snap.device_trace(dev);
    let mut counts = [0u64; 13];
    let mut with_frames = 0;
    for e in trace {
        counts[e.action as usize] += 1;
        with_frames += (!snap.stacks.get(e.stack).is_empty()) as usize;
    }
    let by_action = ALL_ACTIONS
        .iter()
        .filter(|a| counts[**a as usize] > 0)
        .map(|a| (a.as_str(), counts[*a as usize]))
        .collect();
    TraceSummary {
        by_action,
        first_time_us: trace.iter().find_map(|e| e.time()),
        last_time_us: trace.iter().rev().find_map(|e| e.time()),
        entries_with_frames: with_frames,
    }
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
