//! The allocator state at a moment as the page draws it: each segment a row of blocks.

use super::frames::FrameTable;
use super::notes::{AllocNote, NoteSource, NoteTable};
use crate::model::{BlockState, PoolKind, Snapshot, TraceEvent};
use crate::replay::state::{AllocatorState, SegmentAt};
use crate::replay::DeviceReplay;
use serde::Serialize;

/// One segment (or mapped range of an expandable segment) and its blocks.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SegmentView {
    /// Base address.
    pub address: u64,
    /// Bytes reserved.
    pub size: u64,
    /// Raw stream handle.
    pub stream: u64,
    /// small / large / unknown.
    pub pool: PoolKind,
    /// Private pool id; [0, 0] for the default pools.
    pub pool_id: [u64; 2],
    /// Part of an expandable segment.
    pub expandable: bool,
    /// Blocks in address order: `[offset in the segment, size, requested bytes, state,
    /// stack]`, each exactly 5 integers; state 0 allocated, 1 pending free (`record_stream`), 2
    /// cached free; stack an index in the top-level `stacks`, -1 for free blocks.
    pub blocks: Vec<[i64; 5]>,
    /// `[block index in blocks, note index in the state's notes]` of each block whose
    /// allocation has annotations or metadata; absent when none has.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub block_notes: Vec<[u32; 2]>,
}

/// The state the page draws.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StateView {
    /// True when this is the recorded final state; false when rebuilt from the trace (sizes
    /// of blocks freed later are estimated from their requested sizes).
    pub exact: bool,
    /// Trace entries that could not be undone while rebuilding it.
    pub inconsistencies: usize,
    /// Segments by address.
    pub segments: Vec<SegmentView>,
    /// The annotations and metadata of its blocks' allocations, each distinct one once
    /// (`block_notes` index it); absent when none has.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<AllocNote>,
}

/// A traced device's allocations and their notes, to name the notes of a state's blocks.
pub struct BlockNotes<'a> {
    /// The device's replay.
    pub replay: &'a DeviceReplay,
    /// Its trace.
    pub trace: &'a [TraceEvent],
    /// Its notes.
    pub notes: &'a NoteSource,
}

/// The view of `st`, stacks indexed in `table`; with `notes`, each allocated block's
/// annotations and metadata.
pub fn view(
    snap: &Snapshot,
    st: &AllocatorState,
    table: &mut FrameTable,
    notes: Option<BlockNotes<'_>>,
) -> StateView {
    let notes = notes.filter(|n| n.notes.any());
    let mut interned = NoteTable::default();
    let segments = st
        .segments
        .iter()
        .map(|s| SegmentView {
            block_notes: match &notes {
                Some(n) => block_notes(snap, s, st.at, n, &mut interned),
                None => Vec::new(),
            },
            address: s.address,
            size: s.size,
            stream: s.stream,
            pool: s.pool,
            pool_id: [s.pool_id.0, s.pool_id.1],
            expandable: s.expandable,
            blocks: s
                .blocks
                .iter()
                .map(|b| {
                    let (state, stack) = match b.state {
                        BlockState::ActiveAllocated => (0, table.stack(snap, b.stack) as i64),
                        BlockState::ActivePendingFree => (1, table.stack(snap, b.stack) as i64),
                        BlockState::Inactive => (2, -1),
                    };
                    [
                        b.address.wrapping_sub(s.address) as i64,
                        b.size as i64,
                        b.requested as i64,
                        state,
                        stack,
                    ]
                })
                .collect(),
        })
        .collect();
    StateView {
        exact: st.exact,
        inconsistencies: st.inconsistencies,
        segments,
        notes: interned.into_notes(),
    }
}

/// The notes of segment `s`'s allocated blocks at moment `at`, interned in `interned`.
fn block_notes(
    snap: &Snapshot,
    s: &SegmentAt,
    at: i64,
    n: &BlockNotes<'_>,
    interned: &mut NoteTable,
) -> Vec<[u32; 2]> {
    let mut out = Vec::new();
    for (k, b) in s.blocks.iter().enumerate() {
        if b.state == BlockState::Inactive {
            continue;
        }
        let Some(i) = n.notes.live_at(n.replay, b.address, at) else {
            continue;
        };
        if let Some(note) = n.notes.note(snap, n.replay, n.trace, i) {
            out.push([k as u32, interned.intern(note)]);
        }
    }
    out
}
