//! The allocator's segments and blocks at any moment, rebuilt from the final state by undoing
//! the trace backwards (as PyTorch's "Allocator State History" view does).
//!
//! Exact at the end of the trace. Earlier, a block re-created by undoing its free gets
//! `round_size(requested)` bytes (the trace records requested sizes only), so its size is an
//! estimate: `BlockAt::estimated` says which.

use super::round_size;
use crate::model::{Action, BlockState, Device, PoolKind, Snapshot, StackId, TraceEvent};
use std::collections::BTreeMap;

/// A block in a rebuilt state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockAt {
    /// Address.
    pub address: u64,
    /// Bytes.
    pub size: u64,
    /// Requested bytes (0 for free blocks).
    pub requested: u64,
    /// State.
    pub state: BlockState,
    /// Allocation stack (of a block rebuilt by undoing its free: its `alloc` entry's, found
    /// in the trace before the moment; the free's when none is).
    pub stack: StackId,
    /// True when `size` is estimated from the requested size.
    pub estimated: bool,
}

/// A segment (or mapped range of an expandable segment) in a rebuilt state.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentAt {
    /// Base address.
    pub address: u64,
    /// Bytes.
    pub size: u64,
    /// Stream handle.
    pub stream: u64,
    /// Pool kind.
    pub pool: PoolKind,
    /// Private pool id.
    pub pool_id: (u64, u64),
    /// Part of an expandable segment.
    pub expandable: bool,
    /// Blocks in address order, tiling the segment.
    pub blocks: Vec<BlockAt>,
}

/// The allocator state of one device after event `at`.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocatorState {
    /// Device index.
    pub device: u32,
    /// The moment (-1: before the first event).
    pub at: i64,
    /// True when this is the final state (nothing undone).
    pub exact: bool,
    /// Segments by address.
    pub segments: Vec<SegmentAt>,
    /// Trace events that could not be undone consistently (a wrapped trace, racing threads).
    pub inconsistencies: usize,
}

type Blocks = BTreeMap<u64, BlockAt>;

struct Seg {
    size: u64,
    stream: u64,
    pool: PoolKind,
    pool_id: (u64, u64),
    expandable: bool,
    blocks: Blocks,
}

fn free_block(address: u64, size: u64) -> BlockAt {
    BlockAt {
        address,
        size,
        requested: 0,
        state: BlockState::Inactive,
        stack: StackId::EMPTY,
        estimated: false,
    }
}

/// Merges the free block at `addr` with free neighbours.
fn merge_free(blocks: &mut Blocks, addr: u64) {
    let mut start = addr;
    if let Some((&pa, p)) = blocks.range(..addr).next_back() {
        if p.state == BlockState::Inactive && pa + p.size == addr {
            start = pa;
        }
    }
    loop {
        let cur = blocks[&start];
        let next = cur.address + cur.size;
        match blocks.get(&next) {
            Some(n) if n.state == BlockState::Inactive => {
                let n = *n;
                blocks.remove(&next);
                blocks.get_mut(&start).unwrap().size += n.size;
            }
            _ => break,
        }
    }
}

/// Segments by base address.
type Segs = BTreeMap<u64, Seg>;

/// Rebuilds the state of `dev` right after event `at`.
pub fn state_at(snap: &Snapshot, dev: &Device, at: i64) -> AllocatorState {
    let trace = snap.device_trace(dev);
    let mut segs = final_segments(snap, dev);
    let mut bad = 0usize;
    let last = trace.len() as i64 - 1;
    let mut i = last;
    while i > at {
        let e = &trace[i as usize];
        i -= 1;
        bad += undo(snap, &mut segs, e);
    }
    allocation_stacks(
        &mut segs,
        &trace[..((at + 1).max(0) as usize).min(trace.len())],
    );
    AllocatorState {
        device: dev.id,
        at,
        exact: at >= last,
        segments: segs
            .into_iter()
            .map(|(address, s)| SegmentAt {
                address,
                size: s.size,
                stream: s.stream,
                pool: s.pool,
                pool_id: s.pool_id,
                expandable: s.expandable,
                blocks: s.blocks.into_values().collect(),
            })
            .collect(),
        inconsistencies: bad,
    }
}

/// Gives each block rebuilt by undoing its free the stack of its allocation: a free entry
/// carries the stack of the free (PyTorch records the freeing context when history records
/// every stack), the allocation's is that of the last `alloc` at its address in `trace` (the
/// events up to the moment). One pass, only when a block was rebuilt.
fn allocation_stacks(segs: &mut Segs, trace: &[TraceEvent]) {
    let rebuilt: rustc_hash::FxHashSet<u64> = segs
        .values()
        .flat_map(|s| s.blocks.values())
        .filter(|b| b.estimated && b.state != BlockState::Inactive)
        .map(|b| b.address)
        .collect();
    if rebuilt.is_empty() {
        return;
    }
    let mut stacks: rustc_hash::FxHashMap<u64, crate::model::StackId> = Default::default();
    for e in trace
        .iter()
        .filter(|e| e.action == Action::Alloc && rebuilt.contains(&e.addr))
    {
        stacks.insert(e.addr, e.stack);
    }
    for b in segs.values_mut().flat_map(|s| s.blocks.values_mut()) {
        if b.estimated && b.state != BlockState::Inactive {
            if let Some(&stack) = stacks.get(&b.address) {
                b.stack = stack;
            }
        }
    }
}

/// The segments of `dev` at the end of the trace, as the snapshot records them.
fn final_segments(snap: &Snapshot, dev: &Device) -> Segs {
    let mut segs: Segs = BTreeMap::new();
    for s in snap.device_segments(dev) {
        let blocks = snap
            .segment_blocks(s)
            .iter()
            .map(|b| {
                (
                    b.address,
                    BlockAt {
                        address: b.address,
                        size: b.size,
                        requested: if b.state == BlockState::Inactive {
                            0
                        } else {
                            b.requested_size
                        },
                        state: b.state,
                        stack: b.stack,
                        estimated: false,
                    },
                )
            })
            .collect();
        segs.insert(
            s.address,
            Seg {
                size: s.total_size,
                stream: s.stream,
                pool: s.pool,
                pool_id: s.pool_id,
                expandable: s.expandable,
                blocks,
            },
        );
    }
    segs
}

/// The segment holding `addr`, with its base address.
fn owner_of(segs: &mut Segs, addr: u64) -> Option<(&u64, &mut Seg)> {
    segs.range_mut(..=addr)
        .next_back()
        .filter(|(&a, s)| addr < a + s.size)
}

/// Undoes one trace event; returns how many inconsistencies it met.
fn undo(snap: &Snapshot, segs: &mut Segs, e: &TraceEvent) -> usize {
    match e.action {
        Action::Alloc => match owner_of(segs, e.addr) {
            Some((_, s)) => match s.blocks.get_mut(&e.addr) {
                Some(b) if b.state != BlockState::Inactive => {
                    *b = free_block(b.address, b.size);
                    merge_free(&mut s.blocks, e.addr);
                    0
                }
                _ => 1,
            },
            None => 1,
        },
        Action::FreeRequested => {
            match owner_of(segs, e.addr).and_then(|(_, s)| s.blocks.get_mut(&e.addr)) {
                Some(b) if b.state == BlockState::ActivePendingFree => {
                    b.state = BlockState::ActiveAllocated;
                    0
                }
                Some(b) if b.state == BlockState::ActiveAllocated => 0,
                _ => 1,
            }
        }
        Action::FreeCompleted | Action::Free => undo_free(segs, e),
        Action::SegmentAlloc => segs.remove(&e.addr).is_none() as usize,
        Action::SegmentFree => {
            if owner_of(segs, e.addr).is_some() {
                return 1;
            }
            let mut blocks = Blocks::new();
            blocks.insert(e.addr, free_block(e.addr, e.size));
            segs.insert(
                e.addr,
                Seg {
                    size: e.size,
                    stream: snap.event_stream(e),
                    pool: if e.size <= 2 << 20 {
                        PoolKind::Small
                    } else {
                        PoolKind::Large
                    },
                    pool_id: (0, 0),
                    expandable: false,
                    blocks,
                },
            );
            0
        }
        Action::SegmentMap => undo_map(segs, e),
        Action::SegmentUnmap => undo_unmap(snap, segs, e),
        _ => 0,
    }
}

/// Undoes a free: the block is made again in the free block that now covers its address.
fn undo_free(segs: &mut Segs, e: &TraceEvent) -> usize {
    let Some((_, s)) = owner_of(segs, e.addr) else {
        return 1;
    };
    // The free block that now covers addr.
    let Some((&fa, f)) = s.blocks.range(..=e.addr).next_back() else {
        return 1;
    };
    let f = *f;
    if f.state != BlockState::Inactive || e.addr >= fa + f.size {
        return 1;
    }
    let end = (e.addr + round_size(e.size)).min(fa + f.size);
    s.blocks.remove(&fa);
    if fa < e.addr {
        s.blocks.insert(fa, free_block(fa, e.addr - fa));
    }
    s.blocks.insert(
        e.addr,
        BlockAt {
            address: e.addr,
            size: end - e.addr,
            requested: e.size,
            state: if e.action == Action::Free {
                BlockState::ActiveAllocated
            } else {
                BlockState::ActivePendingFree
            },
            stack: e.stack,
            estimated: true,
        },
    );
    if end < fa + f.size {
        s.blocks.insert(end, free_block(end, fa + f.size - end));
    }
    0
}

/// Undoes a map: before it, [addr, addr+size) was not mapped, so it is cut out of its range.
fn undo_map(segs: &mut Segs, e: &TraceEvent) -> usize {
    let Some((&sa, _)) = owner_of(segs, e.addr) else {
        return 1;
    };
    let mut bad = 0;
    let s = segs.remove(&sa).unwrap();
    let (lo, hi) = (e.addr, e.addr + e.size);
    let mut left = Blocks::new();
    let mut right = Blocks::new();
    for (_, b) in s.blocks {
        let (b0, b1) = (b.address, b.address + b.size);
        if b1 <= lo {
            left.insert(b0, b);
        } else if b0 >= hi {
            right.insert(b0, b);
        } else {
            if b.state != BlockState::Inactive {
                bad += 1;
            }
            if b0 < lo {
                left.insert(b0, free_block(b0, lo - b0));
            }
            if b1 > hi {
                right.insert(hi, free_block(hi, b1 - hi));
            }
        }
    }
    for (base, blocks, size) in [
        (sa, left, lo.saturating_sub(sa)),
        (hi, right, (sa + s.size).saturating_sub(hi)),
    ] {
        if size > 0 {
            segs.insert(
                base,
                Seg {
                    size,
                    stream: s.stream,
                    pool: s.pool,
                    pool_id: s.pool_id,
                    expandable: true,
                    blocks,
                },
            );
        }
    }
    bad
}

/// Undoes an unmap: before it the range was mapped and free, so it is added back, joining the
/// expandable ranges of the same stream next to it.
fn undo_unmap(snap: &Snapshot, segs: &mut Segs, e: &TraceEvent) -> usize {
    if owner_of(segs, e.addr).is_some() {
        return 1;
    }
    let mut base = e.addr;
    let mut blocks = Blocks::new();
    blocks.insert(e.addr, free_block(e.addr, e.size));
    let mut size = e.size;
    let (mut stream, mut pool, mut pool_id) = (
        snap.event_stream(e),
        if e.size % (20 << 20) == 0 {
            PoolKind::Large
        } else {
            PoolKind::Small
        },
        (0, 0),
    );
    if let Some((&pa, p)) = segs.range(..e.addr).next_back() {
        if pa + p.size == e.addr && p.expandable && p.stream == snap.event_stream(e) {
            let p = segs.remove(&pa).unwrap();
            base = pa;
            size += p.size;
            (stream, pool, pool_id) = (p.stream, p.pool, p.pool_id);
            blocks.extend(p.blocks);
        }
    }
    if let Some(n) = segs.get(&(e.addr + e.size)) {
        if n.expandable && n.stream == snap.event_stream(e) {
            let n = segs.remove(&(e.addr + e.size)).unwrap();
            size += n.size;
            (pool, pool_id) = (n.pool, n.pool_id);
            blocks.extend(n.blocks);
        }
    }
    merge_free(&mut blocks, e.addr);
    segs.insert(
        base,
        Seg {
            size,
            stream,
            pool,
            pool_id,
            expandable: true,
            blocks,
        },
    );
    0
}
