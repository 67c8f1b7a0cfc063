//! The page's frame and stack tables: every stack the page shows is written once, as frame
//! indices, and every frame once, with the kind that decides whether a view shows it.

use crate::model::{FrameId, Snapshot, StackId};
use crate::vocab::sites::{self, Kind};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// What a frame is, for the page's frame toggles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// Only on the mark that stands for the middle of a stack deeper than the page shows
    /// ([`page_frames`]): how many frames it stands for (`label` says "… N frames not shown").
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "u64"))]
    pub elided: Option<u64>,
    /// Only on the node that stands for memory alive before the trace with no stack
    /// recorded, by its likely kind (`label`: `<before trace, no stack> likely parameters`,
    /// [`crate::analyze::pretrace`]): true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub predates_trace: bool,
}

/// Frames the page keeps at each end of a stack: the innermost and the outermost
/// `PAGE_FRAMES_EACH_END`, the frames between them one mark. A flamegraph 2 x 128 rows deep
/// is already taller than anything read on a screen; a stack of 300,000 frames must not put
/// 300,000 frames into the page (issue #36).
pub const PAGE_FRAMES_EACH_END: usize = 128;

/// One frame of a stack as the page ships it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageFrame {
    /// A recorded frame.
    Frame(FrameId),
    /// The mark of this many frames left out between the two ends.
    Elided(u64),
}

/// The frames of `stack` the page ships, innermost first, in call order
/// ([`sites::ordered_frames`]): all of them up to 2 x [`PAGE_FRAMES_EACH_END`], else the
/// innermost and outermost [`PAGE_FRAMES_EACH_END`] with one [`PageFrame::Elided`] between.
pub fn page_frames(snap: &Snapshot, stack: StackId) -> Vec<PageFrame> {
    let all = sites::ordered_frames(snap, stack);
    let k = PAGE_FRAMES_EACH_END;
    if all.len() <= 2 * k {
        return all.into_iter().map(PageFrame::Frame).collect();
    }
    let mut out: Vec<PageFrame> = all[..k].iter().map(|&f| PageFrame::Frame(f)).collect();
    out.push(PageFrame::Elided((all.len() - 2 * k) as u64));
    out.extend(all[all.len() - k..].iter().map(|&f| PageFrame::Frame(f)));
    out
}

/// Frames and stacks shown by the page, each written once.
#[derive(Debug, Default)]
pub struct FrameTable {
    frames: Vec<FrameInfo>,
    frame_index: FxHashMap<FrameId, u32>,
    stacks: Vec<Vec<u32>>,
    stack_index: FxHashMap<StackId, u32>,
    elided_index: FxHashMap<u64, u32>,
    label_index: FxHashMap<String, u32>,
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
            label: crate::analyze::flame::flame_label(snap, frame),
            file: file.to_string(),
            name: name.to_string(),
            line: fr.line,
            kind: FrameKind::of(file, name),
            elided: None,
            predates_trace: false,
        });
        self.frame_index.insert(frame, i);
        i
    }

    /// The page index of `f`: a recorded frame ([`FrameTable::frame`]), or the mark of `n`
    /// frames elided, added on first use (kind `user`, so that every view shows it).
    pub fn page_frame(&mut self, snap: &Snapshot, f: PageFrame) -> u32 {
        let n = match f {
            PageFrame::Frame(frame) => return self.frame(snap, frame),
            PageFrame::Elided(n) => n,
        };
        if let Some(&i) = self.elided_index.get(&n) {
            return i;
        }
        let i = self.frames.len() as u32;
        self.frames.push(FrameInfo {
            label: sites::elided_label(n),
            file: String::new(),
            name: "…".into(),
            line: -1,
            kind: FrameKind::User,
            elided: Some(n),
            predates_trace: false,
        });
        self.elided_index.insert(n, i);
        i
    }

    /// The page index of the node that stands for memory alive before the trace with no
    /// stack, labelled `label` by its likely kind, added on first use (kind `user`, so that
    /// every view shows it).
    pub fn pretrace_frame(&mut self, label: &str) -> u32 {
        if let Some(&i) = self.label_index.get(label) {
            return i;
        }
        let i = self.frames.len() as u32;
        self.frames.push(FrameInfo {
            label: label.to_string(),
            file: String::new(),
            name: label.to_string(),
            line: -1,
            kind: FrameKind::User,
            elided: None,
            predates_trace: true,
        });
        self.label_index.insert(label.to_string(), i);
        i
    }

    /// The page index of `stack` (its frames innermost first, in call order, the middle of
    /// a very deep one elided: [`page_frames`]), adding it on first use.
    pub fn stack(&mut self, snap: &Snapshot, stack: StackId) -> u32 {
        if let Some(&i) = self.stack_index.get(&stack) {
            return i;
        }
        let frames: Vec<u32> = page_frames(snap, stack)
            .into_iter()
            .map(|f| self.page_frame(snap, f))
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
