//! Replays one device's recorded requests (sizes, streams, order, frees, `empty_cache`
//! calls) through a [`DeviceAllocator`] under given settings, starting from the state before
//! the trace, and measures what it reserves.
//!
//! The requests are the trace's own: `alloc` (a malloc of its requested size, on its stream,
//! in the private pool whose recorded segment holds its address), `oom` (a malloc of its
//! rounded size), `free_requested` / `free_completed` (a deferred free completes where the
//! trace completed it, or when a release of cached memory waits for it), and the
//! `empty_cache` calls [`super::recorded`] found. A malloc the model cannot serve is an OOM
//! of the scenario: the replay goes on without that allocation (its frees are ignored). An
//! `oom` entry the model can serve stays allocated to the end, as the program would have
//! kept the tensor.

use super::device::{Capacity, DeviceAllocator, SeedBlock, SeedRange, SegEvent};
use super::pool::BlockId;
use super::recorded::Recorded;
use super::settings::Settings;
use crate::model::{Action, BlockState, PoolKind, Snapshot};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// How to replay.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Settings the model follows.
    pub settings: Settings,
    /// The limit on reserved memory (`None`: unlimited, nothing can run out).
    pub capacity: Option<Capacity>,
    /// The address range one expandable segment reserves (1⅛ × the GPU's memory).
    pub va_bytes: u64,
    /// Keep the model's segment events (for [`super::fidelity`]) and place new segments at
    /// the recorded addresses where sizes agree.
    pub follow_recorded: bool,
    /// Measure [`Outcome::unreleasable_at_probe`] after this trace index (-1: the start
    /// state).
    pub probe: Option<i64>,
    /// Rebuild the state before the trace under these settings instead of taking its
    /// recorded segments: its live blocks are requested again, in address order, from an
    /// empty allocator (what a run under these settings from the start would hold, without
    /// the fragmentation of the history before the trace, which is not recorded).
    pub repack_start: bool,
    /// Requests of the trace replayed otherwise ([`Reorder`]; none by default).
    pub reorder: Reorder,
}

/// Requests of the trace replayed otherwise than recorded: what "free it earlier" or
/// "allocate it first" would have done to the allocator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reorder {
    /// Trace indices of `alloc` entries not made (as if freed before they were needed);
    /// their frees are ignored. Ascending.
    pub dropped: Vec<u32>,
    /// Trace indices of `alloc` entries made before the first event, in this order (as if
    /// allocated up front), and freed where the trace frees them. Ascending.
    pub first: Vec<u32>,
    /// Stop after the probe (only [`Outcome::stranded_at_probe`] and
    /// [`Outcome::unreleasable_at_probe`] are wanted).
    pub stop_at_probe: bool,
}

/// Oom events kept per scenario (the count is always whole).
pub const OOMS_KEPT: usize = 64;

/// What a replay reserved.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// The most reserved at once.
    pub peak_reserved: u64,
    /// The trace index after which it was first reached (-1: the start state).
    pub peak_event: i64,
    /// Reserved after the last event.
    pub end_reserved: u64,
    /// Cached free bytes when reserved first reached its peak (memory the allocator held
    /// but could not use for the request that grew it).
    pub cached_free_at_peak: u64,
    /// Cached free bytes when the first OOM happened ("reserved but unallocated").
    pub cached_free_at_first_oom: Option<u64>,
    /// The most cached free bytes at once.
    pub peak_cached_free: u64,
    /// Requests the model could not serve.
    pub ooms: u64,
    /// Their trace indices, the first [`OOMS_KEPT`].
    pub oom_events: Vec<u32>,
    /// cudaMalloc calls and page maps.
    pub device_mallocs: u64,
    /// cudaFree calls and page unmaps.
    pub device_frees: u64,
    /// `alloc` entries replayed (served or not).
    pub allocs: u64,
    /// Of those, served at the address the trace recorded.
    pub allocs_at_recorded_address: u64,
    /// Frees of addresses the model holds no allocation at.
    pub unknown_frees: u64,
    /// The model's segment events (when following the recording).
    pub events: Vec<SegEvent>,
    /// Mallocs after releases the model served from its cache (when following the
    /// recording): those releases were an `empty_cache` call, not a failed cudaMalloc.
    pub empty_cache_inferred: Vec<u32>,
    /// At the probe: what stays reserved once the cache is released (every wholly free
    /// segment, every free page of an expandable one), as under memory pressure before an
    /// OOM: the live blocks with their rounding and the free space stranded among them.
    pub unreleasable_at_probe: Option<u64>,
    /// At the probe: the cached free bytes that stay once the cache is released (free bytes
    /// stranded among live blocks).
    pub stranded_at_probe: Option<u64>,
}

/// What `model` keeps reserved after releasing its cache, and the free bytes stranded in it.
fn unreleasable(model: &DeviceAllocator) -> (u64, u64) {
    let mut m = model.clone();
    m.empty_cache();
    (m.reserved, m.cached_free)
}

/// Records the probe's figures in `out`.
fn probe(out: &mut Outcome, model: &DeviceAllocator) {
    let (reserved, stranded) = unreleasable(model);
    out.unreleasable_at_probe = Some(reserved);
    out.stranded_at_probe = Some(stranded);
}

fn seed(model: &mut DeviceAllocator, rec: &Recorded) -> FxHashMap<u64, (BlockId, u64)> {
    let mut live = FxHashMap::default();
    type Blocks = Vec<SeedBlock>;
    let mut expandable: BTreeMap<(u64, bool, (u64, u64)), Vec<SeedRange>> = BTreeMap::new();
    for s in &rec.start.segments {
        let small = match s.pool {
            PoolKind::Small => true,
            PoolKind::Large => false,
            PoolKind::Unknown => s.size <= 2 << 20,
        };
        let blocks: Blocks = s
            .blocks
            .iter()
            .map(|b| {
                (
                    b.size,
                    b.requested,
                    b.state == BlockState::ActiveAllocated,
                    b.state == BlockState::ActivePendingFree,
                )
            })
            .collect();
        if s.expandable {
            expandable
                .entry((s.stream, small, s.pool_id))
                .or_default()
                .push((s.address, blocks));
            continue;
        }
        let pool = model.pool_for(if small { 1 } else { u64::MAX }, s.pool_id);
        for (a, id) in model.seed_segment(s.address, s.stream, pool, &blocks) {
            live.insert(a, (id, model.block(id).serial));
        }
    }
    for ((stream, small, owner), ranges) in expandable {
        let pool = model.pool_for(if small { 1 } else { u64::MAX }, owner);
        for (a, id) in model.seed_expandable(stream, pool, &ranges) {
            live.insert(a, (id, model.block(id).serial));
        }
    }
    live
}

/// The live blocks of the state before the trace, requested again in address order.
fn repack(model: &mut DeviceAllocator, rec: &Recorded) -> FxHashMap<u64, (BlockId, u64)> {
    let mut live = FxHashMap::default();
    for s in &rec.start.segments {
        for b in s.blocks.iter().filter(|b| {
            matches!(
                b.state,
                BlockState::ActiveAllocated | BlockState::ActivePendingFree
            )
        }) {
            let size = if b.requested > 0 { b.requested } else { b.size };
            if let Some(id) = model.malloc(size, s.stream, s.pool_id) {
                live.insert(b.address, (id, model.block(id).serial));
            }
        }
    }
    live
}

/// Replays the trace of device `rec.device` of `snap` under `sc`.
pub fn run(snap: &Snapshot, rec: &Recorded, sc: &Scenario) -> Outcome {
    let Some(dev) = snap.device(rec.device) else {
        return Outcome::default();
    };
    let trace = snap.device_trace(dev);
    let mut model = DeviceAllocator::new(
        sc.settings.clone(),
        sc.capacity,
        sc.va_bytes,
        rec.fresh,
        sc.follow_recorded,
    );
    let mut live = if sc.repack_start {
        repack(&mut model, rec)
    } else {
        seed(&mut model, rec)
    };
    let mut out = Outcome {
        peak_reserved: model.reserved,
        peak_event: -1,
        cached_free_at_peak: model.cached_free,
        peak_cached_free: model.cached_free,
        ..Outcome::default()
    };
    if sc.probe == Some(-1) {
        probe(&mut out, &model);
    }
    // Allocations made up front ([`Reorder::first`]), placed in `live` at their own event.
    let mut early: FxHashMap<u32, (BlockId, u64)> = FxHashMap::default();
    for &at in &sc.reorder.first {
        let Some(e) = trace.get(at as usize).filter(|e| e.action == Action::Alloc) else {
            continue;
        };
        let stream = snap.event_stream(e);
        if let Some(id) = model.malloc(e.size, stream, rec.pool_of(e.addr)) {
            early.insert(at, (id, model.block(id).serial));
        }
    }
    let mut hints: Vec<(Action, u64, u64)> = Vec::new();
    let mut ec = rec.empty_cache_at.iter().peekable();
    let mut flushes: Vec<u32> = if sc.follow_recorded {
        rec.flushes().collect()
    } else {
        Vec::new()
    };
    flushes.sort_unstable();
    let holds = |model: &DeviceAllocator, h: (BlockId, u64)| model.block(h.0).serial == h.1;
    let at_request = snap.frees_at_request(dev);
    for (i, e) in trace.iter().enumerate() {
        if ec.next_if(|&&at| at as usize == i).is_some() {
            model.owner = i as u32;
            model.empty_cache();
        }
        match e.action {
            Action::Alloc if sc.reorder.dropped.binary_search(&(i as u32)).is_ok() => {}
            Action::Alloc if early.contains_key(&(i as u32)) => {
                live.insert(e.addr, early[&(i as u32)]);
            }
            Action::Alloc | Action::Oom => {
                if sc.follow_recorded {
                    model.hint(hints.drain(..));
                }
                hints.clear();
                model.owner = i as u32;
                let pool = if e.action == Action::Alloc {
                    rec.pool_of(e.addr)
                } else {
                    (0, 0)
                };
                let stream = snap.event_stream(e);
                let at = i as u32;
                if rec.empty_cache_before.binary_search(&at).is_ok() {
                    model.empty_cache();
                } else if flushes.binary_search(&at).is_ok()
                    && model.would_reuse(e.size, stream, pool)
                {
                    model.empty_cache();
                    out.empty_cache_inferred.push(at);
                }
                let got = model.malloc(e.size, stream, pool);
                match got {
                    Some(id) if e.action == Action::Alloc => {
                        out.allocs += 1;
                        out.allocs_at_recorded_address += (model.block(id).addr == e.addr) as u64;
                        live.insert(e.addr, (id, model.block(id).serial));
                    }
                    Some(_) => {}
                    None => {
                        out.allocs += (e.action == Action::Alloc) as u64;
                        out.ooms += 1;
                        out.cached_free_at_first_oom
                            .get_or_insert(model.cached_free);
                        if out.oom_events.len() < OOMS_KEPT {
                            out.oom_events.push(i as u32);
                        }
                    }
                }
            }
            Action::FreeRequested if !at_request => match live.get(&e.addr) {
                // A free that completes at once is one step (no deferral to track).
                _ if trace[i + 1..]
                    .iter()
                    .find(|n| !n.action.is_inert())
                    .is_some_and(|n| n.action == Action::FreeCompleted && n.addr == e.addr) => {}
                Some(&h) if holds(&model, h) => model.free_requested(h.0),
                _ => out.unknown_frees += 1,
            },
            // A trace recorded without `free_completed` frees at the request.
            Action::FreeCompleted | Action::Free | Action::FreeRequested => {
                match live.remove(&e.addr) {
                    Some(h) if holds(&model, h) => model.free_completed(h.0),
                    Some(_) => {}
                    None => out.unknown_frees += (e.action == Action::Free) as u64,
                }
            }
            Action::SegmentAlloc | Action::SegmentMap => hints.push((e.action, e.addr, e.size)),
            Action::SegmentFree | Action::SegmentUnmap => {}
            a if a.is_inert() => {}
            _ => hints.clear(),
        }
        if model.reserved > out.peak_reserved {
            out.peak_reserved = model.reserved;
            out.peak_event = i as i64;
            out.cached_free_at_peak = model.cached_free;
        }
        out.peak_cached_free = out.peak_cached_free.max(model.cached_free);
        if sc.probe == Some(i as i64) {
            probe(&mut out, &model);
            if sc.reorder.stop_at_probe {
                break;
            }
        }
    }
    out.end_reserved = model.reserved;
    out.device_mallocs = model.device_mallocs;
    out.device_frees = model.device_frees;
    out.events = model.take_log();
    out
}
