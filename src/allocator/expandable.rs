//! Expandable segments (`expandable_segments:True`): one reserved virtual range per stream
//! and pool, mapped in pages (2 MiB for the small pool, 20 MiB for the large one) as it
//! grows, pages unmapped only when cached memory is released (a miss that cannot map, or
//! `empty_cache`). The range reserved is 1⅛ × the GPU's memory (CUDACachingAllocator.cpp,
//! `find_expandable_block`).

/// One expandable segment's reservation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpandableSegment {
    /// Base address of the reservation.
    pub base: u64,
    /// Page size: what one map or unmap step covers.
    pub page: u64,
    /// Pages the reservation holds.
    pub pages: u64,
    /// Stream it serves.
    pub stream: u64,
}

impl ExpandableSegment {
    /// A reservation of at least `va_bytes` in pages of `page` bytes.
    pub fn new(base: u64, va_bytes: u64, page: u64, stream: u64) -> Self {
        ExpandableSegment {
            base,
            page,
            pages: va_bytes.div_ceil(page).max(1),
            stream,
        }
    }

    /// Bytes reserved.
    pub fn size(&self) -> u64 {
        self.pages * self.page
    }

    /// The page-aligned range a map of `[ptr, ptr + size)` covers: every page it touches.
    pub fn map_range(&self, ptr: u64, size: u64) -> (u64, u64) {
        let begin = (ptr - self.base) / self.page;
        let end = (ptr + size - self.base).div_ceil(self.page);
        (self.base + begin * self.page, (end - begin) * self.page)
    }

    /// The range an unmap of `[ptr, ptr + size)` frees: the whole pages inside it only.
    pub fn unmap_range(&self, ptr: u64, size: u64) -> (u64, u64) {
        let begin = (ptr - self.base).div_ceil(self.page);
        let end = (ptr + size - self.base) / self.page;
        if begin >= end {
            return (ptr, 0);
        }
        (self.base + begin * self.page, (end - begin) * self.page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_whole_pages_and_unmaps_only_whole_pages() {
        let mib = 1u64 << 20;
        let es = ExpandableSegment::new(1 << 40, 100 * mib, 20 * mib, 0);
        assert_eq!(es.size(), 100 * mib);
        assert_eq!(es.map_range(1 << 40, 16 * mib), (1 << 40, 20 * mib));
        assert_eq!(
            es.map_range((1 << 40) + 20 * mib, 21 * mib),
            ((1 << 40) + 20 * mib, 40 * mib)
        );
        // A free range from 10 MiB to 50 MiB holds one whole page: 20..40 MiB.
        assert_eq!(
            es.unmap_range((1 << 40) + 10 * mib, 40 * mib),
            ((1 << 40) + 20 * mib, 20 * mib)
        );
        assert_eq!(es.unmap_range((1 << 40) + mib, 10 * mib).1, 0);
    }
}
