//! What a device's trace says beyond its requests: the state before it, which request each
//! recorded segment event belongs to, where the program called `empty_cache`, and the bounds
//! the trace puts on the memory the allocator could reserve.
//!
//! A malloc records its segment events just before its `alloc` (or `oom`), with only deferred
//! frees (`free_completed`) between them (snapshot-format.md §4), so a segment event belongs
//! to the next `alloc`/`oom` when nothing else comes between. Releases (`segment_free`,
//! `segment_unmap`) that belong to no malloc are an `empty_cache` call. Releases inside a
//! malloc mean its first cudaMalloc failed: reserved + the allocation exceeded the limit there
//! — unless that contradicts what the trace reserved elsewhere, in which case they were an
//! `empty_cache` call just before the malloc.

use super::rounding::{allocation_size, round_size};
use super::settings::Settings;
use crate::model::{Action, Device, Snapshot, TraceEvent};
use crate::replay::state::{state_at, AllocatorState};

/// A segment event of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordedSeg {
    /// Trace index.
    pub event: u32,
    /// The request it belongs to (trace index of the malloc's `alloc`/`oom`, or of the first
    /// release of an `empty_cache` call); `None` when it belongs to no request in the trace.
    pub owner: Option<u32>,
    /// Which segment action.
    pub action: Action,
    /// Address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
}

/// The limit on reserved memory the trace implies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Bounds {
    /// The most the trace ever reserved: the limit is at least this.
    pub lower: u64,
    /// The least reserved + allocation size at which a cudaMalloc failed: the limit is below
    /// this (`null`: nothing failed).
    pub upper: Option<u64>,
    /// Reserved + the device's free memory at the last `oom` (what the device itself had
    /// for the process), if the trace has one.
    pub device: Option<u64>,
}

/// A private pool's address range in the recorded state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrivateRange {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Pool id.
    pub pool: (u64, u64),
}

/// What the trace of one device recorded, besides its requests.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Device index.
    pub device: u32,
    /// The allocator state before the first event (rebuilt from the final state).
    pub start: AllocatorState,
    /// The trace's segment events, in order, with their owners.
    pub segs: Vec<RecordedSeg>,
    /// Trace indices at which the program called `empty_cache` (the first release of each
    /// call), ascending.
    pub empty_cache_at: Vec<u32>,
    /// Releases inside mallocs taken for `empty_cache` calls (the limit they imply
    /// contradicts the trace).
    pub reclassified: usize,
    /// The limit the trace implies.
    pub bounds: Bounds,
    /// Reserved bytes before the first event.
    pub start_reserved: u64,
    /// The most reserved at once, and the first trace index reaching it (-1: the start).
    pub peak_reserved: (u64, i64),
    /// Reserved bytes after the last event.
    pub end_reserved: u64,
    /// Private pools' address ranges, sorted.
    pub private: Vec<PrivateRange>,
    /// An address above every address the file names.
    pub fresh: u64,
    /// Where a cudaMalloc failed: (trace index of the malloc, reserved + its allocation
    /// size, true when its releases came before a successful retry).
    pub failures: Vec<(u32, u64, bool)>,
    /// Mallocs whose releases turned out to be an `empty_cache` call just before them (the
    /// model, replayed as recorded, served them from its cache: nothing failed).
    pub empty_cache_before: Vec<u32>,
}

impl Recorded {
    /// Takes the releases before mallocs `owners` for `empty_cache` calls, and sets the
    /// upper bound from the failures left.
    pub fn exclude(&mut self, owners: &[u32]) {
        self.empty_cache_before.extend_from_slice(owners);
        self.empty_cache_before.sort_unstable();
        self.empty_cache_before.dedup();
        let left = self
            .failures
            .iter()
            .filter(|f| self.empty_cache_before.binary_search(&f.0).is_err());
        self.bounds.upper = left.map(|f| f.1).min();
    }

    /// Mallocs whose releases came before a successful retry: a failure, unless the model
    /// can serve them from its cache.
    pub fn flushes(&self) -> impl Iterator<Item = u32> + '_ {
        self.failures.iter().filter(|f| f.2).map(|f| f.0)
    }

    /// The private pool holding recorded address `addr` ((0, 0): the default pools).
    pub fn pool_of(&self, addr: u64) -> (u64, u64) {
        let i = self.private.partition_point(|r| r.start <= addr);
        match i.checked_sub(1).map(|i| self.private[i]) {
            Some(r) if addr < r.end => r.pool,
            _ => (0, 0),
        }
    }
}

fn is_release(a: Action) -> bool {
    matches!(a, Action::SegmentFree | Action::SegmentUnmap)
}

fn is_segment(a: Action) -> bool {
    matches!(
        a,
        Action::SegmentAlloc | Action::SegmentFree | Action::SegmentMap | Action::SegmentUnmap
    )
}

/// Reads what the trace of `dev` recorded, rounding requests with `settings` (the file's).
pub fn read(snap: &Snapshot, dev: &Device, settings: &Settings) -> Recorded {
    let trace = snap.device_trace(dev);
    let start = state_at(snap, dev, -1);
    let start_reserved: u64 = start.segments.iter().map(|s| s.size).sum();
    let mut segs = owned_segments(trace);
    let walk = Walk::of(trace, &segs, start_reserved);
    let (reclassify, failures) = failure_points(trace, settings, &walk);
    let empty_cache_at = empty_cache_calls(trace, &mut segs, &reclassify);
    let private = private_ranges(snap, dev, &start);
    let fresh = fresh_address(trace, &start, &segs);
    let mut rec = Recorded {
        device: dev.id,
        start,
        segs,
        empty_cache_at,
        reclassified: reclassify.len(),
        bounds: Bounds {
            lower: walk.lower,
            upper: None,
            device: walk.device,
        },
        failures,
        empty_cache_before: Vec::new(),
        start_reserved,
        peak_reserved: walk.peak,
        end_reserved: walk.end_reserved,
        private,
        fresh,
    };
    rec.exclude(&[]);
    rec
}

/// The trace's segment events with their owners, found scanning backwards: the next
/// alloc/oom with only segment events and deferred frees between.
fn owned_segments(trace: &[TraceEvent]) -> Vec<RecordedSeg> {
    let mut segs = Vec::new();
    let mut next: Option<u32> = None;
    for (i, e) in trace.iter().enumerate().rev() {
        match e.action {
            Action::Alloc | Action::Oom => next = Some(i as u32),
            a if is_segment(a) => segs.push(RecordedSeg {
                event: i as u32,
                owner: next,
                action: a,
                addr: e.addr,
                size: e.size,
            }),
            Action::FreeCompleted => {}
            a if a.is_inert() => {}
            _ => next = None,
        }
    }
    segs.reverse();
    segs
}

/// Reserved bytes walked through the trace: the peak, the bounds, and each malloc's
/// first-failure point.
struct Walk {
    /// The most reserved at once, and the first trace index reaching it (-1: the start).
    peak: (u64, i64),
    /// The most the trace ever reserved.
    lower: u64,
    /// Reserved + the device's free memory at the last `oom`.
    device: Option<u64>,
    /// (owner, reserved before its first segment event, it released first, it then allocated)
    groups: Vec<(u32, u64, bool, bool)>,
    /// Reserved just before each oom entry.
    at_oom: Vec<(u32, u64)>,
    /// Reserved after the last event.
    end_reserved: u64,
}

impl Walk {
    /// Walks `trace` and its segment events `segs` from `start_reserved` bytes.
    fn of(trace: &[TraceEvent], segs: &[RecordedSeg], start_reserved: u64) -> Walk {
        let mut reserved = start_reserved as i64;
        let mut peak = (start_reserved, -1i64);
        let mut lower = start_reserved;
        let mut device = None;
        let mut groups: Vec<(u32, u64, bool, bool)> = Vec::new();
        let mut at_oom: Vec<(u32, u64)> = Vec::new();
        let mut k = 0usize;
        for (i, e) in trace.iter().enumerate() {
            if k < segs.len() && segs[k].event as usize == i {
                let s = segs[k];
                k += 1;
                if let Some(o) = s.owner {
                    if groups.last().map(|g| g.0) != Some(o) {
                        groups.push((o, reserved.max(0) as u64, is_release(s.action), false));
                    } else if !is_release(s.action) {
                        groups.last_mut().unwrap().3 = true;
                    }
                }
                reserved += if is_release(s.action) {
                    -(s.size as i64)
                } else {
                    s.size as i64
                };
                let r = reserved.max(0) as u64;
                lower = lower.max(r);
                if r > peak.0 {
                    peak = (r, i as i64);
                }
            } else if e.action == Action::Oom {
                device = Some(reserved.max(0) as u64 + e.addr);
                at_oom.push((i as u32, reserved.max(0) as u64));
            }
        }
        Walk {
            peak,
            lower,
            device,
            groups,
            at_oom,
            end_reserved: reserved.max(0) as u64,
        }
    }
}

/// Failure points: a malloc that released, then allocated (or failed: an oom), and every
/// oom. A malloc that released and then reused a cached block called nothing that fails:
/// the releases were an empty_cache call. Returns the mallocs so reclassified (sorted) and
/// the failures.
fn failure_points(
    trace: &[TraceEvent],
    settings: &Settings,
    walk: &Walk,
) -> (Vec<u32>, Vec<(u32, u64, bool)>) {
    let lower = walk.lower;
    let alloc_of = |i: u32| {
        // An oom entry's size is already rounded (round_size is idempotent).
        allocation_size(round_size(trace[i as usize].size, settings))
    };
    let mut reclassify = Vec::new();
    let mut failures = Vec::new();
    for &(o, before, released_first, allocated) in &walk.groups {
        if !released_first {
            continue;
        }
        let oom = trace[o as usize].action == Action::Oom;
        let v = before + alloc_of(o);
        if (!allocated && !oom) || v <= lower {
            reclassify.push(o);
        } else {
            failures.push((o, v, !oom));
        }
    }
    for &(i, r) in &walk.at_oom {
        let v = r + alloc_of(i);
        if v > lower {
            failures.push((i, v, false));
        }
    }
    reclassify.sort_unstable();
    (reclassify, failures)
}

/// empty_cache calls: runs of releases that belong to no malloc (or to a reclassified
/// one); such a release's owner becomes the call. Returns where each call starts.
fn empty_cache_calls(
    trace: &[TraceEvent],
    segs: &mut [RecordedSeg],
    reclassify: &[u32],
) -> Vec<u32> {
    let mut empty_cache_at = Vec::new();
    let mut run: Option<u32> = None;
    let mut k = 0usize;
    for (i, e) in trace.iter().enumerate() {
        if k < segs.len() && segs[k].event as usize == i {
            let s = &mut segs[k];
            k += 1;
            let orphan = match s.owner {
                None => true,
                Some(o) => reclassify.binary_search(&o).is_ok(),
            };
            if is_release(s.action) && orphan {
                let id = *run.get_or_insert_with(|| {
                    empty_cache_at.push(i as u32);
                    i as u32
                });
                s.owner = Some(id);
            } else {
                run = None;
            }
        } else if e.action != Action::FreeCompleted && !e.action.is_inert() {
            run = None;
        }
    }
    empty_cache_at
}

/// Private pools' address ranges, in the state before the trace and in the final one, sorted.
fn private_ranges(snap: &Snapshot, dev: &Device, start: &AllocatorState) -> Vec<PrivateRange> {
    let mut private: Vec<PrivateRange> = start
        .segments
        .iter()
        .filter(|s| s.pool_id != (0, 0))
        .map(|s| PrivateRange {
            start: s.address,
            end: s.address + s.size,
            pool: s.pool_id,
        })
        .chain(
            snap.device_segments(dev)
                .iter()
                .filter(|s| s.is_private_pool())
                .map(|s| PrivateRange {
                    start: s.address,
                    end: s.address + s.total_size,
                    pool: s.pool_id,
                }),
        )
        .collect();
    private.sort_by_key(|r| (r.start, r.end));
    private.dedup();
    private
}

/// A GiB-aligned address above every address the file names.
fn fresh_address(trace: &[TraceEvent], start: &AllocatorState, segs: &[RecordedSeg]) -> u64 {
    let top = start
        .segments
        .iter()
        .map(|s| s.address.saturating_add(s.size))
        .chain(segs.iter().map(|s| s.addr.saturating_add(s.size)))
        .chain(
            trace
                .iter()
                .filter(|e| e.action == Action::Alloc)
                .map(|e| e.addr),
        )
        .max()
        .unwrap_or(0);
    let gib = 1u64 << 30;
    top.div_ceil(gib).saturating_add(1).saturating_mul(gib)
}
