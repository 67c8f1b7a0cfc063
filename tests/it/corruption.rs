//! Corrupted inputs: byte flips at 200 positions of every sample through the binary (exit 0 or
//! 2 only, never a panic, a signal or a hang), and many more mutations through the library:
//! each is refused with one line naming where, or builds a snapshot that holds together.

use crate::common;
use common::*;
use memlens::model::{BuildError, Snapshot};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn run_with_timeout(args: &[&std::ffi::OsStr], limit: Duration) -> Option<i32> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    // Polled from 50 µs, doubling up to 2 ms: most runs end in a few milliseconds, and a fixed
    // 2 ms sleep added about a millisecond to each of the byte-flip test's 20,800 runs.
    let mut pause = Duration::from_micros(50);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            // None here means killed by a signal.
            return status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("memlens {args:?} hung for {limit:?}");
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}

#[test]
fn byte_flips_through_the_binary_exit_0_or_2() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    for s in samples() {
        let bytes = std::fs::read(&s).unwrap();
        let path = dir.path().join(s.file_name().unwrap());
        for _ in 0..200 {
            let mut b = bytes.clone();
            let pos = rng.below(b.len());
            b[pos] ^= 1 << rng.below(8);
            std::fs::write(&path, &b).unwrap();
            for cmd in ["summary", "top"] {
                let code =
                    run_with_timeout(&[cmd.as_ref(), path.as_os_str()], Duration::from_secs(10));
                assert!(
                    matches!(code, Some(0) | Some(2)),
                    "{cmd} on {} flipped at byte {pos}: exit {code:?} (101 = panic, None = signal)",
                    s.display()
                );
            }
        }
    }
}

#[test]
fn library_survives_many_mutations() {
    let mut rng = Rng(0x0dd_ba11);
    let (mut ok, mut refused) = (0, 0);
    for s in samples()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pickle"))
    {
        let bytes = std::fs::read(&s).unwrap();
        for i in 0..300 {
            let mut b = bytes.clone();
            match rng.below(4) {
                0 => {
                    let p = rng.below(b.len());
                    b[p] = rng.next() as u8;
                }
                1 => {
                    let p = rng.below(b.len());
                    let n = rng.below(16).min(b.len() - p);
                    b.drain(p..p + n);
                }
                2 => {
                    let p = rng.below(b.len());
                    let n = rng.below(16);
                    let src = rng.below(b.len());
                    let chunk: Vec<u8> = b[src..(src + n).min(b.len())].to_vec();
                    b.splice(p..p, chunk);
                }
                _ => {
                    let p = rng.below(b.len());
                    b.truncate(p);
                }
            }
            let what = format!("{} mutation {i}", s.display());
            match memlens::model::build(&b, Default::default()) {
                Ok(snap) => {
                    ok += 1;
                    check_built(&snap, &b, &what);
                }
                Err(e) => {
                    refused += 1;
                    check_refusal(&e, &b, &what);
                }
            }
        }
    }
    // Both outcomes occur: the mutations neither all break the files nor all miss them.
    assert!(ok >= 100 && refused >= 100, "{ok} built, {refused} refused");
}

/// A refusal is one line naming where: the byte offset of the opcode (within the input) or
/// the key path of the value.
fn check_refusal(e: &BuildError, input: &[u8], what: &str) {
    let text = e.to_string();
    assert!(!text.is_empty() && !text.contains('\n'), "{what}: {text:?}");
    match e {
        BuildError::Decode(d) => {
            assert!(d.offset <= input.len() as u64, "{what}: {text}");
            assert!(!d.message.is_empty(), "{what}: {text}");
        }
        BuildError::Shape { path, message } => {
            assert!(!path.is_empty() && !message.is_empty(), "{what}: {text}");
        }
    }
}

/// What was built holds together: every range indexes its arrays, the devices partition
/// segments and events, each traced device's replay has one live figure per entry and its
/// peak is the largest,
/// and the analyses run.
fn check_built(snap: &Snapshot, input: &[u8], what: &str) {
    let (mut segs, mut events) = (0, 0);
    for d in &snap.devices {
        assert_eq!(d.segments.start, segs, "{what}: device {}", d.id);
        assert_eq!(d.trace.start, events, "{what}: device {}", d.id);
        (segs, events) = (d.segments.end, d.trace.end);
        assert!(
            snap.device_segments(d).iter().all(|s| s.device == d.id),
            "{what}"
        );
    }
    assert_eq!(segs, snap.segments.len(), "{what}");
    assert_eq!(events, snap.events.len(), "{what}");
    // The segments' block ranges are disjoint and inside the blocks (in file order: sorting
    // the segments leaves the blocks where they are). Not always all of them: a mutation can
    // leave blocks that no segment owns (cpp_proto2.pickle, mutation 253).
    let mut ranges: Vec<_> = snap.segments.iter().map(|s| s.blocks.clone()).collect();
    ranges.sort_by_key(|r| r.start);
    let mut blocks = 0;
    for r in ranges.iter().filter(|r| !r.is_empty()) {
        assert!(r.start >= blocks, "{what}: block ranges {ranges:?}");
        blocks = r.end;
    }
    assert!(blocks as usize <= snap.blocks.len(), "{what}: {ranges:?}");
    let replays = memlens::replay::replay(snap);
    // One replay per device with a trace.
    let traced: Vec<_> = snap
        .devices
        .iter()
        .filter(|d| !d.trace.is_empty())
        .collect();
    assert_eq!(replays.len(), traced.len(), "{what}");
    for (r, d) in replays.iter().zip(traced) {
        assert_eq!(r.device, d.id, "{what}");
        assert_eq!(r.live.len(), d.trace.len(), "{what}");
        let top = r
            .live
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(r.initial_bytes);
        assert_eq!(r.peak_bytes, top, "{what}");
        assert_eq!(r.live_at(r.peak), top, "{what}");
    }
    // Whatever parsed must also analyze without panicking.
    let summary = memlens::analyze::summary::run(snap);
    assert_eq!(summary.devices.len(), snap.devices.len(), "{what}");
    let _ = memlens::analyze::top::run(snap, &replays, &Default::default());
    let _ = memlens::analyze::frag::run(snap, &replays, &Default::default());
    let _ = memlens::analyze::leaks::run(snap, &replays, &Default::default());
    // The same input builds the same snapshot again.
    let again = memlens::model::build(input, Default::default()).unwrap();
    assert_eq!(canonical(&again), canonical(snap), "{what}");
}
