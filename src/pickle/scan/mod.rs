//! Pass 1 of the parallel decoder: a walk over the opcodes that keeps byte offsets only.
//!
//! It simulates the pickle stack without decoding values and produces a [`Plan`]: the byte
//! ranges ("chunks") of consecutive elements of the big lists (`segments`, or the top-level
//! list, and each `device_traces[d]`), and, for every memoized object that is referenced again,
//! where its definition lies, so a worker can decode it on its own. Lists are keyed on their
//! place in the top-level dict, not on batch sizes; implicit (`MEMOIZE`) and explicit
//! (`BINPUT`) memo ids are both handled. Whenever the file does something the plan cannot
//! express (protocol 0/1 text opcodes, `DUP`, a memo id stored twice, a reference to an
//! object still being filled, anything malformed), [`scan`] returns `None` and the caller uses
//! the sequential decoder, which is the reference for every odd input.

mod defs;
mod plan;
mod scanner;
mod skim;
mod walk;

pub use defs::{Defs, MemoDef};
pub use plan::{Chunk, Plan, Target};
use scanner::scan_into_with;
pub use scanner::{More, WINDOW};

/// Runs pass 1 over `buf` and returns the whole plan. `chunk_bytes` is the target size of a
/// chunk. `None`: the layout is not one the parallel path handles (use the sequential decoder).
pub fn scan(buf: &[u8], chunk_bytes: usize) -> Option<Plan> {
    scan_with(buf, chunk_bytes, true)
}

/// [`scan`], with or without the trace entry walk of [`Scanner::skim_entry`].
fn scan_with(buf: &[u8], chunk_bytes: usize, skim: bool) -> Option<Plan> {
    let defs = Defs::for_input(buf.len())?;
    let mut chunks = Vec::new();
    scan_into_with(buf, None, chunk_bytes, &defs, &mut |c| chunks.push(c), skim)?;
    Some(Plan { chunks, defs })
}

/// Runs pass 1, filling `defs` and handing each chunk to `emit` as soon as it is complete
/// (every memo definition before its end is then recorded in `defs`). With `more`, `buf` is
/// the part of the input there so far and pass 1 asks for the rest as it goes.
pub fn scan_into<'b>(
    buf: &'b [u8],
    more: Option<More<'b>>,
    chunk_bytes: usize,
    defs: &Defs,
    emit: &mut dyn FnMut(Chunk),
) -> Option<()> {
    scan_into_with(buf, more, chunk_bytes, defs, emit, true)
}

#[cfg(test)]
mod tests {
    use super::defs::{LEN_MAX, LEN_SHIFT, REF_BIT};
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn plans_a_small_trace() {
        // {"device_traces": [[{"a": 1}, {"a": 2}, {"a": 3}]]} in protocol 4.
        let body: &[u8] = b"\x80\x04}\x94\x8c\x0ddevice_traces\x94]\x94]\x94(}\x94\x8c\x01a\x94K\x01s}\x94h\x05K\x02s}\x94h\x05K\x03seas.";
        let plan = scan(body, 1).expect("planned");
        assert_eq!(plan.chunks.len(), 3);
        assert!(plan
            .chunks
            .iter()
            .all(|c| c.target == Target::Trace && c.items == 1));
        assert_eq!(plan.chunks[0].end, plan.chunks[1].start);
        assert_eq!(plan.defs.len(), 8);
        let d = plan.defs.get(5).unwrap();
        assert_eq!(
            &body[d.start as usize..(d.start + d.len) as usize],
            b"\x8c\x01a\x94"
        );
        let plan = scan(body, 1 << 20).unwrap();
        assert_eq!(plan.chunks.len(), 1);
        assert_eq!(plan.chunks[0].items, 3);
        assert!(plan.chunks[0].mark_open);
    }

    /// Both plans of `buf`, with and without the trace entry walk, must be identical.
    fn assert_skim_agrees(name: &str, buf: &[u8]) {
        for chunk_bytes in [1 << 12, 8 << 20] {
            let with = scan_with(buf, chunk_bytes, true);
            let without = scan_with(buf, chunk_bytes, false);
            let (with, without) = match (with, without) {
                (Some(a), Some(b)) => (a, b),
                (None, None) => return,
                (a, b) => panic!(
                    "{name}: planned with skim {}, without {}",
                    a.is_some(),
                    b.is_some()
                ),
            };
            assert_eq!(with.defs.len(), without.defs.len(), "{name}: memo count");
            for i in 0..with.defs.len() {
                let (a, b) = (
                    with.defs.table[i].load(Relaxed),
                    without.defs.table[i].load(Relaxed),
                );
                // Reference marks matter only on entries still open when referenced; the
                // walk skips marking complete ones that the opcode path marks.
                if (a ^ b) == REF_BIT {
                    assert!(a >> LEN_SHIFT & LEN_MAX != 0, "{name}: memo entry {i} open");
                    continue;
                }
                assert_eq!(a, b, "{name}: memo entry {i}: {a:#x} vs {b:#x}");
            }
            let key = |c: &Chunk| {
                (
                    c.start,
                    c.end,
                    c.memo_base,
                    c.memo_end,
                    c.items,
                    c.mark_open,
                )
            };
            let a: Vec<_> = with.chunks.iter().map(key).collect();
            let b: Vec<_> = without.chunks.iter().map(key).collect();
            assert_eq!(a, b, "{name}: chunks");
        }
    }

    #[test]
    fn skimmed_trace_entries_plan_like_the_opcode_walk() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut dirs = vec![
            root.join("samples"),
            root.join("samples/ranks"),
            root.join("samples/layouts"),
        ];
        dirs.push(root.join("../shared/samples/real"));
        let mut seen = 0;
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            for path in paths {
                let Ok(input) = crate::input::read(&path) else {
                    continue;
                };
                if scan_with(input.bytes(), 1 << 20, false).is_none() {
                    continue;
                }
                assert_skim_agrees(&path.display().to_string(), input.bytes());
                seen += 1;
            }
        }
        assert!(seen >= 5, "only {seen} plannable samples found");
    }

    #[test]
    fn skim_handles_frames_refs_and_memoized_values() {
        // {"device_traces": [[e1, .., e5]]}: e1 defines strings and a frames list holding a
        // new frame dict (left to the opcode walk), e2 refers to them, e3 has an empty frames
        // list and a FRAME opcode, e4 an APPEND (left to the walk), e5 a shared frames list.
        let body: &[u8] = b"\x80\x04\x7d\x94\x8c\x0d\x64\x65\x76\x69\x63\x65\x5f\x74\x72\x61\x63\x65\x73\x94\x5d\x94\x5d\x94\x28\x7d\x94\x28\x8c\x06\x61\x63\x74\x69\x6f\x6e\x94\x8c\x05\x61\x6c\x6c\x6f\x63\x94\x8c\x06\x66\x72\x61\x6d\x65\x73\x94\x5d\x94\x28\x7d\x94\x8c\x01\x61\x94\x4b\x01\x73\x68\x09\x65\x75\x7d\x94\x28\x68\x05\x68\x06\x68\x07\x5d\x94\x28\x68\x09\x68\x09\x65\x75\x7d\x94\x28\x68\x05\x8c\x01\x78\x94\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x04\x73\x69\x7a\x65\x94\x4b\x05\x68\x07\x5d\x94\x75\x7d\x94\x28\x68\x05\x68\x06\x68\x07\x5d\x94\x68\x09\x61\x75\x7d\x94\x28\x68\x05\x68\x06\x68\x07\x68\x12\x75\x65\x61\x73\x2e";
        assert_skim_agrees("inline", body);
        let plan = scan_with(body, 1, true).expect("planned");
        assert_eq!(plan.chunks.len(), 5);
        // e2's frames list (memo 12) is complete and spans `] MEMOIZE ( h h e`.
        let d = plan.defs.get(12).expect("defined");
        assert_eq!((d.start, d.len), (79, 8));
    }

    #[test]
    fn refuses_what_it_cannot_plan() {
        assert!(scan(b"(lp0\nI3\na.", 1).is_none());
        assert!(scan(b"\x80\x04]\x94K\x012a.", 1).is_none());
        assert!(scan(b"\x80\x04K", 1).is_none());
        assert!(scan(b"", 1).is_none());
    }
}
