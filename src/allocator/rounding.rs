//! Request sizes as the caching allocator rounds them, and the size of the cudaMalloc a miss
//! asks for (snapshot-format.md §8; `round_size`, `get_allocation_size` of
//! CUDACachingAllocator.cpp).

use super::settings::Settings;

/// Every block is a multiple of this many bytes.
pub const MIN_BLOCK: u64 = 512;
/// Rounded requests up to this size go to the small pool.
pub const SMALL_SIZE: u64 = 1 << 20;
/// Segment size of the small pool (and its expandable page).
pub const SMALL_BUFFER: u64 = 2 << 20;
/// Requests below this size share a [`LARGE_BUFFER`] segment.
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// Larger segments are rounded up to a multiple of this.
pub const ROUND_LARGE: u64 = 2 << 20;
/// Segment size for requests between 1 and 10 MiB (and the large pool's expandable page).
pub const LARGE_BUFFER: u64 = 20 << 20;

/// The next of `divisions` equal steps between the powers of two around `size`.
fn next_division(size: u64, divisions: u32) -> u64 {
    if size.is_power_of_two() {
        return size;
    }
    let floor = 1u64 << (63 - size.leading_zeros());
    let step = floor >> (31 - divisions.leading_zeros());
    if step == 0 {
        return floor << 1;
    }
    let down = size & !(step - 1);
    if down == size {
        size
    } else {
        down + step
    }
}

/// `round_size`: the block size a request of `n` bytes gets.
pub fn round_size(n: u64, s: &Settings) -> u64 {
    if n < MIN_BLOCK {
        return MIN_BLOCK;
    }
    let d = s.divisions_for(n);
    if d > 1 && n > MIN_BLOCK * d as u64 {
        next_division(n, d)
    } else {
        n.div_ceil(MIN_BLOCK) * MIN_BLOCK
    }
}

/// `get_allocation_size`: the cudaMalloc a miss for a rounded `size` asks for.
pub fn allocation_size(size: u64) -> u64 {
    if size <= SMALL_SIZE {
        SMALL_BUFFER
    } else if size < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        size.div_ceil(ROUND_LARGE) * ROUND_LARGE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_as_the_format_reference_says() {
        let s = Settings::default();
        assert_eq!(round_size(1, &s), 512);
        assert_eq!(round_size(513, &s), 1024);
        assert_eq!(round_size(1200, &s), 1536);
        let mut four = Settings::default();
        four.apply("roundup_power2_divisions:4").unwrap();
        // 1200 lies between 1024 and 2048: steps 1024, 1280, 1536, 1792.
        assert_eq!(round_size(1200, &four), 1536); // not above 512 x 4: plain rounding
        assert_eq!(round_size(3000, &four), 3072);
        assert_eq!(round_size((1 << 30) + 1, &four), (1 << 30) + (1 << 28));
        assert_eq!(round_size(1 << 30, &four), 1 << 30);
        assert_eq!(allocation_size(512), 2 << 20);
        assert_eq!(allocation_size((1 << 20) + 512), 20 << 20);
        assert_eq!(allocation_size((10 << 20) + 1), 12 << 20);
    }

    #[test]
    fn the_documented_example_rounds_1200_to_1280() {
        // With 8 divisions 1200 is above 512 x 2 only when d = 2; the reference's example
        // (1200, d = 4 → 1280) is next_division itself.
        assert_eq!(next_division(1200, 4), 1280);
        assert_eq!(next_division(1024, 4), 1024);
        assert_eq!(next_division(1100, 2), 1536);
    }
}
