//! Attention scores a non-fused attention materialises: the B×H×S×S matrices (the scores,
//! their masked and scaled copies, the softmax and its fp32 intermediates) that
//! `F.scaled_dot_product_attention`'s flash and memory-efficient kernels never hold.
//!
//! Two kinds of evidence, both required:
//! - **sites**: the allocation is made in attention code — a frame whose file or function is
//!   named for attention (`attn`, `attention`: `run_scaled_dot_product_attention`,
//!   `modeling_llama.py:eager_attention_forward`, `attn.py`) — and no frame is a fused
//!   kernel's (C++ frames naming flash, memory-efficient or cuDNN attention, the `flash_attn`
//!   and `xformers` packages). A hand-written function called `scaled_dot_product_attention`
//!   is attention code; PyTorch's own is a builtin that leaves no Python frame, and its math
//!   fallback (`_scaled_dot_product_attention_math`) materialises the scores too.
//!   A function not named for attention is attention code when it runs under a module's
//!   forward, calls a softmax more than once (once per layer), and makes more tensors of the
//!   softmax's shape than softmaxes (the scores it normalises): `LlamaAttention.forward`
//!   of older transformers, whose frames say only `modeling_llama.py:forward`. Functions are
//!   told apart by their call site too, so `forward` of an MLP in the same file stays out.
//! - **the chain**: the function that calls an attention function (an attention module's
//!   `forward`, which scales and masks the scores before the call) is part of it: its
//!   tensors of exactly the score size (or twice it) count against the score size of the
//!   function it calls, so fused attention is priced at every score tensor the chain keeps
//!   (reading.md §4), not only those of the innermost function. Only exact sizes: the caller
//!   runs the rest of its block too (an MLP's B×S×4H outputs are half of fp32 scores at
//!   S = 512 and heads of 64).
//! - **dropout's mask**: a bool tensor of exactly a quarter of fp32 scores made under a
//!   dropout frame in the chain is the mask of the scores; fused attention keeps none.
//! - **shape**: within one attention function, the score matrix is the size the softmax
//!   allocates (a frame naming `softmax`), else the largest the function allocates; the
//!   tensors of that size, up to twice it (an fp32 softmax of 16-bit scores) and above a
//!   quarter of it (16-bit copies) are score-shaped: they all grow with S². The projections
//!   (B×S×H×d) are a factor S/d smaller and stay out once S ≥ 4·d (sequences of 256 and
//!   more with heads of 64). A backward's frameless temporaries count when their size is
//!   exactly a score size, half or twice it (the scores' gradients).

use crate::model::kinds::{is_native_frame, is_torch};
use crate::model::{Snapshot, StackId, StrId};
use crate::replay::steps::under_module_forward;
use crate::replay::Allocation;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// A score-shaped tensor is at most this many times the score size (an fp32 softmax of
/// 16-bit scores) ...
const ABOVE: u64 = 2;
/// ... and more than the score size divided by this (a 16-bit copy of fp32 scores).
const BELOW: u64 = 4;

/// What the score-shaped tensors live at a moment are, with the evidence.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AttentionScores {
    /// Their bytes.
    pub bytes: u64,
    /// How many.
    pub tensors: u64,
    /// The score size of the attention function holding the most of them: what its
    /// softmax allocates (else its largest allocation), B×H×S×S × the element size.
    pub score_tensor_bytes: u64,
    /// That function (`file:function`).
    pub function: String,
    /// True when a softmax frame fixed the score size (confidence `high`); false when the
    /// largest allocation of the function did (`medium`).
    pub softmax_seen: bool,
    /// Where those bytes sit among `fit`'s parts.
    pub parts: ScoresByPart,
}

/// A function that makes attention scores, with the call site it was called from (so
/// `forward` of an attention module and `forward` of an MLP in the same file stay apart).
type Key = (StrId, StrId, StrId, i64);

/// What one stack says: its attention function (the innermost user frame named for
/// attention, else the innermost user frame), whether the name says attention, whether a
/// frame names a softmax, whether it runs under a module's forward. `None` for a stack
/// without a user frame or that runs a fused kernel.
#[derive(Clone, Copy)]
struct StackFacts {
    key: Key,
    /// The function that called `key`'s, keyed the same way: an attention module's
    /// `forward` that masks and scales the scores before it calls the attention function.
    outer: Option<Key>,
    named: bool,
    softmax: bool,
    /// A frame names dropout: its bool mask of the scores is a quarter of fp32 scores.
    dropout: bool,
    in_module: bool,
}

fn stack_facts(snap: &Snapshot, stack: StackId) -> Option<StackFacts> {
    let mut softmax = false;
    let mut dropout = false;
    let mut users: Vec<(StrId, StrId, i64, bool)> = Vec::new();
    for &f in snap.stacks.get(stack) {
        let frame = snap.frames.get(f);
        let file = snap.strings.get(frame.filename);
        let name = snap.strings.get(frame.name);
        let lname = name.to_ascii_lowercase();
        let lfile = file.to_ascii_lowercase().replace('\\', "/");
        let native = is_native_frame(file, name);
        if is_fused(&lfile, &lname, native) {
            return None;
        }
        softmax |= lname.contains("softmax");
        dropout |= lname.contains("dropout");
        if native || is_torch(file) {
            continue;
        }
        let base = lfile.rsplit('/').next().unwrap_or("");
        let named = ["attn", "attention"]
            .iter()
            .any(|w| base.contains(w) || lname.contains(w));
        users.push((frame.filename, frame.name, frame.line, named));
    }
    let k = users.iter().position(|u| u.3).unwrap_or(0);
    let (file, name, _, named) = *users.get(k)?;
    let caller = users.get(k + 1).map_or((StrId::EMPTY, 0), |c| (c.0, c.2));
    let outer = users.get(k + 1).map(|c| {
        let at = users
            .get(k + 2)
            .map_or((StrId::EMPTY, 0), |cc| (cc.0, cc.2));
        (c.0, c.1, at.0, at.1)
    });
    Some(StackFacts {
        key: (file, name, caller.0, caller.1),
        outer,
        named,
        softmax,
        dropout,
        in_module: under_module_forward(snap, stack),
    })
}

/// A fused attention kernel's frame: it never materialises the scores.
fn is_fused(file: &str, name: &str, native: bool) -> bool {
    if native {
        return (name.contains("flash") && name.contains("attention"))
            || name.contains("efficient_attention")
            || name.contains("cudnn_attention")
            || name.contains("flash_attn")
            || name.contains("fmha");
    }
    file.contains("/flash_attn/") || file.contains("/xformers/")
}

/// Per function: its score size and the evidence for it.
#[derive(Default)]
struct Function {
    named: bool,
    in_module: bool,
    softmax_max: u64,
    softmax_allocations: u64,
    largest: u64,
    sizes: Vec<u64>,
}

impl Function {
    fn score_bytes(&self) -> u64 {
        if self.softmax_max > 0 {
            self.softmax_max
        } else {
            self.largest
        }
    }

    /// Attention code: named for it and running a softmax, or a function under a module's forward that runs a
    /// softmax more than once (once per layer) and makes another tensor of the softmax's
    /// shape (the scores it normalises).
    fn is_attention(&self) -> bool {
        if self.named {
            return self.softmax_allocations > 0;
        }
        let z = self.softmax_max;
        self.in_module
            && self.softmax_allocations >= 2
            && self.sizes.iter().filter(|&&s| score_shaped(s, z)).count() as u64
                > self.softmax_allocations
    }
}

/// A tensor of the score's shape: up to twice its size (fp32 of 16-bit scores), more than a
/// quarter of it (16-bit copies; projections of heads of d are S/d times smaller).
fn score_shaped(size: u64, z: u64) -> bool {
    z > 0 && size <= z.saturating_mul(ABOVE) && size.saturating_mul(BELOW) > z
}

/// A tensor the caller of an attention function keeps for the scores: exactly their size
/// or twice it (the scaled and masked copies, an fp32 copy of 16-bit scores). A caller
/// also runs the rest of a block (an MLP's outputs of B×S×4H are half of fp32 scores at
/// S = 512, heads of 64), so only exact sizes count there.
fn caller_score_tensor(size: u64, z: u64) -> bool {
    z > 0 && (size == z || size == z.saturating_mul(2))
}

/// Dropout's mask of the scores: a bool tensor of B×H×S×S, exactly a quarter of fp32
/// scores, made under a dropout frame. Fused attention keeps no mask (it regenerates it
/// from the random state), so the mask is part of what it saves.
fn dropout_mask(size: u64, z: u64, dropout: bool) -> bool {
    dropout && z > 0 && size.saturating_mul(BELOW) == z
}

/// Where the score-shaped bytes sit among `fit`'s parts.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScoresByPart {
    /// Among the activations.
    pub activations_bytes: u64,
    /// Among the temporaries (a backward's gradients of the scores).
    pub temporaries_bytes: u64,
    /// Among what no rule names (attention outside any module).
    pub other_bytes: u64,
}

/// The score-shaped tensors among `live` (the moment's allocations with their category),
/// sized against every allocation of the trace (`all`) made in the same attention function.
/// Frameless allocations made during the trace (a backward's, with `stacks="python"`) count
/// when their size is exactly a score size, half or twice it.
pub fn measure<'a>(
    snap: &Snapshot,
    all: &[Allocation],
    live: impl Iterator<Item = (&'a Allocation, &'a str)>,
) -> Option<AttentionScores> {
    let mut of_stack: FxHashMap<StackId, Option<StackFacts>> = FxHashMap::default();
    let mut functions: FxHashMap<Key, Function> = FxHashMap::default();
    for a in all {
        let hit = *of_stack
            .entry(a.stack)
            .or_insert_with(|| stack_facts(snap, a.stack));
        let Some(h) = hit else { continue };
        let f = functions.entry(h.key).or_default();
        f.named |= h.named;
        f.in_module |= h.in_module;
        f.largest = f.largest.max(a.size);
        f.sizes.push(a.size);
        if h.softmax {
            f.softmax_max = f.softmax_max.max(a.size);
            f.softmax_allocations += 1;
        }
    }
    functions.retain(|_, f| f.is_attention());
    if functions.is_empty() {
        return None;
    }
    // The chain around an attention function: its caller (the attention module's forward,
    // which scales and masks the scores) keeps score-shaped tensors too; each counts against
    // the score size of the function it calls.
    let mut callers: FxHashMap<Key, u64> = FxHashMap::default();
    for h in of_stack.values().flatten() {
        if let (Some(outer), Some(f)) = (h.outer, functions.get(&h.key)) {
            if !functions.contains_key(&outer) {
                let z = callers.entry(outer).or_default();
                *z = (*z).max(f.score_bytes());
            }
        }
    }
    let mut zs: Vec<u64> = functions.values().map(Function::score_bytes).collect();
    zs.sort_unstable();
    zs.dedup();
    let mut per: FxHashMap<Key, (u64, u64)> = FxHashMap::default();
    let mut by_part = ScoresByPart::default();
    let mut frameless = (0u64, 0u64);
    for (a, category) in live {
        let slot = match category {
            "activations" => &mut by_part.activations_bytes,
            "temporaries" | "autograd_temporaries" => &mut by_part.temporaries_bytes,
            "unknown" | "other" => &mut by_part.other_bytes,
            _ => continue,
        };
        if snap.stacks.get(a.stack).is_empty() {
            let exact = zs
                .iter()
                .any(|&z| a.size == z || a.size == 2 * z || 2 * a.size == z);
            if a.start >= 0 && exact {
                *slot += a.size;
                frameless.0 += a.size;
                frameless.1 += 1;
            }
            continue;
        }
        let hit = *of_stack
            .entry(a.stack)
            .or_insert_with(|| stack_facts(snap, a.stack));
        let Some(h) = hit else { continue };
        let counts = if let Some(f) = functions.get(&h.key) {
            let z = f.score_bytes();
            score_shaped(a.size, z) || dropout_mask(a.size, z, h.dropout)
        } else if let Some(&z) = callers.get(&h.key) {
            caller_score_tensor(a.size, z) || dropout_mask(a.size, z, h.dropout)
        } else {
            continue;
        };
        if counts {
            *slot += a.size;
            let e = per.entry(h.key).or_default();
            e.0 += a.size;
            e.1 += 1;
        }
    }
    let (bytes, tensors) = per
        .values()
        .fold(frameless, |(b, n), &(x, k)| (b + x, n + k));
    if bytes == 0 {
        return None;
    }
    // The attention function that holds the most (a caller's tensors count in `per` under the
    // caller's key, which names no attention function: it is not a key of `functions`).
    let key = per
        .iter()
        .filter(|(k, _)| functions.contains_key(*k))
        .max_by_key(|(k, (b, _))| (*b, std::cmp::Reverse(**k)))
        .map(|(k, _)| *k)
        .or_else(|| {
            functions
                .iter()
                .max_by_key(|(k, f)| (f.score_bytes(), std::cmp::Reverse(**k)))
                .map(|(k, _)| *k)
        })
        .expect("functions is not empty");
    let f = &functions[&key];
    let file = snap.strings.get(key.0);
    Some(AttentionScores {
        bytes,
        tensors,
        score_tensor_bytes: f.score_bytes(),
        function: format!(
            "{}:{}",
            file.rsplit(['/', '\\']).next().unwrap_or(file),
            snap.strings.get(key.1)
        ),
        softmax_seen: f.softmax_max > 0,
        parts: by_part,
    })
}
