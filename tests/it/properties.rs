//! Property tests (proptest, 64 cases each): small random snapshots whose segments, blocks
//! and trace agree by construction, written as JSON (and as a pickle through
//! `memlens::input::json_to_pickle`), against what must hold for any such snapshot:
//!
//! - blocks tile their segments: no invariant warning, Σ blocks = `total_size`, each block
//!   starts where the previous ends, and the summary's reserved bytes are Σ `total_size`;
//! - the replay's live bytes are the running sum of the trace (never below zero), end at
//!   Σ requested bytes of the live final blocks, and stay within every byte ever requested
//!   when the ring buffer lost the start of the trace;
//! - the parallel decoder (64-byte chunks, 2 threads) builds what the sequential one builds;
//! - `diff` of a profile with itself finds no new, removed, grown or shrunk site;
//! - summary totals do not depend on the order of the segments or of the trace entries
//!   (any interleaving that keeps each address's own entries in order).

use crate::common;
use common::*;
use memlens::model::{self, BlockState, BuildOptions, Snapshot, Strategy as Decoder};
use proptest::prelude::*;
use serde_json::{json, Value};

/// One block: its size in 512-byte units, state, requested bytes (per 512 of its size), the
/// site of its stacks, and how many allocations came and went at its address before.
#[derive(Clone, Debug)]
struct BlockSpec {
    units: u64,
    state: BlockState,
    per512: u64,
    site: u64,
    transients: usize,
}

impl BlockSpec {
    fn size(&self) -> u64 {
        self.units * 512
    }
    /// Requested bytes of the final allocation (0 on inactive blocks).
    fn requested(&self) -> u64 {
        match self.state {
            BlockState::Inactive => 0,
            _ => (self.size() * self.per512 / 512).max(1),
        }
    }
    /// Requested bytes of transient allocation `k`.
    fn transient(&self, k: usize) -> u64 {
        (self.size() * self.per512 / 512 / (k as u64 + 1)).max(1)
    }
}

/// Devices, each a list of segments, each a list of blocks.
type Spec = Vec<Vec<Vec<BlockSpec>>>;

fn block() -> impl Strategy<Value = BlockSpec> {
    let state = prop_oneof![
        Just(BlockState::ActiveAllocated),
        Just(BlockState::Inactive),
        Just(BlockState::ActivePendingFree),
    ];
    (1u64..64, state, 1u64..=512, 0u64..4, 0usize..3).prop_map(
        |(units, state, per512, site, transients)| BlockSpec {
            units,
            state,
            per512,
            site,
            transients,
        },
    )
}

fn spec() -> impl Strategy<Value = Spec> {
    prop::collection::vec(
        prop::collection::vec(prop::collection::vec(block(), 1..6), 1..4),
        1..3,
    )
}

fn segment_address(device: usize, i: usize) -> u64 {
    0x7f00_0000_0000 + ((device as u64) << 36) + ((i as u64) << 28)
}

fn frames(site: u64) -> Value {
    json!([
        {"filename": "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py",
         "name": "_call_impl", "line": 1527},
        {"filename": "/home/user/proj/train.py", "name": format!("site{site}"), "line": 10 + site},
    ])
}

/// One trace entry.
fn entry(action: &str, addr: u64, size: u64, site: u64) -> Value {
    json!({"action": action, "addr": addr, "size": size, "stream": 0, "frames": frames(site)})
}

/// The entries at one block's address, in the order they must keep: transient
/// alloc/free_requested/free_completed triples, then the final allocation of a live block
/// (with its free_requested when it is pending).
fn chain(addr: u64, b: &BlockSpec) -> Vec<Value> {
    let mut v = Vec::new();
    for k in 0..b.transients {
        let n = b.transient(k);
        v.push(entry("alloc", addr, n, b.site));
        v.push(entry("free_requested", addr, n, b.site));
        v.push(entry("free_completed", addr, n, b.site));
    }
    if b.state != BlockState::Inactive {
        v.push(entry("alloc", addr, b.requested(), b.site));
        if b.state == BlockState::ActivePendingFree {
            v.push(entry("free_requested", addr, b.requested(), b.site));
        }
    }
    v
}

/// A small deterministic generator (xorshift64*) for interleavings and orders.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n as u64) as usize
    }
}

/// The snapshot of `spec` as JSON: segments in the order `seed` picks (0 = address order),
/// each device's trace its `segment_alloc`s then the chains of its blocks interleaved as
/// `seed` picks, with the first `dropped` entries of each trace lost (a wrapped ring buffer).
fn snapshot_json(spec: &Spec, seed: u64, dropped: usize) -> Vec<u8> {
    let mut rng = Rng(seed | 1);
    let mut segments = Vec::new();
    let mut traces = Vec::new();
    for (d, segs) in spec.iter().enumerate() {
        let mut trace = Vec::new();
        let mut chains = Vec::new();
        for (i, blocks) in segs.iter().enumerate() {
            let base = segment_address(d, i);
            let total: u64 = blocks.iter().map(BlockSpec::size).sum();
            let sum = |f: &dyn Fn(&BlockSpec) -> bool, g: &dyn Fn(&BlockSpec) -> u64| -> u64 {
                blocks.iter().filter(|b| f(b)).map(g).sum()
            };
            let mut addr = base;
            let mut bs = Vec::new();
            for b in blocks {
                let state = match b.state {
                    BlockState::ActiveAllocated => "active_allocated",
                    BlockState::ActivePendingFree => "active_pending_free",
                    BlockState::Inactive => "inactive",
                };
                bs.push(json!({"address": addr, "size": b.size(),
                    "requested_size": b.requested(), "state": state, "frames": frames(b.site)}));
                chains.push(chain(addr, b));
                addr += b.size();
            }
            segments.push(json!({
                "device": d, "address": base, "total_size": total,
                "allocated_size": sum(&|b| b.state == BlockState::ActiveAllocated, &|b| b.size()),
                "active_size": sum(&|b| b.state != BlockState::Inactive, &|b| b.size()),
                "requested_size": sum(&|b| b.state != BlockState::Inactive, &|b| b.requested()),
                "stream": 0, "segment_type": "large", "segment_pool_id": [0, 0],
                "is_expandable": false, "frames": frames(0), "blocks": bs,
            }));
            trace.push(entry("segment_alloc", base, total, 0));
        }
        let mut at: Vec<usize> = vec![0; chains.len()];
        loop {
            let open: Vec<usize> = (0..chains.len())
                .filter(|&c| at[c] < chains[c].len())
                .collect();
            if open.is_empty() {
                break;
            }
            let c = open[if seed == 0 { 0 } else { rng.below(open.len()) }];
            trace.push(chains[c][at[c]].clone());
            at[c] += 1;
        }
        let trace: Vec<Value> = trace
            .into_iter()
            .skip(dropped)
            .enumerate()
            .map(|(t, mut e)| {
                e["time_us"] = json!(1_000 + t as u64);
                e
            })
            .collect();
        traces.push(Value::Array(trace));
    }
    if seed != 0 {
        for i in (1..segments.len()).rev() {
            segments.swap(i, rng.below(i + 1));
        }
    }
    serde_json::to_vec(&json!({"segments": segments, "device_traces": traces})).unwrap()
}

fn pickle_of(json: &[u8]) -> Vec<u8> {
    memlens::input::json_to_pickle(json).unwrap()
}

fn build(bytes: &[u8], strategy: Decoder) -> Snapshot {
    model::build(
        bytes,
        BuildOptions {
            strategy,
            threads: 2,
            chunk_bytes: 64,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn snapshot(spec: &Spec, seed: u64, dropped: usize) -> Snapshot {
    build(
        &pickle_of(&snapshot_json(spec, seed, dropped)),
        Decoder::Sequential,
    )
}

/// Requested bytes of the live final blocks of device `d`.
fn final_live(spec: &Spec, d: usize) -> u64 {
    spec[d].iter().flatten().map(BlockSpec::requested).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn blocks_tile_their_segments(spec in spec(), seed in any::<u64>()) {
        let snap = snapshot(&spec, seed, 0);
        let codes: Vec<&str> = snap.warnings.iter().map(|w| w.code).collect();
        for code in INVARIANT_CODES.iter().filter(|&&c| c != "segments_unsorted") {
            prop_assert!(!codes.contains(code), "{code}: {:?}", snap.warnings);
        }
        for code in ["trace_state_mismatch", "ring_buffer_wrapped", "time_decreasing"] {
            prop_assert!(!codes.contains(&code), "{code}: {:?}", snap.warnings);
        }
        prop_assert_eq!(snap.segments.len(), spec.iter().map(Vec::len).sum::<usize>());
        for seg in &snap.segments {
            let blocks = snap.segment_blocks(seg);
            prop_assert_eq!(blocks.iter().map(|b| b.size).sum::<u64>(), seg.total_size);
            let mut at = seg.address;
            for b in blocks {
                prop_assert_eq!(b.address, at);
                at += b.size;
            }
        }
        let summary = memlens::analyze::summary::run(&snap);
        for (d, segs) in spec.iter().enumerate() {
            let dev = &summary.devices[d];
            prop_assert_eq!(dev.device as usize, d);
            let reserved: u64 = segs.iter().flatten().map(BlockSpec::size).sum();
            prop_assert_eq!(dev.reserved_bytes, reserved);
            prop_assert_eq!(dev.blocks, segs.iter().map(Vec::len).sum::<usize>());
        }
    }

    #[test]
    fn replay_live_bytes_are_the_running_sum_and_never_negative(
        spec in spec(),
        seed in any::<u64>(),
    ) {
        let snap = snapshot(&spec, seed, 0);
        let replays = memlens::replay::replay(&snap);
        prop_assert_eq!(replays.len(), spec.len());
        for (r, dev) in replays.iter().zip(&snap.devices) {
            prop_assert_eq!(r.initial_bytes, 0);
            let mut live: i128 = 0;
            let mut peak: i128 = 0;
            for (i, e) in snap.device_trace(dev).iter().enumerate() {
                match e.action {
                    model::Action::Alloc => live += e.size as i128,
                    model::Action::FreeCompleted => live -= e.size as i128,
                    _ => {}
                }
                prop_assert!(live >= 0, "entry {}: {}", i, live);
                peak = peak.max(live);
                prop_assert_eq!(r.live[i] as i128, live, "entry {}", i);
            }
            prop_assert_eq!(live as u64, final_live(&spec, dev.id as usize));
            prop_assert_eq!(r.peak_bytes as i128, peak);
            prop_assert_eq!(r.unconfirmed_at_end, 0);
        }
    }

    #[test]
    fn a_wrapped_trace_never_drives_live_bytes_below_zero(
        spec in spec(),
        seed in any::<u64>(),
        dropped in 1usize..12,
    ) {
        let snap = snapshot(&spec, seed, dropped);
        for r in memlens::replay::replay(&snap) {
            let d = r.device as usize;
            // Every byte ever requested on the device bounds the live bytes: an underflow
            // would wrap far above it.
            let ever: u64 = spec[d]
                .iter()
                .flatten()
                .map(|b| b.requested() + (0..b.transients).map(|k| b.transient(k)).sum::<u64>())
                .sum();
            prop_assert!(r.initial_bytes <= ever, "{} > {}", r.initial_bytes, ever);
            for (i, &v) in r.live.iter().enumerate() {
                prop_assert!(v <= ever, "entry {}: {} > {}", i, v, ever);
            }
            prop_assert_eq!(r.live_at(r.events as i64 - 1), final_live(&spec, d));
        }
    }

    #[test]
    fn parallel_equals_sequential(spec in spec(), seed in any::<u64>()) {
        let bytes = pickle_of(&snapshot_json(&spec, seed, 0));
        // Pass 1 plans it (the parallel path runs, not its fallback), in several chunks.
        let plan = memlens::pickle::scan::scan(&bytes, 64);
        prop_assert!(plan.is_some_and(|p| p.chunks.len() > 1), "not planned");
        let want = canonical(&build(&bytes, Decoder::Sequential));
        prop_assert_eq!(canonical(&build(&bytes, Decoder::Parallel)), want);
    }

    #[test]
    fn a_diff_of_a_profile_with_itself_is_empty(spec in spec(), seed in any::<u64>()) {
        use memlens::analyze::{diff, profile};
        let snap = snapshot(&spec, seed, 0);
        let replays = memlens::replay::replay(&snap);
        let opts = profile::ProfileOptions::default();
        let p = profile::profile(&snap, &replays, &opts).unwrap();
        let r = diff::run(&p, &p, opts.key, opts.ignore_lines, &Default::default());
        prop_assert_eq!(
            (r.counts.new, r.counts.removed, r.counts.grown, r.counts.shrunk),
            (0, 0, 0, 0)
        );
        prop_assert_eq!(r.counts.unchanged, p.sites.len());
        prop_assert!(r.sites.is_empty(), "{:?}", r.sites);
        prop_assert_eq!(r.peak.delta_bytes, 0);
        prop_assert_eq!(r.reserved.delta_bytes, 0);
    }

    #[test]
    fn summary_totals_do_not_depend_on_the_order_of_segments_or_entries(
        spec in spec(),
        seed in 1u64..,
    ) {
        let ordered = snapshot(&spec, 0, 0);
        let shuffled = snapshot(&spec, seed, 0);
        let devices = |s: &Snapshot| {
            serde_json::to_value(memlens::analyze::summary::run(s)).unwrap()["devices"].clone()
        };
        prop_assert_eq!(devices(&shuffled), devices(&ordered));
        let end = |s: &Snapshot| -> Vec<(u64, u64)> {
            memlens::replay::replay(s)
                .iter()
                .map(|r| (r.live_at(r.events as i64 - 1), r.reserved_at(r.events as i64 - 1)))
                .collect()
        };
        prop_assert_eq!(end(&shuffled), end(&ordered));
    }
}
