//! Expandable segments: finding room in one (reserving a new address range when none has
//! it), mapping pages to serve a request, unmapping free pages, releasing a segment whose
//! pages are all unmapped.

use super::DeviceAllocator;
use crate::allocator::expandable::ExpandableSegment;
use crate::allocator::pool::{ukey, Block, BlockId};
use crate::allocator::rounding::{LARGE_BUFFER, SMALL_BUFFER};
use crate::model::Action;

impl DeviceAllocator {
    pub(super) fn unmap_block(&mut self, id: BlockId) {
        let b = *self.blocks.get(id);
        let Some(es) = self.segment_of(&b) else {
            return;
        };
        let (ptr, usize_) = es.unmap_range(b.addr, b.size);
        if usize_ == 0 {
            return;
        }
        self.uncache(id);
        let before = ptr - b.addr;
        if before > 0 {
            let bf = self.blocks.add(Block {
                size: before,
                prev: b.prev,
                next: Some(id),
                ..b
            });
            self.blocks.set_next(b.prev, Some(bf));
            self.blocks.get_mut(id).prev = Some(bf);
            self.cache(bf);
        }
        let after = b.size - before - usize_;
        if after > 0 {
            let af = self.blocks.add(Block {
                addr: ptr + usize_,
                size: after,
                prev: Some(id),
                next: b.next,
                ..b
            });
            self.blocks.set_prev(b.next, Some(af));
            self.blocks.get_mut(id).next = Some(af);
            self.cache(af);
        }
        let m = self.blocks.get_mut(id);
        m.addr = ptr;
        m.size = usize_;
        m.mapped = false;
        let p = m.prev;
        self.try_merge(id, p);
        let n = self.blocks.get(id).next;
        self.try_merge(id, n);
        let m = *self.blocks.get(id);
        self.pools[m.pool as usize].unmapped.insert(ukey(&m), id);
        self.reserved -= usize_;
        self.device_frees += 1;
        self.record(Action::SegmentUnmap, ptr, usize_);
    }

    pub(super) fn release_expandable_segment(&mut self, id: BlockId) {
        let b = *self.blocks.get(id);
        if let Some(es) = b.es.and_then(|i| self.es.get_mut(i as usize)?.take()) {
            self.ranges.remove(&es.base);
        }
        self.pools[b.pool as usize].unmapped.remove(&ukey(&b));
        self.blocks.remove(id);
    }

    /// The expandable segment block `b` belongs to (`None` for a cudaMalloc segment's block,
    /// or a segment already released).
    fn segment_of(&self, b: &Block) -> Option<ExpandableSegment> {
        *self.es.get(b.es? as usize)?
    }

    /// The first block of a free run of at least `size` bytes (mapped or not) in an
    /// expandable segment of `pool` on `stream`, reserving a new segment when none has one;
    /// `None` when `size` is more than a whole reservation (the driver would not give it).
    pub(super) fn find_expandable_block(
        &mut self,
        pool: u16,
        stream: u64,
        size: u64,
    ) -> Option<BlockId> {
        let allocatable = |id: Option<BlockId>| self.blocks.opt(id).is_some_and(|b| b.is_free());
        let has_space = |mut id: Option<BlockId>| {
            let mut bytes = 0u64;
            while let Some(b) = self.blocks.opt(id).filter(|b| b.is_free()) {
                if bytes >= size {
                    break;
                }
                bytes += b.size;
                id = b.next;
            }
            bytes >= size
        };
        let p = &self.pools[pool as usize];
        for (_, &c) in p
            .unmapped
            .range((stream, 0)..)
            .take_while(|(k, _)| k.0 == stream)
        {
            let prev = self.blocks.get(c).prev;
            let c = match prev {
                Some(p) if allocatable(prev) => p,
                _ => c,
            };
            if has_space(Some(c)) {
                return Some(c);
            }
        }
        let page = if p.small { SMALL_BUFFER } else { LARGE_BUFFER };
        let va = self.va_bytes.div_ceil(page) * page;
        if va < size {
            return None;
        }
        let base = self.reservation_address(va);
        let es = ExpandableSegment::new(base, va, page, stream);
        self.ranges.insert(base, es.size());
        self.es.push(Some(es));
        let id = self.blocks.add(Block {
            addr: base,
            size: es.size(),
            requested: 0,
            stream,
            pool,
            allocated: false,
            pending: false,
            mapped: false,
            prev: None,
            next: None,
            es: Some((self.es.len() - 1) as u32),
            gc_base: 0,
            serial: 0,
        });
        self.pools[pool as usize]
            .unmapped
            .insert((stream, base), id);
        Some(id)
    }

    pub(super) fn map_block(&mut self, id: BlockId, size: u64) -> bool {
        let b = *self.blocks.get(id);
        let Some(es) = self.segment_of(&b) else {
            return false;
        };
        let (ptr, msize) = es.map_range(b.addr, size);
        if let Some(c) = self.capacity {
            if !c.fraction && self.reserved + msize > c.bytes {
                return false;
            }
        }
        self.pools[b.pool as usize].unmapped.remove(&ukey(&b));
        self.blocks.get_mut(id).mapped = true;
        if msize < b.size {
            let rem = self.blocks.add(Block {
                addr: b.addr + msize,
                size: b.size - msize,
                prev: Some(id),
                next: b.next,
                mapped: false,
                ..b
            });
            self.blocks.set_prev(b.next, Some(rem));
            let r = *self.blocks.get(rem);
            self.pools[b.pool as usize].unmapped.insert(ukey(&r), rem);
            let m = self.blocks.get_mut(id);
            m.next = Some(rem);
            m.size = msize;
        }
        let p = self.blocks.get(id).prev;
        self.try_merge(id, p);
        let n = self.blocks.get(id).next;
        self.try_merge(id, n);
        self.cache(id);
        self.reserved += msize;
        self.device_mallocs += 1;
        self.record(Action::SegmentMap, ptr, msize);
        true
    }

    pub(super) fn try_allocate_expandable_block(
        &mut self,
        pool: u16,
        stream: u64,
        size: u64,
    ) -> Option<BlockId> {
        let mut c = self.find_expandable_block(pool, stream, size)?;
        let b = *self.blocks.get(c);
        if !b.mapped && !self.map_block(c, b.size.min(size)) {
            return None;
        }
        while self.blocks.get(c).size < size {
            let remaining = size - self.blocks.get(c).size;
            // The segment ends before the request does (a request larger than the whole
            // reservation: the address range the driver would not give) or the next block is
            // taken: out of memory, as a failed map is.
            let next = self.blocks.get(c).next?;
            let n = *self.blocks.get(next);
            if n.mapped || !n.is_free() || !self.map_block(next, remaining.min(n.size)) {
                return None;
            }
            c = next;
        }
        self.uncache(c);
        Some(c)
    }
}
