//! Interning tables: each distinct string, frame and stack is stored once and named by id.

use super::ids::{FrameId, FxId, StackId, StrId, TagsId};
use rustc_hash::FxHashMap;
use std::cell::OnceCell;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Distinct strings (file names, function names, annotation texts).
#[derive(Debug, Clone)]
pub struct Strings {
    items: Vec<Arc<str>>,
    index: FxHashMap<Arc<str>, StrId>,
}

impl Default for Strings {
    fn default() -> Self {
        let mut s = Strings {
            items: Vec::new(),
            index: FxHashMap::default(),
        };
        s.intern("");
        s
    }
}

impl Strings {
    /// The id of `s`, adding it when new.
    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(id) = self.index.get(s) {
            return *id;
        }
        let id = StrId(self.items.len() as u32);
        let arc: Arc<str> = Arc::from(s);
        self.items.push(arc.clone());
        self.index.insert(arc, id);
        id
    }

    /// The id of `s` if it was interned.
    pub fn find(&self, s: &str) -> Option<StrId> {
        self.index.get(s).copied()
    }

    /// The text of `id`.
    pub fn get(&self, id: StrId) -> &str {
        &self.items[id.0 as usize]
    }

    /// Number of distinct strings.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Bytes held on the heap (texts, the list and the index), approximately.
    pub fn heap_bytes(&self) -> usize {
        let texts: usize = self.items.iter().map(|s| s.len() + 16).sum();
        texts
            + self.items.capacity() * std::mem::size_of::<Arc<str>>()
            + self.index.capacity() * (std::mem::size_of::<(Arc<str>, StrId)>() + 1)
    }

    /// Always false: the empty string is always present.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// One Python or C++ frame of an allocation stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Source file as recorded (`??`, `""` or a basename for C++ frames).
    pub filename: StrId,
    /// Function name.
    pub name: StrId,
    /// Line number; -1 when unknown (recorded as -1 or as 2^64-1).
    pub line: i64,
    /// The FX node of a frame in compiled-graph code (`augment_with_fx_traces=True`):
    /// [`Frames::fx`]; `FxId::NONE` for every other frame.
    pub fx: FxId,
}

/// The FX node a frame of Inductor-generated code ran (`_snapshot(augment_with_fx_traces=True)`,
/// PyTorch PR #166450): the frame's `fx_node_op`, `fx_node_name`, `fx_node_target` and the
/// traceback of the model code the node was traced from (`fx_original_trace`), as recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct FxNode {
    /// `fx_node_op`, e.g. `call_function`.
    pub op: StrId,
    /// `fx_node_name`, e.g. `mm_default`.
    pub name: StrId,
    /// `fx_node_target`, e.g. `aten.mm.default`.
    pub target: StrId,
    /// `fx_original_trace`: a traceback-style text, outermost frame first.
    pub original_trace: StrId,
}

/// Distinct frames, and the FX nodes some of them name.
#[derive(Debug, Clone, Default)]
pub struct Frames {
    items: Vec<Frame>,
    index: FxHashMap<Frame, FrameId>,
    fx: Vec<FxNode>,
    fx_index: FxHashMap<FxNode, FxId>,
}

impl Frames {
    /// The id of `f`, adding it when new.
    #[inline]
    pub fn intern(&mut self, f: Frame) -> FrameId {
        *self.index.entry(f).or_insert_with(|| {
            self.items.push(f);
            FrameId(self.items.len() as u32 - 1)
        })
    }

    /// The frame `id`.
    pub fn get(&self, id: FrameId) -> &Frame {
        &self.items[id.0 as usize]
    }

    /// The id of the FX node `n` (never `FxId::NONE`), adding it when new.
    pub fn intern_fx(&mut self, n: FxNode) -> FxId {
        if self.fx.is_empty() {
            // Slot 0 is `FxId::NONE`.
            self.fx.push(FxNode::default());
        }
        *self.fx_index.entry(n).or_insert_with(|| {
            self.fx.push(n);
            FxId(self.fx.len() as u32 - 1)
        })
    }

    /// The FX node a frame names; `None` for `FxId::NONE`.
    pub fn fx(&self, id: FxId) -> Option<&FxNode> {
        (id != FxId::NONE).then(|| &self.fx[id.0 as usize])
    }

    /// True when some frame names an FX node.
    pub fn has_fx(&self) -> bool {
        self.fx.len() > 1
    }

    /// Every FX node, by id (`FxId::NONE` left out).
    pub fn fx_nodes(&self) -> impl Iterator<Item = (FxId, &FxNode)> {
        self.fx
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, n)| (FxId(i as u32), n))
    }

    /// Number of distinct frames.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Bytes held on the heap (the list and the index), approximately.
    pub fn heap_bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<Frame>()
            + self.index.capacity() * (std::mem::size_of::<(Frame, FrameId)>() + 1)
    }

    /// True when no frame was recorded.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// What a trace entry carries beside its action, address, size, stream, time and stack:
/// strings that change once per region or phase, not per entry, so an entry holds one
/// [`TagsId`] into [`Tags`] and stays 40 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventTags {
    /// `compile_context` (`StrId::EMPTY` when absent).
    pub compile_context: StrId,
    /// `user_metadata`, set by `torch.cuda.memory._set_memory_metadata` (a string, or compact
    /// JSON from a dict); `StrId::EMPTY` when absent or empty. On an `annotate` entry: the
    /// annotation's text.
    pub user_metadata: StrId,
    /// `internal_metadata`: the allocator's own tag (e.g. `mallocWithAddress`), kept apart
    /// from the user's; `StrId::EMPTY` when absent.
    pub internal_metadata: StrId,
    /// `forward_frames` of a backward-pass entry: where the forward op whose gradient is
    /// being computed ran, innermost first; `StackId::ABSENT` when absent.
    pub forward_stack: StackId,
    /// `pool_id` of the entry (the private pool it was served from); `(0, 0)` when absent or
    /// the default pools.
    pub pool_id: (u64, u64),
}

impl Default for EventTags {
    fn default() -> Self {
        EventTags {
            compile_context: StrId::EMPTY,
            user_metadata: StrId::EMPTY,
            internal_metadata: StrId::EMPTY,
            forward_stack: StackId::ABSENT,
            pool_id: (0, 0),
        }
    }
}

/// Distinct [`EventTags`]; `TagsId::NONE` is the default (no tags).
#[derive(Debug, Clone)]
pub struct Tags {
    items: Vec<EventTags>,
    index: FxHashMap<EventTags, TagsId>,
    last: (EventTags, TagsId),
}

impl Default for Tags {
    fn default() -> Self {
        let none = EventTags::default();
        Tags {
            items: vec![none],
            index: FxHashMap::from_iter([(none, TagsId::NONE)]),
            last: (none, TagsId::NONE),
        }
    }
}

impl Tags {
    /// The id of `t`, adding it when new (entries in a row mostly carry the same tags: the
    /// last one is compared first).
    #[inline]
    pub fn intern(&mut self, t: EventTags) -> TagsId {
        if self.last.0 == t {
            return self.last.1;
        }
        self.intern_new(t)
    }

    #[inline(never)]
    fn intern_new(&mut self, t: EventTags) -> TagsId {
        let id = *self.index.entry(t).or_insert_with(|| {
            self.items.push(t);
            TagsId(self.items.len() as u32 - 1)
        });
        self.last = (t, id);
        id
    }

    /// The tags `id`.
    #[inline]
    pub fn get(&self, id: TagsId) -> &EventTags {
        &self.items[id.0 as usize]
    }

    /// Number of distinct tag sets (the empty one included).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Always false: the empty tag set is always present.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Every distinct tag set, by id.
    pub fn iter(&self) -> impl Iterator<Item = (TagsId, &EventTags)> {
        self.items
            .iter()
            .enumerate()
            .map(|(i, t)| (TagsId(i as u32), t))
    }
}

/// Distinct stacks (frame lists, innermost frame first), stored back to back.
#[derive(Debug, Clone)]
pub struct Stacks {
    frames: Vec<FrameId>,
    starts: Vec<usize>,
    /// Hash of a stack's frames → first stack id with that hash; `next` chains collisions.
    index: FxHashMap<u64, u32>,
    next: Vec<u32>,
}

const NO_NEXT: u32 = u32::MAX;

impl Default for Stacks {
    fn default() -> Self {
        let mut s = Stacks {
            frames: Vec::new(),
            starts: vec![0],
            index: FxHashMap::default(),
            next: Vec::new(),
        };
        s.intern(&[]);
        s
    }
}

/// The hash of the stack `items` spell through `frame`; `None` when one spells no frame.
fn hash_frames<T>(items: &[T], frame: &impl Fn(&T) -> Option<FrameId>) -> Option<u64> {
    let mut h = rustc_hash::FxHasher::default();
    items.len().hash(&mut h);
    for f in items {
        frame(f)?.0.hash(&mut h);
    }
    Some(h.finish())
}

impl Stacks {
    /// The id of the stack `frames`, adding it when new.
    pub fn intern(&mut self, frames: &[FrameId]) -> StackId {
        match self.intern_mapped(frames, |f| Some(*f)) {
            Some(id) => id,
            None => unreachable!("every frame id spells a frame"),
        }
    }

    /// [`Stacks::intern`] of the stack `items` spell through `frame`, without first copying
    /// them into a list of frame ids (the decoder's converted values: one pass fewer);
    /// `None` (nothing added) when an item spells no frame.
    #[inline]
    pub fn intern_mapped<T>(
        &mut self,
        items: &[T],
        frame: impl Fn(&T) -> Option<FrameId>,
    ) -> Option<StackId> {
        let h = hash_frames(items, &frame)?;
        let mut cur = self.index.get(&h).copied().unwrap_or(NO_NEXT);
        while cur != NO_NEXT {
            let have = self.get(StackId(cur));
            if have.len() == items.len()
                && have.iter().zip(items).all(|(a, b)| Some(*a) == frame(b))
            {
                return Some(StackId(cur));
            }
            cur = self.next[cur as usize];
        }
        let id = self.next.len() as u32;
        self.frames
            .extend(items.iter().map(|f| frame(f).unwrap_or(FrameId(u32::MAX))));
        self.starts.push(self.frames.len());
        let prev = self.index.insert(h, id).unwrap_or(NO_NEXT);
        self.next.push(prev);
        Some(StackId(id))
    }

    /// The frames of `id`, innermost first; empty for `StackId::ABSENT`.
    pub fn get(&self, id: StackId) -> &[FrameId] {
        if !id.is_recorded() {
            return &[];
        }
        let i = id.0 as usize;
        &self.frames[self.starts[i]..self.starts[i + 1]]
    }

    /// Number of distinct stacks (the empty one included).
    pub fn len(&self) -> usize {
        self.next.len()
    }

    /// Always false: the empty stack is always present.
    pub fn is_empty(&self) -> bool {
        self.next.is_empty()
    }

    /// Total frame references stored.
    pub fn frame_refs(&self) -> usize {
        self.frames.len()
    }

    /// Bytes held on the heap (frames, offsets, chains and the index), approximately.
    pub fn heap_bytes(&self) -> usize {
        self.frames.capacity() * std::mem::size_of::<FrameId>()
            + self.starts.capacity() * std::mem::size_of::<usize>()
            + self.next.capacity() * std::mem::size_of::<u32>()
            + self.index.capacity() * (std::mem::size_of::<(u64, u32)>() + 1)
    }
}

/// A value per stack of a [`Stacks`] table, each computed the first time it is asked for and
/// kept: an analysis that visits every trace event or allocation asks here instead of walking
/// the stack's frames (and building their strings) again, so its frame work is once per
/// distinct stack, not once per entry. [`StackId::ABSENT`] has a slot of its own.
#[derive(Debug)]
pub struct PerStack<T> {
    cells: Vec<OnceCell<T>>,
}

impl<T> PerStack<T> {
    /// Empty slots for every stack of `stacks`, the absent one included.
    pub fn new(stacks: &Stacks) -> Self {
        PerStack {
            cells: (0..=stacks.len()).map(|_| OnceCell::new()).collect(),
        }
    }

    /// The value of `stack`: `f()` the first time, the kept value after.
    pub fn get_or_init(&self, stack: StackId, f: impl FnOnce() -> T) -> &T {
        let i = if stack.is_recorded() {
            stack.0 as usize
        } else {
            self.cells.len() - 1
        };
        self.cells[i].get_or_init(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_interned_by_content() {
        let mut s = Stacks::default();
        let a = s.intern(&[FrameId(1), FrameId(2)]);
        let b = s.intern(&[FrameId(1), FrameId(2)]);
        let c = s.intern(&[FrameId(2), FrameId(1)]);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(s.intern(&[]), StackId::EMPTY);
        assert_eq!(s.get(c), &[FrameId(2), FrameId(1)]);
        assert_eq!(s.get(StackId::ABSENT), &[] as &[FrameId]);
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn per_stack_values_are_computed_once() {
        let mut s = Stacks::default();
        let a = s.intern(&[FrameId(1)]);
        let memo = PerStack::new(&s);
        let calls = std::cell::Cell::new(0);
        let len = |id| {
            calls.set(calls.get() + 1);
            s.get(id).len()
        };
        for _ in 0..3 {
            assert_eq!(*memo.get_or_init(a, || len(a)), 1);
            assert_eq!(
                *memo.get_or_init(StackId::ABSENT, || len(StackId::ABSENT)),
                0
            );
        }
        assert_eq!(*memo.get_or_init(StackId::EMPTY, || 7), 7);
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn strings_start_with_empty() {
        let mut s = Strings::default();
        assert_eq!(s.intern(""), StrId::EMPTY);
        let x = s.intern("x");
        assert_eq!(s.intern("x"), x);
        assert_eq!(s.get(x), "x");
    }
}
