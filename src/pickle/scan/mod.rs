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

mod align;
mod defs;
mod floor;
mod plan;
mod region;
mod scanner;
mod skim;
mod split;
mod walk;

pub use align::{refusal, step, Follow, Followed, Step};
use defs::START_MASK;
pub use defs::{Defs, MemoDef};
pub use floor::{walk as floor_walk, Floor};
pub use plan::{Chunk, Plan, Target};
use scanner::Scanner;
pub use scanner::{More, WINDOW};
pub use split::{SplitOptions, MIN_REGION_BYTES};
use std::sync::atomic::Ordering::Relaxed;

/// Runs pass 1 over `buf` and returns the whole plan. `chunk_bytes` is the target size of a
/// chunk. `None`: the layout is not one the parallel path handles (use the sequential decoder).
pub fn scan(buf: &[u8], chunk_bytes: usize) -> Option<Plan> {
    scan_with(buf, chunk_bytes, true)
}

/// [`scan`], with or without the trace entry walk of [`Scanner::skim_entry`].
fn scan_with(buf: &[u8], chunk_bytes: usize, skim: bool) -> Option<Plan> {
    let defs = Defs::for_input(buf.len())?;
    let mut chunks = Vec::new();
    scan_into_with(
        buf,
        None,
        chunk_bytes,
        &defs,
        &mut |c| chunks.push(c),
        skim,
        SplitOptions::default(),
    )?;
    Some(Plan {
        chunks,
        defs,
        regions_adopted: 0,
    })
}

/// Runs pass 1, filling `defs` and handing each chunk to `emit` as soon as it is complete
/// (every memo definition before its end is then recorded in `defs`). With `more`, `buf` is
/// the part of the input there so far and pass 1 asks for the rest as it goes. With `split`,
/// helper threads walk regions of the trace beside the calling thread (whole inputs only).
pub fn scan_into<'b>(
    buf: &'b [u8],
    more: Option<More<'b>>,
    chunk_bytes: usize,
    defs: &Defs,
    emit: &mut dyn FnMut(Chunk),
    split: SplitOptions,
) -> Option<()> {
    scan_into_with(buf, more, chunk_bytes, defs, emit, true, split).map(|_| ())
}

/// [`scan`] with a split pass 1 (tests compare its plan with the whole walk's).
pub fn scan_split(buf: &[u8], chunk_bytes: usize, split: SplitOptions) -> Option<Plan> {
    let defs = Defs::for_input(buf.len())?;
    let mut chunks = Vec::new();
    let regions_adopted = scan_into_with(
        buf,
        None,
        chunk_bytes,
        &defs,
        &mut |c| chunks.push(c),
        true,
        split,
    )?;
    Some(Plan {
        chunks,
        defs,
        regions_adopted,
    })
}

/// Pass 1: the calling thread's scanner, beside a split's helpers when `split` asks for them
/// (each region walked by [`region::walk_region`]); returns the regions it adopted.
pub(super) fn scan_into_with<'b>(
    buf: &'b [u8],
    more: Option<More<'b>>,
    chunk_bytes: usize,
    defs: &Defs,
    emit: &mut dyn FnMut(Chunk),
    skim: bool,
    split: SplitOptions,
) -> Option<usize> {
    let total = more.map_or(buf.len(), |(_, total)| total.max(buf.len()));
    if total as u64 > START_MASK {
        return None;
    }
    split::with_split(
        buf,
        more.is_none(),
        chunk_bytes,
        split,
        region::walk_region,
        |split| {
            let mut s = Scanner::new(buf, more, total, chunk_bytes, defs, emit, skim);
            s.split = split;
            s.run()?;
            defs.count.store(s.defined as u64, Relaxed);
            Some(s.adopted)
        },
    )
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

    /// Two plans' definition tables must be identical, word for word and as read back
    /// (lengths of 2 MiB and more, and memo bases, live apart).
    fn assert_defs_agree(name: &str, a: &Defs, b: &Defs) {
        assert_eq!(a.len(), b.len(), "{name}: memo count");
        for i in 0..a.len() {
            let (x, y) = (a.table[i].load(Relaxed), b.table[i].load(Relaxed));
            // Reference marks matter only on entries still open when referenced; the trace
            // entry walk and a region skip marking complete ones that the opcode path marks.
            if (x ^ y) == REF_BIT {
                assert!(x >> LEN_SHIFT & LEN_MAX != 0, "{name}: memo entry {i} open");
                continue;
            }
            assert_eq!(x, y, "{name}: memo entry {i}: {x:#x} vs {y:#x}");
            let def = |d: &Defs| d.get(i as u64).map(|d| (d.start, d.len, d.base));
            assert_eq!(def(a), def(b), "{name}: memo entry {i}");
        }
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
            assert_defs_agree(name, &with.defs, &without.defs);
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
            let Some(entries) = crate::test_ci::read_dir_or_skip(&dir) else {
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

    /// The plan of a split pass 1 must say what the whole walk's says: the same definitions
    /// (reference marks aside on complete entries, as above) and the same elements in chunks.
    fn assert_split_agrees(name: &str, buf: &[u8], regions: usize) -> usize {
        let whole = scan(buf, 1 << 12);
        let split = scan_split(
            buf,
            1 << 12,
            SplitOptions {
                regions,
                min_bytes: 1,
                timing: false,
            },
        );
        let (whole, split) = match (whole, split) {
            (Some(a), Some(b)) => (a, b),
            (None, None) => return 0,
            (a, b) => panic!(
                "{name}: planned whole {}, split {}",
                a.is_some(),
                b.is_some()
            ),
        };
        assert_defs_agree(name, &whole.defs, &split.defs);
        for target in [Target::Trace, Target::Segments] {
            let items = |p: &Plan| -> u64 {
                p.chunks
                    .iter()
                    .filter(|c| c.target == target)
                    .map(|c| c.items as u64)
                    .sum()
            };
            assert_eq!(items(&whole), items(&split), "{name}: {target:?} elements");
        }
        for pair in split.chunks.windows(2) {
            assert!(pair[0].end <= pair[1].start, "{name}: chunks overlap");
            assert!(
                pair[0].memo_end <= pair[1].memo_base,
                "{name}: chunk memo ranges"
            );
        }
        split.regions_adopted
    }

    #[test]
    fn a_split_pass_1_plans_like_the_whole_walk() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut paths = Vec::new();
        for dir in ["samples", "samples/layouts", "../shared/samples/real"] {
            let Some(entries) = crate::test_ci::read_dir_or_skip(&root.join(dir)) else {
                continue;
            };
            paths.extend(entries.flatten().map(|e| e.path()));
        }
        paths.sort();
        let (mut files, mut adopted) = (0, 0);
        for path in paths {
            let Ok(input) = crate::input::read(&path) else {
                continue;
            };
            let name = path.display().to_string();
            let mut any = 0;
            for regions in [2, 3, 7] {
                any += assert_split_agrees(&name, input.bytes(), regions);
            }
            files += (any > 0) as usize;
            adopted += any;
        }
        // Regions start at batch boundaries (every 1000 trace entries): the real files have
        // them, the generated samples mostly do not.
        assert!(
            files >= 5 && adopted >= 20,
            "split regions adopted in {files} files ({adopted} regions)"
        );
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
