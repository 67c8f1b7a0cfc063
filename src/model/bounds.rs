//! The size bound every built snapshot holds, so that no figure memlens adds up can wrap.
//!
//! Every total memlens reports (reserved, allocated, live, peak, rounded, waste, per-site
//! bytes, a diff's deltas, a batch's sums) is a sum, a difference or a rounding of sizes read
//! from one file. A file whose sizes add up past [`MAX_FILE_BYTES`] is refused while it is
//! built, naming the key that crossed the bound, so none of those sums can wrap 64 bits: the
//! largest sum (all sizes of the file together) stays below 2^60, its rounding to 512-byte
//! units below 2^61 + 512 × entries, a difference of two such sums fits an `i64`, and a sum of
//! the figures of two files fits a `u64`. No real snapshot comes near: 2^60 bytes (1 EiB) is
//! millions of times the memory of the largest GPU, even summed over every entry of a trace.
//!
//! An address range that runs past 2^64 (`address + size`) is refused the same way: the
//! allocator state, tiling and overlap checks add sizes to addresses.

use super::error::BuildError;
use super::snapshot::{Action, Block, BlockState, Layout, Segment, TraceEvent};
use std::ops::Range;

/// The most bytes all sizes of one file may add up to: 2^60 (1 EiB).
pub const MAX_FILE_BYTES: u128 = 1 << 60;

/// The running sum of a file's sizes, checked as each one is added.
#[derive(Default)]
pub struct SizeTotal {
    bytes: u128,
}

impl SizeTotal {
    /// Adds one size read from `path` under `key`; an error once the file's sizes pass the
    /// bound.
    fn add(
        &mut self,
        size: u64,
        path: impl FnOnce() -> String,
        key: &str,
    ) -> Result<(), BuildError> {
        self.bytes += size as u128;
        if self.bytes > MAX_FILE_BYTES {
            return Err(BuildError::Shape {
                path: path(),
                message: format!(
                    "key '{key}': {size} bytes bring this file's sizes past 2^60 (1 EiB) in all, more than any snapshot holds: refused so that no total wraps around 64 bits"
                ),
            });
        }
        Ok(())
    }

    /// Adds the segments (in the order the file lists them, with their blocks); `layout`
    /// spells their key paths.
    pub fn add_segments(
        &mut self,
        layout: Layout,
        segments: &[Segment],
        blocks: &[Block],
    ) -> Result<(), BuildError> {
        let seg_path = |i: usize| match layout {
            Layout::SegmentList => format!("[{i}]"),
            Layout::Modern | Layout::Legacy => format!("segments[{i}]"),
        };
        self.add_segment_list(segments, blocks, seg_path)
    }

    /// Adds pinned host memory: `host_segments` with their blocks, then `host_traces`.
    pub fn add_host(
        &mut self,
        segments: &[Segment],
        blocks: &[Block],
        events: &[TraceEvent],
    ) -> Result<(), BuildError> {
        self.add_segment_list(segments, blocks, |i| format!("host_segments[{i}]"))?;
        self.add_entries(events, |k| format!("host_traces[{k}]"))
    }

    fn add_segment_list(
        &mut self,
        segments: &[Segment],
        blocks: &[Block],
        seg_path: impl Fn(usize) -> String,
    ) -> Result<(), BuildError> {
        for (i, s) in segments.iter().enumerate() {
            self.add(s.total_size, || seg_path(i), "total_size")?;
            range_fits(s.address, s.total_size, || seg_path(i), "total_size")?;
            let Some(owned) = blocks.get(s.blocks.start as usize..s.blocks.end as usize) else {
                continue;
            };
            for (j, b) in owned.iter().enumerate() {
                let path = || format!("{}.blocks[{j}]", seg_path(i));
                self.add(b.size, path, "size")?;
                if b.state != BlockState::Inactive {
                    self.add(b.requested_size, path, "requested_size")?;
                }
                if b.address_recorded {
                    range_fits(b.address, b.size, path, "size")?;
                }
            }
        }
        Ok(())
    }

    /// Adds the trace entries of each device (`traces[d]` indexes `events`; `None` for a
    /// device without a trace).
    pub fn add_traces(
        &mut self,
        events: &[TraceEvent],
        traces: &[Option<Range<usize>>],
    ) -> Result<(), BuildError> {
        for (d, range) in traces.iter().enumerate() {
            let Some(range) = range else { continue };
            self.add_entries(&events[range.clone()], |k| {
                format!("device_traces[{d}][{k}]")
            })?;
        }
        Ok(())
    }

    fn add_entries(
        &mut self,
        events: &[TraceEvent],
        entry_path: impl Fn(usize) -> String,
    ) -> Result<(), BuildError> {
        {
            for (k, e) in events.iter().enumerate() {
                let path = || entry_path(k);
                self.add(e.size, path, "size")?;
                match e.action {
                    // For an oom, `addr` holds the device's free bytes, which the advice adds.
                    Action::Oom => self.add(e.addr, path, "device_free")?,
                    Action::Alloc
                    | Action::FreeRequested
                    | Action::FreeCompleted
                    | Action::Free
                    | Action::SegmentAlloc
                    | Action::SegmentFree
                    | Action::SegmentMap
                    | Action::SegmentUnmap => range_fits(e.addr, e.size, path, "size")?,
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// An error when `address + size` runs past 2^64.
fn range_fits(
    address: u64,
    size: u64,
    path: impl FnOnce() -> String,
    key: &str,
) -> Result<(), BuildError> {
    if address.checked_add(size).is_none() {
        return Err(BuildError::Shape {
            path: path(),
            message: format!(
                "key '{key}': {size} bytes at address 0x{address:x} run past the end of the 64-bit address space"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{StackId, StreamId, TagsId, NO_TIME};

    fn segment(address: u64, total_size: u64, blocks: Range<u32>) -> Segment {
        Segment {
            device: 0,
            address,
            total_size,
            recorded_allocated: None,
            recorded_active: None,
            recorded_requested: None,
            stream: 0,
            pool: crate::model::PoolKind::Large,
            pool_id: (0, 0),
            expandable: false,
            stack: StackId::ABSENT,
            blocks,
        }
    }

    fn block(address: u64, size: u64, state: BlockState) -> Block {
        Block {
            address,
            size,
            requested_size: size,
            state,
            stack: StackId::ABSENT,
            address_recorded: true,
        }
    }

    fn event(action: Action, addr: u64, size: u64) -> TraceEvent {
        TraceEvent {
            addr,
            size,
            stream: StreamId::default(),
            time_us: NO_TIME,
            stack: StackId::ABSENT,
            tags: TagsId::NONE,
            action,
        }
    }

    fn message(e: BuildError) -> String {
        e.to_string()
    }

    #[test]
    fn sizes_up_to_the_bound_pass_and_one_byte_more_names_its_key() {
        let half = 1u64 << 59;
        let segs = [segment(0, half, 0..0), segment(half, half, 0..0)];
        let mut t = SizeTotal::default();
        t.add_segments(Layout::Modern, &segs, &[]).unwrap();
        let ev = [event(Action::Alloc, 0, 1)];
        let e = t.add_traces(&ev, &[None, Some(0..1)]).unwrap_err();
        assert!(
            message(e).starts_with("key device_traces[1][0]: key 'size': 1 bytes bring"),
            "wrong key"
        );
    }

    #[test]
    fn two_segments_of_2_pow_63_are_refused_at_the_second() {
        let segs = [segment(0, 1 << 63, 0..0), segment(1 << 63, 1 << 63, 0..0)];
        let e = SizeTotal::default()
            .add_segments(Layout::SegmentList, &segs, &[])
            .unwrap_err();
        assert!(message(e).starts_with("key [0]: key 'total_size'"));
    }

    #[test]
    fn blocks_count_towards_the_bound_and_their_ranges_must_fit() {
        let blocks = [
            block(0, 1 << 59, BlockState::ActiveAllocated),
            block(1 << 59, 1 << 59, BlockState::Inactive),
        ];
        // 2^59 (segment) + 2^59 + 2^59 (allocated block, requested) passes 2^60.
        let e = SizeTotal::default()
            .add_segments(Layout::Modern, &[segment(0, 1 << 59, 0..2)], &blocks)
            .unwrap_err();
        assert!(message(e).starts_with("key segments[0].blocks[0]: key 'requested_size'"));

        let at_top = [block(u64::MAX - 511, 1024, BlockState::Inactive)];
        let e = SizeTotal::default()
            .add_segments(
                Layout::Modern,
                &[segment(u64::MAX - 1023, 512, 0..1)],
                &at_top,
            )
            .unwrap_err();
        assert!(message(e).starts_with("key segments[0].blocks[0]: key 'size': 1024 bytes at address 0xfffffffffffffe00 run past"));
    }

    #[test]
    fn an_ooms_device_free_is_a_size_and_its_addr_no_range() {
        let ev = [event(Action::Oom, u64::MAX, 512)];
        let e = SizeTotal::default()
            .add_traces(&ev, &[Some(0..1)])
            .unwrap_err();
        assert!(message(e).starts_with("key device_traces[0][0]: key 'device_free'"));
        let ev = [event(Action::Alloc, u64::MAX - 10, 512)];
        let e = SizeTotal::default()
            .add_traces(&ev, &[Some(0..1)])
            .unwrap_err();
        assert!(message(e).contains("run past the end of the 64-bit address space"));
    }
}
