//! Expandable segments: finding room in one (reserving a new address range when none has
//! it), mapping pages to serve a request, unmapping free pages, releasing a segment whose
//! pages are all unmapped.

use super::DeviceAllocator;
use crate::allocator::expandable::ExpandableSegment;
use crate::allocator::pool::{ukey, Block, BlockId, NONE};
use crate::allocator::rounding::{LARGE_BUFFER, SMALL_BUFFER};
use crate::model::Action;

impl DeviceAllocator {
    pub(super) fn unmap_block(&mut self, id: BlockId) {
        let b = *self.blocks.get(id);
        let Some(es) = self.es[b.es as usize] else {
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
                next: id,
                ..b
            });
            if b.prev != NONE {
                self.blocks.get_mut(b.prev).next = bf;
            }
            self.blocks.get_mut(id).prev = bf;
            self.cache(bf);
        }
        let after = b.size - before - usize_;
        if after > 0 {
            let af = self.blocks.add(Block {
                addr: ptr + usize_,
                size: after,
                prev: id,
                next: b.next,
                ..b
            });
            if b.next != NONE {
                self.blocks.get_mut(b.next).prev = af;
            }
            self.blocks.get_mut(id).next = af;
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
        if let Some(es) = self.es[b.es as usize].take() {
            self.ranges.remove(&es.base);
        }
        self.pools[b.pool as usize].unmapped.remove(&ukey(&b));
        self.blocks.remove(id);
    }

    pub(super) fn find_expandable_block(&mut self, pool: u16, stream: u64, size: u64) -> BlockId {
        let allocatable = |id: BlockId| self.blocks.opt(id).is_some_and(|b| b.is_free());
        let has_space = |mut id: BlockId| {
            let mut bytes = 0u64;
            while bytes < size && allocatable(id) {
                bytes += self.blocks.get(id).size;
                id = self.blocks.get(id).next;
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
            let c = if allocatable(prev) { prev } else { c };
            if has_space(c) {
                return c;
            }
        }
        let page = if p.small { SMALL_BUFFER } else { LARGE_BUFFER };
        let va = self.va_bytes.div_ceil(page) * page;
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
            prev: NONE,
            next: NONE,
            es: (self.es.len() - 1) as u32,
            gc_base: 0,
            serial: 0,
        });
        self.pools[pool as usize]
            .unmapped
            .insert((stream, base), id);
        id
    }

    pub(super) fn map_block(&mut self, id: BlockId, size: u64) -> bool {
        let b = *self.blocks.get(id);
        let Some(es) = self.es[b.es as usize] else {
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
                prev: id,
                next: b.next,
                mapped: false,
                ..b
            });
            if b.next != NONE {
                self.blocks.get_mut(b.next).prev = rem;
            }
            let r = *self.blocks.get(rem);
            self.pools[b.pool as usize].unmapped.insert(ukey(&r), rem);
            let m = self.blocks.get_mut(id);
            m.next = rem;
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
        let mut c = self.find_expandable_block(pool, stream, size);
        let b = *self.blocks.get(c);
        if !b.mapped && !self.map_block(c, b.size.min(size)) {
            return None;
        }
        while self.blocks.get(c).size < size {
            let remaining = size - self.blocks.get(c).size;
            let next = self.blocks.get(c).next;
            let n = *self.blocks.get(next);
            if !self.map_block(next, remaining.min(n.size)) {
                return None;
            }
            c = next;
        }
        self.uncache(c);
        Some(c)
    }
}
