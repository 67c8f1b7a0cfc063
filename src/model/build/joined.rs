//! Stacks that say where a backward-pass allocation's forward code ran, and where a
//! compiled graph's node came from, done once after the snapshot is assembled (both decoders
//! reach here with the same tables, so the result does not depend on the decoder):
//!
//! - An entry with `forward_frames` gets the stack `own frames, marker, forward frames`
//!   ([`FORWARD_MARKER`]): one stack id that sites, categories, flamegraphs and the page read
//!   like any other (`vocab::sites` names it by its forward code); its own frames and its
//!   `forward_frames` stay in [`EventTags`](crate::model::EventTags) and are what `slice`
//!   writes back.
//! - Each FX node's `fx_original_trace` becomes a stack ([`Snapshot::fx_stacks`]).

use crate::model::ids::{FxId, StackId, StrId, TagsId};
use crate::model::intern::Frame;
use crate::model::kinds::FORWARD_MARKER;
use crate::model::snapshot::{Snapshot, TraceEvent};
use crate::model::traceback;
use rustc_hash::FxHashMap;

/// Joins forward stacks and parses FX traces (see the module documentation).
pub(super) fn join(snap: &mut Snapshot) {
    fx_stacks(snap);
    let forward: Vec<bool> = snap
        .tags
        .iter()
        .map(|(_, t)| t.forward_stack.is_recorded())
        .collect();
    if !forward.iter().any(|&f| f) {
        return;
    }
    let marker = intern_frame(snap, FORWARD_MARKER, "", -1);
    snap.forward_marker = Some(marker);
    let mut joined: FxHashMap<(StackId, TagsId), StackId> = FxHashMap::default();
    let mut events = std::mem::take(&mut snap.events);
    let mut host = snap.host.as_mut().map(|h| std::mem::take(&mut h.events));
    for e in events.iter_mut().chain(host.iter_mut().flatten()) {
        if forward[e.tags.0 as usize] {
            e.stack = join_one(snap, &mut joined, e, marker);
        }
    }
    snap.events = events;
    if let (Some(h), Some(events)) = (snap.host.as_mut(), host) {
        h.events = events;
    }
}

/// The joined stack of `e` (own frames, marker, forward frames), interned once per pair.
fn join_one(
    snap: &mut Snapshot,
    joined: &mut FxHashMap<(StackId, TagsId), StackId>,
    e: &TraceEvent,
    marker: crate::model::FrameId,
) -> StackId {
    *joined.entry((e.stack, e.tags)).or_insert_with(|| {
        let forward = snap.tags.get(e.tags).forward_stack;
        let mut frames = snap.stacks.get(e.stack).to_vec();
        frames.push(marker);
        frames.extend_from_slice(snap.stacks.get(forward));
        let id = snap.stacks.intern(&frames);
        snap.recorded_stacks.insert(id, e.stack);
        id
    })
}

/// [`Snapshot::fx_stacks`]: each FX node's original trace as a stack, innermost first.
fn fx_stacks(snap: &mut Snapshot) {
    if !snap.frames.has_fx() {
        return;
    }
    let traces: Vec<(FxId, StrId)> = snap
        .frames
        .fx_nodes()
        .map(|(id, n)| (id, n.original_trace))
        .collect();
    let mut out = vec![StackId::ABSENT; traces.len() + 1];
    for (id, text) in traces {
        let text = snap.strings.get(text).to_string();
        let parsed = traceback::frames(&text);
        if parsed.is_empty() {
            continue;
        }
        let mut ids: Vec<_> = parsed
            .iter()
            .map(|f| intern_frame(snap, f.filename, f.name, f.line))
            .collect();
        ids.reverse();
        out[id.0 as usize] = snap.stacks.intern(&ids);
    }
    snap.fx_stacks = out;
}

fn intern_frame(
    snap: &mut Snapshot,
    filename: &str,
    name: &str,
    line: i64,
) -> crate::model::FrameId {
    let frame = Frame {
        filename: snap.strings.intern(filename),
        name: snap.strings.intern(name),
        line,
        fx: FxId::NONE,
    };
    snap.frames.intern(frame)
}
