//! The frames of a stack in call order.
//!
//! With `stacks="all"`, PyTorch unwinds the C++ stack and splices one Python frame in at
//! each interpreter frame it finds there; Python frames left over go after the last C++ frame
//! (`_start`, `__clone`). Since Python 3.11 one C evaluation loop runs a whole chain of
//! Python calls, so most Python frames are left over: a recorded stack reads
//! `..., forward (model.py), _PyEval_EvalFrameDefault, ..., Py_RunMain, _start,
//! _wrapped_call_impl, memory_profile, <module>`. The left-over frames are the outermost
//! Python frames, run by the outermost evaluation loop, so they belong right after the last
//! Python frame spliced into the C++ stack (before that loop's C frames). Stacks of Python
//! frames alone, of C++ frames alone, or without left-over frames are already in order.

use super::kinds::{self, Kind};
use crate::model::{FrameId, Snapshot, StackId};

/// The frames of `stack`, innermost first, with the Python frames PyTorch appended after the
/// C++ stack moved to where they were called (see the module documentation).
/// A stack joined with its forward frames keeps them after its own, ordered part.
pub fn ordered_frames(snap: &Snapshot, stack: StackId) -> Vec<FrameId> {
    let (own, forward) = snap.split_forward(stack);
    let mut out = ordered(snap, own);
    if let Some(marker) = snap.forward_marker.filter(|_| !forward.is_empty()) {
        out.push(marker);
        out.extend_from_slice(forward);
    }
    out
}

/// [`ordered_frames`] of frames as recorded.
fn ordered(snap: &Snapshot, frames: &[FrameId]) -> Vec<FrameId> {
    let native = |f: FrameId| {
        let fr = snap.frames.get(f);
        kinds::is_native_frame(snap.strings.get(fr.filename), snap.strings.get(fr.name))
    };
    let Some(last_native) = frames.iter().rposition(|&f| native(f)) else {
        return frames.to_vec();
    };
    let trailing = &frames[last_native + 1..];
    if trailing.is_empty() {
        return frames.to_vec();
    }
    let head = &frames[..=last_native];
    // After the last Python frame spliced into the C++ stack; without one, before the first
    // frame of the interpreter (its evaluation loop or its binary).
    let at = match head.iter().rposition(|&f| !native(f)) {
        Some(i) => i + 1,
        None => match head.iter().position(|&f| is_interpreter(snap, f)) {
            Some(i) => i,
            None => return frames.to_vec(),
        },
    };
    let mut out = Vec::with_capacity(frames.len());
    out.extend_from_slice(&head[..at]);
    out.extend_from_slice(trailing);
    out.extend_from_slice(&head[at..]);
    out
}

/// The interpreter's evaluation loop or any frame of its binary.
fn is_interpreter(snap: &Snapshot, f: FrameId) -> bool {
    let fr = snap.frames.get(f);
    let (file, name) = (snap.strings.get(fr.filename), snap.strings.get(fr.name));
    name.contains("PyEval_EvalFrame")
        || (kinds::kind(file, name) == Kind::Noise && kinds::basename(file).starts_with("python"))
}
