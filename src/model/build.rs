//! Decoded pickle values → [`Snapshot`]: every shape and version normalized here.
//!
//! The builder is the decoder's [`Hooks`]: a frame dict becomes a [`FrameId`] the first time
//! it is appended to a list, a frames list a [`StackId`] when it is stored under `frames`, and
//! each trace entry, block, segment and annotation a compact struct as soon as it is appended
//! to its list. Memo entries then point at the converted handles, so shared objects are
//! converted once and the generic containers are released as the decoder goes.

use super::ids::{FrameId, StackId, StrId, StreamId};
use super::intern::{Frame, Frames, Stacks, Strings};
use super::keys::{Key, KeyCache};
use super::snapshot::*;
use super::{bounds, validate};
use crate::pickle::{self, scan, DecodeError, Heap, Hooks, ListData, ObjData, ObjId, Value};
use std::collections::BTreeMap;

const FRAME: u8 = 1;
const STACK: u8 = 2;
const EVENT: u8 = 3;
const BLOCK: u8 = 4;
const SEGMENT: u8 = 5;
const ANNOTATION: u8 = 6;

/// Why a decoded pickle is not a snapshot: a key path (or byte offset) and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// The pickle itself is broken or refused.
    Decode(DecodeError),
    /// The pickle decoded, but a value is not what a snapshot holds there.
    Shape {
        /// Key path such as `device_traces[0][12].size`.
        path: String,
        /// What was expected.
        message: String,
    },
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Decode(e) => e.fmt(f),
            BuildError::Shape { path, message } => write!(f, "key {path}: {message}"),
        }
    }
}

impl std::error::Error for BuildError {}

/// Which decoder builds the snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Strategy {
    /// Parallel for inputs of at least 16 MiB when more than one thread is allowed.
    #[default]
    Auto,
    /// The sequential decoder (the reference; handles every input).
    Sequential,
    /// The two-pass parallel decoder, falling back to the sequential one when pass 1 finds a
    /// layout it does not plan for or anything fails.
    Parallel,
}

/// Options for building a snapshot.
#[derive(Default)]
pub struct BuildOptions<'p> {
    /// Called about every 16 MiB of input with the byte offset reached.
    pub progress: Option<&'p mut dyn FnMut(u64)>,
    /// Worker threads; 0 = [`default_threads`].
    pub threads: usize,
    /// Sequential, parallel or automatic.
    pub strategy: Strategy,
    /// Target bytes per parallel chunk; 0 = 8 MiB (tests use tiny chunks).
    pub chunk_bytes: usize,
    /// Called with input byte ranges the builder will not read again soon (the caller may
    /// drop them from memory, e.g. `madvise(DONTNEED)` on a file mapping; reading them again
    /// must still work).
    pub release: Option<&'p (dyn Fn(usize, usize) + Sync)>,
    /// Keep what was complete before a truncation or corruption instead of failing
    /// (`--salvage`); a `salvaged` warning names the offset.
    pub salvage: bool,
    /// Decode every dict opcode by opcode, without the fast path for trace entries (slower;
    /// for differential tests of that path).
    pub no_fast_entries: bool,
}

static DEFAULT_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the thread count used when [`BuildOptions::threads`] is 0 (0 = number of cores).
pub fn set_default_threads(n: usize) {
    DEFAULT_THREADS.store(n, std::sync::atomic::Ordering::Relaxed);
}

/// The thread count used when [`BuildOptions::threads`] is 0.
pub fn default_threads() -> usize {
    match DEFAULT_THREADS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Whether builders use the decoder's fast path for trace entries (`MEMLENS_FLAT=0` turns
/// it off, to compare both paths in a benchmark).
fn flat_default() -> bool {
    static FLAT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FLAT.get_or_init(|| std::env::var("MEMLENS_FLAT").map_or(true, |v| v != "0"))
}

/// Input bytes still arriving (a decompressing thread): the parallel decoder's pass 1
/// follows them, so decompression overlaps the decode.
pub trait Arriving: Sync {
    /// Blocks until at least `n` bytes (at most [`Arriving::capacity`]) are there or no more
    /// will come; returns everything there so far.
    fn upto(&self, n: usize) -> &[u8];
    /// Blocks until the input is complete; all of it.
    fn all(&self) -> &[u8];
    /// The most bytes [`Arriving::upto`] returns (the expected size).
    fn capacity(&self) -> usize;
}

/// Like [`build`], on input still arriving: the parallel decoder starts on the first bytes;
/// otherwise (one thread, a small input, or a layout it gives up on) the input is awaited
/// whole and decoded as [`build`] would.
pub fn build_arriving(
    src: &dyn Arriving,
    mut options: BuildOptions,
) -> Result<Snapshot, BuildError> {
    if let Some(chunk) = parallel_chunk(&options, src.capacity()) {
        let more = |n: usize| src.upto(n);
        let first = src.upto(scan::WINDOW);
        if let Some(snap) = super::parallel::try_build(
            first,
            Some((&more, src.capacity())),
            resolved_threads(&options),
            chunk,
            &mut options.progress,
            options.release,
        ) {
            return Ok(snap);
        }
    }
    options.strategy = Strategy::Sequential;
    build(src.all(), options)
}

fn resolved_threads(options: &BuildOptions) -> usize {
    match options.threads {
        0 => default_threads(),
        n => n,
    }
}

/// The chunk size when `options` choose the parallel decoder for an input of `len` bytes.
fn parallel_chunk(options: &BuildOptions, len: usize) -> Option<usize> {
    let threads = resolved_threads(options);
    // MEMLENS_STRATEGY=parallel|sequential overrides Auto (benchmarks of one path).
    let forced = match std::env::var("MEMLENS_STRATEGY").as_deref() {
        Ok("parallel") => Some(true),
        Ok("sequential") => Some(false),
        _ => None,
    };
    let parallel = !options.salvage
        && !options.no_fast_entries
        && match options.strategy {
            Strategy::Sequential => false,
            Strategy::Parallel => true,
            // From two threads on, the two-pass decoder beats the sequential one on inputs of
            // tens of MB and up (docs/performance.md); small inputs are not worth the pass.
            Strategy::Auto => forced.unwrap_or(threads >= 2 && len >= 16 << 20),
        };
    parallel.then_some(match options.chunk_bytes {
        0 => 8 << 20,
        n => n,
    })
}

/// Decodes `buf` (an uncompressed pickle) and builds the snapshot.
pub fn build(buf: &[u8], mut options: BuildOptions) -> Result<Snapshot, BuildError> {
    if let Some(chunk) = parallel_chunk(&options, buf.len()) {
        if let Some(snap) = super::parallel::try_build(
            buf,
            None,
            resolved_threads(&options),
            chunk,
            &mut options.progress,
            options.release,
        ) {
            return Ok(snap);
        }
    }
    let mut b = Builder::new(options.progress);
    b.release = options.release;
    b.flat &= !options.no_fast_entries && !options.salvage;
    if options.salvage {
        let (heap, top, failure) =
            pickle::decode_salvage(buf, &mut b, pickle::Limits::for_input(buf.len()))
                .map_err(BuildError::Decode)?;
        let mut snap = b.finish(&heap, top)?;
        if let Some(e) = failure {
            let kept = snap.events.len();
            snap.warnings.insert(
                0,
                Warning {
                    code: "salvaged",
                    device: None,
                    message: format!(
                        "{} at byte {} of {} ({}); kept what was complete before it: {} segments, {} trace events",
                        if e.truncated { "the file ends early" } else { "the file is corrupt" },
                        e.offset,
                        buf.len(),
                        e.message,
                        snap.segments.len(),
                        kept
                    ),
                },
            );
        }
        return Ok(snap);
    }
    let limits = pickle::Limits::for_input(buf.len());
    if !b.flat {
        let (heap, top) = pickle::decode(buf, &mut b, limits).map_err(BuildError::Decode)?;
        return b.finish(&heap, top);
    }
    let decoded = pickle::decode(buf, &mut b, limits);
    let progress = b.progress.take();
    if let Ok((heap, top)) = decoded {
        if let Ok(snap) = b.finish(&heap, top) {
            return Ok(snap);
        }
    }
    // The fast path for trace entries met a file it does not read like the general decoder
    // (a broken or unusual one): the general decoder gives the answer, or the error, of
    // record.
    if std::env::var_os("MEMLENS_TIMING").is_some() {
        eprintln!("fast path: gave up; decoding again opcode by opcode");
    }
    let mut g = Builder::new(progress);
    g.release = options.release;
    g.flat = false;
    let (heap, top) = pickle::decode(buf, &mut g, limits).map_err(BuildError::Decode)?;
    g.finish(&heap, top)
}

/// What a worker produced for one chunk: its own interning tables and converted items.
pub(crate) struct ChunkOut {
    streams: Vec<u64>,
    strings: Strings,
    frames: Frames,
    stacks: Stacks,
    events: Vec<TraceEvent>,
    blocks: Vec<Block>,
    segments: Vec<Segment>,
    unknown_actions: BTreeMap<String, u64>,
    legacy_blocks: u64,
}

/// Decodes one planned chunk into a [`ChunkOut`]; `None` when anything is unexpected.
pub(crate) fn build_chunk(
    buf: &[u8],
    chunk: &pickle::scan::Chunk,
    defs: &pickle::scan::Defs,
) -> Option<ChunkOut> {
    let mut b = Builder::new(None);
    match chunk.target {
        pickle::scan::Target::Trace => b.events.reserve_exact(chunk.items as usize),
        pickle::scan::Target::Segments => b.segments.reserve_exact(chunk.items as usize),
    }
    let (heap, list) = pickle::decode_chunk(
        buf,
        &mut b,
        pickle::Limits::for_input(buf.len()),
        chunk,
        defs,
    )
    .ok()?;
    let (kind, n) = match chunk.target {
        pickle::scan::Target::Trace => (EVENT, b.events.len()),
        pickle::scan::Target::Segments => (SEGMENT, b.segments.len()),
    };
    let other = match chunk.target {
        pickle::scan::Target::Trace => b.segments.len() + b.blocks.len(),
        pickle::scan::Target::Segments => b.events.len(),
    };
    match heap.list(list)? {
        ListData::Run {
            kind: k,
            start: 0,
            len,
        } if *k == kind && *len as usize == n && n == chunk.items as usize => {}
        _ => return None,
    }
    if other != 0 || !b.annotations.is_empty() {
        return None;
    }
    drop(heap);
    Some(ChunkOut {
        streams: b.streams,
        strings: b.strings,
        frames: b.frames,
        stacks: b.stacks,
        events: b.events,
        blocks: b.blocks,
        segments: b.segments,
        unknown_actions: b.unknown_actions,
        legacy_blocks: b.legacy_blocks,
    })
}

/// Builds the snapshot from the skeleton of the file, merging chunk results as the decoder
/// reaches each chunk (`next` blocks until chunk `i` is ready; `None` aborts).
pub(crate) fn build_planned(
    buf: &[u8],
    chunks: &[pickle::scan::Chunk],
    defs: &pickle::scan::Defs,
    progress: Option<&mut dyn FnMut(u64)>,
    next: &mut dyn FnMut(usize) -> Option<ChunkOut>,
) -> Option<Snapshot> {
    let mut b = Builder::new(progress);
    let items = |t| {
        chunks
            .iter()
            .filter(|c| c.target == t)
            .map(|c| c.items as usize)
            .sum::<usize>()
    };
    b.events.reserve_exact(items(pickle::scan::Target::Trace));
    b.segments
        .reserve_exact(items(pickle::scan::Target::Segments));
    let mut skipper = Skipper { b: &mut b, next };
    let (heap, top) = pickle::decode_planned(
        buf,
        &mut skipper,
        pickle::Limits::for_input(buf.len()),
        chunks,
        defs,
    )
    .ok()?;
    b.finish(&heap, top).ok()
}

struct Skipper<'s, 'p> {
    b: &'s mut Builder<'p>,
    next: &'s mut dyn FnMut(usize) -> Option<ChunkOut>,
}

impl Hooks for Skipper<'_, '_> {
    fn on_append(&mut self, heap: &mut Heap, list: ObjId, item: Value) -> Result<Value, String> {
        self.b.on_append(heap, list, item)
    }
    fn on_setitem(
        &mut self,
        heap: &mut Heap,
        dict: ObjId,
        key: Value,
        value: Value,
    ) -> Result<Value, String> {
        self.b.on_setitem(heap, dict, key, value)
    }
    fn on_progress(&mut self, offset: u64) {
        self.b.on_progress(offset)
    }
    fn on_skip(&mut self, _heap: &mut Heap, index: usize) -> Result<(u8, u32, u32), String> {
        let out = (self.next)(index).ok_or("chunk failed")?;
        Ok(self.b.absorb(out))
    }
    fn records(&self) -> usize {
        self.b.records()
    }
    /// The calling thread decodes what lies outside the chunks (the top-level dict, allocator
    /// settings, annotations). A frame dict it needs from inside a chunk would be a plain
    /// dict here but converted in the sequential decoder (its frames list converts it), and
    /// a setting holding one would read differently: such a plan is given up.
    fn accepts_definition(&self, heap: &Heap, value: Value) -> bool {
        self.b.accepts_definition(heap, value) && !converted_in_place(heap, value)
    }
    fn wants_flat(&self) -> bool {
        self.b.flat
    }
    fn on_flat(
        &mut self,
        heap: &mut Heap,
        pairs: &mut [(Value, Value)],
        list: Option<(usize, &[Value])>,
    ) -> Option<(Value, Value)> {
        self.b.on_flat(heap, pairs, list)
    }
}

/// A frame dict, or a list of frames (or an empty one, which may have been a `frames` value):
/// what the sequential decoder converts where it stands (to a frame, to a stack), and a copy
/// decoded on its own does not.
fn converted_in_place(heap: &Heap, value: Value) -> bool {
    let is_frame = |v: Value| match heap.resolve(v) {
        Value::Ext { kind, .. } => kind == FRAME,
        other => dict_pairs(heap, other).is_some_and(|(_, p)| classify(heap, p) == Some(FRAME)),
    };
    match heap.resolve(value) {
        Value::Obj(id) => match heap.data(id) {
            ObjData::List(list) => list.iter().all(is_frame),
            _ => is_frame(value),
        },
        _ => false,
    }
}

struct Builder<'p> {
    /// Raw stream handles of the events so far, by [`StreamId`].
    streams: Vec<u64>,
    strings: Strings,
    frames: Frames,
    stacks: Stacks,
    events: Vec<TraceEvent>,
    blocks: Vec<Block>,
    segments: Vec<Segment>,
    annotations: Vec<Annotation>,
    scratch: Vec<FrameId>,
    unknown_actions: BTreeMap<String, u64>,
    legacy_blocks: u64,
    progress: Option<&'p mut dyn FnMut(u64)>,
    last_text: [(Vec<u8>, StrId); 2],
    /// Input pages behind the decoder are handed back (sequential path), up to `released`.
    release: Option<&'p (dyn Fn(usize, usize) + Sync)>,
    released: u64,
    /// Trace entries are taken through the decoder's flat-dict fast path.
    flat: bool,
    /// Keys and action names recognised by where their strings lie.
    keys: KeyCache,
    /// Trace entries converted through the fast path.
    flat_taken: u64,
}

fn shape<T>(path: impl Into<String>, message: impl Into<String>) -> Result<T, BuildError> {
    Err(BuildError::Shape {
        path: path.into(),
        message: message.into(),
    })
}

/// Typed readers of dict fields; errors name the key.
fn expect_u64(heap: &Heap, v: Value, key: &str) -> Result<u64, String> {
    match v {
        Value::Int(i) => Ok(i as u64),
        Value::UInt(u) => Ok(u),
        Value::Bool(b) => Ok(b as u64),
        // A whole number written as a float (`512.0`, `5e2`: JSON from tools that keep every
        // number as a double) is that integer when a double holds it exactly.
        Value::Float(f) if whole_float(f) => Ok(if f < 0.0 { f as i64 as u64 } else { f as u64 }),
        other => Err(format!(
            "key '{key}': expected an integer, found {}",
            other.type_name(heap)
        )),
    }
}

/// True for a float that is a whole number within the range of `i64` (negative) or `u64`:
/// exactly the integer the writer's double held.
fn whole_float(f: f64) -> bool {
    f.fract() == 0.0 && (-9.223_372_036_854_776e18..1.844_674_407_370_955_2e19).contains(&f)
}

fn expect_size(heap: &Heap, v: Value, key: &str) -> Result<u64, String> {
    match v {
        Value::Int(i) if i < 0 => Err(format!("key '{key}': expected a size, found {i}")),
        Value::Float(f) if f < 0.0 => Err(format!("key '{key}': expected a size, found {f}")),
        _ => expect_u64(heap, v, key),
    }
}

fn expect_i64(heap: &Heap, v: Value, key: &str) -> Result<i64, String> {
    match v {
        Value::Int(i) => Ok(i),
        Value::Float(f) if whole_float(f) && f < 9.223_372_036_854_776e18 => Ok(f as i64),
        Value::UInt(_) | Value::Huge(_) => Err(format!("key '{key}': integer out of range")),
        other => Err(format!(
            "key '{key}': expected an integer, found {}",
            other.type_name(heap)
        )),
    }
}

fn expect_str<'h>(heap: &'h Heap, v: Value, key: &str) -> Result<&'h [u8], String> {
    heap.str_bytes(v).ok_or_else(|| {
        format!(
            "key '{key}': expected a string, found {}",
            v.type_name(heap)
        )
    })
}

fn key_is(heap: &Heap, k: Value, key: &[u8]) -> bool {
    heap.str_bytes(k) == Some(key)
}

fn dict_pairs<'h>(heap: &'h Heap, v: Value) -> Option<(ObjId, &'h [(Value, Value)])> {
    match heap.resolve(v) {
        Value::Obj(id) => match heap.data(id) {
            ObjData::Dict(d) => Some((id, d)),
            _ => None,
        },
        _ => None,
    }
}

/// What a dict appended to a list is, judged by its keys.
fn classify(heap: &Heap, pairs: &[(Value, Value)]) -> Option<u8> {
    classify_by(pairs, |k| heap.str_bytes(k).map_or(Key::Other, Key::of))
}

/// [`classify`] with the keys named by `key`.
fn classify_by(pairs: &[(Value, Value)], mut key: impl FnMut(Value) -> Key) -> Option<u8> {
    let mut has = [false; 6];
    for (k, _) in pairs {
        match key(*k) {
            Key::Action => return Some(EVENT),
            Key::Blocks => return Some(SEGMENT),
            Key::Filename => has[0] = true,
            Key::State => has[1] = true,
            Key::Size => has[2] = true,
            Key::Stage => has[3] = true,
            Key::TotalSize => has[4] = true,
            _ => {}
        }
    }
    if has[0] {
        Some(FRAME)
    } else if has[1] && has[2] && !has[4] {
        Some(BLOCK)
    } else if has[4] {
        Some(SEGMENT)
    } else if has[3] {
        Some(ANNOTATION)
    } else {
        None
    }
}

impl<'p> Builder<'p> {
    fn new(progress: Option<&'p mut dyn FnMut(u64)>) -> Self {
        Builder {
            streams: vec![0],
            strings: Strings::default(),
            frames: Frames::default(),
            stacks: Stacks::default(),
            events: Vec::new(),
            blocks: Vec::new(),
            segments: Vec::new(),
            annotations: Vec::new(),
            scratch: Vec::new(),
            unknown_actions: BTreeMap::new(),
            legacy_blocks: 0,
            progress,
            last_text: [(Vec::new(), StrId::EMPTY), (Vec::new(), StrId::EMPTY)],
            release: None,
            released: 0,
            flat: flat_default(),
            keys: KeyCache::default(),
            flat_taken: 0,
        }
    }

    /// Merges a chunk's results into this builder's tables (ids assigned in file order of
    /// the chunks, so the result does not depend on the thread count); returns the handles.
    fn absorb(&mut self, out: ChunkOut) -> (u8, u32, u32) {
        let smap: Vec<StrId> = (0..out.strings.len() as u32)
            .map(|i| self.strings.intern(out.strings.get(StrId(i))))
            .collect();
        let fmap: Vec<FrameId> = (0..out.frames.len() as u32)
            .map(|i| {
                let f = out.frames.get(FrameId(i));
                self.frames.intern(Frame {
                    filename: smap[f.filename.0 as usize],
                    name: smap[f.name.0 as usize],
                    line: f.line,
                })
            })
            .collect();
        let mut scratch = std::mem::take(&mut self.scratch);
        let stmap: Vec<StackId> = (0..out.stacks.len() as u32)
            .map(|i| {
                scratch.clear();
                scratch.extend(
                    out.stacks
                        .get(StackId(i))
                        .iter()
                        .map(|f| fmap[f.0 as usize]),
                );
                self.stacks.intern(&scratch)
            })
            .collect();
        self.scratch = scratch;
        let st = |s: StackId| {
            if s.is_recorded() {
                stmap[s.0 as usize]
            } else {
                s
            }
        };
        let block_base = self.blocks.len() as u32;
        self.blocks.extend(out.blocks.into_iter().map(|mut b| {
            b.stack = st(b.stack);
            b
        }));
        for (k, v) in out.unknown_actions {
            *self.unknown_actions.entry(k).or_default() += v;
        }
        self.legacy_blocks += out.legacy_blocks;
        if out.segments.is_empty() {
            let start = self.events.len() as u32;
            let n = out.events.len() as u32;
            let streams: Vec<StreamId> = out
                .streams
                .iter()
                .map(|&s| self.intern_stream(s).unwrap_or(StreamId::DEFAULT))
                .collect();
            self.events.extend(out.events.into_iter().map(|mut e| {
                e.stack = st(e.stack);
                e.stream = streams[e.stream.0 as usize];
                e.compile_context = smap[e.compile_context.0 as usize];
                e.user_metadata = smap[e.user_metadata.0 as usize];
                e
            }));
            (EVENT, start, n)
        } else {
            let start = self.segments.len() as u32;
            let n = out.segments.len() as u32;
            self.segments.extend(out.segments.into_iter().map(|mut s| {
                s.stack = st(s.stack);
                s.blocks = s.blocks.start + block_base..s.blocks.end + block_base;
                s
            }));
            (SEGMENT, start, n)
        }
    }

    /// The id of stream handle `raw` (the last one is checked first: traces run on one or two).
    fn intern_stream(&mut self, raw: u64) -> Result<StreamId, String> {
        if let Some(i) = self.streams.iter().rposition(|&s| s == raw) {
            return Ok(StreamId(i as u16));
        }
        if self.streams.len() > u16::MAX as usize {
            return Err(format!(
                "key 'stream': more than {} distinct streams in one trace; not a snapshot",
                u16::MAX as usize + 1
            ));
        }
        self.streams.push(raw);
        Ok(StreamId(self.streams.len() as u16 - 1))
    }

    fn intern_text(&mut self, bytes: &[u8]) -> StrId {
        match std::str::from_utf8(bytes) {
            Ok(s) => self.strings.intern(s),
            Err(_) => self.strings.intern(&String::from_utf8_lossy(bytes)),
        }
    }

    /// Interns a per-event string, remembering the last one per slot: trace entries repeat
    /// the same `compile_context` (a fresh "N/A" object each) millions of times.
    fn intern_cached(&mut self, bytes: &[u8], slot: usize) -> StrId {
        let (last, id) = &self.last_text[slot];
        if last.as_slice() == bytes {
            return *id;
        }
        let id = self.intern_text(bytes);
        self.last_text[slot] = (bytes.to_vec(), id);
        id
    }

    fn convert_frame(&mut self, heap: &Heap, pairs: &[(Value, Value)]) -> Result<FrameId, String> {
        let mut frame = Frame {
            filename: StrId::EMPTY,
            name: StrId::EMPTY,
            line: -1,
        };
        for (k, v) in pairs {
            match heap.str_bytes(*k) {
                Some(b"filename") => {
                    frame.filename = self.intern_text(expect_str(heap, *v, "filename")?)
                }
                Some(b"name") => frame.name = self.intern_text(expect_str(heap, *v, "name")?),
                Some(b"line") => {
                    frame.line = match *v {
                        Value::Int(i) if i >= 0 => i,
                        Value::Float(f) if whole_float(f) && (0.0..2e9).contains(&f) => f as i64,
                        Value::Int(_) | Value::UInt(_) | Value::Huge(_) | Value::None => -1,
                        other => {
                            return Err(format!(
                                "key 'line': expected an integer, found {}",
                                other.type_name(heap)
                            ))
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(self.frames.intern(frame))
    }

    /// A frames list → stack id (items already converted to frames when appended).
    fn convert_stack(&mut self, heap: &Heap, v: Value, key: &str) -> Result<StackId, String> {
        match heap.resolve(v) {
            Value::Ext { kind: STACK, id } => Ok(StackId(id)),
            Value::None => Ok(StackId::ABSENT),
            Value::Obj(id) => {
                let ObjData::List(list) = heap.data(id) else {
                    return Err(format!(
                        "key '{key}': expected a list of frames, found {}",
                        v.type_name(heap)
                    ));
                };
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.clear();
                // Fast path: every item already converted to a frame handle.
                let fast = list.as_slice().is_some_and(|items| {
                    items.iter().all(|v| match v {
                        Value::Ext { kind: FRAME, id } => {
                            scratch.push(FrameId(*id));
                            true
                        }
                        _ => false,
                    })
                });
                if !fast {
                    scratch.clear();
                    for item in list.iter() {
                        match heap.resolve(item) {
                            Value::Ext { kind: FRAME, id } => scratch.push(FrameId(id)),
                            other => match dict_pairs(heap, other) {
                                Some((_, pairs)) => scratch.push(self.convert_frame(heap, pairs)?),
                                None => {
                                    return Err(format!(
                                        "key '{key}': expected frame dicts in the list, found {}",
                                        other.type_name(heap)
                                    ))
                                }
                            },
                        }
                    }
                }
                let sid = self.stacks.intern(&scratch);
                self.scratch = scratch;
                Ok(sid)
            }
            other => Err(format!(
                "key '{key}': expected a list of frames, found {}",
                other.type_name(heap)
            )),
        }
    }

    fn convert_event(
        &mut self,
        heap: &Heap,
        pairs: &[(Value, Value)],
    ) -> Result<TraceEvent, String> {
        let mut e = TraceEvent {
            addr: 0,
            size: 0,
            stream: StreamId::DEFAULT,
            time_us: NO_TIME,
            stack: StackId::ABSENT,
            compile_context: StrId::EMPTY,
            user_metadata: StrId::EMPTY,
            action: Action::Other,
        };
        let mut action = None;
        let mut device_free = None;
        for (k, v) in pairs {
            let v = *v;
            match self.keys.key(heap, *k) {
                Key::Action => {
                    let name = expect_str(heap, v, "action")?;
                    let a = self.keys.action(v, name);
                    if a == Action::Other {
                        *self
                            .unknown_actions
                            .entry(String::from_utf8_lossy(name).into_owned())
                            .or_default() += 1;
                    }
                    action = Some(a);
                }
                Key::Addr => e.addr = expect_u64(heap, v, "addr")?,
                Key::Size => e.size = expect_size(heap, v, "size")?,
                Key::Stream => e.stream = self.intern_stream(expect_u64(heap, v, "stream")?)?,
                Key::TimeUs => e.time_us = expect_i64(heap, v, "time_us")?,
                Key::Frames => e.stack = self.convert_stack(heap, v, "frames")?,
                Key::DeviceFree => device_free = Some(expect_u64(heap, v, "device_free")?),
                Key::CompileContext => {
                    if let Some(s) = heap.str_bytes(v) {
                        e.compile_context = self.intern_cached(s, 0);
                    }
                }
                Key::UserMetadata => {
                    if let Some(s) = heap.str_bytes(v) {
                        e.user_metadata = self.intern_cached(s, 1);
                    }
                }
                _ => {}
            }
        }
        e.action = action.ok_or("trace entry without key 'action'")?;
        if e.action == Action::Oom {
            if let Some(free) = device_free {
                e.addr = free;
            }
        }
        Ok(e)
    }

    fn convert_block(&mut self, heap: &Heap, pairs: &[(Value, Value)]) -> Result<Block, String> {
        let mut b = Block {
            address: 0,
            size: 0,
            requested_size: 0,
            state: BlockState::Inactive,
            stack: StackId::ABSENT,
            address_recorded: false,
        };
        let (mut size, mut state, mut requested) = (None, None, None);
        let mut history = None;
        for (k, v) in pairs {
            let v = *v;
            match heap.str_bytes(*k) {
                Some(b"size") => size = Some(expect_size(heap, v, "size")?),
                Some(b"requested_size") => requested = Some(expect_size(heap, v, "requested_size")?),
                Some(b"address") => {
                    b.address = expect_u64(heap, v, "address")?;
                    b.address_recorded = true;
                }
                Some(b"state") => {
                    state = Some(match expect_str(heap, v, "state")? {
                        b"active_allocated" => BlockState::ActiveAllocated,
                        b"active_pending_free" | b"active_awaiting_free" => BlockState::ActivePendingFree,
                        b"inactive" => BlockState::Inactive,
                        other => {
                            return Err(format!(
                                "key 'state': expected active_allocated, active_pending_free or inactive, found {:?}",
                                String::from_utf8_lossy(other)
                            ))
                        }
                    })
                }
                Some(b"frames") => b.stack = self.convert_stack(heap, v, "frames")?,
                Some(b"history") => history = Some(v),
                _ => {}
            }
        }
        b.size = size.ok_or("block without key 'size'")?;
        b.state = state.ok_or("block without key 'state'")?;
        if let Some(h) = history {
            // PyTorch 2.0: history[0] is the current allocation (snapshot-format.md §2).
            self.legacy_blocks += 1;
            let first = heap
                .list(h)
                .and_then(|l| (!l.is_empty()).then(|| l.get(0)))
                .and_then(|f| dict_pairs(heap, f));
            if let Some((_, pairs)) = first {
                for (k, v) in pairs {
                    match heap.str_bytes(*k) {
                        Some(b"real_size") if requested.is_none() => {
                            requested = Some(expect_size(heap, *v, "history[0].real_size")?)
                        }
                        Some(b"frames") if !b.stack.is_recorded() => {
                            b.stack = self.convert_stack(heap, *v, "history[0].frames")?
                        }
                        _ => {}
                    }
                }
            }
        }
        b.requested_size = requested.unwrap_or(b.size);
        Ok(b)
    }

    fn block_range(&mut self, heap: &Heap, v: Value) -> Result<std::ops::Range<u32>, String> {
        let list = heap
            .list(v)
            .ok_or_else(|| format!("key 'blocks': expected a list, found {}", v.type_name(heap)))?;
        if let ListData::Run {
            kind: BLOCK,
            start,
            len,
        } = list
        {
            return Ok(*start..start + len);
        }
        // Unusual layout: gather (or convert) the blocks into a fresh contiguous range.
        let mut gathered = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            match heap.resolve(item) {
                Value::Ext { kind: BLOCK, id } => gathered.push(self.blocks[id as usize]),
                other => match dict_pairs(heap, other) {
                    Some((_, pairs)) => gathered.push(
                        self.convert_block(heap, pairs)
                            .map_err(|e| format!("blocks[{i}]: {e}"))?,
                    ),
                    None => {
                        return Err(format!(
                            "blocks[{i}]: expected a block dict, found {}",
                            other.type_name(heap)
                        ))
                    }
                },
            }
        }
        let start = self.blocks.len() as u32;
        self.blocks.extend(gathered);
        Ok(start..self.blocks.len() as u32)
    }

    fn convert_segment(
        &mut self,
        heap: &Heap,
        pairs: &[(Value, Value)],
    ) -> Result<Segment, String> {
        let mut s = Segment {
            device: 0,
            address: 0,
            total_size: 0,
            recorded_allocated: None,
            recorded_active: None,
            recorded_requested: None,
            stream: 0,
            pool: PoolKind::Unknown,
            pool_id: (0, 0),
            expandable: false,
            stack: StackId::ABSENT,
            blocks: 0..0,
        };
        let mut total = None;
        let mut blocks = None;
        for (k, v) in pairs {
            let v = *v;
            match heap.str_bytes(*k) {
                Some(b"device") => {
                    let d = expect_i64(heap, v, "device")?;
                    s.device = u32::try_from(d)
                        .map_err(|_| format!("key 'device': expected a device index, found {d}"))?;
                }
                Some(b"address") => s.address = expect_u64(heap, v, "address")?,
                Some(b"total_size") => total = Some(expect_size(heap, v, "total_size")?),
                Some(b"allocated_size") => {
                    s.recorded_allocated = Some(expect_size(heap, v, "allocated_size")?)
                }
                Some(b"active_size") => {
                    s.recorded_active = Some(expect_size(heap, v, "active_size")?)
                }
                Some(b"requested_size") => {
                    s.recorded_requested = Some(expect_size(heap, v, "requested_size")?)
                }
                Some(b"stream") => s.stream = expect_u64(heap, v, "stream")?,
                Some(b"segment_type") => {
                    s.pool = match expect_str(heap, v, "segment_type")? {
                        b"small" => PoolKind::Small,
                        b"large" => PoolKind::Large,
                        _ => PoolKind::Unknown,
                    }
                }
                Some(b"segment_pool_id") => {
                    let items = heap.sequence(v).unwrap_or_default();
                    if items.len() != 2 {
                        return Err(format!(
                            "key 'segment_pool_id': expected a pair of integers, found {}",
                            v.type_name(heap)
                        ));
                    }
                    s.pool_id = (
                        expect_u64(heap, items[0], "segment_pool_id")?,
                        expect_u64(heap, items[1], "segment_pool_id")?,
                    );
                }
                Some(b"is_expandable") => {
                    s.expandable = matches!(v, Value::Bool(true) | Value::Int(1))
                }
                Some(b"frames") => s.stack = self.convert_stack(heap, v, "frames")?,
                Some(b"blocks") => blocks = Some(v),
                _ => {}
            }
        }
        s.total_size = total.ok_or("segment without key 'total_size'")?;
        let range = match blocks {
            Some(v) => self.block_range(heap, v)?,
            None => return Err("segment without key 'blocks'".into()),
        };
        // Addresses absent (2.0, profiler-derived): the running sum from the segment base.
        let mut addr = s.address;
        for b in &mut self.blocks[range.start as usize..range.end as usize] {
            if !b.address_recorded {
                b.address = addr;
            }
            addr = b.address.wrapping_add(b.size);
        }
        s.blocks = range;
        Ok(s)
    }

    fn convert_annotation(
        &mut self,
        heap: &Heap,
        pairs: &[(Value, Value)],
    ) -> Result<Annotation, String> {
        let mut a = Annotation {
            device: None,
            name: String::new(),
            stage: String::new(),
            time_us: None,
        };
        for (k, v) in pairs {
            match heap.str_bytes(*k) {
                Some(b"name") => a.name = heap.text(*v).map(|c| c.into_owned()).unwrap_or_default(),
                Some(b"stage") => {
                    a.stage = heap.text(*v).map(|c| c.into_owned()).unwrap_or_default()
                }
                Some(b"device") => a.device = expect_i64(heap, *v, "device").ok(),
                Some(b"time_us") => a.time_us = expect_i64(heap, *v, "time_us").ok(),
                _ => {}
            }
        }
        Ok(a)
    }

    fn settings(&self, heap: &Heap, v: Value) -> Option<Vec<(String, SettingValue)>> {
        let (_, pairs) = dict_pairs(heap, v)?;
        Some(
            pairs
                .iter()
                .map(|(k, v)| {
                    let key = heap
                        .text(*k)
                        .map(|c| c.into_owned())
                        .unwrap_or_else(|| "?".into());
                    (key, self.setting_value(heap, *v, 0))
                })
                .collect(),
        )
    }

    fn setting_value(&self, heap: &Heap, v: Value, depth: u32) -> SettingValue {
        match heap.resolve(v) {
            Value::Bool(b) => SettingValue::Bool(b),
            Value::Int(i) => SettingValue::Int(i),
            Value::UInt(u) => SettingValue::UInt(u),
            Value::Float(f) => SettingValue::Float(f),
            Value::Str { .. } | Value::Owned(_) => {
                SettingValue::Text(heap.text(v).unwrap().into_owned())
            }
            other => match dict_pairs(heap, other) {
                Some((_, pairs)) if depth < 4 => SettingValue::Map(
                    pairs
                        .iter()
                        .map(|(k, v)| {
                            (
                                heap.text(*k)
                                    .map(|c| c.into_owned())
                                    .unwrap_or_else(|| "?".into()),
                                self.setting_value(heap, *v, depth + 1),
                            )
                        })
                        .collect(),
                ),
                _ => SettingValue::Other(other.type_name(heap).to_string()),
            },
        }
    }

    /// Items of a list of converted `kind` handles, converting stragglers (path-named errors).
    fn collect_ids(
        &mut self,
        heap: &Heap,
        v: Value,
        kind: u8,
        path: &str,
    ) -> Result<Vec<u32>, BuildError> {
        let Some(list) = heap.list(v) else {
            return shape(
                path,
                format!("expected a list, found {}", v.type_name(heap)),
            );
        };
        if let ListData::Run {
            kind: k,
            start,
            len,
        } = list
        {
            if *k == kind {
                return Ok((*start..start + len).collect());
            }
        }
        let mut ids = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            let item = heap.resolve(item);
            if let Value::Ext { kind: k, id } = item {
                if k == kind {
                    ids.push(id);
                    continue;
                }
            }
            let p = format!("{path}[{i}]");
            let Some((_, pairs)) = dict_pairs(heap, item) else {
                return shape(
                    p,
                    format!("expected a dict, found {}", item.type_name(heap)),
                );
            };
            let id = match kind {
                EVENT => {
                    let e = self
                        .convert_event(heap, pairs)
                        .map_err(|m| BuildError::Shape {
                            path: p,
                            message: m,
                        })?;
                    self.events.push(e);
                    self.events.len() - 1
                }
                SEGMENT => {
                    let s = self
                        .convert_segment(heap, pairs)
                        .map_err(|m| BuildError::Shape {
                            path: p,
                            message: m,
                        })?;
                    self.segments.push(s);
                    self.segments.len() - 1
                }
                _ => {
                    let a =
                        self.convert_annotation(heap, pairs)
                            .map_err(|m| BuildError::Shape {
                                path: p,
                                message: m,
                            })?;
                    self.annotations.push(a);
                    self.annotations.len() - 1
                }
            };
            ids.push(id as u32);
        }
        Ok(ids)
    }

    fn finish(mut self, heap: &Heap, top: Value) -> Result<Snapshot, BuildError> {
        let mut traces: Vec<Option<Vec<u32>>> = Vec::new();
        let mut settings = None;
        let mut annotation_ids = Vec::new();
        let layout;
        let segment_ids = match heap.resolve(top) {
            Value::Obj(id) if matches!(heap.data(id), ObjData::List(_)) => {
                layout = Layout::SegmentList;
                self.collect_ids(heap, top, SEGMENT, "[top-level list]")?
            }
            Value::Obj(id) if matches!(heap.data(id), ObjData::Dict(_)) => {
                layout = Layout::Modern;
                let mut seg_ids = Vec::new();
                if let Some(v) = heap.get(top, "segments") {
                    seg_ids = self.collect_ids(heap, v, SEGMENT, "segments")?;
                }
                if let Some(v) = heap.get(top, "device_traces") {
                    let Some(list) = heap.list(v) else {
                        return shape(
                            "device_traces",
                            format!("expected a list of lists, found {}", v.type_name(heap)),
                        );
                    };
                    let items: Vec<Value> = list.iter().collect();
                    for (d, t) in items.into_iter().enumerate() {
                        let t = heap.resolve(t);
                        if t == Value::None {
                            traces.push(None);
                            continue;
                        }
                        traces.push(Some(self.collect_ids(
                            heap,
                            t,
                            EVENT,
                            &format!("device_traces[{d}]"),
                        )?));
                    }
                }
                if let Some(v) = heap.get(top, "allocator_settings") {
                    settings = self.settings(heap, v);
                }
                if let Some(v) = heap.get(top, "external_annotations") {
                    annotation_ids =
                        self.collect_ids(heap, v, ANNOTATION, "external_annotations")?;
                }
                seg_ids
            }
            other => {
                return shape(
                    "[top level]",
                    format!(
                        "expected a snapshot dict or a list of segments, found {}",
                        other.type_name(heap)
                    ),
                )
            }
        };
        let layout = if self.legacy_blocks > 0 && layout == Layout::Modern {
            Layout::Legacy
        } else {
            layout
        };
        self.assemble(layout, segment_ids, traces, settings, annotation_ids)
    }

    fn assemble(
        mut self,
        layout: Layout,
        segment_ids: Vec<u32>,
        traces: Vec<Option<Vec<u32>>>,
        settings: Option<Vec<(String, SettingValue)>>,
        annotation_ids: Vec<u32>,
    ) -> Result<Snapshot, BuildError> {
        let mut warnings = Vec::new();
        // Segments: those the top level lists, sorted by (device, address) (I9).
        let mut segments: Vec<Segment> = if segment_ids.len() == self.segments.len()
            && segment_ids
                .iter()
                .enumerate()
                .all(|(i, &id)| id as usize == i)
        {
            std::mem::take(&mut self.segments)
        } else {
            segment_ids
                .iter()
                .map(|&i| self.segments[i as usize].clone())
                .collect()
        };
        // A segment without blocks gets one spelling of its empty range, whichever decoder
        // (and chunking) built it.
        for seg in segments.iter_mut().filter(|s| s.blocks.is_empty()) {
            seg.blocks = 0..0;
        }
        // No total may wrap: sizes are added up (and their keys named) in file order.
        let mut sizes = bounds::SizeTotal::default();
        sizes.add_segments(layout, &segments, &self.blocks)?;
        let sorted = segments
            .windows(2)
            .all(|w| (w[0].device, w[0].address) <= (w[1].device, w[1].address));
        if !sorted {
            warnings.push(Warning {
                code: "segments_unsorted",
                device: None,
                message: "segments are not sorted by device and address as PyTorch writes them; sorted here".into(),
            });
            segments.sort_by_key(|s| (s.device, s.address));
        }

        // Events: per device, contiguous ranges of one array.
        let contiguous = {
            let mut next = 0u32;
            traces.iter().flatten().all(|ids| {
                ids.iter().all(|&id| {
                    let ok = id == next;
                    next += 1;
                    ok
                })
            }) && next as usize == self.events.len()
        };
        let mut events = Vec::new();
        let mut trace_ranges = Vec::with_capacity(traces.len());
        if contiguous {
            let mut start = 0;
            for t in &traces {
                let n = t.as_ref().map_or(0, |ids| ids.len());
                trace_ranges.push(t.as_ref().map(|_| start..start + n));
                start += n;
            }
            events = std::mem::take(&mut self.events);
        } else {
            for t in &traces {
                let start = events.len();
                if let Some(ids) = t {
                    events.extend(ids.iter().map(|&i| self.events[i as usize]));
                }
                trace_ranges.push(t.as_ref().map(|_| start..events.len()));
            }
        }

        sizes.add_traces(&events, &trace_ranges)?;

        // Devices: any with segments or a non-empty trace.
        let mut ids: Vec<u32> = segments.iter().map(|s| s.device).collect();
        for (d, r) in trace_ranges.iter().enumerate() {
            if r.as_ref().is_some_and(|r| !r.is_empty()) {
                ids.push(d as u32);
            }
        }
        ids.sort_unstable();
        ids.dedup();
        let devices = ids
            .into_iter()
            .map(|id| {
                let lo = segments.partition_point(|s| s.device < id);
                let hi = segments.partition_point(|s| s.device <= id);
                let tr = trace_ranges.get(id as usize).cloned().flatten();
                Device {
                    id,
                    segments: lo..hi,
                    trace_recorded: tr.is_some(),
                    trace: tr.unwrap_or(0..0),
                }
            })
            .collect();

        let annotations = if annotation_ids
            .iter()
            .enumerate()
            .all(|(i, &id)| id as usize == i)
            && annotation_ids.len() == self.annotations.len()
        {
            std::mem::take(&mut self.annotations)
        } else {
            annotation_ids
                .iter()
                .map(|&i| self.annotations[i as usize].clone())
                .collect()
        };

        for (name, n) in &self.unknown_actions {
            warnings.push(Warning {
                code: "unknown_action",
                device: None,
                message: format!("{n} trace entries have the unknown action {name:?}; they are kept but not interpreted"),
            });
        }

        let mut snap = Snapshot {
            layout,
            strings: self.strings,
            frames: self.frames,
            stacks: self.stacks,
            segments,
            blocks: self.blocks,
            events,
            streams: std::mem::take(&mut self.streams),
            devices,
            allocator_settings: settings,
            annotations,
            warnings,
        };
        // Vectors grown by doubling give back their unused tail (a shrinking realloc of a
        // large block remaps pages; nothing is copied).
        snap.events.shrink_to_fit();
        snap.blocks.shrink_to_fit();
        snap.segments.shrink_to_fit();
        let found = validate::check(&snap);
        snap.warnings.extend(found);
        Ok(snap)
    }
}

impl Hooks for Builder<'_> {
    // Chunks are only skipped through `Skipper`.
    fn on_append(&mut self, heap: &mut Heap, _list: ObjId, item: Value) -> Result<Value, String> {
        let Value::Obj(id) = item else {
            return Ok(item);
        };
        let ObjData::Dict(pairs) = heap.data(id) else {
            return Ok(item);
        };
        let converted = match classify(heap, pairs) {
            Some(FRAME) => {
                let f = self
                    .convert_frame(heap, pairs)
                    .map_err(|e| format!("frame: {e}"))?;
                Value::Ext {
                    kind: FRAME,
                    id: f.0,
                }
            }
            Some(EVENT) => {
                let e = self
                    .convert_event(heap, pairs)
                    .map_err(|e| format!("trace entry: {e}"))?;
                self.events.push(e);
                Value::Ext {
                    kind: EVENT,
                    id: self.events.len() as u32 - 1,
                }
            }
            Some(BLOCK) => {
                let b = self
                    .convert_block(heap, pairs)
                    .map_err(|e| format!("block: {e}"))?;
                self.blocks.push(b);
                Value::Ext {
                    kind: BLOCK,
                    id: self.blocks.len() as u32 - 1,
                }
            }
            Some(SEGMENT) => {
                let s = self
                    .convert_segment(heap, pairs)
                    .map_err(|e| format!("segment: {e}"))?;
                self.segments.push(s);
                Value::Ext {
                    kind: SEGMENT,
                    id: self.segments.len() as u32 - 1,
                }
            }
            Some(ANNOTATION) => {
                let a = self.convert_annotation(heap, pairs)?;
                self.annotations.push(a);
                Value::Ext {
                    kind: ANNOTATION,
                    id: self.annotations.len() as u32 - 1,
                }
            }
            _ => return Ok(item),
        };
        heap.convert(id, converted);
        Ok(converted)
    }

    fn on_setitem(
        &mut self,
        heap: &mut Heap,
        _dict: ObjId,
        key: Value,
        value: Value,
    ) -> Result<Value, String> {
        if !key_is(heap, key, b"frames") {
            return Ok(value);
        }
        let Value::Obj(id) = value else {
            return Ok(value);
        };
        if !matches!(heap.data(id), ObjData::List(_)) {
            return Ok(value);
        }
        let sid = self.convert_stack(heap, value, "frames")?;
        let converted = Value::Ext {
            kind: STACK,
            id: sid.0,
        };
        heap.convert(id, converted);
        Ok(converted)
    }

    fn records(&self) -> usize {
        self.events.len() + self.blocks.len() + self.segments.len() + self.annotations.len()
    }

    fn wants_flat(&self) -> bool {
        self.flat
    }

    /// Trace entries only (what `on_append` would classify as one), their frames list given
    /// as frame handles; anything else, or any error, is left to the general path.
    fn on_flat(
        &mut self,
        heap: &mut Heap,
        pairs: &mut [(Value, Value)],
        list: Option<(usize, &[Value])>,
    ) -> Option<(Value, Value)> {
        let keys = &mut self.keys;
        if classify_by(pairs, |k| keys.key(heap, k)) != Some(EVENT) {
            return None;
        }
        let mut stack = Value::None;
        if let Some((at, items)) = list {
            if !key_is(heap, pairs[at].0, b"frames") {
                return None;
            }
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.clear();
            let all_frames = items.iter().all(|v| match *v {
                Value::Ext { kind: FRAME, id } => {
                    scratch.push(FrameId(id));
                    true
                }
                _ => false,
            });
            let sid = all_frames.then(|| self.stacks.intern(&scratch));
            self.scratch = scratch;
            stack = Value::Ext {
                kind: STACK,
                id: sid?.0,
            };
            pairs[at].1 = stack;
        }
        let e = self.convert_event(heap, pairs).ok()?;
        self.events.push(e);
        self.flat_taken += 1;
        let id = self.events.len() as u32 - 1;
        Some((Value::Ext { kind: EVENT, id }, stack))
    }

    fn accepts_definition(&self, heap: &Heap, value: Value) -> bool {
        match dict_pairs(heap, value) {
            Some((_, pairs)) => matches!(classify(heap, pairs), None | Some(FRAME)),
            None => true,
        }
    }

    fn on_progress(&mut self, offset: u64) {
        if let Some(p) = self.progress.as_mut() {
            p(offset)
        }
        // Keep 4 MiB behind the decoder mapped, hand back 8 MiB at a time; strings read
        // again later fault back in from the page cache.
        let upto = offset.saturating_sub(4 << 20);
        if let Some(r) = self.release {
            if upto >= self.released + (8 << 20) {
                r(self.released as usize, (upto - self.released) as usize);
                self.released = upto;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn canonical(s: &Snapshot) -> Vec<String> {
        let stack = |id: StackId| s.stack_text(id);
        let mut out = vec![format!("{:?} {:?}", s.layout, s.devices)];
        for seg in &s.segments {
            let mut plain = seg.clone();
            plain.stack = StackId::EMPTY;
            out.push(format!("{plain:?} {}", stack(seg.stack)));
        }
        for b in &s.blocks {
            let mut plain = *b;
            plain.stack = StackId::EMPTY;
            out.push(format!("{plain:?} {}", stack(b.stack)));
        }
        for e in &s.events {
            out.push(format!(
                "{:?} {} {} {} {} {} {:?} {:?}",
                e.action,
                e.addr,
                e.size,
                s.event_stream(e),
                e.time_us,
                stack(e.stack),
                s.strings.get(e.compile_context),
                s.strings.get(e.user_metadata)
            ));
        }
        out.push(format!("{:?}", s.allocator_settings));
        out.push(format!("{:?}", s.annotations));
        out.push(format!("{:?}", s.warnings));
        out
    }

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
            root.join("samples/captured"),
            root.join("../shared/samples/real"),
        ];
        let (mut seen, mut taken) = (0, 0);
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(&dir) else {
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

    /// A protocol-4 pickle written opcode by opcode, counting implicit memo ids.
    struct Pickle {
        b: Vec<u8>,
        memo: u8,
    }

    impl Pickle {
        /// `{"device_traces": [[` with the entries' MARK open; [`Pickle::finish`] closes it.
        fn trace() -> Pickle {
            let mut p = Pickle {
                b: vec![0x80, 4],
                memo: 0,
            };
            p.op(b"}");
            p.memoize();
            p.str("device_traces");
            p.op(b"]");
            p.memoize();
            p.op(b"]");
            p.memoize();
            p.op(b"(");
            p
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
        assert_eq!(snap.strings.get(snap.events[1].compile_context), "N/A");
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
}
