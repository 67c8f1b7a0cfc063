//! The arithmetic-overflow oracle shared by `decode` and `mutate_snapshot`: for a snapshot
//! that built, every size is added up again in u128, straight from the model's arrays
//! (`segments`, `blocks`, `events`, `devices`), and must stay within the bound of
//! `model::bounds` (all sizes of one file ≤ 2^60, no `address + size` past 2^64) and agree
//! with what the summary and the replay report. A file that is refused has nothing to check.

use memlens::model::{Action, BlockState, Snapshot};
use memlens::replay::DeviceReplay;
use std::collections::BTreeMap;

/// `model::bounds::MAX_FILE_BYTES`, restated so that the oracle does not trust the library.
const BOUND: u128 = 1 << 60;

/// Per-device sums, in u128.
#[derive(Default)]
struct Totals {
    segments: usize,
    blocks: usize,
    /// Σ segment total_size.
    reserved: u128,
    /// Σ size of active_allocated blocks.
    allocated: u128,
    /// Σ requested_size of active_allocated blocks.
    requested: u128,
    /// Σ size of active_pending_free blocks.
    pending_free: u128,
    /// Σ size of inactive blocks.
    inactive: u128,
    /// Σ requested_size of the blocks that are not inactive (what the replay starts live).
    live_requested: u128,
    live_requested_rounded: u128,
    /// Σ size of every trace entry.
    trace: u128,
    /// Σ size of alloc entries.
    alloc: u128,
    alloc_rounded: u128,
    /// Σ size of free / free_completed entries (a free without its alloc starts live).
    free: u128,
    free_rounded: u128,
    /// Σ size of segment_alloc / segment_map and of segment_free / segment_unmap entries.
    segment_grow: u128,
    segment_shrink: u128,
}

/// The allocator's rounding, in u128 (`replay::round_size`).
fn round(n: u64) -> u128 {
    (n as u128).div_ceil(512).max(1) * 512
}

/// `address + size` must not run past 2^64.
fn range_fits(address: u64, size: u64, what: &str) {
    assert!(
        address as u128 + size as u128 <= 1 << 64,
        "{what}: {size} bytes at 0x{address:x} run past 2^64 in a snapshot that built"
    );
}

/// Panics when a total of `snap` passes the bound or disagrees with the summary or `replays`.
pub fn check(snap: &Snapshot, replays: &[DeviceReplay]) {
    let mut per: BTreeMap<u32, Totals> = BTreeMap::new();
    // Every size that `model::bounds` counts, over the whole file.
    let mut all: u128 = 0;
    for (i, s) in snap.segments.iter().enumerate() {
        let t = per.entry(s.device).or_default();
        t.segments += 1;
        t.reserved += s.total_size as u128;
        all += s.total_size as u128;
        range_fits(s.address, s.total_size, &format!("segment {i}"));
        let blocks = snap
            .blocks
            .get(s.blocks.start as usize..s.blocks.end as usize)
            .unwrap_or_else(|| {
                panic!("segment {i}: blocks {:?} outside the block array", s.blocks)
            });
        t.blocks += blocks.len();
        for b in blocks {
            all += b.size as u128;
            if b.address_recorded {
                range_fits(b.address, b.size, &format!("a block of segment {i}"));
            }
            match b.state {
                BlockState::ActiveAllocated => {
                    t.allocated += b.size as u128;
                    t.requested += b.requested_size as u128;
                }
                BlockState::ActivePendingFree => t.pending_free += b.size as u128,
                BlockState::Inactive => t.inactive += b.size as u128,
            }
            if b.state != BlockState::Inactive {
                all += b.requested_size as u128;
                t.live_requested += b.requested_size as u128;
                t.live_requested_rounded += round(b.requested_size);
            }
        }
    }
    for dev in &snap.devices {
        let trace = snap.events.get(dev.trace.clone()).unwrap_or_else(|| {
            panic!(
                "device {}: trace {:?} outside the event array",
                dev.id, dev.trace
            )
        });
        let t = per.entry(dev.id).or_default();
        for e in trace {
            all += e.size as u128;
            t.trace += e.size as u128;
            match e.action {
                Action::Oom => all += e.addr as u128,
                Action::Alloc => {
                    t.alloc += e.size as u128;
                    t.alloc_rounded += round(e.size);
                }
                Action::Free | Action::FreeCompleted => {
                    t.free += e.size as u128;
                    t.free_rounded += round(e.size);
                }
                Action::SegmentAlloc | Action::SegmentMap => t.segment_grow += e.size as u128,
                Action::SegmentFree | Action::SegmentUnmap => t.segment_shrink += e.size as u128,
                _ => {}
            }
            if matches!(
                e.action,
                Action::Alloc
                    | Action::FreeRequested
                    | Action::FreeCompleted
                    | Action::Free
                    | Action::SegmentAlloc
                    | Action::SegmentFree
                    | Action::SegmentMap
                    | Action::SegmentUnmap
            ) {
                range_fits(
                    e.addr,
                    e.size,
                    &format!("a trace entry of device {}", dev.id),
                );
            }
        }
    }
    assert!(
        all <= BOUND,
        "a snapshot whose sizes add up to {all} (> 2^60) built"
    );

    // The summary: per device, the same sums.
    let summary = memlens::analyze::summary::run(snap);
    assert_eq!(
        summary.devices.iter().map(|d| d.device).collect::<Vec<_>>(),
        per.keys().copied().collect::<Vec<_>>(),
        "summary devices"
    );
    for d in &summary.devices {
        let t = &per[&d.device];
        let dev = d.device;
        assert_eq!(d.segments, t.segments, "device {dev}: segments");
        assert_eq!(d.blocks, t.blocks, "device {dev}: blocks");
        assert_eq!(
            d.reserved_bytes as u128, t.reserved,
            "device {dev}: reserved_bytes"
        );
        assert_eq!(
            d.allocated_bytes as u128, t.allocated,
            "device {dev}: allocated_bytes"
        );
        assert_eq!(
            d.requested_bytes as u128, t.requested,
            "device {dev}: requested_bytes"
        );
        assert_eq!(
            d.rounding_waste_bytes as u128,
            t.allocated.saturating_sub(t.requested),
            "device {dev}: rounding_waste_bytes"
        );
        assert_eq!(
            d.pending_free_bytes as u128, t.pending_free,
            "device {dev}: pending_free_bytes"
        );
        assert_eq!(
            d.inactive_bytes as u128, t.inactive,
            "device {dev}: inactive_bytes"
        );
        let pools = |f: fn(&memlens::analyze::summary::PoolSummary) -> u64| -> u128 {
            d.pools.iter().map(|p| f(p) as u128).sum()
        };
        assert_eq!(
            pools(|p| p.reserved_bytes),
            t.reserved,
            "device {dev}: Σ pool reserved"
        );
        assert_eq!(
            pools(|p| p.allocated_bytes),
            t.allocated,
            "device {dev}: Σ pool allocated"
        );
        assert_eq!(
            pools(|p| p.inactive_bytes),
            t.inactive,
            "device {dev}: Σ pool inactive"
        );
        assert_eq!(
            d.pools.iter().map(|p| p.segments).sum::<usize>(),
            t.segments,
            "device {dev}: Σ pool segments"
        );
    }

    // The replay: live bytes never exceed what was ever allocated plus what started live
    // (final live blocks and frees without their alloc); reserved bytes stay within what
    // the segments and the segment entries add up to.
    let with_trace: Vec<u32> = snap
        .devices
        .iter()
        .filter(|d| !d.trace.is_empty())
        .map(|d| d.id)
        .collect();
    assert_eq!(
        replays.iter().map(|r| r.device).collect::<Vec<_>>(),
        with_trace,
        "replayed devices"
    );
    for r in replays {
        let t = &per[&r.device];
        let dev = r.device;
        let initial = t.free + t.live_requested;
        let ceiling = t.alloc + initial;
        assert!(
            r.initial_bytes as u128 <= initial,
            "device {dev}: initial_bytes {} > {initial}",
            r.initial_bytes
        );
        assert!(
            r.peak_bytes as u128 <= ceiling,
            "device {dev}: peak_bytes {} > {ceiling} (Σ alloc + initial)",
            r.peak_bytes
        );
        let max_live = r
            .live
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(r.initial_bytes);
        assert_eq!(
            r.peak_bytes, max_live,
            "device {dev}: peak_bytes is not the largest live"
        );
        let rounded_ceiling = t.alloc_rounded + t.free_rounded + t.live_requested_rounded;
        assert!(
            r.initial_rounded as u128 <= t.free_rounded + t.live_requested_rounded,
            "device {dev}: initial_rounded {}",
            r.initial_rounded
        );
        if let Some(&m) = r.rounded.iter().max() {
            assert!(
                m as u128 <= rounded_ceiling,
                "device {dev}: rounded {m} > {rounded_ceiling}"
            );
        }
        let reserved_ceiling = t.reserved + t.segment_shrink;
        assert!(
            r.initial_reserved as u128 <= reserved_ceiling,
            "device {dev}: initial_reserved {} > {reserved_ceiling}",
            r.initial_reserved
        );
        if let Some(&m) = r.reserved.iter().max() {
            assert!(
                m as u128 <= reserved_ceiling + t.segment_grow,
                "device {dev}: reserved {m} > {}",
                reserved_ceiling + t.segment_grow
            );
        }
        assert_eq!(r.live.len(), r.events, "device {dev}: live per event");
    }
}
