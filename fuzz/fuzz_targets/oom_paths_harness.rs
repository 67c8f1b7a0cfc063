//! Small out-of-memory traces through the paths that replay the caching allocator model:
//! `oom` (with `fit` attached at the OOM), `fit` at every kind of moment, `whatif` with
//! scenarios and `--suggest`, and the `report` page (issue 53: a request larger than an
//! expandable segment's reservation followed a block link past the segment's end and
//! panicked in all four).
//!
//! The fuzzer's bytes steer a snapshot built as JSON ([`snapshot_json`]): the allocator
//! settings, zero to two segments (cudaMalloc or expandable, on one of two streams, a first
//! block allocated, pending or free), up to 15 trace entries (allocs, frees, segment events,
//! `empty_cache`, OOMs) and a final `oom` whose size runs from a byte to past the 2^60 bound,
//! with nothing free. Every input must end in a value or an error, never a panic; what was
//! computed must serialize.
//!
//! Shared by the `oom_paths` fuzz target and `tests/it/fuzz_targets.rs` (seeded
//! pseudo-random inputs in `cargo test`) and `tests/it/no_panic.rs` ([`small_oom`]).

use memlens::analyze::fit::{self, FitOptions};
use memlens::analyze::oom::OomOptions;
use memlens::analyze::whatif::{self, WhatifOptions};
use memlens::compose::oom as compose_oom;
use memlens::compose::page::{self, PageOptions};
use memlens::model::{build, BuildOptions, Snapshot};
use memlens::replay::MomentSpec;
use serde_json::{json, Value};

/// Request and OOM sizes: around the 512-byte and 1 MiB roundings, pages of expandable
/// segments (2 and 20 MiB), the sizes of issue 53 (1 GiB and more with a small segment), and
/// past the 2^60 bound a file may hold.
const SIZES: [u64; 16] = [
    1,
    512,
    513,
    1 << 20,
    (1 << 20) + 1,
    2 << 20,
    10 << 20,
    20 << 20,
    (20 << 20) + 1,
    22 << 20,
    100 << 20,
    1 << 30,
    3 << 30,
    1 << 40,
    1 << 59,
    (1 << 60) + 512,
];

/// Segment sizes: a small segment, a large one, a rounded large one, a big one.
const SEGMENTS: [u64; 4] = [2 << 20, 20 << 20, 22 << 20, 1 << 30];

/// The settings a run may have recorded (`PYTORCH_CUDA_ALLOC_CONF`).
const CONFS: [&str; 6] = [
    "",
    "expandable_segments:True",
    "max_split_size_mb:20",
    "garbage_collection_threshold:0.6,max_split_size_mb:20",
    "roundup_power2_divisions:4",
    "expandable_segments:True,max_split_size_mb:20",
];

/// Capacities given as `--capacity`: none (what the trace implies), 2 MiB, 1 GiB, 80 GiB.
const CAPACITIES: [Option<u64>; 4] = [None, Some(2 << 20), Some(1 << 30), Some(80 << 30)];

/// The first address of the segments.
const BASE: u64 = 0x7f00_0000_0000;

/// The fuzzer's bytes, read one at a time (zero once they run out).
struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.next() as usize % xs.len()]
    }
}

/// One trace entry.
fn entry(action: &str, addr: u64, size: u64, stream: u64, t: u64) -> Value {
    json!({
        "action": action, "addr": addr, "size": size, "stream": stream,
        "time_us": 1_732_950_000_000_000u64 + t,
        "frames": [{"filename": "/home/user/train.py", "line": 10 + t, "name": "step"}],
    })
}

/// One segment at `addr` of `total` bytes whose first block of `first` bytes is in `state`
/// (the rest, if any, inactive).
fn segment(addr: u64, total: u64, first: u64, state: &str, expandable: bool, stream: u64) -> Value {
    let first = first.min(total).div_ceil(512) * 512;
    let first = first.min(total);
    let mut blocks = vec![json!({
        "address": addr, "size": first, "requested_size": first, "state": state, "frames": [],
    })];
    if total > first {
        blocks.push(json!({
            "address": addr + first, "size": total - first, "requested_size": 0,
            "state": "inactive", "frames": [],
        }));
    }
    let active = if state == "inactive" { 0 } else { first };
    json!({
        "device": 0, "address": addr, "total_size": total,
        "allocated_size": if state == "active_allocated" { first } else { 0 },
        "active_size": active, "requested_size": active, "stream": stream,
        "segment_type": if total <= 2 << 20 { "small" } else { "large" },
        "segment_pool_id": [0, 0], "is_expandable": expandable, "frames": [], "blocks": blocks,
    })
}

/// The snapshot of issue 53: one small segment holding one small allocation, then an `oom`
/// of `oom` bytes with nothing free, under `conf` (`PYTORCH_CUDA_ALLOC_CONF`).
pub fn small_oom(oom: u64, conf: &str) -> Value {
    let mut o = entry("oom", 0, oom, 0, 3);
    o["device_free"] = json!(0);
    json!({
        "segments": [segment(BASE, 2 << 20, 512, "active_allocated", false, 0)],
        "device_traces": [[
            entry("segment_alloc", BASE, 2 << 20, 0, 1),
            entry("alloc", BASE, 512, 0, 2),
            o,
        ]],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": conf,
            "expandable_segments": conf.contains("expandable_segments:True"),
        },
    })
}

/// The snapshot the fuzzer's bytes steer, as JSON text, and the capacity to give.
pub fn snapshot_json(data: &[u8]) -> (Vec<u8>, Option<u64>) {
    let mut b = Bytes { data, at: 0 };
    let conf = b.pick(&CONFS);
    let capacity = b.pick(&CAPACITIES);
    let mut segments = Vec::new();
    let mut trace = Vec::new();
    let mut t = 0u64;
    for i in 0..b.next() % 3 {
        let addr = BASE + (u64::from(i) << 32);
        let total = b.pick(&SEGMENTS);
        let flags = b.next();
        let state = ["active_allocated", "active_pending_free", "inactive"][flags as usize % 3];
        let stream = if flags & 4 == 0 { 0 } else { 7 };
        let first = b.pick(&SIZES);
        segments.push(segment(addr, total, first, state, flags & 8 != 0, stream));
        let act = if flags & 8 != 0 {
            "segment_map"
        } else {
            "segment_alloc"
        };
        trace.push(entry(act, addr, total, stream, t));
        t += 1;
    }
    // Allocations go at fresh addresses far from the segments (what the model tolerates: the
    // trace's own addresses only hint its placement).
    let mut cursor = BASE + (8 << 32);
    let mut live: Vec<(u64, u64)> = Vec::new();
    for _ in 0..b.next() % 16 {
        let op = b.next();
        let stream = if op & 0x80 == 0 { 0 } else { 7 };
        let size = b.pick(&SIZES);
        match op % 6 {
            0 | 1 => {
                trace.push(entry("alloc", cursor, size, stream, t));
                live.push((cursor, size));
                cursor += size.div_ceil(512) * 512;
            }
            2 if !live.is_empty() => {
                let (a, s) = live.remove(op as usize / 6 % live.len());
                trace.push(entry("free_requested", a, s, stream, t));
                trace.push(entry("free_completed", a, s, stream, t));
            }
            3 => trace.push(entry("segment_free", cursor, size, stream, t)),
            4 => trace.push(entry("segment_unmap", cursor, size, stream, t)),
            _ => {
                let mut o = entry("oom", 0, size, stream, t);
                o["device_free"] = json!(b.pick(&SIZES) >> (b.next() % 64));
                trace.push(o);
            }
        }
        t += 1;
    }
    let mut o = entry("oom", 0, b.pick(&SIZES), 0, t);
    o["device_free"] = json!(0);
    trace.push(o);
    let doc = json!({
        "segments": segments,
        "device_traces": [trace],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": conf,
            "expandable_segments": conf.contains("expandable_segments:True"),
        },
    });
    (serde_json::to_vec(&doc).expect("JSON"), capacity)
}

/// What [`exercise`] reached (an analysis may refuse a snapshot, which is not a failure).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reached {
    /// The snapshot built.
    pub built: bool,
    /// OOMs `oom` found, with `fit` attached.
    pub ooms: usize,
    /// `fit` reports made (of six moments).
    pub fits: usize,
    /// `whatif --suggest` ran.
    pub whatif: bool,
    /// The report page was written.
    pub page: bool,
}

/// Builds the snapshot the bytes steer and runs it through every path.
pub fn run(data: &[u8]) -> Reached {
    let (json, capacity) = snapshot_json(data);
    let pickle = memlens::input::json_to_pickle(&json).expect("the harness writes JSON");
    let opts = BuildOptions {
        threads: 1,
        ..Default::default()
    };
    match build(&pickle, opts) {
        Ok(snap) => exercise(&snap, capacity),
        Err(_) => Reached::default(),
    }
}

/// `oom`, `fit`, `whatif --suggest` and `report` on `snap`; panics when a result does not
/// serialize.
pub fn exercise(snap: &Snapshot, capacity: Option<u64>) -> Reached {
    let replays = memlens::replay::replay(snap);
    let source = || capacity.map(|c| (c, "--capacity".to_string()));
    let mut reached = Reached {
        built: true,
        ..Reached::default()
    };
    let oom_opts = OomOptions {
        capacity_bytes: capacity,
        capacity_source: source().map(|c| c.1),
        ..Default::default()
    };
    if let Ok(mut report) = compose_oom::run(snap, &replays, &oom_opts) {
        if compose_oom::attach_fit(snap, &replays, &mut report, source()).is_ok() {
            reached.ooms = report.ooms.len();
            serde_json::to_value(&report).expect("oom serializes");
        }
    }
    let moments = [
        None,
        Some(MomentSpec::Oom(1)),
        Some(MomentSpec::Oom(2)),
        Some(MomentSpec::Peak),
        Some(MomentSpec::Start),
        Some(MomentSpec::End),
    ];
    for at in moments {
        let opts = FitOptions {
            at,
            capacity_bytes: capacity,
            capacity_source: source().map(|c| c.1),
        };
        if let Ok(r) = fit::run(snap, &replays, &opts) {
            reached.fits += 1;
            serde_json::to_value(&r).expect("fit serializes");
        }
    }
    let opts = WhatifOptions {
        scenarios: vec![
            "expandable_segments:True".into(),
            "max_split_size_mb:20".into(),
        ],
        suggest: true,
        capacity: source(),
        only_device: None,
    };
    if let Ok(r) = whatif::run(snap, &replays, &opts) {
        reached.whatif = true;
        serde_json::to_value(&r).expect("whatif serializes");
    }
    if let Ok(report) = page::run(snap, &replays, &PageOptions::default()) {
        let mut out = Vec::new();
        memlens::render::html::write(&mut out, "oom.pickle", &report).expect("page in memory");
        reached.page = true;
    }
    reached
}
