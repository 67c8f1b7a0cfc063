//! Structure-aware: the fuzzer's bytes steer opcode-level edits of real-layout snapshots
//! (the committed samples), so mutations land inside valid pickles — a changed integer, a
//! swapped opcode, a duplicated or dropped element — and reach the model builder, the replay
//! and every analysis instead of dying in the first bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlens::model::{build, BuildOptions};

const SEEDS: [&[u8]; 6] = [
    include_bytes!("../../samples/train_small.pickle"),
    include_bytes!("../../samples/cpp_proto2.pickle"),
    include_bytes!("../../samples/legacy_2_0.pickle"),
    include_bytes!("../../samples/expandable_multi.pickle"),
    include_bytes!("../../samples/wrapped_ring.pickle"),
    include_bytes!("../../samples/retained_graph.pickle"),
];

/// Opcodes worth substituting: containers, ints, memo operations and stops.
const OPS: &[u8] = b"(.0]}e)uas\x85\x86\x87\x88\x89\x8a\x94hjqrKMJNX\x8c\x95";

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let mut buf = SEEDS[data[0] as usize % SEEDS.len()].to_vec();
    // Each 4-byte group of the input is one edit: kind, position (2 bytes), argument.
    for edit in data[1..].chunks_exact(4) {
        let pos = (u16::from_le_bytes([edit[1], edit[2]]) as usize * buf.len()) >> 16;
        let arg = edit[3];
        match edit[0] % 6 {
            0 => buf[pos] = arg,
            1 => buf[pos] = OPS[arg as usize % OPS.len()],
            2 => {
                let n = (arg as usize % 64).min(buf.len() - pos);
                buf.drain(pos..pos + n);
            }
            3 => {
                let n = (arg as usize % 64).min(buf.len() - pos);
                let chunk = buf[pos..pos + n].to_vec();
                buf.splice(pos..pos, chunk);
            }
            4 => buf.truncate(pos.max(2)),
            _ => buf[pos] ^= 1 << (arg % 8),
        }
        if buf.len() < 2 {
            return;
        }
    }
    for salvage in [false, true] {
        if let Ok(snap) = build(&buf, BuildOptions { salvage, threads: 1, ..Default::default() }) {
            let replays = memlens::replay::replay(&snap);
            let _ = memlens::analyze::summary::run(&snap);
            let _ = memlens::analyze::top::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::frag::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::leaks::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::categories::run(&snap, &replays, &Default::default());
            let _ = memlens::analyze::oom::run(&snap, &replays, &Default::default());
        }
    }
});
