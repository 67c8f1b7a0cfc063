//! The parallel decoder's glue to the builder: a worker decodes one planned chunk into a
//! [`ChunkOut`], and the calling thread decodes the rest of the file, merging each chunk's
//! results into its tables in file order ([`Builder::absorb`]).

use super::builder::Builder;
use super::kinds::*;
use crate::model::ids::{FrameId, FxId, StackId, StrId, StreamId, TagsId};
use crate::model::intern::{EventTags, Frame, Frames, FxNode, Stacks, Strings, Tags};
use crate::model::snapshot::*;
use crate::pickle::{self, FlatList, Heap, Hooks, ListData, ObjData, ObjId, Value};
use crate::timings::{self, Phase};
use std::collections::BTreeMap;

/// What a worker produced for one chunk: its own interning tables and converted items.
pub(crate) struct ChunkOut {
    streams: Vec<u64>,
    strings: Strings,
    frames: Frames,
    stacks: Stacks,
    tags: Tags,
    events: Vec<TraceEvent>,
    blocks: Vec<Block>,
    segments: Vec<Segment>,
    unknown_actions: BTreeMap<String, u64>,
    legacy_blocks: u64,
    stats: pickle::DecodeStats,
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
    let stats = heap.stats;
    drop(heap);
    Some(ChunkOut {
        stats,
        streams: b.streams,
        strings: b.strings,
        frames: b.frames,
        stacks: b.stacks,
        tags: b.tags,
        events: b.events,
        blocks: b.blocks,
        segments: b.segments,
        unknown_actions: b.unknown_actions,
        legacy_blocks: b.legacy_blocks,
    })
}

/// Builds the snapshot from the skeleton of the file, merging chunk results as the decoder
/// reaches each chunk (`next` blocks until chunk `i` is ready; `None` aborts). Returns, with
/// the snapshot, what the decodes counted (the chunks merged so far and this thread's).
pub(crate) fn build_planned(
    buf: &[u8],
    chunks: &[pickle::scan::Chunk],
    defs: &pickle::scan::Defs,
    progress: Option<&mut dyn FnMut(u64)>,
    next: &mut dyn FnMut(usize) -> Option<ChunkOut>,
) -> (Option<Snapshot>, pickle::DecodeStats) {
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
    // The calling thread's decode, absorbing the workers' chunks as it reaches them.
    let decoded = timings::time(Phase::Decode, || {
        pickle::decode_planned(
            buf,
            &mut skipper,
            pickle::Limits::for_input(buf.len()),
            chunks,
            defs,
        )
    });
    let Ok((heap, top)) = decoded else {
        return (None, b.stats);
    };
    b.stats.add(&heap.stats);
    let stats = b.stats;
    let snap = timings::time(Phase::Model, || b.finish(&heap, top));
    (snap.ok(), stats)
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
        list: Option<(usize, FlatList<'_>)>,
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

impl Builder<'_> {
    /// Merges a chunk's results into this builder's tables (ids assigned in file order of
    /// the chunks, so the result does not depend on the thread count); returns the handles.
    fn absorb(&mut self, out: ChunkOut) -> (u8, u32, u32) {
        let smap: Vec<StrId> = (0..out.strings.len() as u32)
            .map(|i| self.strings.intern(out.strings.get(StrId(i))))
            .collect();
        let fmap: Vec<FrameId> = (0..out.frames.len() as u32)
            .map(|i| {
                let f = *out.frames.get(FrameId(i));
                let fx = match out.frames.fx(f.fx) {
                    Some(n) => self.frames.intern_fx(FxNode {
                        op: smap[n.op.0 as usize],
                        name: smap[n.name.0 as usize],
                        target: smap[n.target.0 as usize],
                        original_trace: smap[n.original_trace.0 as usize],
                    }),
                    None => FxId::NONE,
                };
                self.frames.intern(Frame {
                    filename: smap[f.filename.0 as usize],
                    name: smap[f.name.0 as usize],
                    line: f.line,
                    fx,
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
        let tmap: Vec<TagsId> = out
            .tags
            .iter()
            .map(|(_, t)| {
                self.tags.intern(EventTags {
                    compile_context: smap[t.compile_context.0 as usize],
                    user_metadata: smap[t.user_metadata.0 as usize],
                    internal_metadata: smap[t.internal_metadata.0 as usize],
                    forward_stack: st(t.forward_stack),
                    pool_id: t.pool_id,
                })
            })
            .collect();
        let block_base = self.blocks.len() as u32;
        self.blocks.extend(out.blocks.into_iter().map(|mut b| {
            b.stack = st(b.stack);
            b
        }));
        for (k, v) in out.unknown_actions {
            *self.unknown_actions.entry(k).or_default() += v;
        }
        self.legacy_blocks += out.legacy_blocks;
        self.stats.add(&out.stats);
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
                e.tags = tmap[e.tags.0 as usize];
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
}
