//! The allocator's rules on small hand-made request sequences with known answers.

use super::device::{Capacity, DeviceAllocator, SegEvent};
use super::pool::BlockId;
use super::settings::Settings;
use crate::model::Action;

const MIB: u64 = 1 << 20;

fn allocator(conf: &str, capacity: Option<u64>) -> DeviceAllocator {
    let mut s = Settings::default();
    s.apply(conf).unwrap();
    let cap = capacity.map(|bytes| Capacity {
        bytes,
        fraction: false,
    });
    DeviceAllocator::new(s, cap, 80 << 30, 1 << 40, true)
}

fn events(a: &mut DeviceAllocator) -> Vec<(Action, u64)> {
    let log: Vec<SegEvent> = a.take_log();
    log.iter().map(|e| (e.action, e.size / MIB)).collect()
}

fn malloc(a: &mut DeviceAllocator, bytes: u64) -> BlockId {
    a.malloc(bytes, 0, (0, 0)).expect("served")
}

fn free(a: &mut DeviceAllocator, id: BlockId) {
    a.free_requested(id);
    a.free_completed(id);
}

#[test]
fn sixteens_then_thirty_twos_reserve_256_mib_and_the_reverse_128() {
    // GIVEN eight 16 MiB tensors, freed WHEN four 32 MiB follow THEN none fits: 256 MiB.
    let mut a = allocator("", None);
    let ids: Vec<BlockId> = (0..8).map(|_| malloc(&mut a, 16 * MIB)).collect();
    ids.into_iter().for_each(|id| free(&mut a, id));
    (0..4).for_each(|_| {
        malloc(&mut a, 32 * MIB);
    });
    assert_eq!(a.reserved, 256 * MIB);
    // GIVEN four 32 MiB, freed WHEN eight 16 MiB follow THEN each 32 MiB block splits: 128 MiB.
    let mut b = allocator("", None);
    let ids: Vec<BlockId> = (0..4).map(|_| malloc(&mut b, 32 * MIB)).collect();
    ids.into_iter().for_each(|id| free(&mut b, id));
    (0..8).for_each(|_| {
        malloc(&mut b, 16 * MIB);
    });
    assert_eq!(b.reserved, 128 * MIB);
    assert_eq!(b.device_mallocs, 4);
}

#[test]
fn expandable_segments_map_seven_pages_for_eight_sixteens_and_none_for_the_thirty_twos() {
    let mut a = allocator("expandable_segments:True", None);
    let ids: Vec<BlockId> = (0..8).map(|_| malloc(&mut a, 16 * MIB)).collect();
    // 128 MiB in 20 MiB pages: seven pages, 140 MiB.
    assert_eq!(a.reserved, 140 * MIB);
    assert_eq!(events(&mut a), vec![(Action::SegmentMap, 20); 7]);
    ids.into_iter().for_each(|id| free(&mut a, id));
    (0..4).for_each(|_| {
        malloc(&mut a, 32 * MIB);
    });
    assert_eq!(a.reserved, 140 * MIB);
    assert!(events(&mut a).is_empty());
}

#[test]
fn small_requests_take_2_mib_segments_and_mid_sized_ones_20_mib() {
    let mut a = allocator("", None);
    malloc(&mut a, 100);
    malloc(&mut a, 3 * MIB / 2);
    malloc(&mut a, 41 * MIB / 2);
    // 20.5 MiB rounds up to a 22 MiB segment (2 MiB steps).
    assert_eq!(
        events(&mut a),
        vec![
            (Action::SegmentAlloc, 2),
            (Action::SegmentAlloc, 20),
            (Action::SegmentAlloc, 22)
        ]
    );
    // The 20 MiB segment holds 18.5 MiB more: a 10.5 MiB request is split from it.
    malloc(&mut a, 21 * MIB / 2);
    assert!(events(&mut a).is_empty());
}

#[test]
fn oversize_blocks_are_not_split_and_serve_only_requests_within_20_mib() {
    let mut a = allocator("max_split_size_mb:64", None);
    let big = malloc(&mut a, 100 * MIB);
    free(&mut a, big);
    // A 30 MiB request below max_split_size never takes the 100 MiB oversize block.
    let small = malloc(&mut a, 30 * MIB);
    assert_eq!(
        events(&mut a),
        vec![(Action::SegmentAlloc, 100), (Action::SegmentAlloc, 30)]
    );
    free(&mut a, small);
    // 70 MiB is oversize: the 100 MiB block is 30 MiB too large (20 MiB allowed).
    malloc(&mut a, 70 * MIB);
    assert_eq!(events(&mut a), vec![(Action::SegmentAlloc, 70)]);
    // 90 MiB takes the 100 MiB block whole (within 20 MiB, not split).
    let id = malloc(&mut a, 90 * MIB);
    assert!(events(&mut a).is_empty());
    assert_eq!(a.block(id).size, 100 * MIB);
}

#[test]
fn a_failed_cudamalloc_releases_cached_segments_and_retries() {
    let mut a = allocator("", Some(100 * MIB));
    let id = malloc(&mut a, 60 * MIB);
    free(&mut a, id);
    malloc(&mut a, 70 * MIB);
    assert_eq!(
        events(&mut a),
        vec![
            (Action::SegmentAlloc, 60),
            (Action::SegmentFree, 60),
            (Action::SegmentAlloc, 70)
        ]
    );
    // Nothing cached is left to release: 70 live + 40 > 100 is an OOM.
    assert!(a.malloc(40 * MIB, 0, (0, 0)).is_none());
    assert_eq!(a.reserved, 70 * MIB);
}

#[test]
fn oversize_release_frees_only_what_the_request_needs() {
    let mut a = allocator("max_split_size_mb:32", Some(200 * MIB));
    let x = malloc(&mut a, 40 * MIB);
    let y = malloc(&mut a, 100 * MIB);
    free(&mut a, x);
    free(&mut a, y);
    events(&mut a);
    // 80 MiB: no cached block fits (40 too small, 100 too large for an oversize request);
    // 140 + 80 > 200, so the smallest oversize block of at least 80 MiB (100) is released.
    malloc(&mut a, 80 * MIB);
    assert_eq!(
        events(&mut a),
        vec![(Action::SegmentFree, 100), (Action::SegmentAlloc, 80)]
    );
}

#[test]
fn blocks_serve_only_their_stream_and_deferred_frees_wait() {
    let mut a = allocator("", None);
    let id = a.malloc(30 * MIB, 7, (0, 0)).unwrap();
    free(&mut a, id);
    a.malloc(30 * MIB, 9, (0, 0)).unwrap();
    assert_eq!(
        events(&mut a),
        vec![(Action::SegmentAlloc, 30), (Action::SegmentAlloc, 30)]
    );
    // A free awaiting another stream (record_stream) is not reused until it completes.
    let x = malloc(&mut a, 30 * MIB);
    a.free_requested(x);
    let y = malloc(&mut a, 30 * MIB);
    assert_eq!(events(&mut a).len(), 2);
    a.free_completed(x);
    free(&mut a, y);
    malloc(&mut a, 30 * MIB);
    assert!(events(&mut a).is_empty());
    // empty_cache waits for pending frees, then releases every unsplit cached segment.
    let z = malloc(&mut a, 30 * MIB);
    a.free_requested(z);
    a.empty_cache();
    assert_eq!(
        events(&mut a),
        vec![(Action::SegmentFree, 30), (Action::SegmentFree, 30)]
    );
}

#[test]
fn the_garbage_collection_threshold_frees_old_cached_blocks_before_a_cudamalloc() {
    let run = |conf: &str| {
        let mut a = allocator(conf, Some(200 * MIB));
        let x = malloc(&mut a, 30 * MIB);
        let y = malloc(&mut a, 30 * MIB);
        free(&mut a, x);
        free(&mut a, y);
        events(&mut a);
        malloc(&mut a, 50 * MIB);
        (events(&mut a), a.reserved / MIB)
    };
    assert_eq!(run(""), (vec![(Action::SegmentAlloc, 50)], 110));
    // Above 25% of 200 MiB reserved, the cached blocks go first.
    let (ev, reserved) = run("garbage_collection_threshold:0.25");
    assert_eq!(reserved, 50);
    assert_eq!(ev.last(), Some(&(Action::SegmentAlloc, 50)));
    assert_eq!(ev.len(), 3);
}

#[test]
fn private_pools_keep_their_segments_apart() {
    let mut a = allocator("", None);
    let id = malloc(&mut a, 30 * MIB);
    free(&mut a, id);
    let g = a.malloc(30 * MIB, 0, (0, 1)).unwrap();
    assert_eq!(events(&mut a).len(), 2);
    free(&mut a, g);
    // empty_cache releases the default pools' segments, not a live graph's pool.
    a.empty_cache();
    assert_eq!(events(&mut a), vec![(Action::SegmentFree, 30)]);
    assert_eq!(a.reserved, 30 * MIB);
}

#[test]
fn expandable_segments_unmap_free_pages_and_map_them_again_instead_of_failing() {
    // Capacity 100 MiB: five 20 MiB pages. Four 20 MiB tensors, every other one freed,
    // leave two free pages apart; a 40 MiB request fits only once they are unmapped.
    let mut a = allocator("expandable_segments:True", Some(100 * MIB));
    let ids: Vec<BlockId> = (0..4).map(|_| malloc(&mut a, 20 * MIB)).collect();
    free(&mut a, ids[0]);
    free(&mut a, ids[2]);
    events(&mut a);
    malloc(&mut a, 40 * MIB);
    let ev = events(&mut a);
    assert_eq!(a.reserved, 80 * MIB);
    assert_eq!(ev.iter().filter(|e| e.0 == Action::SegmentUnmap).count(), 2);
    assert_eq!(
        ev.iter()
            .filter(|e| e.0 == Action::SegmentMap)
            .map(|e| e.1)
            .sum::<u64>(),
        40
    );
    // Without expandable segments the freed tensors are whole segments: released on the miss.
    let mut b = allocator("", Some(100 * MIB));
    let ids: Vec<BlockId> = (0..4).map(|_| malloc(&mut b, 20 * MIB)).collect();
    free(&mut b, ids[0]);
    free(&mut b, ids[2]);
    assert!(
        b.malloc(40 * MIB, 0, (0, 0)).is_some(),
        "two 20 MiB segments are freed"
    );
}

#[test]
fn a_request_larger_than_an_expandable_reservation_is_an_oom_that_maps_nothing() {
    // Issue 53: a 100 MiB reservation, a small tensor, then a 1 GiB request. The chain of the
    // new segment ends before the request does: out of memory, no page mapped for it.
    let mut s = Settings::default();
    s.apply("expandable_segments:True").unwrap();
    let mut a = DeviceAllocator::new(s, None, 100 * MIB, 1 << 40, true);
    malloc(&mut a, 512);
    assert_eq!(events(&mut a), vec![(Action::SegmentMap, 2)]);
    assert_eq!(a.malloc(1 << 30, 0, (0, 0)), None);
    assert!(
        events(&mut a).is_empty(),
        "nothing mapped for a request that cannot fit"
    );
    assert_eq!(a.reserved, 2 * MIB);
    // The whole reservation is still there to be had: 100 MiB in five 20 MiB pages.
    let id = malloc(&mut a, 100 * MIB);
    assert_eq!(a.block(id).size, 100 * MIB);
    assert_eq!(a.reserved, 102 * MIB);
    // One byte past a reservation (100 MiB + 512 B, rounded) is refused the same way, after
    // the miss released the cache (the freed 100 MiB unmapped again).
    free(&mut a, id);
    assert_eq!(a.malloc(100 * MIB + 1, 0, (0, 0)), None);
    assert_eq!(a.reserved, 2 * MIB);
}
