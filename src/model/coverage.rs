//! Whether a device's final segments cover what its trace proves live at the end.
//!
//! Reserved bytes are never below live bytes: every allocation sits inside a segment. The
//! segments of the final state bound a device's reserved bytes only when every allocation the
//! trace leaves live at its end lies inside one of them. A segment list that is empty or
//! partial (filtered, cut, crafted) while the trace leaves allocations live outside it proves
//! only a lower bound on reserved bytes (and on live bytes before the trace, which such
//! segments would have held). Allocations made before the trace (a ring buffer that wrapped)
//! are not the trace's to prove: they are the final state's live blocks, inside the segments
//! by construction, so a wrapped trace is never a lack of coverage.

use super::live_addrs::LiveAddrs;
use super::snapshot::{Action, Device, Segment, Snapshot};

/// What a device's trace leaves live at its end, and how much of it lies in no segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Requested bytes of the allocations the trace makes and leaves live at its end.
    pub live_end_bytes: u64,
    /// Those of them whose address lies in no segment of the final state.
    pub uncovered_bytes: u64,
    /// How many allocations that is.
    pub uncovered_allocations: u64,
    /// Σ total_size of the device's segments.
    pub segment_bytes: u64,
}

impl Coverage {
    /// True when every allocation the trace leaves live lies inside some segment.
    pub fn covered(&self) -> bool {
        self.uncovered_allocations == 0
    }

    /// The least reserved bytes the file proves at the end of the trace: the segments, or the
    /// live bytes when the segments do not hold them.
    pub fn reserved_floor(&self) -> u64 {
        self.segment_bytes.max(self.live_end_bytes)
    }
}

/// Segments sorted by address with, per index, the furthest end of any segment up to it:
/// an address is covered when the last segment starting at or below it, or one before,
/// reaches past it (overlapping segments included).
struct Ends<'a> {
    segs: &'a [Segment],
    max_end: Vec<u128>,
}

impl<'a> Ends<'a> {
    fn new(segs: &'a [Segment]) -> Self {
        let mut m = 0u128;
        let max_end = segs
            .iter()
            .map(|s| {
                m = m.max(s.address as u128 + s.total_size as u128);
                m
            })
            .collect();
        Ends { segs, max_end }
    }

    fn contains(&self, addr: u64) -> bool {
        let n = self.segs.partition_point(|s| s.address <= addr);
        n > 0 && self.max_end[n - 1] > addr as u128
    }
}

/// The coverage of `dev`'s trace by its segments: one pass over the trace, one lookup per
/// allocation live at its end. A device without a trace is covered (nothing to prove).
pub fn coverage(snap: &Snapshot, dev: &Device) -> Coverage {
    let mut live = LiveAddrs::new();
    let trace = snap.device_trace(dev);
    let at_request = snap.frees_at_request(dev);
    for e in trace {
        if e.action == Action::Alloc {
            live.insert(e.addr, e.size);
        } else if e.ends_allocation(at_request) {
            live.remove(e.addr);
        }
    }
    of_live(snap.device_segments(dev), live.iter())
}

/// The coverage by `segs` (one device's, sorted by address) of `live`, the (address,
/// requested bytes) of the allocations a trace leaves live at its end (a replay has them).
pub fn of_live(segs: &[Segment], live: impl Iterator<Item = (u64, u64)>) -> Coverage {
    let mut out = Coverage {
        segment_bytes: segs
            .iter()
            .fold(0u64, |t, s| t.saturating_add(s.total_size)),
        ..Coverage::default()
    };
    let mut ends: Option<Ends> = None;
    for (addr, size) in live {
        out.live_end_bytes = out.live_end_bytes.saturating_add(size);
        if !ends.get_or_insert_with(|| Ends::new(segs)).contains(addr) {
            out.uncovered_bytes = out.uncovered_bytes.saturating_add(size);
            out.uncovered_allocations += 1;
        }
    }
    out
}
