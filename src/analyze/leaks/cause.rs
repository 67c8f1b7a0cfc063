//! Growing sites → causes: one cause per line of user code that keeps something every step.
//!
//! A retained autograd graph shows up at every line whose tensors the forward pass saved
//! (each layer's inputs, activations, the logits), a list that keeps a tuple at each line
//! that made one of its items: many growing sites, one cause. The sites are grouped by the
//! user frame their kept tensors share:
//!
//! - A tensor's *user path* is its stack's frames outside C++/the interpreter, the `torch`
//!   package (unless `--keep torch`) and installed packages (`site-packages`,
//!   `dist-packages`), outermost first.
//! - The *loop frames* are the frames every allocation of the measured steps shares (the
//!   script, `main`, the loop's own line when the whole step is one call): the longest common
//!   prefix of those paths. The first frame below them is the line of the loop body that made
//!   the tensor (`val_loss = evaluate(model, batch)`): growing sites whose kept tensors share it
//!   are one cause. The cause's frame, the line to change, is the deepest frame all its kept
//!   tensors share (the site itself when there is one site).
//! - Sites without a user frame (`<no frames>`, torch-only stacks) are causes of their own.
//!
//! A cause is a retained graph when its tensors are forward-pass activations: some of them were
//! made under a module's `forward`, or an `annotate` event marked them packed into the autograd
//! graph (`module_forward`, `autograd_annotation`), or — raw tensor code without modules — the
//! cause keeps tensors at two or more lines while other tensors made under the same loop-body
//! line die within their step: intermediate results of one computation that something kept
//! (`kept_intermediates`; a container keeps what the code put in it, not a computation's
//! intermediates). Otherwise it is a leak.
//!
//! A forward pass saves its input, which the loop body usually makes on the line before it
//! (`xb = xb.cuda()`): a leak made directly at a loop-body line, whose tensors come in every
//! step just before the first tensor of a retained graph's, is that graph's input and joins it.

use super::growth::SiteSeries;
use crate::analyze::sites::{self, SiteOptions};
use crate::model::{FrameId, PerStack, Snapshot, StackId};
use crate::replay::{DeviceReplay, NEVER};
use rustc_hash::FxHashSet;

/// Evidence that a cause's tensors are forward-pass activations kept by an autograd graph.
pub const MODULE_FORWARD: &str = "module_forward";
/// Some kept tensor is annotated as packed into the autograd graph.
pub const AUTOGRAD_ANNOTATION: &str = "autograd_annotation";
/// Several lines of one computation keep tensors while its other tensors die each step.
pub const KEPT_INTERMEDIATES: &str = "kept_intermediates";

/// One cause: the sites it groups and what it is.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Cause {
    /// Sites (indices into the series) whose tensors the cause keeps: the growing ones in the
    /// order found, then those growing too slowly to be findings of their own.
    pub members: Vec<usize>,
    /// How many of `members` (the first ones) grow fast enough to be findings of their own.
    pub growing: usize,
    /// Sites attached as the input of the cause's forward pass.
    pub inputs: Vec<usize>,
    /// The user frame all its kept tensors share: the line to change (`None`: no user frame;
    /// the single member's site names it).
    pub frame: Option<FrameId>,
    /// Why it is a retained graph (`None`: a leak).
    pub graph: Option<&'static str>,
}

/// The user frames of stacks, outermost first, computed once per stack.
struct Paths<'a> {
    snap: &'a Snapshot,
    opts: SiteOptions,
    cache: PerStack<Vec<FrameId>>,
}

impl<'a> Paths<'a> {
    fn new(snap: &'a Snapshot, opts: SiteOptions) -> Self {
        Paths {
            snap,
            opts,
            cache: PerStack::new(&snap.stacks),
        }
    }

    fn get(&self, stack: StackId) -> &[FrameId] {
        self.cache.get_or_init(stack, || {
            let snap = self.snap;
            let mut v: Vec<FrameId> = snap
                .stacks
                .get(stack)
                .iter()
                .copied()
                .filter(|&f| {
                    let fr = snap.frames.get(f);
                    let file = snap.strings.get(fr.filename);
                    !sites::is_native_frame(file, snap.strings.get(fr.name))
                        && (self.opts.keep_torch || !sites::is_torch(file))
                        && !is_package(file)
                })
                .collect();
            v.reverse();
            v
        })
    }
}

/// True for files of installed packages (`site-packages/`, `dist-packages/`).
fn is_package(file: &str) -> bool {
    file.contains("site-packages/")
        || file.contains("dist-packages/")
        || file.contains("site-packages\\")
        || file.contains("dist-packages\\")
}

/// Length of the common prefix of `a` and `b`.
fn common(a: &[FrameId], b: &[FrameId]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The loop-body frame of a path below `depth` loop frames (its innermost frame when the path
/// is no deeper).
fn key_of(path: &[FrameId], depth: usize) -> Option<FrameId> {
    path.get(depth).or(path.last()).copied()
}

/// What [`group`] needs about the device and its measured steps.
pub(super) struct Scope<'a> {
    /// The snapshot.
    pub snap: &'a Snapshot,
    /// The device's replay.
    pub replay: &'a DeviceReplay,
    /// First event of each measured step, in order.
    pub step_starts: &'a [i64],
    /// Last event of the last measured step.
    pub last: i64,
    /// Site attribution.
    pub opts: SiteOptions,
}

impl Scope<'_> {
    /// The measured step an event lies in.
    fn step_of(&self, event: i64) -> usize {
        self.step_starts
            .partition_point(|&s| s <= event)
            .saturating_sub(1)
    }
}

/// Groups the growing sites `triggers` (and the sites `weak` that grow too slowly to be
/// findings of their own) into causes; see the module documentation.
pub(super) fn group(
    scope: &Scope,
    series: &[SiteSeries],
    triggers: &[usize],
    weak: &[usize],
) -> Vec<Cause> {
    let r = scope.replay;
    let paths = Paths::new(scope.snap, scope.opts);
    let from = scope.step_starts.first().copied().unwrap_or(0);
    let in_window = |start: i64| start >= from && start <= scope.last;
    // The loop frames: the common prefix of every user path made in the measured steps.
    let mut loop_path: Option<&[FrameId]> = None;
    let mut depth = 0;
    for a in r.allocations.iter().filter(|a| in_window(a.start)) {
        let p = paths.get(a.stack);
        if p.is_empty() {
            continue;
        }
        match loop_path {
            None => {
                loop_path = Some(p);
                depth = p.len();
            }
            Some(l) => depth = depth.min(common(l, p)),
        }
    }
    // Loop-body lines under which a tensor was made and freed within the measured steps.
    let mut freed_under: FxHashSet<FrameId> = FxHashSet::default();
    for a in r.allocations.iter().filter(|a| in_window(a.start)) {
        if a.end != NEVER && a.end <= scope.last {
            if let Some(k) = key_of(paths.get(a.stack), depth) {
                freed_under.insert(k);
            }
        }
    }
    // Each site's key: the loop-body line holding most of its kept bytes.
    let key_of_site = |k: usize| -> Option<FrameId> {
        let mut by: Vec<(FrameId, u64)> = Vec::new();
        for &ai in &series[k].kept {
            let a = &r.allocations[ai];
            if let Some(f) = key_of(paths.get(a.stack), depth) {
                match by.iter_mut().find(|(g, _)| *g == f) {
                    Some(e) => e.1 += a.size,
                    None => by.push((f, a.size)),
                }
            }
        }
        by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0 .0.cmp(&b.0 .0)));
        by.first().map(|&(f, _)| f)
    };
    let mut causes: Vec<(Option<FrameId>, Cause)> = Vec::new();
    for &k in triggers {
        let key = key_of_site(k);
        match causes.iter_mut().find(|(g, _)| key.is_some() && *g == key) {
            Some((_, c)) => {
                c.members.push(k);
                c.growing += 1;
            }
            None => causes.push((
                key,
                Cause {
                    members: vec![k],
                    growing: 1,
                    inputs: Vec::new(),
                    frame: None,
                    graph: None,
                },
            )),
        }
    }
    for &k in weak {
        let key = key_of_site(k);
        if let Some((_, c)) = causes.iter_mut().find(|(g, _)| key.is_some() && *g == key) {
            c.members.push(k);
        }
    }
    for (key, c) in &mut causes {
        // The deepest frame every kept tensor shares.
        let mut shared: Option<&[FrameId]> = None;
        for &m in &c.members {
            for &ai in &series[m].kept {
                let p = paths.get(r.allocations[ai].stack);
                if p.is_empty() {
                    continue;
                }
                shared = Some(match shared {
                    None => p,
                    Some(s) => &s[..common(s, p)],
                });
            }
        }
        c.frame = shared.and_then(|s| s.last().copied());
        let lines: FxHashSet<&str> = c.members[..c.growing]
            .iter()
            .map(|&m| series[m].label.as_str())
            .collect();
        c.graph = if c.members.iter().any(|&m| series[m].forward) {
            Some(MODULE_FORWARD)
        } else if c.members.iter().any(|&m| series[m].annotated) {
            Some(AUTOGRAD_ANNOTATION)
        } else if lines.len() >= 2 && key.is_some_and(|k| freed_under.contains(&k)) {
            Some(KEPT_INTERMEDIATES)
        } else {
            None
        };
    }
    // A leak made at a loop-body line just before a retained graph's tensors is its input.
    let first_kept = |c: &Cause| -> Vec<Option<i64>> {
        let mut v = vec![None; scope.step_starts.len()];
        for &m in &c.members {
            for &ai in &series[m].kept {
                let start = r.allocations[ai].start;
                let s = scope.step_of(start);
                v[s] = Some(v[s].map_or(start, |x: i64| x.min(start)));
            }
        }
        v
    };
    let graphs: Vec<(usize, Vec<Option<i64>>)> = causes
        .iter()
        .enumerate()
        .filter(|(_, (_, c))| c.graph.is_some())
        .map(|(i, (_, c))| (i, first_kept(c)))
        .collect();
    let mut attach: Vec<(usize, usize)> = Vec::new();
    for (i, (_, c)) in causes.iter().enumerate() {
        if c.graph.is_some() {
            continue;
        }
        let at_loop_line = c.members.iter().all(|&m| {
            series[m]
                .kept
                .iter()
                .all(|&ai| paths.get(r.allocations[ai].stack).len() == depth + 1)
        });
        if !at_loop_line {
            continue;
        }
        let mut last_in_step = vec![None; scope.step_starts.len()];
        for &m in &c.members {
            for &ai in &series[m].kept {
                let start = r.allocations[ai].start;
                let s = scope.step_of(start);
                last_in_step[s] = Some(last_in_step[s].map_or(start, |x: i64| x.max(start)));
            }
        }
        // The graph whose first kept tensor follows this one's last in every step; the
        // nearest one (fewest events in between) when several do.
        let gap = |firsts: &[Option<i64>]| -> Option<i64> {
            let mut sum = 0;
            for (l, f) in last_in_step.iter().zip(firsts) {
                match (l, f) {
                    (Some(l), Some(f)) if l < f => sum += f - l,
                    (Some(_), _) => return None,
                    (None, _) => {}
                }
            }
            Some(sum)
        };
        let found = graphs
            .iter()
            .filter_map(|(g, firsts)| gap(firsts).map(|d| (d, *g)))
            .min();
        if let Some((_, g)) = found {
            attach.push((i, g));
        }
    }
    let mut dropped = vec![false; causes.len()];
    for &(i, g) in &attach {
        let members = causes[i].1.members.clone();
        causes[g].1.inputs.extend(members);
        dropped[i] = true;
    }
    causes
        .into_iter()
        .zip(dropped)
        .filter(|(_, d)| !d)
        .map(|((_, c), _)| c)
        .collect()
}
