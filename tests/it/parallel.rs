//! The parallel decoder gives the same snapshot as the sequential one (the reference) on every
//! sample, GPU capture (samples/captured) and real file: same reports, and the same content
//! once interned ids are replaced by what they name. Tiny chunks put chunk boundaries
//! everywhere, mid-batch included.

use crate::common;
use common::*;
use memlens::model::{self, BuildOptions, Snapshot, Strategy};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

fn build(bytes: &[u8], strategy: Strategy, threads: usize, chunk_bytes: usize) -> Snapshot {
    build_split(bytes, strategy, threads, chunk_bytes, 1)
}

/// [`build`] with pass 1 split into `regions` regions (as small as the file allows).
fn build_split(
    bytes: &[u8],
    strategy: Strategy,
    threads: usize,
    chunk_bytes: usize,
    regions: usize,
) -> Snapshot {
    model::build(
        bytes,
        BuildOptions {
            strategy,
            threads,
            chunk_bytes,
            split_regions: regions,
            split_bytes: 1,
            ..Default::default()
        },
    )
    .unwrap()
}

fn report(s: &Snapshot) -> String {
    serde_json::to_string(&memlens::analyze::summary::run(s)).unwrap()
}

fn inputs() -> Vec<PathBuf> {
    let mut v = samples();
    v.extend(layouts());
    v.extend(captured());
    v.extend(require_shared().unwrap_or_default());
    v
}

fn check(path: &Path) {
    let input = memlens::input::read(path).unwrap();
    let bytes = input.bytes();
    let reference = build(bytes, Strategy::Sequential, 1, 0);
    let (want_report, want) = (report(&reference), canonical(&reference));
    // Pass 1 split into regions (one per thread) on two of the settings.
    for (threads, chunk, regions) in [(1, 1, 1), (3, 1, 3), (2, 4096, 2), (2, 0, 1)] {
        let got = build_split(bytes, Strategy::Parallel, threads, chunk, regions);
        let what = format!(
            "{} threads={threads} chunk={chunk} regions={regions}",
            path.display()
        );
        assert_eq!(report(&got), want_report, "{what}");
        let got = canonical(&got);
        assert_eq!(got.len(), want.len(), "{what}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{what}");
        }
    }
}

/// Every input of shard `k` of 2: inputs by size, dealt alternately, so that the harness
/// runs the two halves side by side with about the same bytes each.
fn check_shard(k: usize) {
    let mut all = inputs();
    assert!(all.len() > 20, "{} inputs", all.len());
    all.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).unwrap().len()));
    for p in all.iter().skip(k).step_by(2) {
        check(p);
    }
}

#[test]
fn parallel_equals_sequential_on_every_sample_and_real_file_first_half() {
    check_shard(0);
}

#[test]
fn parallel_equals_sequential_on_every_sample_and_real_file_second_half() {
    check_shard(1);
}

#[test]
fn the_parallel_plan_covers_the_common_layouts() {
    // Protocol 4 (Python path) and protocol 2 (C++ path, BINPUT ids) are planned, not
    // silently handed to the sequential decoder.
    for name in [
        "train_small.pickle",
        "cpp_proto2.pickle",
        "expandable_multi.pickle",
    ] {
        let bytes = std::fs::read(sample(name)).unwrap();
        let plan = memlens::pickle::scan::scan(&bytes, 1).expect(name);
        assert!(plan.chunks.len() > 1, "{name}");
    }
}

#[test]
fn broken_inputs_fall_back_to_the_sequential_errors() {
    let bytes = std::fs::read(sample("train_small.pickle")).unwrap();
    for cut in [bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
        let opts = |strategy| BuildOptions {
            strategy,
            threads: 2,
            chunk_bytes: 64,
            ..Default::default()
        };
        let a = model::build(&bytes[..cut], opts(Strategy::Sequential)).unwrap_err();
        let b = model::build(&bytes[..cut], opts(Strategy::Parallel)).unwrap_err();
        assert_eq!(a, b);
    }
}

#[test]
fn the_parallel_plan_covers_the_real_files() {
    let Some(real) = require_shared() else { return };
    let mut unplanned = Vec::new();
    for p in &real {
        let bytes = std::fs::read(p).unwrap();
        if memlens::pickle::scan::scan(&bytes, 1).is_none() {
            unplanned.push(p.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    eprintln!("not planned: {unplanned:?}");
    assert!(unplanned.is_empty(), "{unplanned:?}");
}

#[test]
fn a_definition_decoded_twice_never_adds_records() {
    // Found by fuzz/parallel_agrees: the last annotation's `time_us` key turned into a
    // reference to a segment's blocks list (memo 117). Decoding that list on demand, out of
    // file order, converted its blocks a second time; the parallel path must refuse that and
    // fall back, so both paths give the same 34 blocks.
    let mut bytes = std::fs::read(sample("train_small.pickle")).unwrap();
    let at = bytes
        .windows(3)
        .rposition(|w| w == b"h\xa4\x8a")
        .expect("BINGET 164 (time_us) before a LONG1");
    bytes[at + 1] = 117;
    let reference = build(&bytes, Strategy::Sequential, 1, 0);
    assert_eq!(reference.blocks.len(), 34);
    let want = canonical(&reference);
    for chunk in [64, 4096] {
        let got = build(&bytes, Strategy::Parallel, 2, chunk);
        assert_eq!(got.blocks.len(), 34, "chunk={chunk}");
        assert_eq!(canonical(&got), want, "chunk={chunk}");
    }
}

/// `bytes`: an allocator setting that names, through the memo, an object the sequential
/// decoder converted inside a chunk. Both paths must show it converted (the parallel one
/// by refusing its on-demand copy and falling back).
fn setting_sees_the_converted_object(bytes: &[u8]) {
    let reference = build(bytes, Strategy::Sequential, 1, 0);
    let settings = format!("{:?}", reference.allocator_settings);
    assert!(
        settings.contains("(\"PYTORCH_CUDA_ALLOC_CONF\", Other(\"converted object\"))"),
        "{settings}"
    );
    let want = canonical(&reference);
    for chunk in [64, 4096] {
        assert_eq!(
            canonical(&build(bytes, Strategy::Parallel, 2, chunk)),
            want,
            "chunk={chunk}"
        );
    }
}

#[test]
fn a_record_decoded_on_demand_is_refused() {
    // Found by fuzz/parallel_agrees: two flipped bits make an allocator setting a reference
    // to a trace entry defined inside a chunk. The sequential decoder sees the entry already
    // converted; decoded again on demand it would be a plain dict.
    let mut bytes = std::fs::read(sample("retained_graph.pickle")).unwrap();
    bytes[8828] ^= 1 << 1;
    bytes[40232] ^= 1 << 3;
    setting_sees_the_converted_object(&bytes);
}

#[test]
fn a_frames_list_decoded_on_demand_is_refused() {
    // Found by fuzz/parallel_agrees: one byte makes an allocator setting a reference to the
    // `frames` list of a trace entry inside a chunk (memo 17). The sequential decoder sees it
    // already converted to a stack; decoded again on demand it would be a plain list.
    let mut bytes = std::fs::read(sample("retained_graph.pickle")).unwrap();
    assert_eq!(bytes[40232], 248);
    bytes[40232] = 17;
    setting_sees_the_converted_object(&bytes);
}

/// Input that arrives a few KiB at a time from another thread, as a decompressing thread
/// delivers it; `cap` below the length makes it outgrow its reservation.
struct Trickle {
    bytes: Vec<u8>,
    cap: usize,
    avail: std::sync::Mutex<usize>,
    cv: std::sync::Condvar,
    /// Requests that had to wait for bytes, and requests for the whole input.
    waits: AtomicUsize,
    wholes: AtomicUsize,
    /// Set by the first request: the bytes start to arrive only once the decoder asks, so a
    /// small input cannot be all there before it starts (the test would then not see pass 1
    /// follow the input, whatever the scheduler did).
    asked: std::sync::atomic::AtomicBool,
}

impl Trickle {
    fn feed(&self) {
        while !self.asked.load(std::sync::atomic::Ordering::Acquire) {
            std::thread::yield_now();
        }
        let mut at = 0;
        while at < self.bytes.len() {
            at = (at + 4099).min(self.bytes.len());
            *self.avail.lock().unwrap() = at;
            self.cv.notify_all();
            std::thread::yield_now();
        }
    }
    fn wait(&self, want: usize) -> usize {
        let mut a = self.avail.lock().unwrap();
        self.asked.store(true, std::sync::atomic::Ordering::Release);
        if *a < want {
            self.waits.fetch_add(1, Relaxed);
        }
        while *a < want {
            a = self.cv.wait(a).unwrap();
        }
        *a
    }
}

impl model::Arriving for Trickle {
    fn upto(&self, n: usize) -> &[u8] {
        let a = self.wait(n.min(self.cap));
        &self.bytes[..a.min(self.cap)]
    }
    fn all(&self) -> &[u8] {
        self.wholes.fetch_add(1, Relaxed);
        self.wait(self.bytes.len());
        &self.bytes
    }
    fn capacity(&self) -> usize {
        self.cap
    }
}

#[test]
fn input_still_arriving_builds_what_the_whole_input_builds() {
    for path in inputs() {
        let input = memlens::input::read(&path).unwrap();
        let bytes = input.bytes();
        let reference = build(bytes, Strategy::Sequential, 1, 0);
        let (want_report, want) = (report(&reference), canonical(&reference));
        let len = bytes.len();
        // Whole reservations, then one the input outgrows (pass 1 cannot finish: the
        // sequential decoder takes the whole input).
        for (threads, chunk, cap) in [(2, 4096, len), (3, 1, len), (2, 0, len), (2, 4096, len / 2)]
        {
            let src = Trickle {
                bytes: bytes.to_vec(),
                cap,
                avail: std::sync::Mutex::new(0),
                cv: std::sync::Condvar::new(),
                waits: AtomicUsize::new(0),
                wholes: AtomicUsize::new(0),
                asked: std::sync::atomic::AtomicBool::new(false),
            };
            let got = std::thread::scope(|s| {
                s.spawn(|| src.feed());
                model::build_arriving(
                    &src,
                    BuildOptions {
                        strategy: Strategy::Parallel,
                        threads,
                        chunk_bytes: chunk,
                        ..Default::default()
                    },
                )
                .unwrap()
            });
            let what = format!(
                "{} threads={threads} chunk={chunk} cap={cap}",
                path.display()
            );
            assert_eq!(report(&got), want_report, "{what}");
            assert_eq!(canonical(&got), want, "{what}");
            let name = path.file_name().unwrap().to_str().unwrap();
            if ["train_small.pickle", "cpp_proto2.pickle"].contains(&name) {
                // Pass 1 followed the input as it came, and the plan held to the end
                // unless the input outgrew its reservation.
                assert!(src.waits.load(Relaxed) > 0, "{what}");
                assert_eq!(src.wholes.load(Relaxed), usize::from(cap < len), "{what}");
            }
        }
    }
}

#[test]
fn the_parallel_decoder_reports_progress_as_it_goes() {
    // Issue 19: with the parallel decoder (the default from two cores on) the progress bar
    // stayed at 0 B until the very end: pass 1, the workers and the merge reported nothing.
    for name in [
        "train_small.pickle",
        "expandable_multi.pickle",
        "cpp_proto2.pickle",
    ] {
        let bytes = std::fs::read(sample(name)).unwrap();
        let len = bytes.len() as u64;
        let mut seen = Vec::new();
        let mut progress = |p: u64| seen.push(p);
        model::build(
            &bytes,
            BuildOptions {
                strategy: Strategy::Parallel,
                threads: 2,
                chunk_bytes: 1024,
                progress: Some(&mut progress),
                ..Default::default()
            },
        )
        .unwrap();
        // How many reports fall before the end depends on how far the workers got while
        // pass 1 ran (scheduling); that progress is reported, moves forward only, and
        // reaches the end, does not.
        assert!(!seen.is_empty(), "{name}: no progress reported");
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{name}: {seen:?}");
        assert!(seen.iter().all(|&p| p > 0 && p <= len), "{name}: {seen:?}");
        assert!(
            *seen.last().unwrap() >= len * 9 / 10,
            "{name}: {seen:?} of {len}"
        );
    }
}
