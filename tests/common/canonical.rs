//! [`canonical`]: a snapshot spelled out with every interned id replaced by what it names, so
//! that two snapshots whose ids are numbered differently (the parallel and the sequential
//! decoder, a salvaged and a whole decode) compare equal exactly when their content does.
//!
//! Each record is written with `{:?}` of the whole struct once its ids are blanked, so a field
//! added to a segment, block, event, frame, device, annotation or warning is compared without
//! touching this file; a field added to [`Snapshot`] itself stops the exhaustive destructuring
//! below from compiling until it is spelled here too.
//!
//! Depends on `memlens` only: `fuzz/fuzz_targets/parallel_agrees.rs` includes this file with
//! `#[path]`.
#![allow(dead_code)]

use memlens::model::{Frame, Snapshot, StackId, StrId, StreamId, TraceEvent};

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
            ..f
        };
        format!(
            "{plain:?} {:?} {:?}",
            s.strings.get(f.filename),
            s.strings.get(f.name)
        )
    });
    format!("[{}]", frames.collect::<Vec<_>>().join(", "))
}

/// One trace event spelled out (its stack, stream and strings resolved).
pub fn canonical_event(s: &Snapshot, e: &TraceEvent) -> String {
    let plain = TraceEvent {
        stack: StackId::EMPTY,
        stream: StreamId::DEFAULT,
        compile_context: StrId::EMPTY,
        user_metadata: StrId::EMPTY,
        ..*e
    };
    format!(
        "{plain:?} stream={} compile_context={:?} user_metadata={:?} stack={}",
        s.event_stream(e),
        s.strings.get(e.compile_context),
        s.strings.get(e.user_metadata),
        canonical_stack(s, e.stack)
    )
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
    } = s;
    let mut out = vec![format!("layout {layout:?}")];
    for (i, seg) in segments.iter().enumerate() {
        let mut plain = seg.clone();
        plain.stack = StackId::EMPTY;
        out.push(format!(
            "segment {i} {plain:?} stack={}",
            canonical_stack(s, seg.stack)
        ));
    }
    for (i, b) in blocks.iter().enumerate() {
        let mut plain = *b;
        plain.stack = StackId::EMPTY;
        out.push(format!(
            "block {i} {plain:?} stack={}",
            canonical_stack(s, b.stack)
        ));
    }
    for (i, e) in events.iter().enumerate() {
        out.push(format!("event {i} {}", canonical_event(s, e)));
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
            let mut plain = seg.clone();
            plain.stack = StackId::EMPTY;
            out.push(format!(
                "host_segment {i} {plain:?} stack={}",
                canonical_stack(s, seg.stack)
            ));
        }
        for (i, e) in h.events.iter().enumerate() {
            out.push(format!("host_event {i} {}", canonical_event(s, e)));
        }
    }
    out.extend(warnings.iter().map(|w| format!("warning {w:?}")));
    out.push(format!(
        "interned frames={} stacks={} frame_refs={}",
        frames.len(),
        stacks.len(),
        stacks.frame_refs()
    ));
    out
}
