//! Blocks and the pools of cached free blocks: best fit in O(log n) over ordered sets keyed
//! as CUDACachingAllocator.cpp's comparators are (`BlockComparatorSize`: stream, size,
//! address; `BlockComparatorAddress` for unmapped ranges: stream, address).

use std::collections::BTreeMap;

/// Index of a block in [`Blocks`]: only [`Blocks::add`] makes one, so every id names a slot.
/// The end of a segment's chain is `None` in an `Option<BlockId>` ([`Block::prev`],
/// [`Block::next`]), never a sentinel index: a link is checked where it is followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockId(u32);

/// Index of an expandable segment in the allocator's list of them.
pub type EsId = u32;

/// One block: a piece of a segment, allocated or free; for an expandable segment also the
/// unmapped rest of its address range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Block {
    /// Address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// Bytes asked for (allocated blocks).
    pub requested: u64,
    /// Stream handle; a block only serves requests of its stream.
    pub stream: u64,
    /// Its pool in [`super::device::DeviceAllocator`]'s pool list.
    pub pool: u16,
    /// Handed out.
    pub allocated: bool,
    /// Freed by the program but still in use by another stream (`record_stream`): neither
    /// allocated nor reusable until its `free_completed`.
    pub pending: bool,
    /// Backed by memory (always, except for the unmapped ranges of expandable segments).
    pub mapped: bool,
    /// Previous block of the same segment (`None`: the segment's first).
    pub prev: Option<BlockId>,
    /// Next block of the same segment (`None`: the segment's last).
    pub next: Option<BlockId>,
    /// Expandable segment it belongs to (`None` for a cudaMalloc segment).
    pub es: Option<EsId>,
    /// The pool's best-fit call count when the block was cached (the age the garbage
    /// collection measures).
    pub gc_base: u64,
    /// Which allocation holds it (a new number at every hand-out), so a stale handle to a
    /// block since merged and reused is recognised.
    pub serial: u64,
}

impl Block {
    /// True when split from, or next to, other blocks of its segment.
    pub fn is_split(&self) -> bool {
        self.prev.is_some() || self.next.is_some()
    }

    /// True when free for reuse: not allocated and not awaiting other streams.
    pub fn is_free(&self) -> bool {
        !self.allocated && !self.pending
    }
}

/// All blocks, by id; ids of deleted blocks are reused.
#[derive(Clone, Debug, Default)]
pub struct Blocks {
    slots: Vec<Block>,
    vacant: Vec<BlockId>,
}

impl Blocks {
    /// Stores `b`, returning its id.
    pub fn add(&mut self, b: Block) -> BlockId {
        if let Some(id) = self.vacant.pop() {
            self.slots[id.0 as usize] = b;
            id
        } else {
            self.slots.push(b);
            BlockId((self.slots.len() - 1) as u32)
        }
    }

    /// Forgets block `id` (its id may be reused).
    pub fn remove(&mut self, id: BlockId) {
        self.vacant.push(id);
    }

    /// The block `id`.
    pub fn get(&self, id: BlockId) -> &Block {
        &self.slots[id.0 as usize]
    }

    /// The block `id`, mutably.
    pub fn get_mut(&mut self, id: BlockId) -> &mut Block {
        &mut self.slots[id.0 as usize]
    }

    /// The block a link names, if any (`None`: the link is the end of its segment).
    pub fn opt(&self, id: Option<BlockId>) -> Option<&Block> {
        id.map(|id| self.get(id))
    }

    /// Sets the `next` link of block `at`, if there is one (a chain's end has no neighbour
    /// to update).
    pub fn set_next(&mut self, at: Option<BlockId>, next: Option<BlockId>) {
        if let Some(at) = at {
            self.get_mut(at).next = next;
        }
    }

    /// Sets the `prev` link of block `at`, if there is one.
    pub fn set_prev(&mut self, at: Option<BlockId>, prev: Option<BlockId>) {
        if let Some(at) = at {
            self.get_mut(at).prev = prev;
        }
    }
}

/// A pool of cached free blocks (the default small or large pool, or one of a private pool).
#[derive(Clone, Debug)]
pub struct Pool {
    /// Small pool (rounded requests of at most 1 MiB).
    pub small: bool,
    /// Owning private pool (CUDA graphs, MemPool); `(0, 0)` for the default pools.
    pub owner: (u64, u64),
    /// Free mapped blocks by (stream, size, address).
    pub free: BTreeMap<(u64, u64, u64), BlockId>,
    /// Unmapped ranges of expandable segments by (stream, address).
    pub unmapped: BTreeMap<(u64, u64), BlockId>,
    /// Best-fit searches so far (counted only when garbage collection is on).
    pub searches: u64,
}

impl Pool {
    /// An empty pool.
    pub fn new(small: bool, owner: (u64, u64)) -> Self {
        Pool {
            small,
            owner,
            free: BTreeMap::new(),
            unmapped: BTreeMap::new(),
            searches: 0,
        }
    }

    /// The first free block at or after (stream, size, 0), if on `stream`.
    pub fn lower_bound(&self, stream: u64, size: u64) -> Option<(&(u64, u64, u64), BlockId)> {
        self.free
            .range((stream, size, 0)..)
            .next()
            .filter(|(k, _)| k.0 == stream)
            .map(|(k, &id)| (k, id))
    }
}

/// The key of a free mapped block.
pub fn key(b: &Block) -> (u64, u64, u64) {
    (b.stream, b.size, b.addr)
}

/// The key of an unmapped range.
pub fn ukey(b: &Block) -> (u64, u64) {
    (b.stream, b.addr)
}
