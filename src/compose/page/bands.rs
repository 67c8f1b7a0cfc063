//! The active memory timeline as MemoryViz draws it: the largest allocations (by bytes, and by
//! bytes × lifetime) as stacked bands over event indices, the rest as one aggregate band on top, so the stack's height is the
//! live bytes at every sample and nothing is dropped.
//!
//! Samples are states after chosen events: per bucket its lowest and highest live bytes and
//! its highest reserved bytes (so each bucket's maxima, and the peak, are exact), the window's ends, the peak, every OOM,
//! and the alloc and free of every band (so each band starts and ends where it does). Between
//! two samples the state is drawn as the earlier one (a step). Bands stack in allocation
//! order: a band's base is the sum of the earlier bands live with it, listed only where it
//! changes.

use super::frames::FrameTable;
use super::notes::{AllocNote, NoteSource};
use crate::analyze::pretrace::{self, Kinds};
use crate::model::{Action, Snapshot, TraceEvent};
use crate::replay::{DeviceReplay, Origin, Window, NEVER};
use crate::vocab::sites::{self, SiteOptions};
use serde::Serialize;

/// The states drawn, as columns.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Samples {
    /// The state after this event (-1: before the first).
    pub event_index: Vec<i64>,
    /// Its time, when recorded (`null` otherwise).
    pub time_us: Vec<Option<i64>>,
    /// Live requested bytes: the height of the stack.
    pub live_bytes: Vec<u64>,
    /// Reserved bytes (the line over the bands).
    pub reserved_bytes: Vec<u64>,
    /// Live bytes of allocations without a band of their own (the aggregate band on top).
    pub other_bytes: Vec<u64>,
}

/// One allocation drawn as a band of its own.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Band {
    /// Block address.
    pub address: u64,
    /// Requested bytes: the band's height.
    pub size: u64,
    /// Index in the top-level `stacks` (frames innermost first).
    pub stack: u32,
    /// Its site (`filename:line:name`, as `top` groups; for memory alive before the trace
    /// with no stack, `<before trace, no stack> likely KIND` as `top` labels it).
    pub site: String,
    /// Where the record comes from: `trace`, `orphan_free`, `final_block`.
    pub origin: Origin,
    /// Event index of the `alloc` (-1: alive before the trace began).
    pub alloc_event: i64,
    /// Time of the `alloc`, when recorded.
    pub alloc_time_us: Option<i64>,
    /// Event index of the `free_requested`, if any.
    pub free_requested_event: Option<i64>,
    /// Event index of the `free_completed`; `null` when never freed in the trace.
    pub free_event: Option<i64>,
    /// Time of the `free_completed`, when recorded.
    pub free_time_us: Option<i64>,
    /// First sample where the band is live.
    pub first_sample: usize,
    /// Last sample where the band is live.
    pub last_sample: usize,
    /// Its base where it changes: `[sample, bytes, sample, bytes, ...]`, starting at
    /// `first_sample`; the base holds until the next pair.
    pub base: Vec<u64>,
    /// Its annotations and metadata ([`AllocNote`]); absent when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<AllocNote>,
}

/// One device's band timeline.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Bands {
    /// The states drawn.
    pub samples: Samples,
    /// The allocations with a band of their own, in stacking order (allocation order): half
    /// the largest by bytes, half the largest by bytes × events alive in the window.
    pub bands: Vec<Band>,
    /// Allocations of the window without a band (in the aggregate band).
    pub other_allocations: usize,
    /// The smallest band's bytes.
    pub smallest_band_bytes: u64,
    /// The largest allocation of the window in the aggregate band (0 when it holds none).
    pub largest_other_bytes: u64,
    /// Events of `oom` entries inside the window.
    pub oom_events: Vec<i64>,
}

/// Options of the band timeline.
#[derive(Clone, Copy, Debug)]
pub struct BandOptions {
    /// Most allocations drawn as bands of their own.
    pub bands: usize,
    /// Buckets of the downsampling (each keeps its lowest and highest state).
    pub buckets: usize,
}

impl Default for BandOptions {
    fn default() -> Self {
        BandOptions {
            bands: 1000,
            buckets: 1500,
        }
    }
}

/// Where each allocation of a replay starts, and which are live at regular checkpoints: finds
/// the allocations overlapping a window without a pass over all of them (`memlens serve`
/// answers many windows of one replay).
#[derive(Clone, Debug, Default)]
pub struct LiveIndex {
    /// Allocation indices ordered by `start`.
    by_start: Vec<u32>,
    /// Their `start`s, in the same order.
    starts: Vec<i64>,
    /// Per checkpoint `k` (the state after event `k * STRIDE - 1`), the allocations live then.
    live: Vec<Vec<u32>>,
}

impl LiveIndex {
    /// Events between two checkpoints.
    const STRIDE: i64 = 16_384;

    /// The index of `r`'s allocations.
    pub fn new(r: &DeviceReplay) -> LiveIndex {
        let mut by_start: Vec<u32> = (0..r.allocations.len() as u32).collect();
        by_start.sort_by_key(|&i| r.allocations[i as usize].start);
        let starts = by_start
            .iter()
            .map(|&i| r.allocations[i as usize].start)
            .collect();
        let last = r.events as i64 - 1;
        let checkpoints = ((last + 1) / Self::STRIDE + 1) as usize;
        let mut live = vec![Vec::new(); checkpoints];
        for (i, a) in r.allocations.iter().enumerate() {
            // checkpoints k with start <= k * STRIDE - 1 < end
            let first = (a.start + 1 + Self::STRIDE - 1)
                .div_euclid(Self::STRIDE)
                .max(0);
            let end = a.end.min(last + 1);
            let mut k = first;
            while k < checkpoints as i64 && k * Self::STRIDE - 1 < end {
                live[k as usize].push(i as u32);
                k += 1;
            }
        }
        LiveIndex {
            by_start,
            starts,
            live,
        }
    }

    /// The allocations of `r` (the replay this index was made of) overlapping `w`, ascending.
    pub fn overlapping(&self, r: &DeviceReplay, w: Window) -> Vec<usize> {
        let k = ((w.first + 1).max(0) / Self::STRIDE) as usize;
        let Some(at_checkpoint) = self.live.get(k) else {
            return Vec::new();
        };
        let checkpoint = k as i64 * Self::STRIDE - 1;
        let from = self.starts.partition_point(|&s| s <= checkpoint);
        let to = self.starts.partition_point(|&s| s <= w.last);
        let mut out: Vec<usize> = at_checkpoint
            .iter()
            .chain(&self.by_start[from..to.max(from)])
            .map(|&i| i as usize)
            .filter(|&i| {
                let a = &r.allocations[i];
                a.start <= w.last && a.end > w.first
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// What a caller made once for a device and hands to each [`bands`] call.
#[derive(Clone, Copy, Default)]
pub struct Known<'a> {
    /// Made of the replay, finds the allocations overlapping a window without a pass over all
    /// of them ([`LiveIndex::new`]).
    pub index: Option<&'a LiveIndex>,
    /// The likely kinds of the memory older than the trace without a stack
    /// ([`Kinds::of`]); made on demand when absent and a band needs them.
    pub kinds: Option<&'a Kinds>,
    /// The allocations' annotations and metadata ([`NoteSource::of`]); absent: bands carry
    /// none.
    pub notes: Option<&'a NoteSource>,
}

/// The band timeline of replay `r` inside `window`.
pub fn bands(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[TraceEvent],
    window: Window,
    opts: BandOptions,
    known: Known<'_>,
    table: &mut FrameTable,
) -> Bands {
    let sel = Selection::of(r, window, opts, known.index);
    let kept = sel.kept;
    let oom_events: Vec<i64> = trace
        .iter()
        .enumerate()
        .filter(|(i, e)| e.action == Action::Oom && window.contains(*i as i64))
        .map(|(i, _)| i as i64)
        .collect();
    let mut points = bucket_extremes(r, window, opts.buckets);
    points.extend([window.first, window.last, r.peak_in(window)]);
    points.extend(&oom_events);
    for &i in &kept {
        let a = &r.allocations[i];
        points.push(a.start.max(window.first));
        if a.end != NEVER && a.end <= window.last {
            points.push(a.end);
        }
    }
    points.sort_unstable();
    points.dedup();
    let mut out = new_bands(snap, r, trace, &kept, known.kinds, table);
    if let Some(notes) = known.notes.filter(|n| n.any()) {
        for (b, &i) in out.iter_mut().zip(&kept) {
            b.note = notes.note(snap, r, trace, i as u32);
        }
    }
    let samples = sweep(r, trace, &points, &kept, &mut out);
    Bands {
        samples,
        bands: out,
        other_allocations: sel.n_overlapping - kept.len(),
        smallest_band_bytes: sel.smallest_band_bytes,
        largest_other_bytes: sel.largest_other_bytes,
        oom_events,
    }
}

/// The allocations of a window that get bands of their own, and what the others weigh.
struct Selection {
    /// The allocations with a band, in stacking order: allocation order (initial allocations
    /// first, as the replay lists them).
    kept: Vec<usize>,
    /// Allocations overlapping the window.
    n_overlapping: usize,
    /// The smallest allocation with a band.
    smallest_band_bytes: u64,
    /// The largest allocation without one.
    largest_other_bytes: u64,
}

impl Selection {
    /// Allocations overlapping `window` (found with `index` when given); `opts.bands` of them
    /// get bands of their own.
    fn of(
        r: &DeviceReplay,
        window: Window,
        opts: BandOptions,
        index: Option<&LiveIndex>,
    ) -> Selection {
        let overlapping: Vec<usize> = match index {
            Some(index) => index.overlapping(r, window),
            None => (0..r.allocations.len())
                .filter(|&i| {
                    let a = &r.allocations[i];
                    a.start <= window.last && a.end > window.first
                })
                .collect(),
        };
        let n_overlapping = overlapping.len();
        let chosen = chosen(r, window, overlapping.clone(), opts.bands);
        let with_band: rustc_hash::FxHashSet<usize> = chosen.iter().copied().collect();
        let largest_other_bytes = overlapping
            .iter()
            .filter(|i| !with_band.contains(i))
            .map(|&i| r.allocations[i].size)
            .max()
            .unwrap_or(0);
        let mut kept = chosen;
        kept.sort_unstable();
        kept.dedup();
        let smallest_band_bytes = kept
            .iter()
            .map(|&i| r.allocations[i].size)
            .min()
            .unwrap_or(0);
        Selection {
            kept,
            n_overlapping,
            smallest_band_bytes,
            largest_other_bytes,
        }
    }
}

/// The time of event `i` of `trace`, when it records one.
fn time_of(trace: &[TraceEvent], i: i64) -> Option<i64> {
    if i < 0 {
        None
    } else {
        trace.get(i as usize).and_then(|e| e.time())
    }
}

/// A band per allocation of `kept`, labelled by its site (or, for memory older than the
/// trace, its likely kind: `kinds`, else made here when a band needs them), its samples not
/// yet swept.
fn new_bands(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[TraceEvent],
    kept: &[usize],
    kinds: Option<&Kinds>,
    table: &mut FrameTable,
) -> Vec<Band> {
    // Site labels once per stack, not once per band (a deep stack's site walks its frames).
    let mut labels: rustc_hash::FxHashMap<crate::model::StackId, String> = Default::default();
    let (made, empty);
    let kinds = match kinds {
        Some(k) => k,
        None if kept
            .iter()
            .any(|&i| pretrace::is_pretrace(snap, &r.allocations[i])) =>
        {
            made = Kinds::of(snap, r, trace);
            &made
        }
        None => {
            empty = Kinds::default();
            &empty
        }
    };
    kept.iter()
        .map(|&i| {
            let a = &r.allocations[i];
            let site = match kinds.of_alloc(snap, a) {
                Some(p) => p.label(),
                None => labels
                    .entry(a.stack)
                    .or_insert_with(|| sites::site_label(snap, a.stack, SiteOptions::default()))
                    .clone(),
            };
            Band {
                address: a.addr,
                size: a.size,
                stack: table.stack(snap, a.stack),
                site,
                origin: a.origin,
                alloc_event: a.start,
                alloc_time_us: time_of(trace, a.start),
                free_requested_event: a.free_requested,
                free_event: (a.end != NEVER).then_some(a.end),
                free_time_us: if a.end == NEVER {
                    None
                } else {
                    time_of(trace, a.end)
                },
                first_sample: usize::MAX,
                last_sample: 0,
                base: Vec::new(),
                note: None,
            }
        })
        .collect()
}

/// Sweeps the sample `points` with the bands (`out`, one per allocation of `kept`) live at
/// each, in stacking order: sets each band's samples and bases, returns the samples.
fn sweep(
    r: &DeviceReplay,
    trace: &[TraceEvent],
    points: &[i64],
    kept: &[usize],
    out: &mut [Band],
) -> Samples {
    let mut samples = Samples::default();
    let mut next = 0; // next kept band (by start) not yet entered
    let mut active: Vec<usize> = Vec::new(); // positions in `kept`
    let mut last_base: Vec<Option<u64>> = vec![None; kept.len()];
    for (s, &e) in points.iter().enumerate() {
        while next < kept.len() && r.allocations[kept[next]].start <= e {
            active.push(next);
            next += 1;
        }
        active.retain(|&k| r.allocations[kept[k]].live_at(e));
        let mut base = 0u64;
        for &k in &active {
            let b = &mut out[k];
            if b.first_sample == usize::MAX {
                b.first_sample = s;
            }
            b.last_sample = s;
            if last_base[k] != Some(base) {
                b.base.extend([s as u64, base]);
                last_base[k] = Some(base);
            }
            base += b.size;
        }
        let live = r.live_at(e);
        samples.event_index.push(e);
        samples.time_us.push(time_of(trace, e));
        samples.live_bytes.push(live);
        samples.reserved_bytes.push(r.reserved_at(e));
        samples.other_bytes.push(live.saturating_sub(base));
    }
    samples
}

/// The allocations drawn as bands, `n` at most, taken in turn from three rankings until
/// there are `n`: the largest by bytes (the spikes that make a peak), the largest by bytes ×
/// events alive inside the window (what the eye sees on a long trace, where the largest
/// temporaries are slivers), and the largest of those made or freed inside the window (what
/// a zoomed window is about, ranked only in windows of at most `4 n` events; on a window of
/// fewer events than `n` they all get one).
fn chosen(r: &DeviceReplay, w: Window, candidates: Vec<usize>, n: usize) -> Vec<usize> {
    if candidates.len() <= n {
        return candidates;
    }
    let area = |i: usize| {
        let a = &r.allocations[i];
        let span = (a.end.min(w.last + 1) - a.start.max(w.first)).max(1) as u128;
        a.size as u128 * span
    };
    let size = |i: usize| r.allocations[i].size as u128;
    // The `n` largest by `key`, largest first (ties: lower index first): one pass keeping the
    // best `n` in a heap whose top is the worst of them, so a window of millions of
    // allocations costs a comparison each, not a sort.
    let top = |candidates: &[usize], key: &dyn Fn(usize) -> u128| -> Vec<usize> {
        use std::cmp::Reverse;
        let mut heap: std::collections::BinaryHeap<Reverse<(u128, Reverse<usize>)>> =
            std::collections::BinaryHeap::with_capacity(n + 1);
        for &i in candidates {
            let item = (key(i), Reverse(i));
            if heap.len() < n {
                heap.push(Reverse(item));
            } else if heap.peek().is_some_and(|worst| item > worst.0) {
                heap.pop();
                heap.push(Reverse(item));
            }
        }
        let mut best: Vec<(u128, Reverse<usize>)> = heap.into_iter().map(|r| r.0).collect();
        best.sort_unstable_by(|x, y| y.cmp(x));
        best.into_iter().map(|(_, Reverse(i))| i).collect()
    };
    let zoomed = (w.last - w.first + 1) as u128 <= 4 * n as u128;
    let inside: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|_| zoomed)
        .filter(|&i| {
            let a = &r.allocations[i];
            w.contains(a.start) || (a.end != NEVER && w.contains(a.end))
        })
        .collect();
    let by_inside = top(&inside, &size);
    let by_size = top(&candidates, &size);
    let by_area = top(&candidates, &area);
    let mut out = Vec::with_capacity(n);
    let mut seen = rustc_hash::FxHashSet::default();
    let longest = by_size.len().max(by_area.len()).max(by_inside.len());
    for k in 0..longest {
        for list in [&by_size, &by_area, &by_inside] {
            if let Some(&i) = list.get(k) {
                if out.len() < n && seen.insert(i) {
                    out.push(i);
                }
            }
        }
    }
    out
}

/// Per bucket of the window, the states of its lowest and highest live bytes and of its
/// highest reserved bytes (so the reserved line keeps its maximum too).
fn bucket_extremes(r: &DeviceReplay, w: Window, buckets: usize) -> Vec<i64> {
    let n = (w.last - w.first + 1) as usize;
    if n <= buckets * 3 {
        return (w.first..=w.last).collect();
    }
    let mut keep = Vec::with_capacity(buckets * 3);
    for b in 0..buckets {
        let lo = w.first + (n * b / buckets) as i64;
        let hi = w.first + (n * (b + 1) / buckets) as i64 - 1;
        if lo > hi {
            continue;
        }
        let (mut min_i, mut max_i, mut res_i) = (lo, lo, lo);
        let (mut min_v, mut max_v) = (r.live_at(lo), r.live_at(lo));
        let mut res_v = r.reserved_at(lo);
        for i in lo + 1..=hi {
            let v = r.live_at(i);
            if v < min_v {
                (min_i, min_v) = (i, v);
            }
            if v > max_v {
                (max_i, max_v) = (i, v);
            }
            let rv = r.reserved_at(i);
            if rv > res_v {
                (res_i, res_v) = (i, rv);
            }
        }
        keep.extend([min_i, max_i, res_i]);
    }
    keep
}
