//! Typed indices into the interning tables, so a frame id can never be used as a stack id.

/// Index of an interned string in [`super::Strings`]; `StrId::EMPTY` is `""`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StrId(pub u32);

impl StrId {
    /// The empty string, always id 0.
    pub const EMPTY: StrId = StrId(0);
}

/// Index of an event's stream in [`super::Snapshot::streams`]; `StreamId::DEFAULT` is stream 0.
/// A trace names a handful of streams, so 16 bits keep an event at 40 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StreamId(pub u16);

impl StreamId {
    /// The default stream (handle 0), always id 0.
    pub const DEFAULT: StreamId = StreamId(0);
}

/// Index of an interned frame in [`super::Frames`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);

/// Index of an interned stack in [`super::Stacks`]; `StackId::EMPTY` is the empty stack and
/// `StackId::ABSENT` marks a holder whose `frames` key was absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackId(pub u32);

impl StackId {
    /// The stack with no frames (recorded as `[]`).
    pub const EMPTY: StackId = StackId(0);
    /// No `frames` key at all (history recorded without context).
    pub const ABSENT: StackId = StackId(u32::MAX);

    /// True when the holder had a `frames` key (possibly empty).
    pub fn is_recorded(self) -> bool {
        self != StackId::ABSENT
    }
}

/// Index of a trace entry's interned tags in [`super::Tags`]; `TagsId::NONE` is an entry that
/// carries none (no compile context, metadata, forward stack or pool).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TagsId(pub u32);

impl TagsId {
    /// No tags, always id 0.
    pub const NONE: TagsId = TagsId(0);
}

/// Index of a compiled-graph node in [`super::Frames`]' FX table; `FxId::NONE` is a frame
/// without `fx_*` keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FxId(pub u32);

impl FxId {
    /// A frame that names no FX node, always id 0.
    pub const NONE: FxId = FxId(0);
}
