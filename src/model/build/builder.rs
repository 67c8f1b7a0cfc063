//! The builder's state: interning tables, converted records and the decoder-facing options.
//! Its methods live beside their jobs: `convert.rs`, `assemble.rs`, `hooks.rs`, `chunk.rs`.

use crate::model::ids::{FrameId, StrId, StreamId};
use crate::model::intern::{Frames, Stacks, Strings, Tags};
use crate::model::keys::KeyCache;
use crate::model::snapshot::{Annotation, Block, Segment, TraceEvent};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

pub(super) struct Builder<'p> {
    /// Raw stream handles of the events so far, by [`StreamId`](crate::model::StreamId).
    pub(super) streams: Vec<u64>,
    /// Where each raw handle of `streams` lies: a stream is found in constant time however
    /// many the trace has (65,536 at most), never by a scan of the list (issue #36).
    pub(super) stream_index: FxHashMap<u64, StreamId>,
    /// The stream of the entry before and its id: entries in a row are mostly on one stream.
    pub(super) last_stream: (u64, StreamId),
    pub(super) strings: Strings,
    pub(super) frames: Frames,
    pub(super) stacks: Stacks,
    /// The entries' tags (compile context, metadata, forward stack, pool).
    pub(super) tags: Tags,
    pub(super) events: Vec<TraceEvent>,
    pub(super) blocks: Vec<Block>,
    pub(super) segments: Vec<Segment>,
    pub(super) annotations: Vec<Annotation>,
    pub(super) scratch: Vec<FrameId>,
    pub(super) unknown_actions: BTreeMap<String, u64>,
    pub(super) legacy_blocks: u64,
    pub(super) progress: Option<&'p mut dyn FnMut(u64)>,
    pub(super) last_text: [(Vec<u8>, StrId); 2],
    /// Input pages behind the decoder are handed back (sequential path), up to `released`.
    pub(super) release: Option<&'p (dyn Fn(usize, usize) + Sync)>,
    pub(super) released: u64,
    /// Trace entries are taken through the decoder's flat-dict fast path.
    pub(super) flat: bool,
    /// Keys and action names recognised by where their strings lie.
    pub(super) keys: KeyCache,
    /// Trace entries converted through the fast path.
    pub(super) flat_taken: u64,
    /// Strings interned by where they lie in the input (direct-mapped on the offset): a
    /// frame's name and filename memoized once and referenced by millions of frame dicts
    /// (scripts that rewrite frames and dump again) are decoded and hashed once.
    pub(super) text_at: Box<[(u64, StrId)]>,
    /// Frame dicts read by the fast path, by what their pairs hold (key strings' offsets,
    /// value strings' offsets, integers): dicts rewritten per entry from the same memoized
    /// strings convert once (direct-mapped; see `hooks.rs`).
    pub(super) frame_at: Box<[([u64; 6], FrameId)]>,
    /// What the decodes feeding this builder counted (a chunk's, merged by `absorb`).
    pub(super) stats: crate::pickle::DecodeStats,
}

/// Slots of [`Builder::frame_at`] (a power of two).
pub(super) const FRAME_AT_SLOTS: usize = 1 << 12;

/// Slots of [`Builder::text_at`] (a power of two).
pub(super) const TEXT_AT_SLOTS: usize = 1 << 12;

impl<'p> Builder<'p> {
    pub(super) fn new(progress: Option<&'p mut dyn FnMut(u64)>) -> Self {
        Builder {
            streams: vec![0],
            stream_index: FxHashMap::from_iter([(0, StreamId::DEFAULT)]),
            last_stream: (0, StreamId::DEFAULT),
            strings: Strings::default(),
            frames: Frames::default(),
            stacks: Stacks::default(),
            tags: Tags::default(),
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
            // On unless the caller asks otherwise (`BuildOptions::no_fast_entries`).
            flat: true,
            keys: KeyCache::default(),
            flat_taken: 0,
            text_at: vec![(u64::MAX, StrId::EMPTY); TEXT_AT_SLOTS].into_boxed_slice(),
            frame_at: vec![([u64::MAX; 6], FrameId(u32::MAX)); FRAME_AT_SLOTS].into_boxed_slice(),
            stats: Default::default(),
        }
    }
}
