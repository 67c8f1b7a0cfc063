//! Releasing cached memory: whole segments back to the device (`release_*`, when memory is
//! short or on `empty_cache`), and garbage collection of old cached blocks past the
//! configured threshold (`garbage_collection_threshold`).

use super::DeviceAllocator;
use crate::allocator::pool::{Block, BlockId};
use crate::model::Action;

impl DeviceAllocator {
    pub(super) fn release_block(&mut self, id: BlockId) {
        let b = *self.blocks.get(id);
        self.record(Action::SegmentFree, b.addr, b.size);
        self.uncache(id);
        self.ranges.remove(&b.addr);
        self.reserved -= b.size;
        self.device_frees += 1;
        self.blocks.remove(id);
    }

    pub(super) fn release_available_cached_blocks(
        &mut self,
        pool: u16,
        stream: u64,
        size: u64,
    ) -> bool {
        let Some(mss) = self.settings.max_split_size else {
            return false;
        };
        let want = size.max(mss);
        let p = &self.pools[pool as usize];
        let one = p
            .free
            .range((stream, want, 0)..)
            .next()
            .filter(|(k, &id)| k.0 == stream && self.blocks.get(id).es.is_none())
            .map(|(_, &id)| id);
        if let Some(id) = one {
            self.release_block(id);
            return true;
        }
        // No single block is large enough: release oversize blocks, largest first.
        let mut chosen = Vec::new();
        let mut total = 0u64;
        for (k, &id) in p.free.range(..(stream, want, 0)).rev() {
            if total >= want || k.1 < mss || k.0 != stream {
                break;
            }
            if self.blocks.get(id).es.is_none() {
                chosen.push(id);
                total += k.1;
            }
        }
        for id in chosen {
            self.release_block(id);
        }
        total >= want
    }

    pub(super) fn release_cached_blocks(&mut self) {
        // Outstanding events are waited for: deferred frees complete first.
        let pending: Vec<BlockId> = std::mem::take(&mut self.pending).into_iter().collect();
        for id in pending {
            self.free_block(id);
        }
        self.release_blocks(1);
        self.release_blocks(0);
    }

    pub(super) fn release_blocks(&mut self, pool: u16) {
        let ids: Vec<BlockId> = self.pools[pool as usize].free.values().copied().collect();
        let mut to_unmap = Vec::new();
        for id in ids {
            let b = self.blocks.get(id);
            if b.es.is_some() {
                to_unmap.push(id);
            } else if !b.is_split() {
                self.release_block(id);
            }
        }
        for id in to_unmap {
            self.unmap_block(id);
            if !self.blocks.get(id).is_split() && !self.blocks.get(id).mapped {
                self.release_expandable_segment(id);
            }
        }
    }

    pub(super) fn garbage_collect(&mut self) {
        let Some(cap) = self.capacity else {
            return;
        };
        let threshold = (self.settings.garbage_collection_threshold * cap.bytes as f64) as u64;
        if self.reserved <= threshold {
            return;
        }
        let target = self.reserved - threshold;
        let searches = self.pools[1].searches;
        let age = |b: &Block| searches - b.gc_base.min(searches);
        let (mut total_age, mut count) = (0u64, 0u64);
        for &id in self.pools[1].free.values() {
            let b = self.blocks.get(id);
            if !b.is_split() && b.es.is_none() {
                total_age += age(b);
                count += 1;
            }
        }
        let (mut reclaimed, mut freed) = (0u64, true);
        while reclaimed < target && freed && count > 0 {
            let threshold_age = total_age as f64 / count as f64;
            freed = false;
            let ids: Vec<BlockId> = self.pools[1].free.values().copied().collect();
            for id in ids {
                let b = *self.blocks.get(id);
                if !b.is_split() && b.es.is_none() && age(&b) as f64 >= threshold_age {
                    freed = true;
                    reclaimed += b.size;
                    total_age -= age(&b);
                    count -= 1;
                    self.release_block(id);
                }
            }
        }
    }
}
