//! The structure-aware edits shared by `mutate_snapshot` and `parallel_agrees`: the fuzzer's
//! bytes pick a committed sample and steer opcode-level edits of it, so mutations land inside
//! valid pickles.

/// Opcodes worth substituting: containers, ints, memo operations and stops.
const OPS: &[u8] = b"(.0]}e)uas\x85\x86\x87\x88\x89\x8a\x94hjqrKMJNX\x8c\x95";

/// Sizes worth writing over an integer: around the 2^60 bound of `model::bounds` (half of
/// it, so that two add up past it), around 2^63 and 2^64 (where an `i64` or a `u64` sum
/// wraps), and the largest values a 64-bit field holds.
const BIG: [u64; 16] = [
    1 << 59,
    (1 << 59) + 512,
    (1 << 60) - 1,
    1 << 60,
    (1 << 60) + 1,
    1 << 61,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    (1 << 63) + 512,
    u64::MAX - 511,
    u64::MAX - 1,
    u64::MAX,
    (1 << 60) / 3,
    (1 << 32) + 1,
    1 << 40,
];

/// Integer opcodes whose argument the big-integer edit replaces: BININT1, BININT2, BININT,
/// LONG1.
const INTS: &[u8] = b"KMJ\x8a";

/// Replaces the first integer opcode at or after `pos` (and its argument) with a LONG1 of
/// `value`: 9 bytes, so that values past `i64::MAX` read as positive. Nothing when no integer
/// opcode follows.
fn write_big(buf: &mut Vec<u8>, pos: usize, value: u64) {
    let Some(at) = buf[pos..]
        .iter()
        .position(|b| INTS.contains(b))
        .map(|i| pos + i)
    else {
        return;
    };
    let arg = match buf[at] {
        b'K' => 1,
        b'M' => 2,
        b'J' => 4,
        _ => 1 + buf.get(at + 1).copied().unwrap_or(0) as usize,
    };
    let end = (at + 1 + arg).min(buf.len());
    let mut long = vec![0x8a, 9];
    long.extend_from_slice(&value.to_le_bytes());
    long.push(0);
    buf.splice(at..end, long);
}

/// `data[0]` picks a seed; each following 4-byte group is one edit: kind, position (2 bytes,
/// scaled to the buffer), argument (for the big-integer edit: which of [`BIG`], and in its
/// top 4 bits a multiple of 512 to subtract from it). `None` when the input is too short or the buffer empties.
pub fn apply(seeds: &[&[u8]], data: &[u8]) -> Option<Vec<u8>> {
    let (&pick, edits) = data.split_first()?;
    if edits.is_empty() {
        return None;
    }
    let mut buf = seeds[pick as usize % seeds.len()].to_vec();
    for edit in edits.chunks_exact(4) {
        let pos = (u16::from_le_bytes([edit[1], edit[2]]) as usize * buf.len()) >> 16;
        let arg = edit[3];
        match edit[0] % 7 {
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
            5 => buf[pos] ^= 1 << (arg % 8),
            _ => {
                let value = BIG[arg as usize % BIG.len()].saturating_sub((arg as u64 >> 4) * 512);
                write_big(&mut buf, pos, value);
            }
        }
        if buf.len() < 2 {
            return None;
        }
    }
    Some(buf)
}
