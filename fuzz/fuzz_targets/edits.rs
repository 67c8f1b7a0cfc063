//! The structure-aware edits shared by `mutate_snapshot` and `parallel_agrees`: the fuzzer's
//! bytes pick a committed sample and steer opcode-level edits of it, so mutations land inside
//! valid pickles.

/// Opcodes worth substituting: containers, ints, memo operations and stops.
const OPS: &[u8] = b"(.0]}e)uas\x85\x86\x87\x88\x89\x8a\x94hjqrKMJNX\x8c\x95";

/// `data[0]` picks a seed; each following 4-byte group is one edit: kind, position (2 bytes,
/// scaled to the buffer), argument. `None` when the input is too short or the buffer empties.
pub fn apply(seeds: &[&[u8]], data: &[u8]) -> Option<Vec<u8>> {
    let (&pick, edits) = data.split_first()?;
    if edits.is_empty() {
        return None;
    }
    let mut buf = seeds[pick as usize % seeds.len()].to_vec();
    for edit in edits.chunks_exact(4) {
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
            return None;
        }
    }
    Some(buf)
}
