//! [`canonical`]: a snapshot spelled out with every interned id replaced by what it names, so
//! that two snapshots whose ids are numbered differently (the parallel and the sequential
//! decoder, a salvaged and a whole decode) compare equal exactly when their content does.
//!
//! A stack is spelled out once, on a `stack #n` line before the first record that holds it
//! (numbered in order of first use, so the numbering depends on content, not on ids); records
//! then name it `#n`. Spelling it out on every record made this the slowest part of the tests.
//!
//! Each record is written with `{:?}` of the whole struct once its ids are blanked, so a field
//! added to a segment, block, event, frame, device, annotation or warning is compared without
//! touching this file; a field added to [`Snapshot`] itself stops the exhaustive destructuring
//! below from compiling until it is spelled here too.
//!
//! Depends on `memlens` only: `fuzz/fuzz_targets/parallel_agrees.rs` includes this file with
//! `#[path]`.
#![allow(dead_code)]

use memlens::model::{Frame, FxId, Snapshot, StackId, StrId, StreamId, TagsId, TraceEvent};
use std::collections::HashMap;

/// A stack spelled out: `<absent>` when its holder had no `frames` key, else every frame
/// (innermost first) as `{:?}` of the frame with its strings blanked, then those strings.
pub fn canonical_stack(s: &Snapshot, id: StackId) -> String {
    if !id.is_recorded() {
        return "<absent>".into();
    }
    let frames = s.stacks.get(id).iter().map(|&f| {
        let f = *s.frames.get(f);
        let plain = Frame {
            filename: StrId::EMPTY,
            name: StrId::EMPTY,
            fx: FxId::NONE,
            ..f
        };
        let fx = s.frames.fx(f.fx).map(|n| {
            [n.op, n.name, n.target, n.original_trace].map(|t| s.strings.get(t).to_string())
        });
        format!(
            "{plain:?} {:?} {:?} fx={fx:?}",
            s.strings.get(f.filename),
            s.strings.get(f.name)
        )
    });
    format!("[{}]", frames.collect::<Vec<_>>().join(", "))
}

/// One trace event spelled out (its stack, stream and strings resolved).
pub fn canonical_event(s: &Snapshot, e: &TraceEvent) -> String {
    event_with_stack(s, e, &canonical_stack(s, e.stack))
}

/// [`canonical_event`] of each of `events` (of snapshot `s`), in order: the same strings, each
/// stack spelled once per id instead of once per event.
pub fn canonical_events(s: &Snapshot, events: &[TraceEvent]) -> Vec<String> {
    let mut stacks: HashMap<StackId, String> = HashMap::new();
    events
        .iter()
        .map(|e| {
            let stack = stacks
                .entry(e.stack)
                .or_insert_with(|| canonical_stack(s, e.stack));
            event_with_stack(s, e, stack)
        })
        .collect()
}

/// [`canonical_event`] with its stack already spelled (or named).
fn event_with_stack(s: &Snapshot, e: &TraceEvent, stack: &str) -> String {
    let plain = TraceEvent {
        stack: StackId::EMPTY,
        stream: StreamId::DEFAULT,
        tags: TagsId::NONE,
        ..*e
    };
    let t = s.event_tags(e);
    format!(
        "{plain:?} stream={} compile_context={:?} user_metadata={:?} internal_metadata={:?} pool_id={:?} forward={} stack={}",
        s.event_stream(e),
        s.strings.get(t.compile_context),
        s.strings.get(t.user_metadata),
        s.strings.get(t.internal_metadata),
        t.pool_id,
        canonical_stack(s, t.forward_stack),
        stack
    )
}

/// Names stacks by content for [`canonical`]: `#n` in order of first use, with a
/// `stack #n [...]` line pushed the first time a content is seen.
struct StackNames {
    by_id: HashMap<StackId, String>,
    by_content: HashMap<String, usize>,
}

impl StackNames {
    fn new() -> Self {
        StackNames {
            by_id: HashMap::new(),
            by_content: HashMap::new(),
        }
    }

    /// The name of stack `id` (`<absent>` when not recorded), defining it in `out` if new.
    fn name(&mut self, s: &Snapshot, id: StackId, out: &mut Vec<String>) -> String {
        if !id.is_recorded() {
            return "<absent>".into();
        }
        if let Some(n) = self.by_id.get(&id) {
            return n.clone();
        }
        let content = canonical_stack(s, id);
        let next = self.by_content.len();
        let n = *self.by_content.entry(content.clone()).or_insert_with(|| {
            out.push(format!("stack #{next} {content}"));
            next
        });
        let name = format!("#{n}");
        self.by_id.insert(id, name.clone());
        name
    }
}

/// Everything the snapshot says, one line per record, ids resolved; the last line gives the
/// sizes of the frame and stack tables (both decoders intern each distinct one once).
pub fn canonical(s: &Snapshot) -> Vec<String> {
    let Snapshot {
        layout,
        strings: _, // resolved through the ids below
        frames,     // resolved through the stacks; its size on the last line
        stacks,     // resolved through the ids below; its size on the last line
        streams: _, // resolved through the events
        segments,
        blocks,
        events,
        devices,
        allocator_settings,
        annotations,
        host,
        warnings,
        tags, // resolved through the events; its size on the last line
        unknown_actions,
        fx_stacks,          // spelled below, by FX node
        forward_marker: _,  // resolved through the stacks
        recorded_stacks: _, // what the joined stacks say
        recorded_distinct,
    } = s;
    let mut out = vec![format!("layout {layout:?}")];
    let mut names = StackNames::new();
    for (i, seg) in segments.iter().enumerate() {
        let stack = names.name(s, seg.stack, &mut out);
        let mut plain = seg.clone();
        plain.stack = StackId::EMPTY;
        out.push(format!("segment {i} {plain:?} stack={}", stack));
    }
    for (i, b) in blocks.iter().enumerate() {
        let stack = names.name(s, b.stack, &mut out);
        let mut plain = *b;
        plain.stack = StackId::EMPTY;
        out.push(format!("block {i} {plain:?} stack={}", stack));
    }
    for (i, e) in events.iter().enumerate() {
        let stack = names.name(s, e.stack, &mut out);
        out.push(format!("event {i} {}", event_with_stack(s, e, &stack)));
    }
    out.extend(devices.iter().map(|d| format!("device {d:?}")));
    out.push(format!("allocator_settings {allocator_settings:?}"));
    out.extend(annotations.iter().map(|a| format!("annotation {a:?}")));
    if let Some(h) = host {
        out.push(format!(
            "host segments_recorded={} trace_recorded={}",
            h.segments_recorded, h.trace_recorded
        ));
        for (i, seg) in h.segments.iter().enumerate() {
            let stack = names.name(s, seg.stack, &mut out);
            let mut plain = seg.clone();
            plain.stack = StackId::EMPTY;
            out.push(format!("host_segment {i} {plain:?} stack={}", stack));
        }
        for (i, e) in h.events.iter().enumerate() {
            let stack = names.name(s, e.stack, &mut out);
            out.push(format!("host_event {i} {}", event_with_stack(s, e, &stack)));
        }
    }
    out.extend(warnings.iter().map(|w| format!("warning {w:?}")));
    out.push(format!("unknown_actions {unknown_actions:?}"));
    out.push(format!("recorded_distinct {recorded_distinct:?}"));
    for (i, st) in fx_stacks.iter().enumerate() {
        out.push(format!("fx_stack {i} {}", canonical_stack(s, *st)));
    }
    out.push(format!(
        "interned frames={} stacks={} frame_refs={} tags={}",
        frames.len(),
        stacks.len(),
        stacks.frame_refs(),
        tags.len()
    ));
    out
}
