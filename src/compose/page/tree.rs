//! Flamegraph trees of one live set, one per frame view: the page switches between them when
//! C++ or PyTorch-internal frames are toggled, so no merging happens in the browser.

use super::frames::{FrameKind, FrameTable, PageFrame};
use crate::model::{Snapshot, StackId};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// One flamegraph as flat columns in pre-order (each node before its callees, callees
/// heaviest first, ties by frame index), so no nesting limits how deep a stack may be. A
/// node's value minus its callees' is its own bytes (or callees pruned as too light).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Tree {
    /// Index in the top-level `frames` of each node; -2 for the root, -1 for a stack left without frames
    /// by the view (`<no frames>`).
    pub frame: Vec<i64>,
    /// Bytes live under each node.
    pub value: Vec<u64>,
    /// The node's caller (its index in these columns); -1 for the root.
    pub parent: Vec<i64>,
    /// Depth: 0 for the root.
    pub depth: Vec<u32>,
}

/// Which frames a view hides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FrameView {
    /// Every frame but interpreter plumbing.
    All,
    /// Without C++ frames.
    NoCpp,
    /// Without frames inside the torch package.
    NoTorch,
    /// Python frames outside torch only.
    User,
}

impl FrameView {
    /// Every view, in the order the page lists them.
    pub const ALL: [FrameView; 4] = [
        FrameView::All,
        FrameView::NoCpp,
        FrameView::NoTorch,
        FrameView::User,
    ];

    fn shows(self, kind: FrameKind) -> bool {
        !matches!(
            (self, kind),
            (_, FrameKind::Noise)
                | (FrameView::NoCpp | FrameView::User, FrameKind::Cpp)
                | (FrameView::NoTorch | FrameView::User, FrameKind::Torch)
        )
    }
}

/// The trees of one live set.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FlameTrees {
    /// Σ weights: the root's value.
    pub total: u64,
    /// Callees lighter than this were folded into their caller's own bytes (a 10,000th of
    /// the total: under a pixel at any width a screen has).
    pub pruned_below_bytes: u64,
    /// Every frame but interpreter plumbing.
    pub all: Tree,
    /// Without C++ frames.
    pub no_cpp: Tree,
    /// Without frames inside the torch package.
    pub no_torch: Tree,
    /// Python frames outside torch only.
    pub user: Tree,
}

#[derive(Default)]
struct Trie {
    value: Vec<u64>,
    frame: Vec<i64>,
    children: Vec<Vec<usize>>,
    index: FxHashMap<(usize, i64), usize>,
}

impl Trie {
    fn new() -> Trie {
        let mut t = Trie::default();
        t.value.push(0);
        t.frame.push(-2);
        t.children.push(Vec::new());
        t
    }

    fn child(&mut self, parent: usize, frame: i64) -> usize {
        if let Some(&c) = self.index.get(&(parent, frame)) {
            return c;
        }
        let c = self.value.len();
        self.value.push(0);
        self.frame.push(frame);
        self.children.push(Vec::new());
        self.children[parent].push(c);
        self.index.insert((parent, frame), c);
        c
    }

    /// The trie in pre-order, callees lighter than `min` left out.
    fn flatten(&self, min: u64) -> Tree {
        let mut out = Tree::default();
        let mut todo: Vec<(usize, i64, u32)> = vec![(0, -1, 0)];
        while let Some((i, parent, depth)) = todo.pop() {
            let me = out.frame.len() as i64;
            out.frame.push(self.frame[i]);
            out.value.push(self.value[i]);
            out.parent.push(parent);
            out.depth.push(depth);
            let mut kids: Vec<usize> = self.children[i]
                .iter()
                .copied()
                .filter(|&c| self.value[c] >= min)
                .collect();
            kids.sort_by(|&a, &b| {
                self.value[b]
                    .cmp(&self.value[a])
                    .then(self.frame[a].cmp(&self.frame[b]))
            });
            // Pushed lightest first, so the heaviest is taken next.
            todo.extend(kids.into_iter().rev().map(|c| (c, me, depth + 1)));
        }
        out
    }
}

/// The trees of `weights` (bytes per stack) and `labelled` (bytes of memory alive before the
/// trace with no stack, by its label: one node of its own under the root, in every view),
/// frames indexed in `table`.
pub fn trees(
    snap: &Snapshot,
    weights: &FxHashMap<StackId, u64>,
    labelled: &FxHashMap<String, u64>,
    table: &mut FrameTable,
) -> FlameTrees {
    let total: u64 = weights.values().sum::<u64>() + labelled.values().sum::<u64>();
    let min = (total / 10_000).max(1);
    let mut ordered: Vec<(StackId, u64)> = weights.iter().map(|(&s, &w)| (s, w)).collect();
    ordered.sort_unstable();
    // Page frame index and kind of every frame, stack by stack, outermost first.
    let mut labels: Vec<(&String, u64)> = labelled.iter().map(|(l, &w)| (l, w)).collect();
    labels.sort_unstable();
    let mut stacks: Vec<(Vec<(i64, FrameKind)>, u64)> = labels
        .into_iter()
        .map(|(l, w)| (vec![(table.pretrace_frame(l) as i64, FrameKind::User)], w))
        .collect();
    stacks.extend(ordered.into_iter().map(|(s, w)| {
        let frames = super::frames::page_frames(snap, s)
            .into_iter()
            .rev()
            .map(|f| {
                let kind = match f {
                    PageFrame::Frame(f) => {
                        let fr = snap.frames.get(f);
                        FrameKind::of(snap.strings.get(fr.filename), snap.strings.get(fr.name))
                    }
                    PageFrame::Elided(_) => FrameKind::User,
                };
                (table.page_frame(snap, f) as i64, kind)
            })
            .collect();
        (frames, w)
    }));
    let mut views = FrameView::ALL.iter().map(|&view| {
        let mut t = Trie::new();
        for (frames, w) in &stacks {
            t.value[0] += w;
            let mut at = 0;
            let mut shown = 0;
            for &(f, kind) in frames {
                if view.shows(kind) {
                    at = t.child(at, f);
                    t.value[at] += w;
                    shown += 1;
                }
            }
            if shown == 0 {
                let c = t.child(0, -1);
                t.value[c] += w;
            }
        }
        t.flatten(min)
    });
    let mut next = || views.next().expect("four views");
    FlameTrees {
        total,
        pruned_below_bytes: min,
        all: next(),
        no_cpp: next(),
        no_torch: next(),
        user: next(),
    }
}
