//! The sequential decoder's tests: the fast path against the general loop on every sample
//! and real file, hand-written pickles of the cases they could differ on, and the chunked
//! decoder against both.

use super::*;
use crate::model::{StreamId, TraceEvent};

/// The sequential decoder with or without the flat-dict fast path, and how many trace
/// entries took it.
fn build_seq(buf: &[u8], flat: bool) -> (Result<Snapshot, String>, u64) {
    let mut b = Builder::new(None);
    b.flat = flat;
    let decoded = pickle::decode(buf, &mut b, pickle::Limits::for_input(buf.len()));
    let taken = b.flat_taken;
    let snap = decoded
        .map_err(|e| e.to_string())
        .and_then(|(heap, top)| b.finish(&heap, top).map_err(|e| e.to_string()));
    (snap, taken)
}

/// Everything a snapshot says, with interned ids resolved (their order may differ).
use super::shared_canonical::canonical;

/// Asserts both paths agree (the fast one falling back to the general one on failure,
/// as [`build`] does, when `fallback`); returns how many entries took the fast path.
fn assert_flat_agrees(name: &str, buf: &[u8], fallback: bool) -> u64 {
    let ((fast, taken), (general, none)) = (build_seq(buf, true), build_seq(buf, false));
    assert_eq!(none, 0);
    let fast = match fast {
        Err(_) if fallback => build_seq(buf, false).0,
        other => other,
    };
    match (fast, general) {
        (Ok(a), Ok(b)) => {
            let (a, b) = (canonical(&a), canonical(&b));
            assert_eq!(a.len(), b.len(), "{name}");
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(x, y, "{name}");
            }
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "{name}"),
        (a, b) => panic!("{name}: fast path {:?}, general {:?}", a.err(), b.err()),
    }
    taken
}

#[test]
fn the_flat_fast_path_builds_what_the_general_path_builds() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dirs = [
        root.join("samples"),
        root.join("samples/ranks"),
        root.join("samples/layouts"),
        root.join("samples/captured"),
        root.join("../shared/samples/real"),
    ];
    let (mut seen, mut taken) = (0, 0);
    for dir in dirs {
        let Some(entries) = crate::test_ci::read_dir_or_skip(&dir) else {
            continue;
        };
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            if path.extension().and_then(|e| e.to_str()) == Some("json") {
                continue;
            }
            let Ok(input) = crate::input::read(&path) else {
                continue;
            };
            let buf = input.bytes();
            taken += assert_flat_agrees(&path.display().to_string(), buf, false);
            // Every 7th cut of the first 4 KiB of the trace: errors and truncations land
            // inside entries at many offsets.
            if seen < 3 {
                let start = buf
                    .windows(13)
                    .position(|w| w == b"device_traces")
                    .unwrap_or(0);
                for cut in (start..(start + 4096).min(buf.len())).step_by(7) {
                    let name = format!("{} cut at {cut}", path.display());
                    assert_flat_agrees(&name, &buf[..cut], true);
                }
            }
            seen += 1;
        }
    }
    assert!(seen >= 20, "only {seen} files found");
    assert!(taken > 10_000, "only {taken} entries took the fast path");
}

#[test]
fn inline_frame_dicts_seen_again_referring_to_themselves_or_rebinding_agree() {
    // Entries whose frames lists define frame dicts inline from memoized strings: the
    // second entry repeats the first one's frame (read from the fast path's cache), the
    // third's frame names itself as its line (declined: the general path reports it),
    // the fourth's frame is put again under the id of a string the fifth refers to.
    let mut p = Pickle::trace();
    let action = p.str("action");
    let alloc = p.str("alloc");
    let frames = p.str("frames");
    let (name, filename, line) = (p.str("name"), p.str("filename"), p.str("line"));
    p.op(b"}");
    p.memoize();
    p.op(b"(");
    let (f, g) = (p.str("f.py"), p.str("g"));
    p.op(b"u");
    let frame = |p: &mut Pickle, line_value: &[u8]| {
        p.op(b"}");
        p.memoize();
        p.op(b"(");
        p.get(name);
        p.get(g);
        p.get(filename);
        p.get(f);
        p.get(line);
        p.op(line_value);
        p.op(b"u");
    };
    for (i, line_value) in [&b"K\x07"[..], b"K\x07", b"h\xff", b"M\x01\x01"]
        .into_iter()
        .enumerate()
    {
        p.entry(&[action, alloc, frames]);
        p.op(b"]");
        p.memoize();
        p.op(b"(");
        let mut line_value = line_value.to_vec();
        if i == 2 {
            // A reference to the frame dict being read.
            line_value = vec![b'h', p.memo + 1];
        }
        frame(&mut p, &line_value);
        if i == 3 {
            p.put(g);
        }
        p.op(b"eu");
    }
    p.entry(&[action, alloc, frames]);
    p.op(b"]");
    p.memoize();
    p.op(b"(");
    p.get(g);
    p.op(b"eu");
    let body = p.finish();
    let taken = assert_flat_agrees("inline seen", &body, true);
    assert!(taken >= 2, "{taken} entries by the fast path");
    for cut in 0..body.len() {
        assert_flat_agrees(&format!("inline seen cut at {cut}"), &body[..cut], true);
    }
}

/// Seven trace entries whose frames lists repeat the same frame dict bytes (memo
/// references to `name`, `g`, `filename`, `f.py`, `line` and 7); with `rebind`, the fourth
/// entry first has a frame of its own that puts a new string, `h.py`, under `f.py`'s id.
fn repeated_frame_trace(rebind: bool) -> Vec<u8> {
    let (mut p, ids) = Pickle::strings_then_trace(&[
        "action", "alloc", "frames", "name", "filename", "line", "f.py", "g",
    ]);
    let [action, alloc, frames, name, filename, line, f, g] = ids[..] else {
        unreachable!()
    };
    let frame = |p: &mut Pickle, file: &dyn Fn(&mut Pickle)| {
        p.op(b"}");
        p.memoize();
        p.op(b"(");
        p.get(name);
        p.get(g);
        p.get(filename);
        file(p);
        p.get(line);
        p.op(b"K\x07");
        p.op(b"u");
    };
    for i in 0..7 {
        p.entry(&[action, alloc, frames]);
        p.op(b"]");
        p.memoize();
        p.op(b"(");
        if i == 3 && rebind {
            frame(&mut p, &|p| {
                p.op(b"\x8c\x04h.py");
                p.put(f);
            });
        }
        frame(&mut p, &|p| p.get(f));
        frame(&mut p, &|p| p.get(f));
        p.op(b"eu");
    }
    p.finish()
}

/// A trace whose first entry defines two frame dicts inline (f.py, g.py) and whose later
/// entries' frames lists are the same run of references to them. With `rebind`, the
/// fifth entry's own frame dict (h.py) is put at the first one's id.
fn repeated_list_trace(rebind: bool) -> Vec<u8> {
    let (mut p, ids) = Pickle::strings_then_trace(&[
        "action", "alloc", "frames", "name", "filename", "line", "f.py", "g.py", "h.py",
    ]);
    let [action, alloc, frames, name, filename, line, f, g, h] = ids[..] else {
        unreachable!()
    };
    let frame = |p: &mut Pickle, file: u8, put: Option<u8>| {
        p.frame_of_refs([name, filename, line], file, put)
    };
    p.entry(&[action, alloc, frames]);
    p.op(b"]");
    p.memoize();
    p.op(b"(");
    let (a, b) = (frame(&mut p, f, None), frame(&mut p, g, None));
    p.op(b"eu");
    for i in 0..7 {
        p.entry(&[action, alloc, frames]);
        p.op(b"]");
        p.memoize();
        p.op(b"(");
        if i == 3 && rebind {
            frame(&mut p, h, Some(a));
        } else {
            p.get(a);
        }
        p.get(b);
        p.op(b"eu");
    }
    p.finish()
}

#[test]
fn a_frames_list_known_by_its_bytes_follows_its_frames_when_rebound() {
    // The same run of references in every entry after the first: converted once, then
    // recognised by its bytes (the list cache). The fifth entry puts a new frame at the
    // first frame's id; from then on the same bytes name the new frame, and the cached
    // stack must not be used.
    let mut want = vec!["f.py,g.py"; 4];
    want.extend(["h.py,g.py"; 4]);
    assert_rebound_agrees("rebound list", &repeated_list_trace(true), 7, want);
}

#[test]
fn frames_lists_known_by_their_bytes_agree_across_chunks() {
    // Without the rebinding: the frame dicts are outside definitions of every chunk but
    // the first, each chunk's machine keeps a cache of its own.
    let body = repeated_list_trace(false);
    assert_chunks_agree(&body, &[16, 32, 64, 128], vec!["f.py,g.py"; 8]);
}

/// `body` decoded by the general path has these frame files per entry, and the two-pass
/// decoder with chunks of each size builds the same.
fn assert_chunks_agree(body: &[u8], chunk_sizes: &[usize], want: Vec<&str>) {
    let snapshot = build_seq(body, false).0.expect("decodes");
    assert_eq!(frame_files(&snapshot), want);
    let general = canonical(&snapshot);
    for &chunk in chunk_sizes {
        let parallel = parallel::try_build(body, None, &two_threads(chunk), &mut None, None)
            .unwrap_or_else(|| panic!("chunks of {chunk} bytes: no plan"));
        assert_eq!(canonical(&parallel), general, "chunks of {chunk} bytes");
    }
}

/// Two threads, `chunk_bytes` per chunk, pass 1 unsplit however small the file.
fn two_threads(chunk_bytes: usize) -> path::Parallel {
    path::Parallel {
        threads: 2,
        chunk_bytes,
        split: crate::pickle::scan::SplitOptions {
            regions: 1,
            min_bytes: 1,
            timing: false,
        },
        prescan: false,
        timing: false,
    }
}

/// A file that puts an id again: the fast path (`taken` entries at least) agrees with the
/// general path on it and on every cut of it, the frame files per entry are `want`, and
/// the two-pass decoder does not plan it, so a chunk's caches can rely on outside
/// definitions not changing.
fn assert_rebound_agrees(name: &str, body: &[u8], taken: u64, want: Vec<&str>) {
    let fast = assert_flat_agrees(name, body, true);
    assert!(fast >= taken, "{name}: {fast} entries by the fast path");
    let snapshot = build_seq(body, true).0.expect("decodes");
    assert_eq!(frame_files(&snapshot), want);
    for cut in 0..body.len() {
        assert_flat_agrees(&format!("{name} cut at {cut}"), &body[..cut], true);
    }
    assert!(parallel::try_build(body, None, &two_threads(64), &mut None, None).is_none());
}

#[test]
fn a_frames_list_naming_an_entry_defined_later_is_refused_by_both_decoders() {
    // No container but the big ones memoized while open (as the C++ pickler writes),
    // and a first trace entry whose frames list names the frame dict the second entry
    // defines; its `extra` value an integer, or an empty tuple (which pass 1's skim
    // leaves to the opcode walk). The sequential decoder refuses the reference; pass 1
    // must give the plan up, and the two-pass decoder must not read the later definition.
    for extra in [&b"K\x01"[..], b")"] {
        let body = forward_frame_reference(extra);
        assert!(crate::pickle::scan::scan(&body, 16).is_none());
        let sequential = build_seq(&body, false).0;
        assert!(
            sequential
                .as_ref()
                .is_err_and(|e| e.contains("memo reference 8")),
            "{:?}",
            sequential.map(|s| s.events.len())
        );
        for chunk in [16, 32, 64, 4096] {
            let parallel = parallel::try_build(&body, None, &two_threads(chunk), &mut None, None);
            assert!(
                parallel.is_none(),
                "chunks of {chunk} bytes: the two-pass decoder read {} entries",
                parallel.map_or(0, |s| s.events.len())
            );
        }
    }
}

#[test]
fn a_chunk_decodes_on_demand_only_entries_stored_before_the_point_it_reads() {
    // The plan of a valid file (the first entry defines frame y and names it, the second
    // defines frame x), used to decode the first entry's chunk of the same bytes with y's
    // reference turned into x's: pass 1's table knows where x is defined, but x comes
    // later in the file, so the chunk must refuse the reference as the sequential
    // decoder does, not decode x's definition.
    let (mut p, ids) = Pickle::strings_then_trace(&[
        "action", "alloc", "frames", "name", "filename", "line", "f.py", "g.py",
    ]);
    let [action, alloc, frames, name, filename, line, f, g] = ids[..] else {
        unreachable!()
    };
    let frame = |p: &mut Pickle, file: u8| p.frame_of_refs([name, filename, line], file, None);
    let entry_with_frames = |p: &mut Pickle, file: u8| {
        p.entry(&[action, alloc, frames]);
        p.op(b"]");
        p.memoize();
        p.op(b"(");
        let id = frame(p, file);
        p.get(id);
        let named_at = p.b.len() - 1;
        p.op(b"eu");
        (id, named_at)
    };
    let (_, named_at) = entry_with_frames(&mut p, f);
    let (x, _) = entry_with_frames(&mut p, g);
    let valid = p.finish();
    let plan = crate::pickle::scan::scan(&valid, 16).expect("planned");
    let first = plan
        .chunks
        .iter()
        .find(|c| (c.start..c.end).contains(&(named_at as u64)))
        .expect("a chunk holds the first entry");
    assert!(chunk::build_chunk(&valid, first, &plan.defs).is_some());
    let mut hostile = valid.clone();
    hostile[named_at] = x;
    assert!(chunk::build_chunk(&hostile, first, &plan.defs).is_none());
    assert!(build_seq(&hostile, false)
        .0
        .is_err_and(|e| e.contains(&format!("memo reference {x}"))));
}

/// Two trace entries, the first one's frames list naming (as memo id 8) the frame dict
/// the second defines; `extra` is the first one's `extra` value.
fn forward_frame_reference(extra: &[u8]) -> Vec<u8> {
    let mut p = Pickle::trace();
    p.op(b"}(");
    let (action, alloc) = (p.str("action"), p.str("alloc"));
    p.str("extra");
    p.op(extra);
    let frames = p.str("frames");
    p.op(b"](");
    p.get(8);
    p.get(8);
    p.op(b"eu}(");
    for key in [action, alloc, frames] {
        p.get(key);
    }
    p.op(b"](}");
    assert_eq!(p.memoize(), 8);
    p.op(b"(");
    for s in ["name", "g", "filename", "f.py", "line"] {
        p.str(s);
    }
    p.op(b"K\x07ueu");
    p.finish()
}

/// Each event's frames' file names, joined.
fn frame_files(snapshot: &Snapshot) -> Vec<String> {
    let files = |e: &crate::model::TraceEvent| {
        let stack = snapshot.stacks.get(e.stack).iter();
        let names = stack.map(|&f| snapshot.strings.get(snapshot.frames.get(f).filename));
        names.collect::<Vec<_>>().join(",")
    };
    snapshot.events.iter().map(files).collect()
}

#[test]
fn a_frame_dict_known_by_its_bytes_follows_its_strings_when_rebound() {
    // The same frame dict bytes in every entry: read through the memo, then recognised
    // by its bytes (the item cache). The fourth entry's own frame rebinds the id of the
    // file name the others refer to; from then on the same bytes name the new file, and
    // the cached answer must not be used.
    let mut want = vec!["f.py,f.py"; 3];
    want.extend(["h.py,h.py,h.py", "h.py,h.py", "h.py,h.py", "h.py,h.py"]);
    assert_rebound_agrees("rebound", &repeated_frame_trace(true), 6, want);
}

#[test]
fn frame_dicts_known_by_their_bytes_agree_across_chunks() {
    // Without the rebinding, the two-pass decoder with chunks cut everywhere (each
    // chunk's machine keeps a cache of its own; the strings are outside definitions
    // there) builds what the general path builds.
    let body = repeated_frame_trace(false);
    assert_chunks_agree(&body, &[32, 64, 128, 256], vec!["f.py,f.py"; 7]);
}

#[test]
fn every_benchmark_layout_takes_the_fast_path() {
    // Frame dicts written inline in an entry's frames list (fresh and memo layouts), a
    // shared list memoized after it is complete (the C++ pickler) and PyTorch's own memo
    // layout: nearly every trace entry is read by the fast path, and the model is the
    // general path's.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/layouts");
    for name in ["shared", "shared_p2", "fresh", "torch", "memo", "cpp"] {
        let path = dir.join(format!("{name}.pickle"));
        let bytes = std::fs::read(&path).expect("samples/layouts (gen_samples.py layouts)");
        let taken = assert_flat_agrees(name, &bytes, false);
        let events = build_seq(&bytes, true).0.expect("decodes").events.len() as u64;
        assert!(events >= 300, "{name}: {events} events");
        assert!(
            taken * 100 >= events * 95,
            "{name}: {taken} of {events} by the fast path"
        );
    }
}

/// A protocol-4 pickle written opcode by opcode, counting implicit memo ids.
struct Pickle {
    b: Vec<u8>,
    memo: u8,
}

impl Pickle {
    /// `{"device_traces": [[` with the entries' MARK open; [`Pickle::finish`] closes it.
    fn trace() -> Pickle {
        let mut p = Pickle::new();
        p.op(b"}");
        p.memoize();
        p.open_traces();
        p
    }
    /// `{"strings": [...], "device_traces": [[` with the entries' MARK open: `strings`
    /// memoized first, in a list under a key the model does not read; their memo ids.
    fn strings_then_trace(strings: &[&str]) -> (Pickle, Vec<u8>) {
        let mut p = Pickle::new();
        p.op(b"}");
        p.memoize();
        p.str("strings");
        p.op(b"]");
        p.memoize();
        p.op(b"(");
        let ids = strings.iter().map(|s| p.str(s)).collect();
        p.op(b"es");
        p.open_traces();
        (p, ids)
    }
    /// A frame dict of memo references, memoized: `keys` are the ids of `name`,
    /// `filename` and `line`, `file` the id of the string both name and file name are,
    /// the line 7; then put at `put`, if given. Returns its memo id.
    fn frame_of_refs(&mut self, keys: [u8; 3], file: u8, put: Option<u8>) -> u8 {
        let [name, filename, line] = keys;
        self.op(b"}");
        let id = self.memoize();
        self.op(b"(");
        for r in [name, file, filename, file, line] {
            self.get(r);
        }
        self.op(b"K\x07u");
        if let Some(at) = put {
            self.put(at);
        }
        id
    }
    /// The protocol header alone.
    fn new() -> Pickle {
        Pickle {
            b: vec![0x80, 4],
            memo: 0,
        }
    }
    /// The key `device_traces` and `[[` with the entries' MARK open, inside an open dict.
    fn open_traces(&mut self) {
        self.str("device_traces");
        self.op(b"]");
        self.memoize();
        self.op(b"]");
        self.memoize();
        self.op(b"(");
    }
    /// Closes what [`Pickle::trace`] opened and returns the pickle.
    fn finish(mut self) -> Vec<u8> {
        self.op(b"eas.");
        self.b
    }
    fn memoize(&mut self) -> u8 {
        self.b.push(0x94);
        self.memo += 1;
        self.memo - 1
    }
    fn str(&mut self, s: &str) -> u8 {
        self.b.extend([0x8c, s.len() as u8]);
        self.b.extend(s.as_bytes());
        self.memoize()
    }
    fn get(&mut self, i: u8) {
        self.b.extend([b'h', i]);
    }
    fn put(&mut self, i: u8) {
        self.b.extend([b'q', i]);
    }
    fn op(&mut self, bytes: &[u8]) {
        self.b.extend_from_slice(bytes);
    }
    fn new_dict(&mut self) {
        self.op(b"}");
        self.memoize();
        self.op(b"(");
    }
    /// A new dict whose first items are references to the memo ids `refs`.
    fn entry(&mut self, refs: &[u8]) {
        self.new_dict();
        for &r in refs {
            self.get(r);
        }
    }
}

#[test]
fn flat_entries_with_inline_frames_shared_lists_and_appends_agree() {
    let mut p = Pickle::trace();
    // e1: a frame dict defined inline, in a one-item list (general path).
    p.new_dict();
    let action = p.str("action");
    let alloc = p.str("alloc");
    let frames = p.str("frames");
    p.op(b"]");
    p.memoize();
    p.op(b"}");
    let frame = p.memoize();
    p.op(b"(");
    p.str("filename");
    p.str("f.py");
    p.str("name");
    p.str("g");
    p.str("line");
    p.op(b"K\x07uau");
    // e2: references, an 8-byte LONG1, a new string, a frames list of references.
    p.entry(&[action, alloc]);
    p.str("addr");
    p.op(&[0x8a, 8, 0, 0, 0, 0, 0, 0x7f, 0, 0]);
    p.str("compile_context");
    p.str("N/A");
    p.get(frames);
    p.op(b"]");
    let list2 = p.memoize();
    p.op(b"(");
    p.get(frame);
    p.get(frame);
    p.op(b"eu");
    // e3: an empty frames list.
    p.entry(&[action]);
    p.str("free_requested");
    p.get(frames);
    p.op(b"]");
    p.memoize();
    p.op(b"u");
    // e4: a one-item list written with APPEND.
    p.entry(&[action, alloc, frames]);
    p.op(b"]");
    p.memoize();
    p.get(frame);
    p.op(b"au");
    // e5: e2's frames list, shared.
    p.entry(&[action, alloc, frames, list2]);
    p.op(b"u");
    // e6: a FRAME opcode between two pairs (general path).
    p.entry(&[action, alloc]);
    p.op(&[0x95, 0, 0, 0, 0, 0, 0, 0, 0]);
    p.get(frames);
    p.op(b"]");
    p.memoize();
    p.op(b"u");
    // e7: two lists, the second of strings (general path).
    p.entry(&[action, alloc, frames]);
    p.op(b"]");
    p.memoize();
    p.get(frame);
    p.op(b"a");
    p.str("forward_frames");
    p.op(b"]");
    p.memoize();
    p.str("x");
    p.op(b"au");
    let body = p.finish();
    let (snap, _) = build_seq(&body, true);
    let snap = snap.expect("decodes");
    assert_eq!(snap.events.len(), 7);
    assert_eq!(snap.events[1].addr, 0x7f << 40);
    assert_eq!(
        snap.strings
            .get(snap.event_tags(&snap.events[1]).compile_context),
        "N/A"
    );
    assert_eq!(snap.stacks.get(snap.events[1].stack).len(), 2);
    assert_eq!(snap.events[4].stack, snap.events[1].stack);
    assert_eq!(assert_flat_agrees("inline", &body, false), 4);
    for cut in 0..body.len() {
        assert_flat_agrees(&format!("inline cut at {cut}"), &body[..cut], true);
    }
    // A POP where e5 began: the next pairs then go into e4, already read by the fast
    // path. The decode stops and [`build`] decodes again without the fast path.
    let at = body
        .windows(4)
        .rposition(|w| w == [b'}', 0x94, b'(', b'h'])
        .unwrap();
    let mut popped = body.clone();
    popped[at] = b'0';
    popped.remove(at + 1);
    let (fast, _) = build_seq(&popped, true);
    assert!(fast
        .unwrap_err()
        .contains(crate::pickle::machine::flat::FLAT_BROKEN));
    let general = build(
        &popped,
        BuildOptions {
            no_fast_entries: true,
            ..Default::default()
        },
    );
    let with_fallback = build(&popped, BuildOptions::default()).expect("general path reads it");
    assert_eq!(
        canonical(&with_fallback),
        canonical(&general.expect("reads"))
    );
}

#[test]
fn a_put_that_rebinds_an_id_wins_over_converting_what_it_held() {
    // Pickle semantics: memo id n names the last object PUT there. A frame dict put at n,
    // then a second (non-frame) dict put at n in the same list: converting the first when
    // the list is filled must not take n back. Both paths must give the second.
    let mut p = Pickle::trace();
    p.new_dict();
    let action = p.str("action");
    let alloc = p.str("alloc");
    let frames = p.str("frames");
    p.op(b"]");
    p.memoize();
    p.op(b"(}(");
    p.str("filename");
    p.str("f.py");
    let name = p.str("name");
    p.str("g");
    p.str("line");
    p.op(b"K\x01u");
    let n = p.memo;
    p.put(n);
    p.memo += 1;
    p.op(b"}(");
    p.get(name);
    p.str("h");
    p.op(b"u");
    p.put(n);
    p.op(b"eu");
    p.entry(&[action, alloc, frames]);
    p.op(b"]");
    p.memoize();
    p.op(b"(");
    p.get(n);
    p.op(b"eu");
    let body = p.finish();
    for flat in [true, false] {
        let snap = build_seq(&body, flat).0.expect("decodes");
        let stack = snap.stacks.get(snap.events[1].stack);
        assert_eq!(stack.len(), 1);
        let f = snap.frames.get(stack[0]);
        assert_eq!((snap.strings.get(f.name), f.line), ("h", -1), "flat={flat}");
    }
    assert_flat_agrees("rebound", &body, false);
}

#[test]
fn streams_are_interned_and_an_event_is_40_bytes() {
    assert_eq!(std::mem::size_of::<TraceEvent>(), 40);
    // Three entries on streams 0x7f00aa, 0 (default) and 0x7f00aa again.
    let mut p = Pickle::trace();
    p.new_dict();
    let action = p.str("action");
    let alloc = p.str("alloc");
    let stream = p.str("stream");
    p.op(&[b'J', 0xaa, 0x00, 0x7f, 0x00, b'u']);
    p.entry(&[action, alloc, stream]);
    p.op(b"K\x00u");
    p.entry(&[action, alloc, stream]);
    p.op(&[b'J', 0xaa, 0x00, 0x7f, 0x00, b'u']);
    let body = p.finish();
    for flat in [true, false] {
        let snap = build_seq(&body, flat).0.expect("decodes");
        let raw: Vec<u64> = snap.events.iter().map(|e| snap.event_stream(e)).collect();
        assert_eq!(raw, [0x7f00aa, 0, 0x7f00aa], "flat={flat}");
        assert_eq!(snap.events[1].stream, StreamId::DEFAULT);
        assert_eq!(snap.events[0].stream, snap.events[2].stream);
        assert_eq!(snap.streams.len(), 2);
    }
}

/// GIVEN segments on device 2 and a trace list for device 0 only, WHEN built, THEN device
/// 2's (empty) trace range starts where device 0's ends: the ranges stay contiguous.
#[test]
fn a_device_without_a_trace_list_gets_an_empty_range_in_order() {
    let json = r#"{"segments": [{"device": 2, "address": 1048576, "total_size": 2097152, "stream": 0,
        "segment_type": "large", "allocated_size": 0, "active_size": 0, "requested_size": 0,
        "blocks": [{"address": 1048576, "size": 2097152, "requested_size": 0, "state": "inactive"}]}],
        "device_traces": [[{"action": "alloc", "addr": 4096, "size": 512, "stream": 0},
                           {"action": "free_completed", "addr": 4096, "size": 512, "stream": 0}]]}"#;
    let snap = build(
        &crate::input::json_to_pickle(json.as_bytes()).unwrap(),
        Default::default(),
    )
    .unwrap();
    let ranges: Vec<(u32, std::ops::Range<usize>)> = snap
        .devices
        .iter()
        .map(|d| (d.id, d.trace.clone()))
        .collect();
    assert_eq!(ranges, [(0, 0..2), (2, 2..2)]);
}
