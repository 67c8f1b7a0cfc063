//! One device's caching allocator: `malloc` (best fit, split, new segments, release of
//! cached blocks and retry when memory is short, garbage collection), `free` (merge with free
//! neighbours; deferred while other streams use the block), `empty_cache`, per-stream and
//! private pools, and expandable segments — the rules of CUDACachingAllocator.cpp
//! (snapshot-format.md §8), with the segment events it would record.
//!
//! Addresses of new segments are PyTorch's to choose (cudaMalloc, the driver's address
//! reservation): the caller may hint the ones it saw ([`DeviceAllocator::hint`]); otherwise
//! fresh addresses above every hinted one are used.

use super::expandable::ExpandableSegment;
use super::pool::{key, ukey, Block, BlockId, Blocks, EsId, Pool};
use super::rounding::{allocation_size, round_size, MIN_BLOCK, SMALL_BUFFER, SMALL_SIZE};
use super::settings::Settings;
use crate::model::Action;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

mod mapping;
mod release;

/// What limits the memory the allocator may reserve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Capacity {
    /// Bytes the allocator may reserve in all.
    pub bytes: u64,
    /// True for a per-process limit (`set_per_process_memory_fraction`): checked against the
    /// whole allocation size before any cudaMalloc or map. False for the device's memory:
    /// a cudaMalloc or a map fails when what it adds does not fit.
    pub fraction: bool,
}

/// A block of the state before the trace: (size, requested bytes, allocated, pending free).
pub type SeedBlock = (u64, u64, bool, bool);

/// A mapped range of an expandable segment before the trace: its address and blocks.
pub type SeedRange = (u64, Vec<SeedBlock>);

/// A segment event the model records (as the trace would: `segment_alloc`, `segment_free`,
/// `segment_map`, `segment_unmap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegEvent {
    /// The request it belongs to: the trace index of the malloc (its `alloc` or `oom`) or of
    /// the `empty_cache` call that caused it.
    pub owner: u32,
    /// Which segment action.
    pub action: Action,
    /// Address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
}

/// The allocator state of one device.
#[derive(Clone, Debug)]
pub struct DeviceAllocator {
    settings: Settings,
    capacity: Option<Capacity>,
    va_bytes: u64,
    gc_on: bool,
    blocks: Blocks,
    pools: Vec<Pool>,
    private: BTreeMap<(u64, u64), (u16, u16)>,
    es: Vec<Option<ExpandableSegment>>,
    pending: BTreeSet<BlockId>,
    ranges: BTreeMap<u64, u64>,
    fresh: u64,
    hints: Vec<(Action, u64, u64)>,
    /// The request now being served (owner of the segment events recorded).
    pub owner: u32,
    log: Option<Vec<SegEvent>>,
    serial: u64,
    /// Bytes reserved (cudaMalloc segments and mapped pages).
    pub reserved: u64,
    /// Bytes of cached free blocks (mapped, not handed out).
    pub cached_free: u64,
    /// cudaMalloc calls and page maps so far.
    pub device_mallocs: u64,
    /// cudaFree calls and page unmaps so far.
    pub device_frees: u64,
}

impl DeviceAllocator {
    /// An empty allocator. `va_bytes`: the address range one expandable segment reserves;
    /// `fresh`: the first address of segments no hint placed; `log`: keep segment events.
    pub fn new(
        settings: Settings,
        capacity: Option<Capacity>,
        va_bytes: u64,
        fresh: u64,
        log: bool,
    ) -> Self {
        let gc_on = settings.garbage_collection_threshold > 0.0 && capacity.is_some();
        DeviceAllocator {
            settings,
            capacity,
            va_bytes: va_bytes.max(SMALL_BUFFER),
            gc_on,
            blocks: Blocks::default(),
            pools: vec![Pool::new(true, (0, 0)), Pool::new(false, (0, 0))],
            private: BTreeMap::new(),
            es: Vec::new(),
            pending: BTreeSet::new(),
            ranges: BTreeMap::new(),
            fresh,
            hints: Vec::new(),
            owner: 0,
            log: log.then(Vec::new),
            serial: 0,
            reserved: 0,
            cached_free: 0,
            device_mallocs: 0,
            device_frees: 0,
        }
    }

    /// The settings followed.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The segment events recorded so far (empty unless logging).
    pub fn take_log(&mut self) -> Vec<SegEvent> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Addresses the next request's new segments should take when their sizes agree
    /// (`segment_alloc`: its size; `segment_map`: the first page of a new reservation).
    pub fn hint(&mut self, hints: impl IntoIterator<Item = (Action, u64, u64)>) {
        self.hints.clear();
        self.hints.extend(hints);
    }

    /// The block `id`.
    pub fn block(&self, id: BlockId) -> &Block {
        self.blocks.get(id)
    }

    fn record(&mut self, action: Action, addr: u64, size: u64) {
        let owner = self.owner;
        if let Some(log) = &mut self.log {
            log.push(SegEvent {
                owner,
                action,
                addr,
                size,
            });
        }
    }

    /// The pool for a rounded request of `size` bytes in private pool `owner` ((0, 0): the
    /// default pools).
    pub fn pool_for(&mut self, size: u64, owner: (u64, u64)) -> u16 {
        let small = size <= SMALL_SIZE;
        if owner == (0, 0) {
            return if small { 0 } else { 1 };
        }
        let n = self.pools.len() as u16;
        let (s, l) = *self.private.entry(owner).or_insert((n, n + 1));
        if s == n {
            self.pools.push(Pool::new(true, owner));
            self.pools.push(Pool::new(false, owner));
        }
        if small {
            s
        } else {
            l
        }
    }

    // ---------------------------------------------------------------- the free sets

    fn cache(&mut self, id: BlockId) {
        let b = self.blocks.get_mut(id);
        let pool = &mut self.pools[b.pool as usize];
        b.gc_base = pool.searches;
        pool.free.insert(key(b), id);
        self.cached_free += b.size;
    }

    fn uncache(&mut self, id: BlockId) {
        let b = *self.blocks.get(id);
        self.pools[b.pool as usize].free.remove(&key(&b));
        self.cached_free -= b.size;
    }

    fn overlaps(&self, addr: u64, size: u64) -> bool {
        self.ranges
            .range(..addr.saturating_add(size))
            .next_back()
            .is_some_and(|(&a, &l)| a.saturating_add(l) > addr)
    }

    fn take_fresh(&mut self, size: u64) -> u64 {
        let a = self.fresh;
        self.fresh = a.saturating_add(size.div_ceil(SMALL_BUFFER) * SMALL_BUFFER);
        a
    }

    fn segment_address(&mut self, size: u64) -> u64 {
        let pos = self.hints.iter().position(|&(act, a, s)| {
            act == Action::SegmentAlloc && s == size && !self.overlaps(a, s)
        });
        match pos {
            Some(i) => self.hints.remove(i).1,
            None => self.take_fresh(size),
        }
    }

    fn reservation_address(&mut self, size: u64) -> u64 {
        let pos = self
            .hints
            .iter()
            .position(|&(act, a, _)| act == Action::SegmentMap && !self.overlaps(a, size));
        match pos {
            Some(i) => self.hints.remove(i).1,
            None => self.take_fresh(size),
        }
    }

    // ---------------------------------------------------------------- the start state

    /// Adds a cudaMalloc segment of the state before the trace, its blocks as
    /// `(size, requested, allocated, pending)` in address order. Returns the ids of its
    /// blocks that hold memory, with their addresses.
    pub fn seed_segment(
        &mut self,
        addr: u64,
        stream: u64,
        pool: u16,
        blocks: &[SeedBlock],
    ) -> Vec<(u64, BlockId)> {
        let total: u64 = blocks.iter().map(|b| b.0).sum();
        self.ranges.insert(addr, total);
        self.reserved += total;
        self.chain(addr, stream, pool, None, blocks.iter().map(|&b| (b, true)))
    }

    /// Adds the mapped ranges of one expandable segment of the state before the trace (same
    /// stream and pool), each `(address, blocks)`, sorted by address; the gaps between them
    /// and the rest of its reservation are unmapped.
    pub fn seed_expandable(
        &mut self,
        stream: u64,
        pool: u16,
        ranges: &[SeedRange],
    ) -> Vec<(u64, BlockId)> {
        let Some(first) = ranges.first() else {
            return Vec::new();
        };
        let page = if self.pools[pool as usize].small {
            SMALL_BUFFER
        } else {
            super::rounding::LARGE_BUFFER
        };
        let base = first.0;
        let last = ranges.last().unwrap();
        let span = last.0 + last.1.iter().map(|b| b.0).sum::<u64>() - base;
        let es = ExpandableSegment::new(base, self.va_bytes.max(span), page, stream);
        self.ranges.insert(base, es.size());
        self.es.push(Some(es));
        let es_id = Some((self.es.len() - 1) as EsId);
        let mut pieces: Vec<(SeedBlock, bool)> = Vec::new();
        let mut at = base;
        for (a, blocks) in ranges {
            if *a > at {
                pieces.push(((a - at, 0, false, false), false));
            }
            for b in blocks {
                pieces.push((*b, true));
                self.reserved += b.0;
            }
            at = a + blocks.iter().map(|b| b.0).sum::<u64>();
        }
        if base + es.size() > at {
            pieces.push(((base + es.size() - at, 0, false, false), false));
        }
        self.chain(base, stream, pool, es_id, pieces.into_iter())
    }

    fn chain(
        &mut self,
        addr: u64,
        stream: u64,
        pool: u16,
        es: Option<EsId>,
        pieces: impl Iterator<Item = (SeedBlock, bool)>,
    ) -> Vec<(u64, BlockId)> {
        let mut live = Vec::new();
        let (mut at, mut prev) = (addr, None);
        for ((size, requested, allocated, pending), mapped) in pieces {
            let id = self.blocks.add(Block {
                addr: at,
                size,
                requested,
                stream,
                pool,
                allocated,
                pending,
                mapped,
                prev,
                next: None,
                es,
                gc_base: 0,
                serial: 0,
            });
            self.blocks.set_next(prev, Some(id));
            if !mapped {
                let b = *self.blocks.get(id);
                self.pools[pool as usize].unmapped.insert(ukey(&b), id);
            } else if allocated || pending {
                self.serial += 1;
                self.blocks.get_mut(id).serial = self.serial;
                live.push((at, id));
                if pending {
                    self.pending.insert(id);
                }
            } else {
                self.cache(id);
            }
            at += size;
            prev = Some(id);
        }
        live
    }

    // ---------------------------------------------------------------- requests

    /// Serves a request of `orig` bytes on `stream` from private pool `owner` ((0, 0): the
    /// default pools): the block handed out, or `None` for an out-of-memory error.
    pub fn malloc(&mut self, orig: u64, stream: u64, owner: (u64, u64)) -> Option<BlockId> {
        let size = round_size(orig, &self.settings);
        let pool = self.pool_for(size, owner);
        let alloc = allocation_size(size);
        let mut found = self.get_free_block(pool, stream, size);
        if found.is_none() {
            if self.gc_on {
                self.garbage_collect();
            }
            found = self.alloc_block(pool, stream, size, alloc);
            // `throw_on_cudamalloc_oom` with a per-process limit: a request past the limit
            // raises the OOM at once, no cached block freed and no retry (PR #179473).
            let retry = !(self.settings.throw_on_cudamalloc_oom
                && self.capacity.is_some_and(|c| c.fraction));
            if retry && found.is_none() && self.release_available_cached_blocks(pool, stream, size)
            {
                found = self.alloc_block(pool, stream, size, alloc);
            }
            if retry && found.is_none() {
                self.release_cached_blocks();
                found = self.alloc_block(pool, stream, size, alloc);
            }
        }
        let id = found?;
        let split = self.should_split(id, size);
        Some(self.alloc_found_block(id, stream, size, orig, split))
    }

    /// The program freed block `id`: it waits for `free_completed` (other streams' uses).
    pub fn free_requested(&mut self, id: BlockId) {
        let b = self.blocks.get_mut(id);
        if b.allocated {
            b.allocated = false;
            b.pending = true;
            self.pending.insert(id);
        }
    }

    /// Block `id` is free for reuse (`free_completed`): merged with free neighbours and cached.
    pub fn free_completed(&mut self, id: BlockId) {
        let b = self.blocks.get(id);
        if !(b.allocated || b.pending) {
            return;
        }
        if b.pending {
            self.pending.remove(&id);
        }
        self.free_block(id);
    }

    /// `torch.cuda.empty_cache()`: releases every unsplit cached block and unmaps free pages.
    pub fn empty_cache(&mut self) {
        self.release_cached_blocks();
    }

    fn free_block(&mut self, id: BlockId) {
        let b = self.blocks.get_mut(id);
        b.allocated = false;
        b.pending = false;
        let (p, n) = (b.prev, b.next);
        self.try_merge(id, p);
        self.try_merge(id, n);
        self.cache(id);
    }

    /// Merges `src`, a neighbour of `dst` (its `prev` or `next` link), into `dst` when both
    /// are free and alike; the bytes merged. A link that ends the chain merges nothing.
    fn try_merge(&mut self, dst: BlockId, src: Option<BlockId>) -> u64 {
        let Some(src) = src else {
            return 0;
        };
        let s = *self.blocks.get(src);
        let d = *self.blocks.get(dst);
        if !s.is_free() || s.mapped != d.mapped {
            return 0;
        }
        if s.mapped {
            self.uncache(src);
        } else {
            self.pools[s.pool as usize].unmapped.remove(&ukey(&s));
        }
        let d = self.blocks.get_mut(dst);
        if d.prev == Some(src) {
            d.addr = s.addr;
            d.prev = s.prev;
            self.blocks.set_next(s.prev, Some(dst));
        } else {
            d.next = s.next;
            self.blocks.set_prev(s.next, Some(dst));
        }
        self.blocks.get_mut(dst).size += s.size;
        self.blocks.remove(src);
        s.size
    }

    fn expandable_size(&self, id: BlockId) -> u64 {
        let b = self.blocks.get(id);
        b.size
            + self
                .blocks
                .opt(b.next)
                .filter(|n| !n.mapped)
                .map_or(0, |n| n.size)
    }

    fn get_free_block(&mut self, pool: u16, stream: u64, size: u64) -> Option<BlockId> {
        if self.gc_on {
            self.pools[pool as usize].searches += 1;
        }
        let id = self.find_free(pool, stream, size)?;
        self.uncache(id);
        Some(id)
    }

    /// The cached block best fit would hand out for a rounded `size` (nothing changes).
    fn find_free(&self, pool: u16, stream: u64, size: u64) -> Option<BlockId> {
        let p = &self.pools[pool as usize];
        let mut it = p
            .free
            .range((stream, size, 0)..)
            .take_while(|(k, _)| k.0 == stream);
        let (_, &first) = it.next()?;
        let mut id = first;
        if self.blocks.get(id).es.is_some() {
            if self.settings.expandable_segments {
                // Best fit counts what an expandable block can grow into (its unmapped tail).
                for (_, &next) in it {
                    if self.blocks.get(id).es.is_none()
                        || self.expandable_size(next) >= self.expandable_size(id)
                    {
                        break;
                    }
                    id = next;
                }
            } else {
                id = it
                    .map(|(_, &b)| b)
                    .find(|&b| self.blocks.get(b).es.is_none())?;
            }
        }
        let b = self.blocks.get(id);
        let mss = self.settings.max_split_size.unwrap_or(u64::MAX);
        if size < mss && b.size >= mss {
            return None;
        }
        if size >= mss && b.size >= size.saturating_add(self.settings.max_non_split_rounding) {
            return None;
        }
        Some(id)
    }

    /// True when a request of `orig` bytes would be served from cached blocks, without new
    /// memory (nothing changes).
    pub fn would_reuse(&mut self, orig: u64, stream: u64, owner: (u64, u64)) -> bool {
        let size = round_size(orig, &self.settings);
        let pool = self.pool_for(size, owner);
        self.find_free(pool, stream, size).is_some()
    }

    fn should_split(&self, id: BlockId, size: u64) -> bool {
        let b = self.blocks.get(id);
        let remaining = b.size - size;
        if self.pools[b.pool as usize].small || self.settings.expandable_segments {
            remaining >= MIN_BLOCK
        } else {
            size < self.settings.max_split_size.unwrap_or(u64::MAX) && remaining > SMALL_SIZE
        }
    }

    fn alloc_found_block(
        &mut self,
        id: BlockId,
        stream: u64,
        size: u64,
        orig: u64,
        split: bool,
    ) -> BlockId {
        let mut id = id;
        if split {
            let rem = *self.blocks.get(id);
            let new = self.blocks.add(Block {
                addr: rem.addr,
                size,
                requested: 0,
                stream,
                pool: rem.pool,
                allocated: false,
                pending: false,
                mapped: true,
                prev: rem.prev,
                next: Some(id),
                es: rem.es,
                gc_base: 0,
                serial: 0,
            });
            self.blocks.set_next(rem.prev, Some(new));
            let r = self.blocks.get_mut(id);
            r.prev = Some(new);
            r.addr += size;
            r.size -= size;
            self.cache(id);
            id = new;
        }
        self.serial += 1;
        let b = self.blocks.get_mut(id);
        b.allocated = true;
        b.requested = orig;
        b.serial = self.serial;
        id
    }

    fn alloc_block(&mut self, pool: u16, stream: u64, size: u64, alloc: u64) -> Option<BlockId> {
        if let Some(c) = self.capacity {
            if c.fraction && self.reserved + alloc > c.bytes {
                return None;
            }
        }
        if self.settings.expandable_segments {
            return self.try_allocate_expandable_block(pool, stream, size);
        }
        if let Some(c) = self.capacity {
            if !c.fraction && self.reserved + alloc > c.bytes {
                return None;
            }
        }
        let addr = self.segment_address(alloc);
        self.ranges.insert(addr, alloc);
        self.reserved += alloc;
        self.device_mallocs += 1;
        self.record(Action::SegmentAlloc, addr, alloc);
        Some(self.blocks.add(Block {
            addr,
            size: alloc,
            requested: 0,
            stream,
            pool,
            allocated: false,
            pending: false,
            mapped: true,
            prev: None,
            next: None,
            es: None,
            gc_base: 0,
            serial: 0,
        }))
    }
}
