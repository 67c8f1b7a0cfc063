//! Invariant and data-quality checks on a built snapshot (snapshot-format.md §2, §4).
//!
//! Nothing here fails: each finding becomes one [`Warning`] per kind and device, with a count
//! and the first example, so a corrupt total is reported instead of silently used.

use super::live_addrs::LiveAddrs;
use super::snapshot::*;
use rustc_hash::FxHashSet;

struct Tally {
    code: &'static str,
    device: Option<u32>,
    count: u64,
    first: String,
    /// What was found, said of one and of several.
    what: [&'static str; 2],
}

impl Tally {
    fn new(code: &'static str, device: Option<u32>, what: [&'static str; 2]) -> Self {
        Tally {
            code,
            device,
            count: 0,
            first: String::new(),
            what,
        }
    }
    fn hit(&mut self, example: impl FnOnce() -> String) {
        if self.count == 0 {
            self.first = example();
        }
        self.count += 1;
    }
    fn into_warning(self) -> Option<Warning> {
        (self.count > 0).then(|| Warning {
            code: self.code,
            device: self.device,
            message: format!(
                "{} {} (first: {})",
                self.count,
                self.what[(self.count != 1) as usize],
                self.first
            ),
        })
    }
}

/// Whether a device's trace holds one entry alone: history recorded in 'state' mode or with
/// `max_entries=1`, so there is no timeline (the `single_entry_trace` warning, and the page
/// shows no timeline for it).
pub fn single_entry_trace(trace: &[TraceEvent]) -> bool {
    trace.len() == 1
}

/// All warnings for `snap`, in a fixed order.
pub fn check(snap: &Snapshot) -> Vec<Warning> {
    let mut out = Vec::new();
    for dev in &snap.devices {
        out.extend(check_segments(snap, dev));
        out.extend(check_trace(snap, dev));
        out.extend(check_coverage(snap, dev));
        out.extend(check_skipped_actions(snap, dev));
    }
    out.extend(check_private_pools_only(snap));
    let any_holder = !snap.blocks.is_empty() || !snap.events.is_empty();
    if any_holder && !snap.has_frames() {
        out.push(Warning {
            code: "no_frames",
            device: None,
            message: "no stack frames recorded (history recorded without context, or `context=None`): call sites cannot be named".into(),
        });
    }
    out
}

/// Whole action kinds missing from a trace that holds their partners: what
/// `_record_memory_history(skip_actions=[...])` (PyTorch PR #168183) leaves. `free_requested`
/// and `free_completed` come in pairs for every free, and frees follow allocations, so a
/// trace with one side and none of the other was recorded with the other skipped (a ring
/// buffer that wrapped loses the oldest entries of every kind, never one kind). What the
/// remaining kinds say stays right: without `free_completed` the replay ends an allocation
/// at its `free_requested` (a free waiting on another stream then looks complete at once).
/// Codes: `skipped_free_requested`, `skipped_free_completed`, `skipped_alloc`.
fn check_skipped_actions(snap: &Snapshot, dev: &Device) -> Vec<Warning> {
    let mut n = [0u64; 3]; // alloc, free_requested, free_completed (or free)
    for e in snap.device_trace(dev) {
        match e.action {
            Action::Alloc => n[0] += 1,
            Action::FreeRequested => n[1] += 1,
            Action::FreeCompleted | Action::Free => n[2] += 1,
            _ => {}
        }
    }
    let d = Some(dev.id);
    let mut out = Vec::new();
    // A handful of entries is a short trace, not a recording choice.
    const MIN: u64 = 4;
    if n[1] == 0 && n[2] >= MIN && n[0] >= MIN {
        out.push(Warning {
            code: "skipped_free_requested",
            device: d,
            message: format!("the trace has {} allocations and {} completed frees but no `free_requested` entry: it was recorded with skip_actions=['free_requested'], so frees deferred by record_stream cannot be told apart", n[0], n[2]),
        });
    }
    if n[2] == 0 && n[1] >= MIN {
        out.push(Warning {
            code: "skipped_free_completed",
            device: d,
            message: format!("the trace has {} `free_requested` entries but no `free_completed`: it was recorded with skip_actions=['free_completed'], so each allocation is taken to end at its free_requested", n[1]),
        });
    }
    if n[0] == 0 && n[1] + n[2] >= MIN {
        out.push(Warning {
            code: "skipped_alloc",
            device: d,
            message: format!("the trace has {} frees but no `alloc` entry: it was recorded with skip_actions=['alloc'], so what was freed is known only by its size and the free's stack", n[1] + n[2]),
        });
    }
    out
}

/// Every segment in private pools, none in the default ones, and no trace: what
/// `MemPool.snapshot()` (`memory_snapshot(mempool_id=...)`) writes, one pool alone.
fn check_private_pools_only(snap: &Snapshot) -> Option<Warning> {
    if snap.segments.is_empty() || snap.devices.iter().any(|d| !d.trace.is_empty()) {
        return None;
    }
    let mut pools: Vec<(u64, u64)> = snap.segments.iter().map(|s| s.pool_id).collect();
    pools.sort_unstable();
    pools.dedup();
    if pools.contains(&(0, 0)) {
        return None;
    }
    let names: Vec<String> = pools.iter().map(|(a, b)| format!("({a}, {b})")).collect();
    Some(Warning {
        code: "private_pools_only",
        device: None,
        message: format!(
            "every segment belongs to private pool{} {} and no trace was recorded: this looks like `MemPool.snapshot()` (or `memory_snapshot(mempool_id=...)`), which holds that pool alone, so memory outside it (the default pools, other pools) is not in the file",
            if names.len() == 1 { "" } else { "s" },
            names.join(", ")
        ),
    })
}

fn check_segments(snap: &Snapshot, dev: &Device) -> Vec<Warning> {
    let d = Some(dev.id);
    let mut total = Tally::new(
        "segment_total_mismatch",
        d,
        [
            "segment whose block sizes do not add up to total_size",
            "segments whose block sizes do not add up to total_size",
        ],
    );
    let mut sums = Tally::new(
        "segment_sum_mismatch",
        d,
        [
            "segment whose recorded allocated/active/requested sizes differ from its blocks",
            "segments whose recorded allocated/active/requested sizes differ from their blocks",
        ],
    );
    let mut tiling = Tally::new(
        "blocks_not_contiguous",
        d,
        [
            "block that does not start where the previous block ends",
            "blocks that do not start where the previous block ends",
        ],
    );
    let mut align = Tally::new(
        "block_size_unaligned",
        d,
        [
            "block whose size is not a multiple of 512 bytes",
            "blocks whose size is not a multiple of 512 bytes",
        ],
    );
    let mut overlap = Tally::new(
        "segments_overlap",
        d,
        [
            "segment that overlaps the previous one",
            "segments that overlap the previous one",
        ],
    );
    let mut stale = Tally::new(
        "stale_requested_size",
        d,
        [
            "inactive block carries a stale requested_size, ignored as PyTorch leaves it",
            "inactive blocks carry a stale requested_size, ignored as PyTorch leaves it",
        ],
    );
    let mut over = Tally::new(
        "requested_exceeds_size",
        d,
        [
            "active block whose requested_size exceeds its size",
            "active blocks whose requested_size exceeds their size",
        ],
    );
    let segs = snap.device_segments(dev);
    for (i, s) in segs.iter().enumerate() {
        let blocks = snap.segment_blocks(s);
        let at = || format!("segment 0x{:x}", s.address);
        let sum: u64 = blocks.iter().map(|b| b.size).sum();
        if sum != s.total_size {
            total.hit(|| format!("{}: blocks {} vs total_size {}", at(), sum, s.total_size));
        }
        let alloc: u64 = blocks
            .iter()
            .filter(|b| b.state == BlockState::ActiveAllocated)
            .map(|b| b.size)
            .sum();
        let active: u64 = blocks
            .iter()
            .filter(|b| b.state != BlockState::Inactive)
            .map(|b| b.size)
            .sum();
        let req: u64 = blocks
            .iter()
            .filter(|b| b.state != BlockState::Inactive)
            .map(|b| b.requested_size)
            .sum();
        if s.recorded_allocated.is_some_and(|v| v != alloc)
            || s.recorded_active.is_some_and(|v| v != active)
            || s.recorded_requested.is_some_and(|v| v != req)
        {
            sums.hit(|| format!("{}: allocated {:?}/{alloc}, active {:?}/{active}, requested {:?}/{req} (recorded/blocks)", at(), s.recorded_allocated, s.recorded_active, s.recorded_requested));
        }
        let mut expect = s.address;
        for b in blocks {
            if b.address_recorded && b.address != expect {
                tiling
                    .hit(|| format!("block 0x{:x} in {}, expected 0x{expect:x}", b.address, at()));
            }
            expect = b.address.wrapping_add(b.size);
            if b.size % 512 != 0 {
                align.hit(|| format!("block 0x{:x} of {} bytes", b.address, b.size));
            }
            if b.state == BlockState::Inactive
                && b.requested_size != 0
                && b.requested_size != b.size
            {
                stale.hit(|| format!("block 0x{:x}", b.address));
            }
            if b.state != BlockState::Inactive && b.requested_size > b.size {
                over.hit(|| {
                    format!(
                        "block 0x{:x}: requested {} > size {}",
                        b.address, b.requested_size, b.size
                    )
                });
            }
        }
        if i > 0 {
            let p = &segs[i - 1];
            if p.address.wrapping_add(p.total_size) > s.address {
                overlap.hit(at);
            }
        }
    }
    [total, sums, tiling, align, overlap, over, stale]
        .into_iter()
        .filter_map(Tally::into_warning)
        .collect()
}

/// Allocations the trace leaves live outside every segment: the segment list is empty or
/// partial, so reserved bytes are only bounded from below (see [`super::coverage`]).
fn check_coverage(snap: &Snapshot, dev: &Device) -> Option<Warning> {
    if dev.trace.is_empty() {
        return None;
    }
    let c = super::coverage::coverage(snap, dev);
    (!c.covered()).then(|| Warning {
        code: "segments_do_not_cover_trace",
        device: Some(dev.id),
        message: format!(
            "the segments do not cover the trace: {} allocation{} the trace leaves live ({} bytes of {} bytes live at its end) lie in no segment of the final state ({} bytes reserved listed); reserved bytes are at least {} bytes, and what was live before the trace in unlisted segments is unknown",
            c.uncovered_allocations,
            if c.uncovered_allocations == 1 { "" } else { "s" },
            c.uncovered_bytes,
            c.live_end_bytes,
            c.segment_bytes,
            c.reserved_floor(),
        ),
    })
}

fn check_trace(snap: &Snapshot, dev: &Device) -> Vec<Warning> {
    let d = Some(dev.id);
    let trace = snap.device_trace(dev);
    let mut out = Vec::new();
    if trace.is_empty() {
        return out;
    }
    let mut orphans = Tally::new(
        "ring_buffer_wrapped",
        d,
        [
            "free of an allocation made before the trace begins (the ring buffer wrapped; max_entries was reached)",
            "frees of allocations made before the trace begins (the ring buffer wrapped; max_entries was reached)",
        ],
    );
    let mut time = Tally::new(
        "time_decreasing",
        d,
        [
            "trace entry whose time_us is earlier than the entry before",
            "trace entries whose time_us is earlier than the entry before",
        ],
    );
    let mut live = LiveAddrs::new();
    let mut prev_time = NO_TIME;
    let mut allocs = 0u64;
    let mut allocs_without_frames = 0u64;
    let at_request = snap.frees_at_request(dev);
    for (i, e) in trace.iter().enumerate() {
        match e.action {
            Action::Alloc => {
                live.insert(e.addr, 0);
                allocs += 1;
                if !e.stack.is_recorded() {
                    allocs_without_frames += 1;
                }
            }
            _ if e.ends_allocation(at_request) && live.remove(e.addr).is_none() => {
                orphans.hit(|| format!("entry {i}, addr 0x{:x}", e.addr));
            }
            _ => {}
        }
        if let Some(t) = e.time() {
            if prev_time != NO_TIME && t < prev_time {
                time.hit(|| format!("entry {i}"));
            }
            prev_time = t;
        }
    }
    out.extend(orphans.into_warning());
    out.extend(time.into_warning());
    // Allocations the trace leaves live must be live blocks of the final state (§9 trap 11).
    if !live.is_empty() && !snap.device_segments(dev).is_empty() {
        let final_live: FxHashSet<u64> = snap
            .device_segments(dev)
            .iter()
            .flat_map(|s| snap.segment_blocks(s))
            .filter(|b| b.state != BlockState::Inactive)
            .map(|b| b.address)
            .collect();
        let missing = live.iter().filter(|(a, _)| !final_live.contains(a)).count();
        if missing > 0 {
            out.push(Warning {
                code: "trace_state_mismatch",
                device: d,
                message: format!("{missing} allocations the trace leaves live have no live block in the final segments (trace and segments were captured apart, or segments were filtered); replayed figures near the end of the trace may be off"),
            });
        }
    }
    if allocs > 0 && allocs_without_frames == allocs {
        out.push(Warning {
            code: "trace_without_frames",
            device: d,
            message: "trace entries carry no `frames` key: history was recorded with context below 'alloc'".into(),
        });
    }
    if single_entry_trace(trace) {
        out.push(Warning {
            code: "single_entry_trace",
            device: d,
            message: format!("the trace holds one entry ({}): history was recorded in 'state' mode or with max_entries=1, so there is no timeline", trace[0].action.as_str()),
        });
    }
    out
}
