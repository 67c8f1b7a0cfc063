//! Corrupted inputs: byte flips at 200 positions of every sample through the binary (exit 0 or
//! 2 only, never a panic, a signal or a hang), and many more mutations through the library.

mod common;
use common::*;
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
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            // None here means killed by a signal.
            return status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("memlens {args:?} hung for {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
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
    for s in samples()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pickle"))
    {
        let bytes = std::fs::read(&s).unwrap();
        for _ in 0..300 {
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
            if let Ok(snap) = memlens::model::build(&b, Default::default()) {
                // Whatever parsed must also analyze without panicking.
                let replays = memlens::replay::replay(&snap);
                let _ = memlens::analyze::summary::run(&snap);
                let _ = memlens::analyze::top::run(&snap, &replays, &Default::default());
                let _ = memlens::analyze::frag::run(&snap, &replays, &Default::default());
                let _ = memlens::analyze::leaks::run(&snap, &replays, &Default::default());
            }
        }
    }
}
