//! The user lines of one stack: the one rule of `memlens lines`, computed once per distinct
//! stack ([`StackLines`], a [`PerStack`] cache).
//!
//! A stack's lines are its *user* frames ([`kinds::Kind::User`]: Python code outside torch,
//! installed packages and the standard library), innermost first:
//!
//! - a frame of generated code (Inductor's output, an FX graph module) that carries an FX
//!   node with an original trace (`fx_original_trace`), found inside the stack's innermost
//!   user frame, contributes that trace's user frames in its place (the model code the
//!   compiled node was traced from), as the site of such a stack is named
//!   ([`crate::vocab::sites`]);
//! - a backward-pass stack joined with its forward frames ([`Snapshot::split_forward`]) reads
//!   its forward part the same way, and that part's lines come first: they name the forward
//!   code the gradient is computed for, which is also its site;
//! - the first line is the stack's *self* line; a line (file, line number) that appears more
//!   than once (a recursive function) is kept once, where it first appears.

use crate::model::{FrameId, PerStack, Snapshot, StackId, StrId};
use crate::vocab::sites::kinds::{self, Kind};

/// A source line: the file's interned name and the line number as recorded (-1: unknown).
pub type LineKey = (StrId, i64);

/// One line of a stack, with the function that line was recorded in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackLine {
    /// File and line.
    pub key: LineKey,
    /// The recorded function name.
    pub function: StrId,
}

/// The distinct user lines of every stack, each stack's computed the first time it is asked
/// for.
pub struct StackLines<'s> {
    snap: &'s Snapshot,
    cache: PerStack<Vec<StackLine>>,
}

impl<'s> StackLines<'s> {
    /// An empty cache for the stacks of `snap`.
    pub fn new(snap: &'s Snapshot) -> Self {
        StackLines {
            snap,
            cache: PerStack::new(&snap.stacks),
        }
    }

    /// The distinct user lines of `stack`, the self line first (empty: no user frame).
    pub fn of(&self, stack: StackId) -> &[StackLine] {
        self.cache.get_or_init(stack, || lines_of(self.snap, stack))
    }
}

/// [`StackLines::of`], uncached.
pub fn lines_of(snap: &Snapshot, stack: StackId) -> Vec<StackLine> {
    let (own, forward) = snap.split_forward(stack);
    let mut out: Vec<StackLine> = Vec::new();
    // A set, not a scan of `out`: a recursion can make a stack of 100,000 frames.
    let mut seen = rustc_hash::FxHashSet::default();
    for part in [forward, own] {
        for line in part_lines(snap, part) {
            if seen.insert(line.key) {
                out.push(line);
            }
        }
    }
    out
}

/// The user lines of one part of a stack, innermost first, an FX node's original trace in
/// place of the generated code that ran it (duplicates kept; [`lines_of`] drops them).
fn part_lines(snap: &Snapshot, frames: &[FrameId]) -> Vec<StackLine> {
    let mut out = Vec::new();
    let mut inside_user = false;
    for &f in frames {
        let fr = snap.frames.get(f);
        let kind = kinds::kind(snap.strings.get(fr.filename), snap.strings.get(fr.name));
        if kind == Kind::User {
            inside_user = true;
            out.push(StackLine {
                key: (fr.filename, fr.line),
                function: fr.name,
            });
        } else if !inside_user && snap.frames.has_fx() {
            if let Some(original) = snap.fx_stack(fr.fx) {
                // The original trace is plain frames: no FX node of its own to expand.
                out.extend(user_frames(snap, snap.stacks.get(original)));
                inside_user = true;
            }
        }
    }
    out
}

/// The user frames among `frames`, in their order.
fn user_frames<'a>(
    snap: &'a Snapshot,
    frames: &'a [FrameId],
) -> impl Iterator<Item = StackLine> + 'a {
    frames.iter().filter_map(move |&f| {
        let fr = snap.frames.get(f);
        (kinds::kind(snap.strings.get(fr.filename), snap.strings.get(fr.name)) == Kind::User)
            .then_some(StackLine {
                key: (fr.filename, fr.line),
                function: fr.name,
            })
    })
}
