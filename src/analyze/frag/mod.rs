//! `memlens frag`: fragmentation of the caching allocator at a moment, per pool and stream.

use crate::model::{BlockState, PoolKind, Snapshot};
use crate::replay::state::{self, AllocatorState, SegmentAt};
use crate::replay::{self, DeviceReplay, Moment, MomentSpec};
use crate::units::iec;
use serde::Serialize;
use std::collections::BTreeMap;

pub mod pinned;
pub mod pools;

/// Options of `frag`.
#[derive(Clone, Copy, Debug)]
pub struct FragOptions {
    /// The moment.
    pub at: MomentSpec,
    /// Worst segments listed per device.
    pub worst: usize,
    /// Characters per segment map.
    pub map_width: usize,
    /// Add the per-(pool, stream) view over time ([`pools`]; `--by pool`).
    pub by_pool: bool,
}

impl Default for FragOptions {
    fn default() -> Self {
        FragOptions {
            at: MomentSpec::End,
            worst: 5,
            map_width: 64,
            by_pool: false,
        }
    }
}

/// Free blocks of one size class.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Bucket {
    /// Smallest block size in the class.
    pub min_bytes: u64,
    /// Largest (exclusive); `null` = unbounded.
    pub max_bytes: Option<u64>,
    /// Free blocks in the class.
    pub blocks: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Fragmentation figures of one pool (kind, private pool id, stream), or of a whole device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PoolFrag {
    /// small / large (`unknown` for device totals).
    pub pool: PoolKind,
    /// Private pool id; [0, 0] for the default pools.
    pub pool_id: [u64; 2],
    /// Stream handle.
    pub stream: u64,
    /// Segments (mapped ranges for expandable segments).
    pub segments: usize,
    /// Σ segment sizes.
    pub reserved_bytes: u64,
    /// Σ active_allocated block sizes.
    pub allocated_bytes: u64,
    /// Σ requested bytes of active_allocated blocks.
    pub requested_bytes: u64,
    /// allocated − requested (internal fragmentation).
    pub rounding_waste_bytes: u64,
    /// Σ active_pending_free block sizes.
    pub pending_free_bytes: u64,
    /// Σ inactive block sizes (external fragmentation when scattered).
    pub free_bytes: u64,
    /// Largest inactive block.
    pub largest_free_block_bytes: u64,
    /// 1 − largest free / total free (0 = one piece, → 1 = dust); 0 when nothing is free.
    pub fragmentation: f64,
    /// Free bytes that cannot be returned to the driver (inside partly used segments).
    pub stranded_free_bytes: u64,
    /// Free bytes `empty_cache()` could return (whole free segments, or whole unmapped pages
    /// of expandable segments).
    pub releasable_bytes: u64,
    /// The largest request this pool serves without asking the driver for memory.
    pub largest_request_without_new_memory_bytes: u64,
    /// Free blocks by size class.
    pub free_histogram: Vec<Bucket>,
}

/// One segment drawn as a strip: one character per slice (`' '` free, `1`-`9` tenths
/// allocated, `#` full, `p` mostly pending free).
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SegmentMap {
    /// Base address.
    pub address: u64,
    /// Bytes.
    pub size: u64,
    /// Pool.
    pub pool: PoolKind,
    /// Stream.
    pub stream: u64,
    /// Expandable range.
    pub expandable: bool,
    /// Allocated bytes.
    pub allocated_bytes: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// Free bytes that are stranded.
    pub stranded_free_bytes: u64,
    /// Largest free block.
    pub largest_free_block_bytes: u64,
    /// The strip.
    pub map: String,
}

/// One device.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceFrag {
    /// Device index.
    pub device: u32,
    /// The moment.
    pub at: Moment,
    /// True when the state is the recorded final state; false when rebuilt (block sizes of
    /// allocations freed later are estimated from their requested sizes).
    pub exact: bool,
    /// Device totals.
    pub total: PoolFrag,
    /// Per pool, private pool and stream.
    pub pools: Vec<PoolFrag>,
    /// The segments with the most stranded free memory.
    pub worst_segments: Vec<SegmentMap>,
    /// What limits the answer.
    pub notes: Vec<String>,
    /// Whether fragmentation matters here, judged by bytes, not by its ratio
    /// ([`FragReading`], reading.md §6).
    pub reading: FragReading,
    /// What pins the stranded bytes, by site, with the segments they split and changes priced
    /// by the allocator replay ([`pinned`]; computed by `analyze::pinners`, absent where it was
    /// not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinners: Option<pinned::DevicePinners>,
}

/// The cached free bytes count for fragmentation only when they are a material share of
/// what is reserved: at least this share (5%).
pub const FRAG_MATERIAL: f64 = 0.05;

/// Fragmentation judged by its bytes (reading.md §6): the ratio (1 − largest free block /
/// free) says how scattered the cached free bytes are, not whether there are enough of them
/// to matter; a capacity shortage with a few MiB cached free has a high ratio and no
/// fragmentation problem.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FragReading {
    /// True when the cached free bytes are at least [`FRAG_MATERIAL`] of the reserved bytes.
    pub matters: bool,
    /// Cached free bytes / reserved bytes (0 when nothing is reserved).
    pub free_share_of_reserved: f64,
    /// The judgement in one sentence, with its bytes.
    pub words: String,
}

/// The reading of a device's totals.
pub fn reading_of(total: &PoolFrag) -> FragReading {
    let share = if total.reserved_bytes == 0 {
        0.0
    } else {
        total.free_bytes as f64 / total.reserved_bytes as f64
    };
    let matters = total.free_bytes > 0 && share >= FRAG_MATERIAL;
    let (free, reserved) = (iec(total.free_bytes), iec(total.reserved_bytes));
    let words = if matters {
        format!(
            "{free} cached free is {:.1}% of the {reserved} reserved, and the largest free block is {}: fragmentation matters here",
            share * 100.0,
            iec(total.largest_free_block_bytes)
        )
    } else {
        format!(
            "only {free} is cached free, {:.1}% of the {reserved} reserved: fragmentation is not what limits this device, whatever its ratio ({:.0}% of those {free})",
            share * 100.0,
            total.fragmentation * 100.0
        )
    };
    FragReading {
        matters,
        free_share_of_reserved: share,
        words,
    }
}

/// Fragmentation of the caching allocator at a moment: per device, pool, stream and worst
/// segments.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FragReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// The moment asked for.
    pub moment: String,
    /// Per device.
    pub devices: Vec<DeviceFrag>,
    /// `--by pool`: per device, reserved vs active bytes over the trace per (pool, stream),
    /// and the ghost blocks. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_pool: Option<Vec<pools::DevicePools>>,
}

const MIB: u64 = 1 << 20;
const CLASSES: [(u64, Option<u64>); 6] = [
    (0, Some(MIB)),
    (MIB, Some(2 * MIB)),
    (2 * MIB, Some(20 * MIB)),
    (20 * MIB, Some(100 * MIB)),
    (100 * MIB, Some(1024 * MIB)),
    (1024 * MIB, None),
];

/// Page size an expandable range is mapped in.
pub fn page(pool: PoolKind) -> u64 {
    if pool == PoolKind::Small {
        2 * MIB
    } else {
        20 * MIB
    }
}

fn empty_pool(pool: PoolKind, pool_id: (u64, u64), stream: u64) -> PoolFrag {
    PoolFrag {
        pool,
        pool_id: [pool_id.0, pool_id.1],
        stream,
        segments: 0,
        reserved_bytes: 0,
        allocated_bytes: 0,
        requested_bytes: 0,
        rounding_waste_bytes: 0,
        pending_free_bytes: 0,
        free_bytes: 0,
        largest_free_block_bytes: 0,
        fragmentation: 0.0,
        stranded_free_bytes: 0,
        releasable_bytes: 0,
        largest_request_without_new_memory_bytes: 0,
        free_histogram: CLASSES
            .iter()
            .map(|&(min_bytes, max_bytes)| Bucket {
                min_bytes,
                max_bytes,
                blocks: 0,
                bytes: 0,
            })
            .collect(),
    }
}

/// Releasable free bytes of a segment (see [`PoolFrag::releasable_bytes`]).
fn releasable(s: &SegmentAt) -> u64 {
    if s.expandable {
        // Pages start at the mapped range's base ([`pinned`]).
        let p = page(s.pool);
        s.blocks
            .iter()
            .filter(|b| b.state == BlockState::Inactive)
            .map(|b| {
                let (lo, hi) = pinned::whole_pages(s.address, p, b.address, b.address + b.size);
                hi.saturating_sub(lo)
            })
            .sum()
    } else if s.blocks.len() == 1 && s.blocks[0].state == BlockState::Inactive {
        s.size
    } else {
        0
    }
}

fn add_segment(p: &mut PoolFrag, s: &SegmentAt) {
    p.segments += 1;
    p.reserved_bytes += s.size;
    let mut free = 0;
    for b in &s.blocks {
        match b.state {
            BlockState::ActiveAllocated => {
                p.allocated_bytes += b.size;
                p.requested_bytes += b.requested;
            }
            BlockState::ActivePendingFree => p.pending_free_bytes += b.size,
            BlockState::Inactive => {
                free += b.size;
                p.largest_free_block_bytes = p.largest_free_block_bytes.max(b.size);
                if let Some(c) = p
                    .free_histogram
                    .iter_mut()
                    .find(|c| b.size >= c.min_bytes && c.max_bytes.map_or(true, |m| b.size < m))
                {
                    c.blocks += 1;
                    c.bytes += b.size;
                }
            }
        }
    }
    p.free_bytes += free;
    // A segment's blocks may not cover it (a damaged or salvaged file): what can be released
    // is never more than what is free, or stranded bytes would wrap.
    let rel = releasable(s).min(free);
    p.releasable_bytes += rel;
    p.stranded_free_bytes += free - rel;
}

fn finish(p: &mut PoolFrag) {
    p.rounding_waste_bytes = p.allocated_bytes.saturating_sub(p.requested_bytes);
    p.fragmentation = if p.free_bytes == 0 {
        0.0
    } else {
        1.0 - p.largest_free_block_bytes as f64 / p.free_bytes as f64
    };
    // Small-pool blocks serve requests of at most 1 MiB.
    p.largest_request_without_new_memory_bytes = if p.pool == PoolKind::Small {
        p.largest_free_block_bytes.min(MIB)
    } else {
        p.largest_free_block_bytes
    };
}

fn strip(s: &SegmentAt, width: usize) -> String {
    let width = width.max(1) as u64;
    let slice = s.size.div_ceil(width).max(1);
    (0..width)
        .map(|k| {
            let (lo, hi) = (
                s.address + k * slice,
                (s.address + (k + 1) * slice).min(s.address + s.size),
            );
            if lo >= hi {
                return ' ';
            }
            let (mut alloc, mut pending) = (0u64, 0u64);
            for b in &s.blocks {
                let (b0, b1) = (b.address.max(lo), (b.address + b.size).min(hi));
                if b0 >= b1 {
                    continue;
                }
                match b.state {
                    BlockState::ActiveAllocated => alloc += b1 - b0,
                    BlockState::ActivePendingFree => pending += b1 - b0,
                    BlockState::Inactive => {}
                }
            }
            let span = hi - lo;
            if pending * 2 > span {
                'p'
            } else if alloc >= span {
                '#'
            } else if alloc == 0 {
                ' '
            } else {
                char::from(b'0' + ((alloc * 10 / span) as u8).clamp(1, 9))
            }
        })
        .collect()
}

/// Analyzes one rebuilt state.
pub fn analyze_state(st: &AllocatorState, at: Moment, opts: &FragOptions) -> DeviceFrag {
    let mut pools: BTreeMap<(PoolKind, (u64, u64), u64), PoolFrag> = BTreeMap::new();
    let mut total = empty_pool(PoolKind::Unknown, (0, 0), 0);
    for s in &st.segments {
        add_segment(
            pools
                .entry((s.pool, s.pool_id, s.stream))
                .or_insert_with(|| empty_pool(s.pool, s.pool_id, s.stream)),
            s,
        );
        add_segment(&mut total, s);
    }
    let mut pools: Vec<PoolFrag> = pools.into_values().collect();
    pools.iter_mut().for_each(finish);
    finish(&mut total);
    total.largest_request_without_new_memory_bytes = pools
        .iter()
        .filter(|p| p.pool_id == [0, 0] && p.stream == 0)
        .map(|p| p.largest_request_without_new_memory_bytes)
        .max()
        .unwrap_or(0);
    let mut maps: Vec<SegmentMap> = st
        .segments
        .iter()
        .map(|s| {
            let free: u64 = s
                .blocks
                .iter()
                .filter(|b| b.state == BlockState::Inactive)
                .map(|b| b.size)
                .sum();
            SegmentMap {
                address: s.address,
                size: s.size,
                pool: s.pool,
                stream: s.stream,
                expandable: s.expandable,
                allocated_bytes: s
                    .blocks
                    .iter()
                    .filter(|b| b.state == BlockState::ActiveAllocated)
                    .map(|b| b.size)
                    .sum(),
                free_bytes: free,
                stranded_free_bytes: free - releasable(s),
                largest_free_block_bytes: s
                    .blocks
                    .iter()
                    .filter(|b| b.state == BlockState::Inactive)
                    .map(|b| b.size)
                    .max()
                    .unwrap_or(0),
                map: strip(s, opts.map_width),
            }
        })
        .collect();
    maps.sort_by(|a, b| {
        b.stranded_free_bytes
            .cmp(&a.stranded_free_bytes)
            .then(a.address.cmp(&b.address))
    });
    maps.retain(|m| m.stranded_free_bytes > 0);
    maps.truncate(opts.worst);
    let mut notes = Vec::new();
    if !st.exact {
        notes.push("state rebuilt by undoing the trace from the final snapshot: sizes of blocks freed later are estimated from their requested sizes".into());
    }
    if st.inconsistencies > 0 {
        notes.push(format!("{} trace events could not be undone consistently (the trace and the segments disagree, e.g. a wrapped ring buffer)", st.inconsistencies));
    }
    DeviceFrag {
        device: st.device,
        at,
        exact: st.exact,
        reading: reading_of(&total),
        total,
        pools,
        worst_segments: maps,
        notes,
        pinners: None,
    }
}

/// Runs `frag` on every device; devices without a trace are analyzed at their final state.
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &FragOptions,
) -> Result<FragReport, String> {
    run_with(snap, replays, opts, &mut |_, _, _| None)
}

/// What [`run_with`] asks of each device's state: its pinners, given the state, the device's
/// figures and its replay.
pub type PinnersOf<'a> = dyn FnMut(&AllocatorState, &DeviceFrag, Option<&DeviceReplay>) -> Option<pinned::DevicePinners>
    + 'a;

/// [`run`], with `pinners` asked for each device's pinners at the moment (the state is
/// rebuilt once for both).
pub fn run_with(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &FragOptions,
    pinners: &mut PinnersOf<'_>,
) -> Result<FragReport, String> {
    let mut devices = Vec::new();
    for dev in &snap.devices {
        let trace = snap.device_trace(dev);
        let replay = replays.iter().find(|r| r.device == dev.id);
        let (at, moment) = match replay {
            Some(r) => {
                let at = replay::resolve_in(snap, opts.at, r, trace)?;
                (at, replay::moment(trace, at))
            }
            None => (
                -1,
                Moment {
                    event_index: -1,
                    time_us: None,
                },
            ),
        };
        let st = state::state_at(snap, dev, if trace.is_empty() { -1 } else { at });
        let mut d = analyze_state(&st, moment, opts);
        if trace.is_empty() && opts.at != MomentSpec::End {
            d.notes.push(format!(
                "device {} has no trace: only the final state is known",
                dev.id
            ));
        }
        d.pinners = pinners(&st, &d, replay);
        devices.push(d);
    }
    Ok(FragReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        moment: opts.at.to_string(),
        devices,
        by_pool: opts.by_pool.then(|| pools::run(snap, replays, false)),
    })
}
