//! `memlens frag --by pool`: reserved vs active bytes over the trace per (private pool,
//! stream), and the ghost blocks (live at dump time, never allocated in the trace).
//!
//! Segment events are attributed walking the trace backwards from the final segments: a
//! segment live at the end belongs to the pool `segments` gives it; a segment freed before the
//! dump to the entry's `pool_id` when it carries one, otherwise to the unknown pool (never
//! guessed). Allocations (the replay's, [`crate::replay::Origin`]) belong to the segment that
//! holds their address when they are made.

use crate::model::{Action, BlockState, Device, Snapshot};
use crate::replay::{self, DeviceReplay, Moment, Origin, NEVER};
use crate::vocab::sites::{site_label, SiteOptions};
use serde::Serialize;
use std::collections::BTreeMap;

/// How many ghost blocks are listed per pool (all are counted).
pub const GHOSTS_LISTED: usize = 5;

/// One block live at dump time whose allocation the trace never recorded.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GhostBlock {
    /// Block address.
    pub address: u64,
    /// Requested bytes.
    pub size: u64,
    /// Where it was made (the block's frames, when the file kept them), or `?`.
    pub site: String,
}

/// One (pool, stream): reserved and active bytes over the trace.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PoolUse {
    /// Private pool id; [0, 0] for the default pools; `null` when unknown (segments freed
    /// before the dump whose entries carry no `pool_id`).
    pub pool_id: Option<[u64; 2]>,
    /// Stream handle.
    pub stream: u64,
    /// `default`, `mempool` (a private pool used outside a capture), `graph` (a CUDA graph's
    /// pool: its memory is held for the graph's lifetime) or `unknown`.
    pub kind: String,
    /// Segments at the end (mapped ranges for expandable segments).
    pub segments: usize,
    /// Reserved bytes at the end.
    pub reserved_bytes: u64,
    /// Active (allocated, requested) bytes at the end.
    pub active_bytes: u64,
    /// Σ inactive block sizes at the end: reserved by the pool, usable only by it.
    pub inactive_bytes: u64,
    /// Peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// When reserved first reached its peak.
    pub peak_reserved_at: Moment,
    /// Peak active bytes.
    pub peak_active_bytes: u64,
    /// When active first reached its peak.
    pub peak_active_at: Moment,
    /// Ghost blocks of the pool: live at the end, never allocated in the trace.
    pub ghost_blocks: usize,
    /// Their bytes (requested).
    pub ghost_bytes: u64,
    /// The largest few.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ghosts: Vec<GhostBlock>,
    /// (event index, reserved, active) after each event that changed either; the first point
    /// is the state before the first event (index -1).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<[i64; 3]>,
}

/// One device's pools.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DevicePools {
    /// Device index.
    pub device: u32,
    /// Per (pool, stream), default pools first, unknown last.
    pub pools: Vec<PoolUse>,
    /// Ghost blocks of the device.
    pub ghost_blocks: usize,
    /// Their bytes.
    pub ghost_bytes: u64,
    /// What limits the answer.
    pub notes: Vec<String>,
}

type Key = (Option<(u64, u64)>, u64);

/// Segments live at a moment: base → (end, key).
struct Live(BTreeMap<u64, (u64, Key)>);

impl Live {
    fn find(&self, addr: u64) -> Option<Key> {
        let (_, &(end, key)) = self.0.range(..=addr).next_back()?;
        (addr < end).then_some(key)
    }
}

fn entry_pool(snap: &Snapshot, e: &crate::model::TraceEvent) -> Option<(u64, u64)> {
    let p = snap.event_tags(e).pool_id;
    (p != (0, 0)).then_some(p)
}

/// Per event: (key, reserved delta) of segment events; per allocation its key.
fn attribute(
    snap: &Snapshot,
    dev: &Device,
    r: &DeviceReplay,
) -> (Vec<Option<(Key, i64)>>, Vec<Key>) {
    let trace = snap.device_trace(dev);
    let mut live = Live(
        snap.device_segments(dev)
            .iter()
            .map(|s| {
                (
                    s.address,
                    (s.address + s.total_size, (Some(s.pool_id), s.stream)),
                )
            })
            .collect(),
    );
    let mut by_start: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (i, a) in r.allocations.iter().enumerate() {
        by_start.entry(a.start).or_default().push(i);
    }
    let mut seg = vec![None; trace.len()];
    // Live at the end: the final segment holding it; earlier ones as the walk finds them.
    let mut akey: Vec<Option<Key>> = r
        .allocations
        .iter()
        .map(|a| {
            if a.end == NEVER {
                live.find(a.addr)
            } else {
                None
            }
        })
        .collect();
    let unknown = |e: &crate::model::TraceEvent| (entry_pool(snap, e), snap.event_stream(e));
    for (i, e) in trace.iter().enumerate().rev() {
        if let Some(list) = by_start.get(&(i as i64)) {
            for &k in list {
                let found = live.find(r.allocations[k].addr);
                akey[k] = akey[k].or(found).or(Some((None, snap.event_stream(e))));
            }
        }
        let size = e.size as i64;
        seg[i] = match e.action {
            Action::SegmentAlloc => {
                let key = live.find(e.addr).unwrap_or_else(|| unknown(e));
                live.0.remove(&e.addr);
                Some((key, size))
            }
            Action::SegmentFree => {
                let key = unknown(e);
                live.0.insert(e.addr, (e.addr + e.size, key));
                Some((key, -size))
            }
            Action::SegmentMap => Some((live.find(e.addr).unwrap_or_else(|| unknown(e)), size)),
            Action::SegmentUnmap => Some((live.find(e.addr).unwrap_or_else(|| unknown(e)), -size)),
            _ => None,
        };
    }
    if let Some(list) = by_start.get(&-1) {
        for &k in list {
            let found = live.find(r.allocations[k].addr);
            akey[k] = akey[k].or(found).or(Some((None, 0)));
        }
    }
    (
        seg,
        akey.into_iter().map(|k| k.unwrap_or((None, 0))).collect(),
    )
}

#[derive(Default)]
struct Acc {
    segments: usize,
    end_reserved: u64,
    inactive: u64,
    deltas: Vec<(i64, i64, i64)>,
    initial_active: u64,
    ghosts: Vec<GhostBlock>,
}

fn kind_of(key: Key) -> &'static str {
    match key.0 {
        None => "unknown",
        Some((0, 0)) => "default",
        // A graph's own pool is (graph id, 0); a pool used on a side stream is a capture's.
        Some((g, _)) if g != 0 || key.1 != 0 => "graph",
        Some(_) => "mempool",
    }
}

/// The pools of one device.
pub fn device_pools(snap: &Snapshot, dev: &Device, r: &DeviceReplay, series: bool) -> DevicePools {
    let trace = snap.device_trace(dev);
    let (seg, akey) = attribute(snap, dev, r);
    let mut acc: BTreeMap<Key, Acc> = BTreeMap::new();
    for s in snap.device_segments(dev) {
        let a = acc.entry((Some(s.pool_id), s.stream)).or_default();
        a.segments += 1;
        a.end_reserved += s.total_size;
        a.inactive += snap
            .segment_blocks(s)
            .iter()
            .filter(|b| b.state == BlockState::Inactive)
            .map(|b| b.size)
            .sum::<u64>();
    }
    for (i, d) in seg.iter().enumerate() {
        if let Some((key, delta)) = *d {
            acc.entry(key)
                .or_default()
                .deltas
                .push((i as i64, delta, 0));
        }
    }
    let wrapped =
        r.allocations.iter().any(|a| a.origin == Origin::OrphanFree) || r.reserved_incomplete;
    let mut notes = Vec::new();
    for (k, a) in r.allocations.iter().enumerate() {
        let key = akey[k];
        let p = acc.entry(key).or_default();
        let start = a.start;
        // The replay starts a ghost block (its segment made in the trace) at that segment's
        // `segment_alloc`; a final block older than the trace starts at -1.
        if a.origin == Origin::FinalBlock && (start >= 0 || !wrapped) {
            p.ghosts.push(GhostBlock {
                address: a.addr,
                size: a.size,
                site: site_label(snap, a.stack, SiteOptions::default()),
            });
        }
        if start < 0 {
            p.initial_active += a.size;
        } else {
            p.deltas.push((start, 0, a.size as i64));
        }
        if a.end != NEVER {
            p.deltas.push((a.end, 0, -(a.size as i64)));
        }
    }
    if wrapped {
        notes.push(
            "the trace wrapped: blocks whose segment predates it are not counted as ghosts".into(),
        );
    }
    let mut pools = Vec::new();
    for (key, mut a) in acc {
        a.deltas.sort_by_key(|d| d.0);
        let net: i64 = a.deltas.iter().map(|d| d.1).sum();
        let mut reserved = a.end_reserved as i64 - net;
        if reserved < 0 {
            reserved = 0;
        }
        let mut active = a.initial_active as i64;
        let mut pts = vec![[-1, reserved, active]];
        let (mut pr, mut pa) = ((reserved, -1), (active, -1));
        for &(i, dr, da) in &a.deltas {
            reserved += dr;
            active += da;
            if pts.last().map(|p| p[0]) == Some(i) {
                *pts.last_mut().unwrap() = [i, reserved, active];
            } else {
                pts.push([i, reserved, active]);
            }
            if reserved > pr.0 {
                pr = (reserved, i);
            }
            if active > pa.0 {
                pa = (active, i);
            }
        }
        a.ghosts
            .sort_by(|x, y| y.size.cmp(&x.size).then(x.address.cmp(&y.address)));
        let ghost_bytes = a.ghosts.iter().map(|g| g.size).sum();
        let ghost_blocks = a.ghosts.len();
        a.ghosts.truncate(GHOSTS_LISTED);
        pools.push(PoolUse {
            pool_id: key.0.map(|(x, y)| [x, y]),
            stream: key.1,
            kind: kind_of(key).to_string(),
            segments: a.segments,
            reserved_bytes: reserved.max(0) as u64,
            active_bytes: active.max(0) as u64,
            inactive_bytes: a.inactive,
            peak_reserved_bytes: pr.0.max(0) as u64,
            peak_reserved_at: replay::moment(trace, pr.1),
            peak_active_bytes: pa.0.max(0) as u64,
            peak_active_at: replay::moment(trace, pa.1),
            ghost_blocks,
            ghost_bytes,
            ghosts: a.ghosts,
            series: if series { pts } else { Vec::new() },
        });
    }
    // Default pools first, unknown last.
    pools.sort_by_key(|p| {
        (
            p.pool_id.is_none(),
            p.pool_id != Some([0, 0]),
            p.pool_id,
            p.stream,
        )
    });
    DevicePools {
        device: dev.id,
        ghost_blocks: pools.iter().map(|p| p.ghost_blocks).sum(),
        ghost_bytes: pools.iter().map(|p| p.ghost_bytes).sum(),
        pools,
        notes,
    }
}

/// True when any device of `snap` has a private pool (a segment or an entry with a pool id).
pub fn has_private_pool(snap: &Snapshot) -> bool {
    snap.segments.iter().any(|s| s.is_private_pool())
        || snap
            .events
            .iter()
            .any(|e| snap.event_tags(e).pool_id != (0, 0))
}

/// The pools of every device with a replay.
pub fn run(snap: &Snapshot, replays: &[DeviceReplay], series: bool) -> Vec<DevicePools> {
    snap.devices
        .iter()
        .filter_map(|d| {
            let r = replays.iter().find(|r| r.device == d.id)?;
            Some(device_pools(snap, d, r, series))
        })
        .collect()
}
