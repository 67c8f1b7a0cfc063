//! Call sites: what a person would write down as the place an allocation comes from.
//!
//! The site of a stack, by the frames `--frames` lets it use ([`FrameFilter`]):
//!
//! 1. Python (`python`, `all`): the innermost *user* frame — Python code outside the `torch`
//!    package, outside installed packages (`site-packages`, `dist-packages`) and outside the
//!    standard library ([`kinds::Kind`]). A library frame between it and the allocation
//!    (`einops/_backends.py:291:einsum` under `model.py:39:forward`) is shown beside it as
//!    its context ([`Site::context`]), as is a C++ workspace the allocation is
//!    (`at::cuda::setWorkspaceForHandle`). With no user frame, the innermost library frame,
//!    then the innermost torch frame is the site. `--keep torch` and `--keep libraries` let
//!    those frames be sites like the user's.
//! 2. C++ (`cpp`, and `all` when no Python frame names a site: the autograd engine's thread
//!    runs no Python): the autograd node (`autograd: IndexBackward0`, with the first
//!    meaningful C++ frame inside it as context: `at::cuda::setWorkspaceForHandle` for the
//!    cuBLAS workspace a `MmBackward0` allocates), else the first
//!    meaningful C++ frame after the allocator's, the dispatcher's and the interpreter's
//!    ([`kinds::Kind::Cpp`]), else the ATen operator (`aten::mm`).
//! 3. `<no frames>` when none of these is there.
//!
//! Python sites are written `filename:line:name`, the filename as recorded; C++ sites by the
//! function's name without arguments ([`cpp::short_name`]).

pub mod order;

pub use crate::model::cpp_names as cpp;
pub use crate::model::kinds;
pub use kinds::{is_native, is_native_frame, is_noise, is_torch, Kind};
pub use order::ordered_frames;

use crate::model::{Frame, FrameId, Snapshot, StackId};
use serde::Serialize;

/// The label of an allocation without Python frames.
pub const NO_FRAMES: &str = "<no frames>";

/// Which frames sites and shown stacks use (`--frames`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FrameFilter {
    /// Python frames only (a stack of C++ frames alone has no site: `<no frames>`).
    Python,
    /// C++ frames only (autograd nodes, C++ functions, ATen operators).
    Cpp,
    /// Both: the Python site, else the C++ one; stacks show both kinds interleaved.
    #[default]
    All,
}

impl FrameFilter {
    fn python(self) -> bool {
        self != FrameFilter::Cpp
    }

    fn cpp(self) -> bool {
        self != FrameFilter::Python
    }
}

/// Options of site attribution.
#[derive(Clone, Copy, Debug, Default)]
pub struct SiteOptions {
    /// Let frames inside the `torch` package be sites (`--keep torch`).
    pub keep_torch: bool,
    /// Let frames of installed packages and the standard library be sites
    /// (`--keep libraries`): the site is then the innermost Python frame outside torch.
    pub keep_libraries: bool,
    /// Which frames sites and shown stacks use (`--frames`).
    pub frames: FrameFilter,
}

/// What kind of frame names a site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SiteKind {
    /// A Python frame.
    Python,
    /// An autograd node (`autograd: MmBackward0`).
    Autograd,
    /// A C++ function.
    Cpp,
    /// An ATen operator (`aten::mm`).
    Op,
    /// No frame names one (`<no frames>`).
    None,
}

/// The site of one stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// What names it.
    pub kind: SiteKind,
    /// The frame it names (absent for `<no frames>`).
    pub frame: Option<FrameId>,
    /// `filename:line:name`, `autograd: NODE`, a C++ function, `aten::OP`, or `<no frames>`.
    pub label: String,
    /// The library frame or C++ function between the site and the allocation, when one says
    /// more than the site alone (`einops/_backends.py:291:einsum` for a user line calling
    /// einops; the C++ function inside an autograd node).
    pub context: Option<String>,
}

impl Site {
    fn none() -> Site {
        Site {
            kind: SiteKind::None,
            frame: None,
            label: NO_FRAMES.to_string(),
            context: None,
        }
    }

    /// The Python frame of a Python site.
    pub fn python_frame(&self) -> Option<FrameId> {
        self.frame.filter(|_| self.kind == SiteKind::Python)
    }
}

/// One frame of a stack and its kind.
#[derive(Clone, Copy)]
struct Classified {
    id: FrameId,
    kind: Kind,
}

fn classify(snap: &Snapshot, frames: &[FrameId]) -> Vec<Classified> {
    frames
        .iter()
        .map(|&id| {
            let fr = snap.frames.get(id);
            Classified {
                id,
                kind: kinds::kind(snap.strings.get(fr.filename), snap.strings.get(fr.name)),
            }
        })
        .collect()
}

/// The site of `stack` (see the module documentation).
pub fn site_of(snap: &Snapshot, stack: StackId, opts: SiteOptions) -> Site {
    let (own, forward) = snap.split_forward(stack);
    if !forward.is_empty() && opts.frames.python() {
        if let Some(s) = forward_site(snap, own, forward, opts) {
            return s;
        }
    }
    own_site(snap, own, opts)
}

/// The site of a stack as recorded (no forward part).
fn own_site(snap: &Snapshot, own: &[FrameId], opts: SiteOptions) -> Site {
    let frames = classify(snap, own);
    if opts.frames.python() {
        if let Some(s) = fx_site(snap, &frames, opts).or_else(|| python_site(snap, &frames, opts)) {
            return s;
        }
    }
    if opts.frames.cpp() {
        if let Some(s) = cpp_site(snap, &frames) {
            return s;
        }
    }
    Site::none()
}

/// A backward-pass allocation's site: the Python site of its forward frames (the forward
/// code whose gradient it computes), with `backward` and the autograd node of its own frames
/// as context.
fn forward_site(
    snap: &Snapshot,
    own: &[FrameId],
    forward: &[FrameId],
    opts: SiteOptions,
) -> Option<Site> {
    let site = python_site(snap, &classify(snap, forward), opts)?;
    let node = cpp_site(snap, &classify(snap, own)).filter(|s| s.kind == SiteKind::Autograd);
    Some(Site {
        context: Some(match node {
            Some(n) => format!("backward pass, {}", n.label),
            None => "backward pass".to_string(),
        }),
        ..site
    })
}

/// The site of an allocation made in a compiled graph's generated code: the frame of the
/// FX node it ran that has an original trace (`fx_original_trace`), named by that trace's
/// Python site, with the node as context (`fx: aten.mm.default (mm_default)`). Only a frame
/// inside the stack's own Python site counts (the generated code runs under the call of the
/// compiled function).
fn fx_site(snap: &Snapshot, frames: &[Classified], opts: SiteOptions) -> Option<Site> {
    if !snap.frames.has_fx() {
        return None;
    }
    for f in frames {
        let fr = snap.frames.get(f.id);
        if let (Some(node), Some(original)) = (snap.frames.fx(fr.fx), snap.fx_stack(fr.fx)) {
            let site = python_site(snap, &classify(snap, snap.stacks.get(original)), opts)?;
            let target = snap.strings.get(node.target);
            let name = snap.strings.get(node.name);
            return Some(Site {
                context: Some(match (target.is_empty(), name.is_empty()) {
                    (false, false) => format!("fx: {target} ({name})"),
                    (false, true) => format!("fx: {target}"),
                    _ => format!("fx: {name}"),
                }),
                ..site
            });
        }
        if f.kind == Kind::User {
            return None;
        }
    }
    None
}

/// The Python site, its context from the frames inside it.
fn python_site(snap: &Snapshot, frames: &[Classified], opts: SiteOptions) -> Option<Site> {
    let allowed = |k: Kind| {
        k == Kind::User
            || (k == Kind::Torch && opts.keep_torch)
            || (k == Kind::Library && opts.keep_libraries)
    };
    let at = frames
        .iter()
        .position(|f| allowed(f.kind))
        .or_else(|| frames.iter().position(|f| f.kind == Kind::Library))
        .or_else(|| frames.iter().position(|f| f.kind == Kind::Torch))?;
    let site = frames[at];
    let inner = &frames[..at];
    let workspace = opts
        .frames
        .cpp()
        .then(|| inner.iter().find_map(|f| workspace(snap, f.id)))
        .flatten();
    let library = (site.kind != Kind::Library)
        .then(|| inner.iter().find(|f| f.kind == Kind::Library))
        .flatten()
        .map(|f| format_frame(snap, snap.frames.get(f.id)));
    Some(Site {
        kind: SiteKind::Python,
        frame: Some(site.id),
        label: format_frame(snap, snap.frames.get(site.id)),
        context: workspace.map(str::to_string).or(library),
    })
}

/// A C++ frame that allocates a library's workspace (cuBLAS, cuBLASLt, cuDNN): memory the
/// library keeps per handle and stream, which no tensor of the user's holds.
fn workspace(snap: &Snapshot, f: FrameId) -> Option<&str> {
    let fr = snap.frames.get(f);
    let file = snap.strings.get(fr.filename);
    let name = snap.strings.get(fr.name);
    if !kinds::is_native_frame(file, name) {
        return None;
    }
    let short = cpp::short_name(name);
    short.contains("Workspace").then_some(short)
}

/// True when `stack` allocates a cuBLAS/cuDNN workspace ([`workspace`]).
pub fn is_workspace(snap: &Snapshot, stack: StackId) -> bool {
    snap.stacks
        .get(stack)
        .iter()
        .any(|&f| workspace(snap, f).is_some())
}

/// The C++ site: the autograd node, else the first meaningful C++ function, else the ATen
/// operator.
fn cpp_site(snap: &Snapshot, frames: &[Classified]) -> Option<Site> {
    let name = |f: &Classified| {
        let fr = snap.frames.get(f.id);
        snap.strings.get(fr.name)
    };
    let meaningful = |fs: &[Classified]| {
        fs.iter()
            .find(|f| f.kind == Kind::Cpp)
            .map(|f| (f.id, cpp::short_name(name(f)).to_string()))
            .or_else(|| {
                fs.iter().find_map(|f| {
                    cpp::aten_op(name(f))
                        .filter(|op| !is_creation(op))
                        .map(|op| (f.id, format!("aten::{op}")))
                })
            })
    };
    let node = frames.iter().enumerate().find_map(|(i, f)| {
        let n = name(f);
        cpp::autograd_node(n)
            .or_else(|| cpp::engine_step(n))
            .map(|node| (i, f.id, node))
    });
    if let Some((i, id, node)) = node {
        return Some(Site {
            kind: SiteKind::Autograd,
            frame: Some(id),
            label: format!("autograd: {node}"),
            context: meaningful(&frames[..i]).map(|(_, c)| c),
        });
    }
    if let Some(f) = frames.iter().find(|f| f.kind == Kind::Cpp) {
        return Some(Site {
            kind: SiteKind::Cpp,
            frame: Some(f.id),
            label: cpp::short_name(name(f)).to_string(),
            context: None,
        });
    }
    // The operator called from outside: the outermost `at::_ops` frame.
    frames.iter().rev().find_map(|f| {
        cpp::aten_op(name(f)).map(|op| Site {
            kind: SiteKind::Op,
            frame: Some(f.id),
            label: format!("aten::{op}"),
            context: None,
        })
    })
}

/// `empty`, `new_zeros`, ...: operators that only make a tensor ([`kinds`]).
fn is_creation(op: &str) -> bool {
    ["empty", "new_", "zeros", "ones", "full"]
        .iter()
        .any(|p| op.starts_with(p))
}

/// The Python frame that names the site of `stack`, if its site is a Python frame.
pub fn site_frame(snap: &Snapshot, stack: StackId, opts: SiteOptions) -> Option<FrameId> {
    let opts = SiteOptions {
        frames: FrameFilter::Python,
        ..opts
    };
    site_of(snap, stack, opts).python_frame()
}

/// `filename:line:name` of a frame (line -1 when unknown).
pub fn format_frame(snap: &Snapshot, frame: &Frame) -> String {
    format!(
        "{}:{}:{}",
        snap.strings.get(frame.filename),
        frame.line,
        snap.strings.get(frame.name)
    )
}

/// What stands for `n` frames left out of a stack where only its ends are
/// shown (the page, its top rows): `… 299,744 frames not shown`.
pub fn elided_label(n: u64) -> String {
    format!("… {} frames not shown", crate::units::grouped(n))
}

/// The site label of `stack` ([`Site::label`]).
pub fn site_label(snap: &Snapshot, stack: StackId, opts: SiteOptions) -> String {
    site_of(snap, stack, opts).label
}

/// The frames of `stack` without interpreter noise (PyTorch's list and this crate's:
/// [`is_noise`]), innermost first, as recorded.
pub fn filtered_frames(snap: &Snapshot, stack: StackId) -> Vec<FrameId> {
    snap.stacks
        .get(stack)
        .iter()
        .copied()
        .filter(|&f| {
            let fr = snap.frames.get(f);
            !is_noise(snap.strings.get(fr.filename), snap.strings.get(fr.name))
        })
        .collect()
}

/// What a shown stack holds (flamegraphs, `top --by stack`, `--full-stacks`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackView {
    /// Which frames (`--frames`).
    pub frames: FrameFilter,
    /// Keep the allocator's own frames ([`Kind::Allocator`]); without, they are folded into
    /// the frame that called them.
    pub allocator: bool,
}

/// The frames of `stack` a view shows, innermost first, in call order ([`ordered_frames`]):
/// never noise or dispatcher plumbing; Python and C++ frames as `view.frames` says; the
/// allocator's frames when `view.allocator`.
pub fn shown_frames(snap: &Snapshot, stack: StackId, view: StackView) -> Vec<FrameId> {
    ordered_frames(snap, stack)
        .into_iter()
        .filter(|&f| {
            let fr = snap.frames.get(f);
            let k = kinds::kind(snap.strings.get(fr.filename), snap.strings.get(fr.name));
            match k {
                Kind::Noise | Kind::Dispatch => false,
                Kind::Allocator => view.allocator && view.frames.cpp(),
                Kind::Autograd | Kind::Cpp => view.frames.cpp(),
                Kind::User | Kind::Library | Kind::Torch => view.frames.python(),
            }
        })
        .collect()
}
