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
//!
//! The loss is computed from the forward pass's output, usually in the loop body, outside any
//! module's forward (`loss = F.cross_entropy(logits, y)`), and what it saves (the log-softmax
//! output) is kept by the same graph: a cause whose kept tensors are a *loss computation's* —
//! all made under a loss function's frame (`torch/nn/functional.py`'s `*_loss`,
//! `cross_entropy`, `kl_div`; anything in `torch/nn/modules/loss.py`), or, for user code, at a
//! loop-body line that also makes a scalar (the loss value, at most 8 bytes, outside any
//! module's forward) in each of those steps while keeping a larger tensor — joins the retained
//! graph whose first kept tensor precedes its own in every step (the nearest, when several do),
//! when both keep tensors in exactly the same steps and all of its tensors are made within
//! their step. Sites growing too slowly to be findings of their own (whose line keeps nothing
//! else) join the same way. Anything else made after the forward pass (a list of outputs)
//! stays a cause of its own.

use super::growth::SiteSeries;
use crate::model::{FrameId, PerStack, Snapshot, StackId};
use crate::replay::{DeviceReplay, NEVER};
use crate::vocab::sites::{self, SiteOptions};
use rustc_hash::{FxHashMap, FxHashSet};

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
    /// Sites attached as what the loss computed from the forward pass's output saved (made
    /// after it, outside any module's forward).
    pub losses: Vec<usize>,
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

/// Per measured step, the events of the first and last tensor of some sites kept in it.
type Spans = Vec<Option<(i64, i64)>>;

/// The largest tensor taken for a scalar (a loss value): one float64 element.
const SCALAR_BYTES: u64 = 8;

/// True for a frame of a loss function: `torch/nn/functional.py`'s `cross_entropy`, `kl_div`
/// and `*_loss`, and anything in `torch/nn/modules/loss.py` (the loss modules' forward).
fn is_loss_frame(file: &str, name: &str) -> bool {
    if !sites::is_torch(file) {
        return false;
    }
    let f = file.replace('\\', "/");
    f.ends_with("/nn/modules/loss.py")
        || (f.ends_with("/nn/functional.py")
            && (name.ends_with("_loss") || name.contains("cross_entropy") || name == "kl_div"))
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
    /// Last event of each measured step, in order.
    pub step_ends: &'a [i64],
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

    /// The measured step an event lies in, `None` between steps or after the last.
    fn step_within(&self, event: i64) -> Option<usize> {
        let s = self.step_of(event);
        (event >= self.step_starts[s] && event <= self.step_ends[s]).then_some(s)
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
    let g = Grouping::new(scope, series);
    let mut causes = g.by_line(triggers, weak);
    g.classify(&mut causes);
    let mut dropped = vec![false; causes.len()];
    g.attach_losses(&mut causes, &mut dropped);
    g.attach_inputs(&mut causes, &mut dropped);
    causes
        .into_iter()
        .zip(dropped)
        .filter(|((_, c), d)| !d && c.growing > 0)
        .map(|((_, c), _)| c)
        .collect()
}

/// Causes with their loop-body line (`None`: sites without a user frame).
type Keyed = Vec<(Option<FrameId>, Cause)>;

/// What the phases of [`group`] share: the measured steps, the series, the user paths, the
/// depth of the loop frames and the loop-body lines that free tensors.
struct Grouping<'s, 'a> {
    scope: &'s Scope<'a>,
    series: &'s [SiteSeries],
    paths: Paths<'a>,
    /// How many loop frames start every user path made in the measured steps.
    depth: usize,
    /// Loop-body lines under which a tensor was made and freed within the measured steps.
    freed_under: FxHashSet<FrameId>,
}

impl<'s, 'a> Grouping<'s, 'a> {
    fn new(scope: &'s Scope<'a>, series: &'s [SiteSeries]) -> Self {
        let mut g = Grouping {
            scope,
            series,
            paths: Paths::new(scope.snap, scope.opts),
            depth: 0,
            freed_under: FxHashSet::default(),
        };
        g.depth = g.loop_depth();
        g.freed_under = g.freeing_lines();
        g
    }

    /// True for an event from the first measured step's start to the last one's end.
    fn in_window(&self, start: i64) -> bool {
        let from = self.scope.step_starts.first().copied().unwrap_or(0);
        start >= from && start <= self.scope.last
    }

    /// The loop frames' depth: the common prefix of every user path made in the measured steps.
    fn loop_depth(&self) -> usize {
        let mut loop_path: Option<&[FrameId]> = None;
        let mut depth = 0;
        let made = self.scope.replay.allocations.iter();
        for a in made.filter(|a| self.in_window(a.start)) {
            let p = self.paths.get(a.stack);
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
        depth
    }

    /// Loop-body lines under which a tensor was made and freed within the measured steps.
    fn freeing_lines(&self) -> FxHashSet<FrameId> {
        let mut freed_under: FxHashSet<FrameId> = FxHashSet::default();
        let made = self.scope.replay.allocations.iter();
        for a in made.filter(|a| self.in_window(a.start)) {
            if a.end != NEVER && a.end <= self.scope.last {
                if let Some(k) = key_of(self.paths.get(a.stack), self.depth) {
                    freed_under.insert(k);
                }
            }
        }
        freed_under
    }

    /// A site's key: the loop-body line holding most of its kept bytes.
    fn key_of_site(&self, k: usize) -> Option<FrameId> {
        let r = self.scope.replay;
        let mut by: Vec<(FrameId, u64)> = Vec::new();
        for &ai in &self.series[k].kept {
            let a = &r.allocations[ai];
            if let Some(f) = key_of(self.paths.get(a.stack), self.depth) {
                match by.iter_mut().find(|(g, _)| *g == f) {
                    Some(e) => e.1 += a.size,
                    None => by.push((f, a.size)),
                }
            }
        }
        by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0 .0.cmp(&b.0 .0)));
        by.first().map(|&(f, _)| f)
    }

    /// The sites grouped by their key, the growing ones first.
    fn by_line(&self, triggers: &[usize], weak: &[usize]) -> Keyed {
        let mut causes: Keyed = Vec::new();
        for &k in triggers {
            let key = self.key_of_site(k);
            match causes.iter_mut().find(|(g, _)| key.is_some() && *g == key) {
                Some((_, c)) => {
                    c.members.push(k);
                    c.growing += 1;
                }
                None => causes.push((key, Cause::of(k, 1))),
            }
        }
        // Slow sites join the cause of their line; those of a line without one are grouped
        // apart (`growing` 0): never findings of their own, they may still join a graph as its
        // loss.
        for &k in weak {
            let key = self.key_of_site(k);
            if key.is_none() {
                continue;
            }
            match causes.iter_mut().find(|(g, _)| *g == key) {
                Some((_, c)) => c.members.push(k),
                None => causes.push((key, Cause::of(k, 0))),
            }
        }
        causes
    }

    /// Each cause's frame, and whether (and why) it is a retained graph.
    fn classify(&self, causes: &mut Keyed) {
        let (r, series) = (self.scope.replay, self.series);
        for (key, c) in causes.iter_mut() {
            // The deepest frame every kept tensor shares.
            let mut shared: Option<&[FrameId]> = None;
            for &m in &c.members {
                for &ai in &series[m].kept {
                    let p = self.paths.get(r.allocations[ai].stack);
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
            } else if lines.len() >= 2 && key.is_some_and(|k| self.freed_under.contains(&k)) {
                Some(KEPT_INTERMEDIATES)
            } else {
                None
            };
        }
    }

    /// Per measured step, the first and last kept tensor of some sites, and whether all of
    /// them were made within a step.
    fn spans(&self, members: &[usize]) -> (Spans, bool) {
        let scope = self.scope;
        let mut v: Spans = vec![None; scope.step_starts.len()];
        let mut within = true;
        for &m in members {
            for &ai in &self.series[m].kept {
                let start = scope.replay.allocations[ai].start;
                within &= scope.step_within(start).is_some();
                let s = scope.step_of(start);
                v[s] = Some(v[s].map_or((start, start), |(f, l)| (f.min(start), l.max(start))));
            }
        }
        (v, within)
    }

    /// True for a stack under a loss function's frame (remembered in `cache`).
    fn under_loss(&self, cache: &PerStack<bool>, stack: StackId) -> bool {
        *cache.get_or_init(stack, || {
            let snap = self.scope.snap;
            snap.stacks.get(stack).iter().any(|&f| {
                let fr = snap.frames.get(f);
                is_loss_frame(snap.strings.get(fr.filename), snap.strings.get(fr.name))
            })
        })
    }

    /// Loop-body lines that made a scalar (a loss value) outside any module's forward, by step
    /// (looked for only when `any_graph`: a retained graph is there to join).
    fn scalar_lines(&self, any_graph: bool) -> FxHashMap<FrameId, Vec<bool>> {
        let scope = self.scope;
        let n = scope.step_starts.len();
        let mut scalars: FxHashMap<FrameId, Vec<bool>> = FxHashMap::default();
        let forward: PerStack<bool> = PerStack::new(&scope.snap.stacks);
        for a in scope
            .replay
            .allocations
            .iter()
            .filter(|a| any_graph && self.in_window(a.start))
        {
            if a.size == 0 || a.size > SCALAR_BYTES {
                continue;
            }
            let (Some(s), Some(k)) = (
                scope.step_within(a.start),
                key_of(self.paths.get(a.stack), self.depth),
            ) else {
                continue;
            };
            let under = *forward.get_or_init(a.stack, || {
                super::growth::under_forward(scope.snap, a.stack)
            });
            if !under {
                scalars.entry(k).or_insert_with(|| vec![false; n])[s] = true;
            }
        }
        scalars
    }

    /// True when a cause's kept tensors are a loss computation's (see the module
    /// documentation); `scalars` from [`Grouping::scalar_lines`], `loss_stack` a cache.
    fn is_loss(
        &self,
        key: Option<FrameId>,
        c: &Cause,
        scalars: &FxHashMap<FrameId, Vec<bool>>,
        loss_stack: &PerStack<bool>,
    ) -> bool {
        let (r, series) = (self.scope.replay, self.series);
        let kept = || {
            c.members
                .iter()
                .flat_map(|&m| series[m].kept.iter().map(|&ai| &r.allocations[ai]))
        };
        if kept().next().is_none() {
            return false;
        }
        if kept().all(|a| self.under_loss(loss_stack, a.stack)) {
            return true;
        }
        // User code: its line makes the loss value in every step it keeps tensors in, and it
        // keeps more than scalars (a list of loss values is not a graph's).
        if c.graph == Some(MODULE_FORWARD) || !kept().any(|a| a.size > SCALAR_BYTES) {
            return false;
        }
        let Some(made) = key.and_then(|k| scalars.get(&k)) else {
            return false;
        };
        let (steps, _) = self.spans(&c.members);
        steps
            .iter()
            .zip(made)
            .all(|(kept, &scalar)| kept.is_none() || scalar)
    }

    /// Loss computations join the retained graph whose forward pass precedes them; they are
    /// marked `dropped`.
    fn attach_losses(&self, causes: &mut Keyed, dropped: &mut [bool]) {
        let loss_stack: PerStack<bool> = PerStack::new(&self.scope.snap.stacks);
        let any_graph = causes
            .iter()
            .any(|(_, c)| c.graph.is_some() && c.growing > 0);
        let scalars = self.scalar_lines(any_graph);
        let loss: Vec<bool> = causes
            .iter()
            .map(|(k, c)| any_graph && self.is_loss(*k, c, &scalars, &loss_stack))
            .collect();
        let targets: Vec<(usize, Spans)> = causes
            .iter()
            .enumerate()
            .filter(|&(i, (_, c))| c.graph.is_some() && c.growing > 0 && !loss[i])
            .map(|(i, (_, c))| (i, self.spans(&c.members).0))
            .collect();
        let mut attach: Vec<(usize, usize)> = Vec::new();
        for (i, (_, c)) in causes.iter().enumerate() {
            if !loss[i] {
                continue;
            }
            let (steps, within) = self.spans(&c.members);
            if !within {
                continue;
            }
            // The graph whose forward pass began before this one's first tensor in every step,
            // keeping tensors in the same steps; the nearest one when several do.
            let gap = |graph: &[Option<(i64, i64)>]| -> Option<i64> {
                let mut sum = 0;
                for (mine, theirs) in steps.iter().zip(graph) {
                    match (mine, theirs) {
                        (Some((f, _)), Some((g, _))) if g < f => sum += f - g,
                        (None, None) => {}
                        _ => return None,
                    }
                }
                Some(sum)
            };
            if let Some(g) = nearest(&targets, i, gap) {
                attach.push((i, g));
            }
        }
        for &(i, g) in &attach {
            let members = causes[i].1.members.clone();
            causes[g].1.losses.extend(members);
            dropped[i] = true;
        }
    }

    /// A leak made at a loop-body line just before a retained graph's tensors is its input: it
    /// joins that graph and is marked `dropped`.
    fn attach_inputs(&self, causes: &mut Keyed, dropped: &mut [bool]) {
        let (r, series) = (self.scope.replay, self.series);
        let graphs: Vec<(usize, Spans)> = causes
            .iter()
            .enumerate()
            .filter(|&(i, (_, c))| c.graph.is_some() && c.growing > 0 && !dropped[i])
            .map(|(i, (_, c))| (i, self.spans(&c.members).0))
            .collect();
        let mut attach: Vec<(usize, usize)> = Vec::new();
        for (i, (_, c)) in causes.iter().enumerate() {
            if c.graph.is_some() || c.growing == 0 || dropped[i] {
                continue;
            }
            let at_loop_line = c.members.iter().all(|&m| {
                series[m]
                    .kept
                    .iter()
                    .all(|&ai| self.paths.get(r.allocations[ai].stack).len() == self.depth + 1)
            });
            if !at_loop_line {
                continue;
            }
            let (last_in_step, _) = self.spans(&c.members);
            // The graph whose first kept tensor follows this one's last in every step; the
            // nearest one (fewest events in between) when several do.
            let gap = |firsts: &[Option<(i64, i64)>]| -> Option<i64> {
                let mut sum = 0;
                for (l, f) in last_in_step.iter().zip(firsts) {
                    match (l, f) {
                        (Some((_, l)), Some((f, _))) if l < f => sum += f - l,
                        (Some(_), _) => return None,
                        (None, _) => {}
                    }
                }
                Some(sum)
            };
            if let Some(g) = nearest(&graphs, i, gap) {
                attach.push((i, g));
            }
        }
        for &(i, g) in &attach {
            let members = causes[i].1.members.clone();
            causes[g].1.inputs.extend(members);
            dropped[i] = true;
        }
    }
}

impl Cause {
    /// A cause of one site, `growing` 1 when it grows fast enough to be a finding, else 0.
    fn of(site: usize, growing: usize) -> Self {
        Cause {
            members: vec![site],
            growing,
            inputs: Vec::new(),
            losses: Vec::new(),
            frame: None,
            graph: None,
        }
    }
}

/// The graph of `graphs` (index, spans) other than `me` with the smallest `gap` to it (the
/// lower index on ties), if `gap` accepts any.
fn nearest(
    graphs: &[(usize, Spans)],
    me: usize,
    gap: impl Fn(&[Option<(i64, i64)>]) -> Option<i64>,
) -> Option<usize> {
    graphs
        .iter()
        .filter(|(g, _)| *g != me)
        .filter_map(|(g, firsts)| gap(firsts).map(|d| (d, *g)))
        .min()
        .map(|(_, g)| g)
}
