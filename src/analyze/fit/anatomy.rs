//! The anatomy of a device's memory at one moment: what the live bytes are (from the
//! category rules), the allocator's share on top, the attention-score-like tensors among the
//! activations, the layers the activations repeat over, and the ratios that tell the setup
//! (optimizer state per parameter byte, bytes per parameter of the static part).

use super::attention::{self, AttentionScores};
use crate::analyze::categories::rules::Ctx;
use crate::model::kinds::is_native_frame;
use crate::model::{Snapshot, StackId};
use crate::replay::{Allocation, DeviceReplay, NEVER};
use crate::vocab::sites::{self, SiteOptions};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// Live bytes by part, plus the allocator's share: what `fit`'s fixes act on.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Parts {
    /// Weights.
    pub parameters_bytes: u64,
    /// Gradients.
    pub gradients_bytes: u64,
    /// Optimizer state (moments, momentum buffers).
    pub optimizer_state_bytes: u64,
    /// Activations saved for backward, or kept by an autograd graph (attention scores
    /// included).
    pub activations_bytes: u64,
    /// Among the activations: attention-score-shaped tensors (see [`super::attention`]).
    pub attention_scores_bytes: u64,
    /// Key/value caches.
    pub kv_cache_bytes: u64,
    /// A forward pass's outputs kept past it.
    pub outputs_bytes: u64,
    /// Temporaries and the autograd engine's temporaries.
    pub temporaries_bytes: u64,
    /// Inputs (data loading, user code before the forward).
    pub inputs_bytes: u64,
    /// Library workspaces (cuBLAS, cuDNN).
    pub workspaces_bytes: u64,
    /// What no rule names (and user categories).
    pub other_bytes: u64,
    /// What the allocator holds beyond the live requested bytes and cannot give back under
    /// pressure: rounding, and free blocks stranded in segments that also hold live blocks
    /// (reserved − live − releasable).
    pub allocator_cache_bytes: u64,
    /// At an OOM: the request that failed (rounded), which the moment still needs.
    pub pending_request_bytes: u64,
}

impl Parts {
    /// Live requested bytes (the parts without the allocator's share and the pending request).
    pub fn live(&self) -> u64 {
        self.parameters_bytes
            + self.gradients_bytes
            + self.optimizer_state_bytes
            + self.activations_bytes
            + self.kv_cache_bytes
            + self.outputs_bytes
            + self.temporaries_bytes
            + self.inputs_bytes
            + self.workspaces_bytes
            + self.other_bytes
    }

    /// What the device must hold at the moment: live + the allocator's share + a pending
    /// request.
    pub fn demand(&self) -> u64 {
        self.live() + self.allocator_cache_bytes + self.pending_request_bytes
    }
}

/// The setup the ratios suggest.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Setup {
    /// Optimizer state / parameters (null without parameters).
    pub optimizer_state_per_parameter_byte: Option<f64>,
    /// What that ratio usually means, in words.
    pub reading: String,
    /// Bytes per weight the reading implies (4 fp32, 2 bf16/fp16), when it implies one.
    pub weight_bytes: Option<u32>,
    /// Parameters count that implies (`parameters_bytes / weight_bytes`).
    pub parameter_count: Option<u64>,
    /// (parameters + gradients + optimizer state) per parameter.
    pub static_bytes_per_parameter: Option<f64>,
    /// Activations / live bytes.
    pub activation_share: f64,
}

/// What the trace says around the moment.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Flags {
    /// The trace runs a backward pass.
    pub training: bool,
    /// A training job: the trace runs a backward pass, gradients or optimizer state are
    /// alive at the moment (a trace recorded around one forward pass of a training step), or
    /// the modules' forward passes are called from training code (a function named for
    /// training — `train`, `train_step`, `training_step` — and none named for evaluation).
    pub trains: bool,
    /// Of those: the forward passes are called from training code.
    pub called_from_training_code: bool,
    /// The forward runs under autocast (C++ frames of `at::autocast`): activations are
    /// already 16-bit, and autocast keeps a 16-bit copy of each weight through the forward.
    pub autocast: bool,
    /// The phase of the moment: `forward`, `backward`, `optimizer`, or null.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["forward", "backward", "optimizer", null])))]
    pub phase: Option<&'static str>,
    /// Gradients are alive during a forward pass (left from the previous backward).
    pub gradients_alive_in_forward: bool,
    /// Activations kept by an autograd graph in a trace without backward and without
    /// training state (evaluation or generation with autograd on): a forward pass that
    /// returned left many of its tensors alive, or the moment is inside a forward pass that
    /// holds the tensors of several layers at once.
    pub evaluation_with_autograd: bool,
    /// Those activations' bytes (what `torch.inference_mode()` frees).
    pub activations_kept_by_graph_bytes: u64,
    /// They are counted inside a forward pass still running (several layers' tensors alive
    /// at once), not after one returned: a training job's first forward, before its first
    /// backward not called from training code, looks the same, so `inference_mode` is offered
    /// on that condition.
    pub kept_in_open_forward: bool,
    /// A training job's forward pass recorded without its backward (gradients or optimizer
    /// state alive, no backward in the trace): when that forward is only measured or
    /// evaluated, `torch.no_grad()` keeps none of its activations.
    pub forward_without_backward: bool,
    /// The optimizer frees and re-allocates its state each step (out of place), holding two
    /// copies during its call.
    pub optimizer_state_rebuilt: bool,
    /// The layers the activations repeat over: the count the most activation sites share
    /// (each layer runs the same lines; a line allocating two tensors per layer counts twice
    /// the layers, and is outvoted), null when none repeats.
    pub layers: Option<u64>,
    /// A typical per-layer boundary tensor (the median activation tensor of the repeated
    /// sites), the one checkpointing keeps per layer.
    pub layer_boundary_bytes: Option<u64>,
    /// Live KV-cache bytes an inference engine allocated (frames of `vllm/` or `sglang/`):
    /// a cache sized up front as a fraction of the GPU, not by the batch.
    pub engine_kv_cache_bytes: u64,
    /// The engine that made them (`vLLM`, `SGLang`), when any.
    pub engine: Option<String>,
    /// How many activation sites share that count: the more, the surer the layers (three
    /// and more make checkpointing's estimate `medium`).
    pub layer_sites: u64,
    /// The file shows that nothing trains on the device, so its weights serve inference:
    /// a trace of allocations without a backward or optimizer step, or, without a trace, a
    /// state whose blocks carry Python frames none of which builds an optimizer or gradient
    /// buffers (`*optimizer*`, `*grad_buffer*`). A frameless state cannot tell weights from
    /// same-sized gradients and optimizer state.
    pub no_training_shown: bool,
}

/// The anatomy of one device at one moment.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Anatomy {
    /// The parts.
    pub parts: Parts,
    /// The setup.
    pub setup: Setup,
    /// The trace's evidence.
    pub flags: Flags,
    /// The attention-score-shaped tensors among the activations, with their evidence (`null`
    /// when none).
    pub attention: Option<AttentionScores>,
    /// Reserved bytes at the moment.
    pub reserved_bytes: u64,
    /// Cached free bytes in wholly free segments: what the allocator releases (and retries)
    /// before an OOM, so not part of the demand.
    pub releasable_cache_bytes: u64,
    /// Live bytes in blocks (rounded) at the moment: what expandable segments map, in pages.
    pub rounded_bytes: u64,
}

fn reading(ratio: Option<f64>, gradients: u64) -> (String, Option<u32>) {
    let Some(r) = ratio else {
        return ("no parameters found at this moment".into(), None);
    };
    let near = |x: f64| (r - x).abs() <= 0.15 * x;
    if r == 0.0 {
        if gradients == 0 {
            return (
                "no gradients and no optimizer state: inference, or training before its first backward"
                    .into(),
                None,
            );
        }
        return (
            "gradients but no optimizer state: before the first optimizer step, or an optimizer without state (plain SGD)"
                .into(),
            None,
        );
    }
    if near(2.0) {
        (
            "optimizer state 2× the parameters: Adam/AdamW with fp32 states on fp32 weights (8 B of state per 4 B weight)".into(),
            Some(4),
        )
    } else if near(4.0) {
        (
            "optimizer state 4× the parameters: Adam/AdamW with fp32 states on 16-bit weights (8 B of state per 2 B weight)".into(),
            Some(2),
        )
    } else if near(1.0) {
        (
            "optimizer state 1× the parameters: one state per weight (SGD with momentum), or Adam's two states in 16 bits".into(),
            None,
        )
    } else if near(0.5) {
        (
            "optimizer state 0.5× the parameters: an 8-bit Adam (2 B of state per 4 B weight)"
                .into(),
            Some(4),
        )
    } else {
        (
            format!("optimizer state {r:.2}× the parameters: no common optimizer layout"),
            None,
        )
    }
}

/// Sums the live allocations of `replay` at event `at` into parts with the category rules of
/// `ctx`, and reads the setup and the trace's flags. `pending` is an OOM's failed request;
/// `releasable` the cached bytes in wholly free segments (from `frag`).
pub fn measure(
    snap: &Snapshot,
    replay: &DeviceReplay,
    ctx: &Ctx<'_>,
    at: i64,
    pending: u64,
    releasable: u64,
) -> Anatomy {
    let mut p = Parts::default();
    // Activation sites, for the layers: site stack → (allocations, sizes).
    let mut by_stack: FxHashMap<StackId, Vec<u64>> = FxHashMap::default();
    let mut kept_by_graph = 0;
    let (mut engine_kv, mut engine) = (0u64, None);
    let mut live = Vec::new();
    for a in replay.live_allocations(at) {
        let (cat, rule, _) = ctx.classify(a);
        live.push((a, cat));
        if cat == "activations" && rule.contains("autograd graph still allows") {
            kept_by_graph += a.size;
        }
        let slot = match cat {
            "parameters" => &mut p.parameters_bytes,
            "gradients" => &mut p.gradients_bytes,
            "optimizer_state" => &mut p.optimizer_state_bytes,
            "activations" => {
                by_stack.entry(a.stack).or_default().push(a.size);
                &mut p.activations_bytes
            }
            "kv_cache" => {
                if let Some(e) = engine_of(snap, a.stack) {
                    engine_kv += a.size;
                    engine.get_or_insert(e);
                }
                &mut p.kv_cache_bytes
            }
            "outputs" => &mut p.outputs_bytes,
            "temporaries" | "autograd_temporaries" => &mut p.temporaries_bytes,
            "inputs" => &mut p.inputs_bytes,
            "workspaces" => &mut p.workspaces_bytes,
            _ => &mut p.other_bytes,
        };
        *slot += a.size;
    }
    let attention = attention::measure(snap, &replay.allocations, live.into_iter());
    p.attention_scores_bytes = attention.as_ref().map_or(0, |s| s.parts.activations_bytes);
    let reserved = replay.reserved_at(at);
    p.allocator_cache_bytes = reserved.saturating_sub(p.live()).saturating_sub(releasable);
    p.pending_request_bytes = pending;

    let ratio = (p.parameters_bytes > 0)
        .then(|| p.optimizer_state_bytes as f64 / p.parameters_bytes as f64);
    let (reading, weight_bytes) = reading(ratio, p.gradients_bytes);
    let parameter_count = weight_bytes.map(|w| p.parameters_bytes / w as u64);
    let setup = Setup {
        optimizer_state_per_parameter_byte: ratio,
        reading,
        weight_bytes,
        parameter_count,
        static_bytes_per_parameter: parameter_count.filter(|&n| n > 0).map(|n| {
            (p.parameters_bytes + p.gradients_bytes + p.optimizer_state_bytes) as f64 / n as f64
        }),
        activation_share: if p.live() == 0 {
            0.0
        } else {
            p.activations_bytes as f64 / p.live() as f64
        },
    };

    // Layers: the most repeated activation site (each layer instance runs the same lines).
    let mut by_frame: FxHashMap<String, Vec<u64>> = FxHashMap::default();
    for (stack, sizes) in &by_stack {
        let site = sites::site_of(snap, *stack, SiteOptions::default());
        if site.frame.is_some() {
            // The library frame it goes through tells apart the lines of a model called
            // from one user line (a notebook cell running a whole transformers model).
            let key = match site.context {
                Some(via) => format!("{} via {via}", site.label),
                None => site.label,
            };
            by_frame.entry(key).or_default().extend(sizes);
        }
    }
    // The count the most sites share (ties: the smaller, a layer's own lines).
    let mut votes: FxHashMap<u64, usize> = FxHashMap::default();
    for v in by_frame.values().filter(|v| v.len() >= 2) {
        *votes.entry(v.len() as u64).or_default() += 1;
    }
    let (layers, layer_sites) = votes
        .iter()
        .max_by_key(|(n, k)| (**k, std::cmp::Reverse(**n)))
        .map_or((None, 0), |(n, k)| (Some(*n), *k as u64));
    let layer_boundary_bytes = layers.and_then(|n| {
        let mut sizes: Vec<u64> = by_frame
            .values()
            .filter(|v| v.len() as u64 == n)
            .flat_map(|v| v.iter().copied())
            .collect();
        sizes.sort_unstable();
        sizes.get(sizes.len() / 2).copied()
    });

    let training = ctx.has_backward();
    let training_code = called_from_training_code(snap, replay);
    let trains = training || p.gradients_bytes > 0 || p.optimizer_state_bytes > 0 || training_code;
    let phase = (at >= 0).then(|| ctx.phase_at(at)).flatten();
    let rebuilt = replay.allocations.iter().any(|a: &Allocation| {
        a.end != NEVER && ctx.classify(a).0 == "optimizer_state" && a.start >= 0
    });
    // Inside a forward pass of a trace without training state, the tensors of several layers
    // alive at once are kept for a backward that never comes.
    let holding_layers =
        !trains && phase == Some("forward") && layers.is_some_and(|l| l >= 3) && layer_sites >= 3;
    let kept_in_open_forward = holding_layers && kept_by_graph == 0;
    if kept_in_open_forward {
        kept_by_graph =
            p.activations_bytes
                .saturating_sub(one_layer(&p, layers, layer_boundary_bytes));
    }
    let flags = Flags {
        training,
        trains,
        called_from_training_code: training_code,
        autocast: runs_autocast(snap, replay),
        phase,
        gradients_alive_in_forward: trains && phase == Some("forward") && p.gradients_bytes > 0,
        evaluation_with_autograd: !trains && kept_by_graph > 0,
        activations_kept_by_graph_bytes: kept_by_graph,
        kept_in_open_forward: kept_in_open_forward && kept_by_graph > 0,
        forward_without_backward: trains && !training && p.activations_bytes > 0,
        optimizer_state_rebuilt: rebuilt,
        layers,
        layer_boundary_bytes,
        layer_sites,
        engine_kv_cache_bytes: engine_kv,
        engine: engine.map(str::to_string),
        no_training_shown: !trains
            && (ctx.has_allocations() || state_built_without_training(snap, replay)),
    };
    Anatomy {
        parts: p,
        setup,
        flags,
        attention,
        reserved_bytes: reserved,
        releasable_cache_bytes: releasable.min(reserved),
        rounded_bytes: replay.rounded_at(at),
    }
}

/// The inference engine a stack runs in, by its frames' files.
fn engine_of(snap: &Snapshot, stack: StackId) -> Option<&'static str> {
    snap.stacks.get(stack).iter().find_map(|&f| {
        let file = snap
            .strings
            .get(snap.frames.get(f).filename)
            .replace('\\', "/");
        if file.contains("/vllm/") || file.starts_with("vllm/") {
            Some("vLLM")
        } else if file.contains("/sglang/") || file.starts_with("sglang/") {
            Some("SGLang")
        } else {
            None
        }
    })
}

/// What a forward pass without autograd holds of its activations at once: one layer's share
/// and the boundary tensor passed on (all of them when no layer repeats).
pub fn one_layer(p: &Parts, layers: Option<u64>, boundary: Option<u64>) -> u64 {
    match layers {
        Some(l) if l >= 2 => {
            (p.activations_bytes / l + boundary.unwrap_or(0)).min(p.activations_bytes)
        }
        _ => p.activations_bytes,
    }
}

/// True when an allocation of the trace was made under autocast (C++ frames of
/// `at::autocast::`, recorded with `stacks="all"`).
fn runs_autocast(snap: &Snapshot, replay: &DeviceReplay) -> bool {
    let mut seen = rustc_hash::FxHashSet::default();
    replay.allocations.iter().any(|a| {
        seen.insert(a.stack)
            && snap.stacks.get(a.stack).iter().any(|&f| {
                let fr = snap.frames.get(f);
                let (file, name) = (snap.strings.get(fr.filename), snap.strings.get(fr.name));
                is_native_frame(file, name) && name.starts_with("at::autocast::")
            })
    })
}

/// Words of a function name that say it trains, and that say it does not.
const TRAIN_WORDS: [&str; 4] = ["train", "training", "trainer", "finetune"];
const EVAL_WORDS: [&str; 14] = [
    "eval",
    "evaluate",
    "evaluation",
    "validate",
    "validation",
    "val",
    "test",
    "inference",
    "infer",
    "generate",
    "predict",
    "benchmark",
    "profile",
    "measure",
];

/// True when the modules' forward passes are called from training code: a user frame of a
/// forward's stack is a function named for training (`trainers.py:train`,
/// `train_one_epoch`, `training_step`), and no frame of any forward's stack is named for
/// evaluation, generation or measurement.
/// True when some allocation carries Python frames and none was made by code that builds an
/// optimizer or gradient buffers (a file or function naming `optimizer` or `grad_buffer`:
/// `torch/optim/optimizer.py`, Megatron's `distrib_optimizer.py`, `param_and_grad_buffer.py`).
fn state_built_without_training(snap: &Snapshot, replay: &DeviceReplay) -> bool {
    let mut seen = rustc_hash::FxHashSet::default();
    let mut framed = false;
    for a in &replay.allocations {
        if !seen.insert(a.stack) {
            continue;
        }
        for &f in snap.stacks.get(a.stack) {
            let fr = snap.frames.get(f);
            let (file, name) = (snap.strings.get(fr.filename), snap.strings.get(fr.name));
            if is_native_frame(file, name) {
                continue;
            }
            framed = true;
            let base = file
                .rsplit(['/', '\\'])
                .next()
                .unwrap_or(file)
                .to_ascii_lowercase();
            let lname = name.to_ascii_lowercase();
            if ["optimizer", "grad_buffer"]
                .iter()
                .any(|w| base.contains(w) || lname.contains(w))
            {
                return false;
            }
        }
    }
    framed
}

fn called_from_training_code(snap: &Snapshot, replay: &DeviceReplay) -> bool {
    let mut seen = rustc_hash::FxHashSet::default();
    let (mut train, mut eval) = (false, false);
    for a in &replay.allocations {
        if !seen.insert(a.stack) || !crate::replay::steps::under_module_forward(snap, a.stack) {
            continue;
        }
        for &f in snap.stacks.get(a.stack) {
            let fr = snap.frames.get(f);
            let (file, name) = (snap.strings.get(fr.filename), snap.strings.get(fr.name));
            if is_native_frame(file, name) || crate::model::kinds::is_torch(file) {
                continue;
            }
            let lname = name.to_ascii_lowercase();
            let words: Vec<&str> = lname.split(['_', '.']).collect();
            train |= words.iter().any(|w| TRAIN_WORDS.contains(w));
            eval |= words.iter().any(|w| EVAL_WORDS.contains(w));
        }
    }
    train && !eval
}
