//! The page's frame and stack tables: every stack the page shows is written once, as frame
//! indices, and every frame once, with the kind that decides whether a view shows it.

use crate::analyze::sites::{self, Kind};
use crate::model::{FrameId, Snapshot, StackId};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// What a frame is, for the page's frame toggles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    /// The user's own Python code.
    User,
    /// Python code of an installed package other than torch (`site-packages`, `dist-packages`)
    /// or of the standard library.
    Library,
    /// Python code inside the `torch` package.
    Torch,
    /// C++, CUDA or interpreter code (`stacks="all"`).
    Cpp,
    /// Interpreter and dispatcher plumbing PyTorch's own viewer hides ([`sites::is_noise`]).
    Noise,
}

impl FrameKind {
    /// The kind of a frame by its file and function ([`sites::kinds::kind`]): the
    /// dispatcher's plumbing is hidden like the interpreter's, the allocator's frames are C++.
    pub fn of(filename: &str, name: &str) -> FrameKind {
        match sites::kinds::kind(filename, name) {
            Kind::Noise | Kind::Dispatch => FrameKind::Noise,
            Kind::Allocator | Kind::Autograd | Kind::Cpp => FrameKind::Cpp,
            Kind::Torch => FrameKind::Torch,
            Kind::Library => FrameKind::Library,
            Kind::User => FrameKind::User,
        }
    }
}

/// One frame as the page shows it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FrameInfo {
    /// `name (short/path.py:line)`, as flamegraphs label it.
    pub label: String,
    /// Source file as recorded.
    pub file: String,
    /// Function name.
    pub name: String,
    /// Line number (-1 when unknown).
    pub line: i64,
    /// What the frame is.
    pub kind: FrameKind,
}

/// Frames and stacks shown by the page, each written once.
#[derive(Debug, Default)]
pub struct FrameTable {
    frames: Vec<FrameInfo>,
    frame_index: FxHashMap<FrameId, u32>,
    stacks: Vec<Vec<u32>>,
    stack_index: FxHashMap<StackId, u32>,
}

impl FrameTable {
    /// The page index of `frame`, adding it on first use.
    pub fn frame(&mut self, snap: &Snapshot, frame: FrameId) -> u32 {
        if let Some(&i) = self.frame_index.get(&frame) {
            return i;
        }
        let fr = snap.frames.get(frame);
        let file = snap.strings.get(fr.filename);
        let name = snap.strings.get(fr.name);
        let i = self.frames.len() as u32;
        self.frames.push(FrameInfo {
            label: super::super::flame::flame_label(snap, frame),
            file: file.to_string(),
            name: name.to_string(),
            line: fr.line,
            kind: FrameKind::of(file, name),
        });
        self.frame_index.insert(frame, i);
        i
    }

    /// The page index of `stack` (its frames innermost first, in call order:
    /// [`sites::ordered_frames`]), adding it on first use.
    pub fn stack(&mut self, snap: &Snapshot, stack: StackId) -> u32 {
        if let Some(&i) = self.stack_index.get(&stack) {
            return i;
        }
        let frames: Vec<u32> = sites::ordered_frames(snap, stack)
            .into_iter()
            .map(|f| self.frame(snap, f))
            .collect();
        let i = self.stacks.len() as u32;
        self.stacks.push(frames);
        self.stack_index.insert(stack, i);
        i
    }

    /// The tables: frames, and stacks as frame indices innermost first.
    pub fn into_parts(self) -> (Vec<FrameInfo>, Vec<Vec<u32>>) {
        (self.frames, self.stacks)
    }
}

#[cfg(test)]
mod tests {
    use super::FrameKind;

    #[test]
    fn kinds() {
        assert_eq!(FrameKind::of("/home/u/train.py", "main"), FrameKind::User);
        assert_eq!(
            FrameKind::of(
                "/venv/lib/python3.11/site-packages/einops/_backends.py",
                "einsum"
            ),
            FrameKind::Library
        );
        assert_eq!(
            FrameKind::of(
                "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py",
                "forward"
            ),
            FrameKind::Torch
        );
        assert_eq!(
            FrameKind::of("CUDACachingAllocator.cpp", "malloc"),
            FrameKind::Cpp
        );
        assert_eq!(
            FrameKind::of("??", "PyEval_EvalFrameDefault"),
            FrameKind::Noise
        );
    }
}
