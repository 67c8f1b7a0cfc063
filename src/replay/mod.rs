//! Timeline replay: each device's trace walked forward, reconciled with the final segments.
//!
//! In: a [`Snapshot`]. Out: per device, every allocation with its lifetime (event indices),
//! the live requested bytes, estimated rounded bytes and reserved bytes after each event, and
//! the peak. Event index `-1` is the state before the first event.
//!
//! ```text
//!   initial allocations (alive before the trace began)        trace events 0..n
//!   ─ orphan frees: free_completed with no alloc in the trace  alloc ──────── free_completed
//!   ─ final live blocks with no live allocation at the end     (pending between free_requested
//!                                                               and free_completed still counts)
//! ```

pub mod annotations;
pub mod loops;
mod moment;
pub mod passes;
pub mod state;
pub mod steps;

pub use moment::{
    resolve, resolve_in, resolve_window, resolve_window_in, Moment, MomentSpec, Window, WindowSpec,
};

use crate::model::{Action, Device, Snapshot, StackId, TraceEvent};
use rustc_hash::FxHashMap;

/// Where an allocation's record comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// An `alloc` event of the trace.
    Trace,
    /// A free whose alloc is not in the trace (the ring buffer wrapped).
    OrphanFree,
    /// A live block of the final state with no live allocation of the trace at its address:
    /// alive before the trace (`start` -1), or, when its segment was made inside the trace,
    /// a ghost block (its `alloc` was not recorded) that starts at that `segment_alloc`.
    FinalBlock,
}

/// Index used for "never freed within the trace".
pub const NEVER: i64 = i64::MAX;

/// One allocation and its lifetime in event indices.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Allocation {
    /// Block address.
    pub addr: u64,
    /// Requested bytes.
    pub size: u64,
    /// Allocation stack.
    pub stack: StackId,
    /// Event index of the `alloc`, or -1 when alive before the trace began.
    pub start: i64,
    /// Event index of the `free_requested`, if any.
    pub free_requested: Option<i64>,
    /// Event index of the `free_completed`, or [`NEVER`].
    pub end: i64,
    /// Where the record comes from.
    pub origin: Origin,
}

impl Allocation {
    /// True when the allocation occupies memory in the state right after event `at`.
    pub fn live_at(&self, at: i64) -> bool {
        self.start <= at && at < self.end
    }
}

/// The replay of one device.
#[derive(Clone, Debug)]
pub struct DeviceReplay {
    /// Device index.
    pub device: u32,
    /// Number of trace events.
    pub events: usize,
    /// Every allocation: initial ones first, then by start (`alloc` order; a ghost block,
    /// [`Origin::FinalBlock`] in a segment made inside the trace, at its `segment_alloc`).
    pub allocations: Vec<Allocation>,
    /// Requested bytes alive before the first event.
    pub initial_bytes: u64,
    /// Live requested bytes after each event.
    pub live: Vec<u64>,
    /// Rounded (block) bytes after each event, estimated with the allocator's `round_size`.
    pub rounded: Vec<u64>,
    /// Reserved bytes after each event (segment_alloc/free, segment_map/unmap).
    pub reserved: Vec<u64>,
    /// Rounded and reserved bytes before the first event.
    pub initial_rounded: u64,
    /// Reserved bytes before the first event (final reserved minus the trace's net change).
    pub initial_reserved: u64,
    /// Event index of the peak of live requested bytes (-1: before the first event).
    pub peak: i64,
    /// Live requested bytes at the peak.
    pub peak_bytes: u64,
    /// Allocations live at the end of the trace that no final block confirms (the trace and
    /// the segments are captured under separate locks).
    pub unconfirmed_at_end: usize,
    /// True when the reserved replay went below zero (a wrapped trace lost segment events).
    pub reserved_incomplete: bool,
}

impl DeviceReplay {
    /// Live requested bytes in the state right after event `at` (-1: before the first).
    pub fn live_at(&self, at: i64) -> u64 {
        if at < 0 {
            self.initial_bytes
        } else {
            self.live[at as usize]
        }
    }

    /// Reserved bytes right after event `at`.
    pub fn reserved_at(&self, at: i64) -> u64 {
        if at < 0 {
            self.initial_reserved
        } else {
            self.reserved[at as usize]
        }
    }

    /// Estimated rounded bytes right after event `at`.
    pub fn rounded_at(&self, at: i64) -> u64 {
        if at < 0 {
            self.initial_rounded
        } else {
            self.rounded[at as usize]
        }
    }

    /// The allocations live right after event `at`.
    pub fn live_allocations(&self, at: i64) -> impl Iterator<Item = &Allocation> {
        self.allocations.iter().filter(move |a| a.live_at(at))
    }

    /// The first index in `window` where live requested bytes reach their maximum there.
    pub fn peak_in(&self, window: Window) -> i64 {
        let mut best = window.first;
        let mut best_bytes = self.live_at(best);
        for i in (window.first + 1)..=window.last {
            let v = self.live_at(i);
            if v > best_bytes {
                best = i;
                best_bytes = v;
            }
        }
        best
    }

    /// The whole trace as a window (-1 ..= last event).
    pub fn full_window(&self) -> Window {
        Window {
            first: -1,
            last: self.events as i64 - 1,
        }
    }
}

/// `round_size` of the caching allocator for a request of `n` bytes (snapshot-format.md §8),
/// without roundup_power2_divisions.
pub fn round_size(n: u64) -> u64 {
    if n < 512 {
        512
    } else {
        n.div_ceil(512) * 512
    }
}

/// Replays every device that has a trace.
pub fn replay(snap: &Snapshot) -> Vec<DeviceReplay> {
    snap.devices
        .iter()
        .filter(|d| !d.trace.is_empty())
        .map(|d| replay_device(snap, d))
        .collect()
}

/// The replay of `dev` among `replays`, else — for a device without a trace that still has
/// segments — its final state replayed on the spot (nothing to replay for the rest): what
/// the analyses that read final blocks of traceless devices (`categories`, `fit`) share.
pub fn replay_or_final_state<'a>(
    snap: &Snapshot,
    replays: &'a [DeviceReplay],
    dev: &Device,
) -> Option<std::borrow::Cow<'a, DeviceReplay>> {
    if let Some(r) = replays.iter().find(|r| r.device == dev.id) {
        return Some(std::borrow::Cow::Borrowed(r));
    }
    (snap.device_trace(dev).is_empty() && !snap.device_segments(dev).is_empty())
        .then(|| std::borrow::Cow::Owned(replay_device(snap, dev)))
}

/// Replays one device.
pub fn replay_device(snap: &Snapshot, dev: &Device) -> DeviceReplay {
    let trace = snap.device_trace(dev);
    let n = trace.len();
    // Sized up front: growing a vector of millions of allocations copies it several times.
    let allocs = trace.iter().filter(|e| e.action == Action::Alloc).count();
    let mut allocations: Vec<Allocation> = Vec::with_capacity(allocs);
    let mut initial: Vec<Allocation> = Vec::new();
    let mut live_by_addr: FxHashMap<u64, usize> = FxHashMap::default();
    let mut live_delta = Vec::with_capacity(n);
    let mut rounded_delta = Vec::with_capacity(n);
    let mut reserved_delta = Vec::with_capacity(n);
    let (mut cur, mut cur_r, mut cur_res) = (0i64, 0i64, 0i64);
    // A trace recorded with `skip_actions=['free_completed']` frees at `free_requested`.
    let requested_ends = snap.frees_at_request(dev);
    for (i, e) in trace.iter().enumerate() {
        let i = i as i64;
        match e.action {
            Action::Alloc => {
                if let Some(prev) = live_by_addr.insert(e.addr, allocations.len()) {
                    // Never expected: an address handed out twice. Close the older one here.
                    let p = &mut allocations[prev];
                    p.end = i;
                    cur -= p.size as i64;
                    cur_r -= round_size(p.size) as i64;
                }
                allocations.push(Allocation {
                    addr: e.addr,
                    size: e.size,
                    stack: e.stack,
                    start: i,
                    free_requested: None,
                    end: NEVER,
                    origin: Origin::Trace,
                });
                cur += e.size as i64;
                cur_r += round_size(e.size) as i64;
            }
            Action::FreeRequested if !requested_ends => {
                if let Some(&k) = live_by_addr.get(&e.addr) {
                    allocations[k].free_requested.get_or_insert(i);
                }
            }
            // `free_completed` skipped (`skip_actions`): the request is the free.
            Action::FreeCompleted | Action::Free | Action::FreeRequested => {
                match live_by_addr.remove(&e.addr) {
                    Some(k) => {
                        let a = &mut allocations[k];
                        a.end = i;
                        cur -= a.size as i64;
                        cur_r -= round_size(a.size) as i64;
                    }
                    None => {
                        initial.push(Allocation {
                            addr: e.addr,
                            size: e.size,
                            stack: e.stack,
                            start: -1,
                            free_requested: None,
                            end: i,
                            origin: Origin::OrphanFree,
                        });
                        cur -= e.size as i64;
                        cur_r -= round_size(e.size) as i64;
                    }
                }
            }
            Action::SegmentAlloc | Action::SegmentMap => cur_res += e.size as i64,
            Action::SegmentFree | Action::SegmentUnmap => cur_res -= e.size as i64,
            _ => {}
        }
        live_delta.push(cur);
        rounded_delta.push(cur_r);
        reserved_delta.push(cur_res);
    }

    // Final live blocks that no live allocation of the trace accounts for: alive before the
    // trace, unless their segment was made inside it ("ghost blocks" of a private pool, whose
    // allocations were not recorded): those start at their segment's `segment_alloc`, the
    // earliest they can have been made.
    let (ghosts, unconfirmed) = final_blocks(snap, dev, trace, &live_by_addr, &mut initial);
    if !ghosts.is_empty() {
        add_late(&ghosts, &mut live_delta, &mut rounded_delta);
        allocations = merge_by_start(allocations, ghosts);
    }
    let initial_bytes: u64 = initial.iter().map(|a| a.size).sum();
    let initial_rounded: u64 = initial.iter().map(|a| round_size(a.size)).sum();
    let final_reserved: u64 = snap.device_segments(dev).iter().map(|s| s.total_size).sum();
    let net_reserved = reserved_delta.last().copied().unwrap_or(0);
    let initial_reserved_signed = final_reserved as i64 - net_reserved;
    let mut reserved_incomplete = initial_reserved_signed < 0;
    let initial_reserved = initial_reserved_signed.max(0) as u64;

    // The deltas become the byte counts in place (`into_iter().map().collect()` of a type of
    // the same size reuses the vector): no second set of arrays as long as the trace.
    let at = |base: u64, d: i64| -> u64 { (base as i64 + d).max(0) as u64 };
    let live: Vec<u64> = live_delta
        .into_iter()
        .map(|d| at(initial_bytes, d))
        .collect();
    let rounded: Vec<u64> = rounded_delta
        .into_iter()
        .map(|d| at(initial_rounded, d))
        .collect();
    let reserved: Vec<u64> = reserved_delta
        .into_iter()
        .map(|d| {
            let v = initial_reserved as i64 + d;
            if v < 0 {
                reserved_incomplete = true;
            }
            v.max(0) as u64
        })
        .collect();

    // The peak: the first index at which the maximum is reached; -1 if the initial state is it.
    let mut peak_at = -1i64;
    let mut peak = initial_bytes;
    for (i, &v) in live.iter().enumerate() {
        if v > peak {
            peak = v;
            peak_at = i as i64;
        }
    }
    // Allocations alive before the trace come first. Inserted at the front of the trace's
    // (a move within one vector) rather than appending those to a new one.
    allocations.splice(0..0, initial);
    DeviceReplay {
        device: dev.id,
        events: n,
        allocations,
        initial_bytes,
        live,
        rounded,
        reserved,
        initial_rounded,
        initial_reserved,
        peak: peak_at,
        peak_bytes: peak,
        unconfirmed_at_end: unconfirmed,
        reserved_incomplete,
    }
}

/// The final live blocks of `dev` that no live allocation of the trace (`live_by_addr`)
/// accounts for: those older than the trace are pushed to `initial`; ghost blocks (their
/// segment made inside the trace) are returned sorted by start, with the count of live
/// allocations of the trace that no final block confirms.
fn final_blocks(
    snap: &Snapshot,
    dev: &Device,
    trace: &[TraceEvent],
    live_by_addr: &FxHashMap<u64, usize>,
    initial: &mut Vec<Allocation>,
) -> (Vec<Allocation>, usize) {
    let births = final_segment_births(snap, dev, trace);
    let mut ghosts: Vec<Allocation> = Vec::new();
    let mut unconfirmed = live_by_addr.len();
    for s in snap.device_segments(dev) {
        let born = births.get(&s.address).copied();
        for b in snap.segment_blocks(s) {
            if b.state == crate::model::BlockState::Inactive {
                continue;
            }
            if live_by_addr.contains_key(&b.address) {
                unconfirmed -= 1;
                continue;
            }
            let a = Allocation {
                addr: b.address,
                size: b.requested_size,
                stack: b.stack,
                start: born.unwrap_or(-1),
                free_requested: None,
                end: NEVER,
                origin: Origin::FinalBlock,
            };
            match born {
                Some(_) => ghosts.push(a),
                None => initial.push(a),
            }
        }
    }
    ghosts.sort_by_key(|a| (a.start, a.addr));
    (ghosts, unconfirmed)
}

/// Adds allocations that enter the byte counts inside the trace without an `alloc` event
/// (`late`, sorted by start) to the live and rounded deltas from their start on.
fn add_late(late: &[Allocation], live_delta: &mut [i64], rounded_delta: &mut [i64]) {
    let (mut k, mut add, mut add_r) = (0usize, 0i64, 0i64);
    for (i, (d, dr)) in live_delta
        .iter_mut()
        .zip(rounded_delta.iter_mut())
        .enumerate()
    {
        while k < late.len() && late[k].start <= i as i64 {
            add += late[k].size as i64;
            add_r += round_size(late[k].size) as i64;
            k += 1;
        }
        *d += add;
        *dr += add_r;
    }
}

/// Per base address of a segment live at the end of `trace`: the index of the
/// `segment_alloc` (or `segment_map`) that made it, when the trace holds it.
fn final_segment_births(
    snap: &Snapshot,
    dev: &Device,
    trace: &[TraceEvent],
) -> FxHashMap<u64, i64> {
    let mut born: FxHashMap<u64, i64> = FxHashMap::default();
    for (i, e) in trace.iter().enumerate() {
        match e.action {
            Action::SegmentAlloc | Action::SegmentMap => {
                born.insert(e.addr, i as i64);
            }
            Action::SegmentFree | Action::SegmentUnmap => {
                born.remove(&e.addr);
            }
            _ => {}
        }
    }
    let finals: rustc_hash::FxHashSet<u64> = snap
        .device_segments(dev)
        .iter()
        .map(|s| s.address)
        .collect();
    born.retain(|a, _| finals.contains(a));
    born
}

/// `trace` (allocations in `alloc` order) and `late` (sorted by start) merged by start;
/// on a tie the trace's allocation comes first.
fn merge_by_start(trace: Vec<Allocation>, late: Vec<Allocation>) -> Vec<Allocation> {
    let mut out = Vec::with_capacity(trace.len() + late.len());
    let mut late = late.into_iter().peekable();
    for a in trace {
        while late.peek().is_some_and(|g| g.start < a.start) {
            out.extend(late.next());
        }
        out.push(a);
    }
    out.extend(late);
    out
}

/// The moment (index and time) of event `at` of `trace`.
pub fn moment(trace: &[TraceEvent], at: i64) -> Moment {
    Moment {
        event_index: at,
        time_us: if at >= 0 {
            trace.get(at as usize).and_then(|e| e.time())
        } else {
            None
        },
    }
}

#[cfg(test)]
mod tests;
