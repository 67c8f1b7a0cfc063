//! What pins stranded bytes: the live blocks that keep a segment's free bytes from being
//! returned to the driver, and the types of the pinners report (`frag`, `oom`, the page).
//!
//! A cudaMalloc'd segment is released only when it is wholly free, so each of its live blocks
//! pins all of its free bytes, jointly. An expandable segment is released page by page: a free
//! page is unmapped, so only the free bytes that share a page with a live block are stranded,
//! and that block pins them (the free bytes at a free block's start share their page with the
//! live block before it, those at its end with the block after it; a free block inside one
//! page is pinned by both). Pages of a mapped range start at the range's base (PyTorch maps
//! `segment_size` pages from the reservation's base, which is not aligned to 20 MiB).

use super::page;
use crate::model::{BlockState, PoolKind};
use crate::replay::state::SegmentAt;
use crate::replay::Moment;
use serde::Serialize;

/// Stranded free bytes of one segment, and the live blocks (indices into `SegmentAt::blocks`)
/// that pin them; no pinners when no live block does (a segment whose blocks do not cover it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Stranded free bytes.
    pub bytes: u64,
    /// The live blocks that keep them; each alone is enough to keep them stranded.
    pub pinners: Vec<usize>,
}

fn live(state: BlockState) -> bool {
    state != BlockState::Inactive
}

/// The page-aligned part `[lo, hi)` of the free block `[start, end)` in an expandable range
/// based at `base` with pages of `p` bytes (`lo ≥ hi` when no whole page is free).
pub fn whole_pages(base: u64, p: u64, start: u64, end: u64) -> (u64, u64) {
    let lo = base + (start.saturating_sub(base)).div_ceil(p) * p;
    let hi = base + (end.saturating_sub(base)) / p * p;
    (lo, hi)
}

/// The stranded pieces of `s` (their bytes sum to its free bytes less what `empty_cache`
/// could release, [`super::PoolFrag::stranded_free_bytes`]).
pub fn pieces(s: &SegmentAt) -> Vec<Piece> {
    let blocks = &s.blocks;
    if !s.expandable {
        let free: u64 = blocks
            .iter()
            .filter(|b| !live(b.state))
            .map(|b| b.size)
            .sum();
        let pinners: Vec<usize> = (0..blocks.len())
            .filter(|&i| live(blocks[i].state))
            .collect();
        if free == 0 || (blocks.len() == 1 && pinners.is_empty()) {
            return Vec::new();
        }
        return vec![Piece {
            bytes: free,
            pinners,
        }];
    }
    let p = page(s.pool);
    let mut out = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        if live(b.state) {
            continue;
        }
        let prev = i.checked_sub(1).filter(|&j| live(blocks[j].state));
        let next = Some(i + 1).filter(|&j| j < blocks.len() && live(blocks[j].state));
        let (start, end) = (b.address, b.address + b.size);
        let (lo, hi) = whole_pages(s.address, p, start, end);
        if lo > hi {
            // Inside one page: it shares that page with both neighbours.
            out.push(Piece {
                bytes: b.size,
                pinners: prev.into_iter().chain(next).collect(),
            });
            continue;
        }
        if lo > start {
            out.push(Piece {
                bytes: lo - start,
                pinners: prev.into_iter().collect(),
            });
        }
        if end > hi {
            out.push(Piece {
                bytes: end - hi,
                pinners: next.into_iter().collect(),
            });
        }
    }
    out.retain(|x| x.bytes > 0);
    out
}

/// One site's share of what pins a pool's (or a device's) stranded bytes.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PinnerSite {
    /// The site (as `profile` keys it), or what is known when no stack was recorded.
    pub site: String,
    /// Stranded bytes only this site's blocks pin: freeing them releases these bytes.
    pub sole_bytes: u64,
    /// Stranded bytes this site's blocks pin together with other sites' blocks (each alone
    /// keeps them; freeing one site's blocks releases nothing of these).
    pub shared_bytes: u64,
    /// Its live blocks that pin stranded bytes.
    pub blocks: u64,
    /// Their bytes.
    pub block_bytes: u64,
    /// Trace index of the oldest one's allocation (`null`: allocated before the trace).
    pub oldest_allocated_event: Option<u64>,
    /// Of those blocks, how many were allocated before the trace began.
    pub allocated_before_trace: u64,
    /// The oldest block's age at the moment, microseconds (`null` without times, or when it
    /// was allocated before the trace).
    pub oldest_age_us: Option<i64>,
}

/// Sites whose live blocks pin the same stranded bytes together: each site's blocks alone
/// keep them, so only freeing (or moving) every one of these sites' blocks releases them.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PinnerGroup {
    /// The sites, by name.
    pub sites: Vec<String>,
    /// The stranded bytes they pin together (and no other set of sites does).
    pub stranded_bytes: u64,
}

/// A segment whose free bytes are stranded, and the live blocks that split it.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PinnedSegment {
    /// Base address (of the mapped range for an expandable segment).
    pub address: u64,
    /// Bytes.
    pub size: u64,
    /// Pool.
    pub pool: PoolKind,
    /// Stream.
    pub stream: u64,
    /// An expandable segment's mapped range.
    pub expandable: bool,
    /// Its stranded free bytes.
    pub stranded_bytes: u64,
    /// Trace index of the `segment_alloc` / `segment_map` that created it (`null`: before
    /// the trace).
    pub created_event: Option<u64>,
    /// The live blocks that pin its stranded bytes, oldest allocation first (at most 8;
    /// `pinning_blocks` counts them all): the allocations that split it and still hold.
    pub split_by: Vec<PinningBlock>,
    /// How many live blocks pin it.
    pub pinning_blocks: u64,
}

/// A live block that pins stranded bytes.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PinningBlock {
    /// Address.
    pub address: u64,
    /// Bytes.
    pub size: u64,
    /// Its site.
    pub site: String,
    /// Trace index of its allocation (`null`: before the trace).
    pub allocated_event: Option<u64>,
    /// Its `time_us`, when recorded.
    pub allocated_time_us: Option<i64>,
}

/// Stranded bytes of one pool (kind, private pool, stream) and what pins them.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PoolPinners {
    /// small / large.
    pub pool: PoolKind,
    /// Private pool id; [0, 0] for the default pools.
    pub pool_id: [u64; 2],
    /// Stream handle.
    pub stream: u64,
    /// Its stranded free bytes.
    pub stranded_bytes: u64,
    /// The sites whose live blocks pin them, most pinned first.
    pub pinners: Vec<PinnerSite>,
}

/// What a change would leave stranded at the moment, by the allocator replay.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PinnerPrice {
    /// `expandable_segments`, `max_split_size_mb`, `pinners_allocated_first`,
    /// `pinners_freed`.
    pub change: String,
    /// The change in words (the setting, or the site and what happens to its allocations).
    pub what: String,
    /// Stranded bytes the replay leaves at the moment with the change.
    pub stranded_bytes: u64,
    /// Stranded bytes the same replay leaves without it (the file's settings and order).
    pub baseline_stranded_bytes: u64,
    /// With the change − without it: negative when the change strands less (it frees that
    /// much), positive when it strands more.
    pub stranded_change_bytes: i64,
}

/// What strands a device's cache at a moment: the stranded bytes, the live blocks and sites
/// that pin them, the segments they split, and what the allocator replay says changes would
/// leave stranded.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DevicePinners {
    /// Device index.
    pub device: u32,
    /// The moment.
    pub at: Moment,
    /// Stranded free bytes (equal to `frag`'s `stranded_free_bytes` at the moment).
    pub stranded_bytes: u64,
    /// Of those, pinned by at least one block whose allocation stack was recorded.
    pub attributed_bytes: u64,
    /// Pinned only by blocks without a recorded stack (allocated before history was on):
    /// their site cannot be named.
    pub unattributed_bytes: u64,
    /// The device's sites, most pinned first (sole + shared, then sole bytes; at most 20).
    pub pinners: Vec<PinnerSite>,
    /// How many sites pin stranded bytes (`pinners` keeps the first 20).
    pub pinning_sites: u64,
    /// The sets of sites that pin stranded bytes, most bytes first (at most 5): a set of one
    /// is a site that pins bytes alone.
    pub groups: Vec<PinnerGroup>,
    /// Per pool with stranded bytes.
    pub pools: Vec<PoolPinners>,
    /// The segments with the most stranded bytes (at most 5).
    pub segments: Vec<PinnedSegment>,
    /// Changes priced by the allocator replay; empty when it cannot (no trace; the
    /// notes say why).
    pub prices: Vec<PinnerPrice>,
    /// The reading in sentences: what pins the bytes, what split the segments, what the
    /// replay says would change, what cannot be judged.
    pub words: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StackId;
    use crate::replay::state::BlockAt;

    const MIB: u64 = 1 << 20;

    fn seg(expandable: bool, pool: PoolKind, base: u64, blocks: &[(u64, bool)]) -> SegmentAt {
        let mut a = base;
        let blocks = blocks
            .iter()
            .map(|&(size, is_live)| {
                let b = BlockAt {
                    address: a,
                    size,
                    requested: if is_live { size } else { 0 },
                    state: if is_live {
                        BlockState::ActiveAllocated
                    } else {
                        BlockState::Inactive
                    },
                    stack: StackId::EMPTY,
                    estimated: false,
                };
                a += size;
                b
            })
            .collect();
        SegmentAt {
            address: base,
            size: a - base,
            stream: 0,
            pool,
            pool_id: (0, 0),
            expandable,
            blocks,
        }
    }

    #[test]
    fn a_cudamalloc_segment_is_pinned_by_all_its_live_blocks() {
        let s = seg(
            false,
            PoolKind::Large,
            0,
            &[
                (4 * MIB, true),
                (6 * MIB, false),
                (MIB, true),
                (9 * MIB, false),
            ],
        );
        assert_eq!(
            pieces(&s),
            vec![Piece {
                bytes: 15 * MIB,
                pinners: vec![0, 2]
            }]
        );
        assert!(pieces(&seg(false, PoolKind::Large, 0, &[(20 * MIB, false)])).is_empty());
        assert!(pieces(&seg(false, PoolKind::Large, 0, &[(20 * MIB, true)])).is_empty());
    }

    #[test]
    fn an_expandable_range_is_pinned_page_by_page_from_its_base() {
        // Base 2 MiB past a 20 MiB multiple: pages at base + k × 20 MiB.
        let base = 22 * MIB;
        // live 5, free 50 (15 to the page end, 20 whole, 15 before the next live), live 5.
        let s = seg(
            true,
            PoolKind::Large,
            base,
            &[(5 * MIB, true), (50 * MIB, false), (5 * MIB, true)],
        );
        assert_eq!(
            pieces(&s),
            vec![
                Piece {
                    bytes: 15 * MIB,
                    pinners: vec![0]
                },
                Piece {
                    bytes: 15 * MIB,
                    pinners: vec![2]
                },
            ]
        );
        // A free block inside one page is pinned by both neighbours.
        let s = seg(
            true,
            PoolKind::Large,
            base,
            &[(5 * MIB, true), (10 * MIB, false), (5 * MIB, true)],
        );
        assert_eq!(
            pieces(&s),
            vec![Piece {
                bytes: 10 * MIB,
                pinners: vec![0, 2]
            }]
        );
        // A free tail of whole pages is released; none of it is stranded.
        let s = seg(
            true,
            PoolKind::Large,
            base,
            &[(20 * MIB, true), (40 * MIB, false)],
        );
        assert!(pieces(&s).is_empty());
    }

    /// Every layout of live and free blocks on a page grid: the pieces add up to the free
    /// bytes less the whole free pages, and every piece with a live neighbour names it.
    #[test]
    fn pieces_sum_to_free_less_whole_free_pages() {
        let unit = MIB;
        for pool in [PoolKind::Small, PoolKind::Large] {
            let p = page(pool);
            for shape in 0u32..(1 << 10) {
                let sizes: Vec<(u64, bool)> = (0..10)
                    .map(|k| {
                        (
                            unit * (1 + (k as u64 * 7 + shape as u64) % 23),
                            shape >> k & 1 == 1,
                        )
                    })
                    .collect();
                // Adjacent free blocks are merged in a real state.
                let mut merged: Vec<(u64, bool)> = Vec::new();
                for (size, l) in sizes {
                    match merged.last_mut() {
                        Some(last) if !last.1 && !l => last.0 += size,
                        _ => merged.push((size, l)),
                    }
                }
                let total: u64 = merged.iter().map(|x| x.0).sum();
                let padded = total.div_ceil(p) * p;
                if padded > total {
                    merged.push((padded - total, true));
                }
                let s = seg(true, pool, 3 * p, &merged);
                let free: u64 = s
                    .blocks
                    .iter()
                    .filter(|b| !live(b.state))
                    .map(|b| b.size)
                    .sum();
                let released: u64 = s
                    .blocks
                    .iter()
                    .filter(|b| !live(b.state))
                    .map(|b| {
                        let (lo, hi) = whole_pages(s.address, p, b.address, b.address + b.size);
                        hi.saturating_sub(lo)
                    })
                    .sum();
                let got = pieces(&s);
                assert_eq!(
                    got.iter().map(|x| x.bytes).sum::<u64>(),
                    free - released,
                    "{shape}"
                );
                assert!(got.iter().all(|x| !x.pinners.is_empty()), "{shape}");
                assert!(got
                    .iter()
                    .all(|x| x.pinners.iter().all(|&i| live(s.blocks[i].state))));
            }
        }
    }
}
