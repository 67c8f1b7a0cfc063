//! The fixes `fit` knows, cheapest first, each a rewrite of the anatomy's parts: what it
//! saves is the demand before minus the demand after, at the same moment. Every fix states
//! its cost class (`free`: changes no result and costs no speed; `slower`; `changes_results`),
//! its confidence and the evidence it stands on. The allocator's share stays as it is under
//! every fix but the allocator setting's.

use super::anatomy::{one_layer, Anatomy, Parts};
use crate::units::iec;
use serde::Serialize;

/// Page size of an expandable segment's large pool (snapshot-format.md §8).
const LARGE_PAGE: u64 = 20 << 20;

/// Share of the gradients and optimizer state LoRA keeps (its adapters' own).
const LORA_KEPT: f64 = 0.01;

/// One fix, with what it saves at the moment.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Fix {
    /// Stable identifier (`expandable_segments`, `zero_grad_set_to_none`, ...).
    #[cfg_attr(feature = "schema", schemars(extend("enum" = crate::vocab::advice::RECOMMENDATION_IDS)))]
    pub id: &'static str,
    /// What to change, in words.
    pub action: String,
    /// `free`, `slower` or `changes_results`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["free", "slower", "changes_results"])))]
    pub cost: &'static str,
    /// `high`, `medium` or `low`.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["high", "medium", "low"])))]
    pub confidence: &'static str,
    /// Bytes it saves at the moment, applied alone.
    pub saves_bytes: u64,
    /// The demand after it, applied alone.
    pub peak_after_bytes: u64,
    /// What it stands on (categories, sites, bytes), in words.
    pub evidence: String,
    /// What in the file makes it apply (the part it shrinks, or the OOM's verdict), in words.
    pub premise: String,
    /// True for a fix only the OOM's verdict calls for (a per-process limit, another process,
    /// the request's shape, a setting against fragmentation): it answers the cause rather than
    /// shrinking a part, so no rewrite measures it (`saves_bytes` 0) and it is material by its
    /// premise.
    pub for_verdict: bool,
}

/// A fix's rewrite of the parts; `k` is the accumulation factor where one applies.
type Rewrite = Box<dyn Fn(&Parts, &Anatomy, u64) -> Parts>;

/// A fix the catalogue knows, before it is measured.
pub(super) struct Candidate {
    pub id: &'static str,
    pub cost: &'static str,
    pub confidence: &'static str,
    pub action: String,
    pub evidence: String,
    pub premise: String,
    pub for_verdict: bool,
    pub rewrite: Rewrite,
}

/// The ids the catalogue decides by its own premises: an OOM's recommendation under one of
/// these is left to the catalogue (offered, measured, or not offered at all), never added
/// beside it.
pub const CATALOGUE_IDS: [&str; 15] = [
    "expandable_segments",
    "zero_grad_set_to_none",
    "inference_mode",
    "no_grad_forward",
    "detach_retained_graph",
    "vllm_gpu_memory_utilization",
    "gradient_accumulation",
    "micro_batch",
    "activation_checkpointing",
    "offload_optimizer_state",
    "eight_bit_optimizer",
    "fused_attention",
    "bf16_autocast",
    "lora",
    "int8_weights",
];

fn scale(x: u64, f: f64) -> u64 {
    (x as f64 * f).round() as u64
}

/// What expandable segments would hold beyond the live bytes under pressure: the blocks'
/// rounding and the last partly used 20 MiB page (whole free pages are unmapped and mapped
/// again where a request needs them, so no free block stays stranded between live ones).
pub fn expandable_cache(a: &Anatomy) -> u64 {
    (a.rounded_bytes.div_ceil(LARGE_PAGE) * LARGE_PAGE).saturating_sub(a.parts.live())
}

fn no_gradients(p: &Parts, _: &Anatomy, _: u64) -> Parts {
    Parts {
        gradients_bytes: 0,
        ..p.clone()
    }
}

fn no_graph(p: &Parts, a: &Anatomy, _: u64) -> Parts {
    let activations = p
        .activations_bytes
        .saturating_sub(a.flags.activations_kept_by_graph_bytes);
    Parts {
        activations_bytes: activations,
        attention_scores_bytes: p.attention_scores_bytes.min(activations),
        ..p.clone()
    }
}

fn no_grad(p: &Parts, a: &Anatomy, _: u64) -> Parts {
    let activations = one_layer(p, a.flags.layers, a.flags.layer_boundary_bytes);
    Parts {
        activations_bytes: activations,
        attention_scores_bytes: p.attention_scores_bytes.min(activations),
        ..p.clone()
    }
}

fn accumulate(p: &Parts, _: &Anatomy, k: u64) -> Parts {
    let k = k.max(1);
    Parts {
        activations_bytes: p.activations_bytes / k,
        attention_scores_bytes: p.attention_scores_bytes / k,
        inputs_bytes: p.inputs_bytes / k,
        outputs_bytes: p.outputs_bytes / k,
        ..p.clone()
    }
}

/// Activations under checkpointing: one boundary tensor per layer kept, one layer's
/// activations recomputed at a time.
pub fn checkpointed_activations(p: &Parts, a: &Anatomy) -> u64 {
    match (a.flags.layers, a.flags.layer_boundary_bytes) {
        (Some(l), Some(b)) if l >= 2 => (l * b + p.activations_bytes / l).min(p.activations_bytes),
        _ => p.activations_bytes,
    }
}

fn checkpoint(p: &Parts, a: &Anatomy, _: u64) -> Parts {
    let after = checkpointed_activations(p, a);
    Parts {
        activations_bytes: after,
        attention_scores_bytes: if p.activations_bytes == 0 {
            0
        } else {
            scale(
                p.attention_scores_bytes,
                after as f64 / p.activations_bytes as f64,
            )
        },
        ..p.clone()
    }
}

fn offload_state(p: &Parts, _: &Anatomy, _: u64) -> Parts {
    Parts {
        optimizer_state_bytes: 0,
        ..p.clone()
    }
}

fn eight_bit_state(p: &Parts, _: &Anatomy, _: u64) -> Parts {
    Parts {
        optimizer_state_bytes: p.optimizer_state_bytes / 4,
        ..p.clone()
    }
}

fn fused_attention(p: &Parts, a: &Anatomy, _: u64) -> Parts {
    let elsewhere = a.attention.as_ref().map(|s| &s.parts);
    Parts {
        activations_bytes: p.activations_bytes - p.attention_scores_bytes,
        attention_scores_bytes: 0,
        temporaries_bytes: p
            .temporaries_bytes
            .saturating_sub(elsewhere.map_or(0, |s| s.temporaries_bytes)),
        other_bytes: p
            .other_bytes
            .saturating_sub(elsewhere.map_or(0, |s| s.other_bytes)),
        ..p.clone()
    }
}

fn bf16_activations(p: &Parts, _: &Anatomy, _: u64) -> Parts {
    Parts {
        activations_bytes: p.activations_bytes / 2,
        attention_scores_bytes: p.attention_scores_bytes / 2,
        ..p.clone()
    }
}

fn lora(p: &Parts, _: &Anatomy, _: u64) -> Parts {
    Parts {
        gradients_bytes: scale(p.gradients_bytes, LORA_KEPT),
        optimizer_state_bytes: scale(p.optimizer_state_bytes, LORA_KEPT),
        ..p.clone()
    }
}

fn int8_weights(p: &Parts, _: &Anatomy, _: u64) -> Parts {
    Parts {
        parameters_bytes: p.parameters_bytes / 2,
        ..p.clone()
    }
}

/// The retained graphs `leaks` found on this device: their live bytes leave activations
/// first, then what no rule names, then temporaries.
fn drop_retained(p: &Parts, retained: u64) -> Parts {
    let mut q = p.clone();
    let mut left = retained;
    for slot in [
        &mut q.activations_bytes,
        &mut q.other_bytes,
        &mut q.temporaries_bytes,
        &mut q.outputs_bytes,
    ] {
        let take = left.min(*slot);
        *slot -= take;
        left -= take;
    }
    q.attention_scores_bytes = q.attention_scores_bytes.min(q.activations_bytes);
    q
}

/// The allocator's share under expandable segments at the moment, from a replay of the
/// trace (`memlens whatif`'s model) under the file's settings and under
/// `expandable_segments:True`: what each holds there that a release of its cache cannot
/// give back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpandableReplay {
    /// The file's own settings, replayed.
    pub recorded_share_bytes: u64,
    /// With expandable segments.
    pub expandable_share_bytes: u64,
}

impl ExpandableReplay {
    /// The allocator's share of the moment under expandable segments: the measured share
    /// less what the replay saves (the model's own error cancels out).
    fn share_after(&self, measured: u64) -> u64 {
        measured.saturating_sub(
            self.recorded_share_bytes
                .saturating_sub(self.expandable_share_bytes),
        )
    }
}

/// What the catalogue offers for this anatomy, in cost order (the order within a class is
/// set later: material savings first, conditional fixes last in their class, then savings). `expandable_on` is true when the file already
/// runs with expandable segments; `replayed` is the replay's answer for them (else the
/// moment's blocks estimate it); `retained` is the live bytes of `leaks`'s retained graphs
/// on the device, with the line to change.
pub(super) fn candidates(
    a: &Anatomy,
    expandable_on: bool,
    replayed: Option<ExpandableReplay>,
    retained: Option<(u64, &str)>,
    verdict: Option<&OomVerdict>,
) -> Vec<Candidate> {
    let mut out = Vec::new();
    expandable_fix(a, expandable_on, replayed, &mut out);
    autograd_fixes(a, retained, &mut out);
    engine_fixes(a, &mut out);
    batch_fixes(a, &mut out);
    optimizer_fixes(a, &mut out);
    model_fixes(a, &mut out);
    if let Some(v) = verdict {
        verdict_fixes(v, &mut out);
    }
    out
}

/// The OOM a moment is at: its verdict and the recommendations the diagnosis made for it
/// (`crate::vocab::advice`), some of which only the verdict calls for.
pub struct OomVerdict {
    /// The verdict's name (`capacity`, `fragmentation`, ...).
    pub verdict: &'static str,
    /// The diagnosis's recommendations, cheapest first.
    pub recommendations: Vec<crate::vocab::advice::Recommendation>,
}

/// The fit cost class of a diagnosis's cost.
pub fn cost_class(c: crate::vocab::advice::Cost) -> &'static str {
    match c {
        crate::vocab::advice::Cost::Free => "free",
        crate::vocab::advice::Cost::Speed => "slower",
        crate::vocab::advice::Cost::Results => "changes_results",
    }
}

/// The diagnosis's recommendations the catalogue does not decide ([`CATALOGUE_IDS`]): they
/// answer the verdict (a limit, another process, the request's shape, fragmentation's
/// settings) and change no part, so they save nothing a rewrite measures.
fn verdict_fixes(v: &OomVerdict, out: &mut Vec<Candidate>) {
    for r in &v.recommendations {
        if CATALOGUE_IDS.contains(&r.id) || out.iter().any(|c| c.id == r.id) {
            continue;
        }
        out.push(Candidate {
            id: r.id,
            premise: format!("the OOM's verdict: {}", v.verdict.replace('_', " ")),
            for_verdict: true,
            cost: cost_class(r.cost),
            confidence: "medium",
            action: r.action.clone(),
            evidence: r.why.clone(),
            rewrite: Box::new(|p, _, _| p.clone()),
        });
    }
}

/// An inference engine's pre-sized KV cache (vLLM reserves `gpu_memory_utilization` of the
/// GPU up front, mostly for it): the fraction, or releasing the engine's memory while another
/// job shares the GPU (reading.md §4).
fn engine_fixes(a: &Anatomy, out: &mut Vec<Candidate>) {
    let kv = a.flags.engine_kv_cache_bytes.min(a.parts.kv_cache_bytes);
    if kv == 0 {
        return;
    }
    out.push(Candidate {
        id: "vllm_gpu_memory_utilization",
        premise: "an inference engine's KV cache, pre-sized as a fraction of the GPU, is live".into(),
        for_verdict: false,
        cost: "free",
        confidence: "high",
        action: "size vLLM's KV cache to what the job needs: lower gpu_memory_utilization (the fraction of the GPU it reserves up front), or release the engine's memory between rollout and training when they share the GPU (vLLM sleep mode: llm.sleep(level=1) / wake_up(); RL frameworks' free_cache_engine)".into(),
        evidence: format!(
            "{} of KV cache allocated by the inference engine ({}), reserved up front whatever the batch uses",
            iec(kv),
            a.flags.engine.as_deref().unwrap_or("vLLM")
        ),
        rewrite: Box::new(move |p, _, _| Parts {
            kv_cache_bytes: p.kv_cache_bytes.saturating_sub(kv),
            ..p.clone()
        }),
    });
}

/// Expandable segments, when the file runs without them and they would hold less.
fn expandable_fix(
    a: &Anatomy,
    expandable_on: bool,
    replayed: Option<ExpandableReplay>,
    out: &mut Vec<Candidate>,
) {
    let p = &a.parts;
    let expandable_after = match replayed {
        Some(r) => r.share_after(p.allocator_cache_bytes),
        None => p.allocator_cache_bytes.min(expandable_cache(a)),
    };
    if !expandable_on && p.allocator_cache_bytes > expandable_after {
        let evidence = match replayed {
            Some(r) => format!(
                "{} is held beyond the live bytes (rounding, and free blocks stranded between live ones); replayed through the allocator's model (`memlens whatif --set expandable_segments:True`), the share that a release of the cache cannot give back here goes from {} to {}",
                iec(p.allocator_cache_bytes),
                iec(r.recorded_share_bytes),
                iec(r.expandable_share_bytes)
            ),
            None => format!(
                "{} is held beyond the live bytes (rounding, and free blocks stranded between live ones); one growing segment per pool unmaps whole free 20 MiB pages and maps them where a request needs them, leaving about {} (estimated from the moment's blocks: no trace to replay)",
                iec(p.allocator_cache_bytes),
                iec(expandable_cache(a))
            ),
        };
        out.push(Candidate {
            id: "expandable_segments",
            premise: "the allocator holds bytes beyond the live ones (rounding, free blocks between live ones) and the file runs without expandable segments".into(),
            for_verdict: false,
            cost: "free",
            confidence: if replayed.is_some() { "high" } else { "medium" },
            action: "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True".into(),
            evidence,
            rewrite: Box::new(move |p, _, _| Parts {
                allocator_cache_bytes: p.allocator_cache_bytes.min(expandable_after),
                ..p.clone()
            }),
        });
    }
}

/// Fixes of what autograd keeps: gradients alive in the forward pass, a graph kept by
/// evaluation or a measured forward, and retained graphs `leaks` found.
fn autograd_fixes(a: &Anatomy, retained: Option<(u64, &str)>, out: &mut Vec<Candidate>) {
    let p = &a.parts;
    let f = &a.flags;
    if f.gradients_alive_in_forward {
        out.push(Candidate {
            id: "zero_grad_set_to_none",
            premise: "gradients are alive during a forward pass".into(),
            for_verdict: false,
            cost: "free",
            confidence: "high",
            action: "call optimizer.zero_grad(set_to_none=True) before the forward pass (not after it)".into(),
            evidence: format!(
                "{} of gradients are alive during the forward pass, left from the previous backward",
                iec(p.gradients_bytes)
            ),
            rewrite: Box::new(no_gradients),
        });
    }
    if f.evaluation_with_autograd {
        // Medium either way: a trace without backward, gradients or optimizer state, whose
        // forward is not called from training code, is far more often an evaluation.
        let (confidence, action, evidence) = if f.kept_in_open_forward {
            (
                "medium",
                "if this forward pass is evaluation or generation (no backward follows it), run it under torch.inference_mode() (or torch.no_grad())",
                format!(
                    "the trace runs no backward and holds no gradients or optimizer state; inside the forward pass {} of activations of several layers are alive at once, kept for a backward (a training job's first forward, before its first backward, looks the same)",
                    iec(a.flags.activations_kept_by_graph_bytes)
                ),
            )
        } else {
            (
                "medium",
                "run evaluation/generation under torch.inference_mode() (or torch.no_grad())",
                format!(
                    "the trace runs no backward and holds no gradients or optimizer state, yet {} of activations outlive the forward pass that made them, kept by its outputs' autograd graph",
                    iec(a.flags.activations_kept_by_graph_bytes)
                ),
            )
        };
        out.push(Candidate {
            id: "inference_mode",
            premise:
                "no backward in the trace and no training state, yet activations are kept for one"
                    .into(),
            for_verdict: false,
            cost: "free",
            confidence,
            action: action.into(),
            evidence,
            rewrite: Box::new(no_graph),
        });
    }
    // A forward called from training code is no forward "only measured".
    if f.forward_without_backward && !f.called_from_training_code {
        out.push(Candidate {
            id: "no_grad_forward",
            premise: "a training job's forward pass recorded without its backward".into(),
            for_verdict: false,
            cost: "free",
            confidence: "low",
            action: "if this forward pass is only measured or evaluated (no backward follows it), run it under torch.no_grad(): none of its activations are kept".into(),
            evidence: format!(
                "the trace records a forward pass of a training job (gradients or optimizer state alive) and no backward; {} of activations are kept for one; without autograd about {} (one layer at a time) stays",
                iec(p.activations_bytes),
                iec(one_layer(p, f.layers, f.layer_boundary_bytes))
            ),
            rewrite: Box::new(no_grad),
        });
    }
    if let Some((bytes, site)) = retained.filter(|r| r.0 > 0) {
        out.push(Candidate {
            id: "detach_retained_graph",
            premise: "`memlens leaks` found a retained autograd graph".into(),
            for_verdict: false,
            cost: "free",
            confidence: "medium",
            action: format!(
                "at {site}, keep .item() or .detach() of the result, not the tensor (its autograd graph is kept every step)"
            ),
            evidence: format!(
                "`memlens leaks`: retained autograd graphs hold {} at the end of the trace",
                iec(bytes)
            ),
            rewrite: Box::new(move |p, _, _| drop_retained(p, bytes)),
        });
    }
}

/// Fixes of what scales with the batch: smaller batches, accumulation, checkpointing.
fn batch_fixes(a: &Anatomy, out: &mut Vec<Candidate>) {
    let p = &a.parts;
    let f = &a.flags;
    if !f.trains && p.activations_bytes > 0 {
        out.push(Candidate {
            id: "micro_batch",
            premise: "no training; activations scale with the batch".into(),
            for_verdict: false,
            cost: "slower",
            confidence: "medium",
            action: "run the batch in 2 chunks (half the batch per forward pass) and concatenate the results".into(),
            evidence: format!(
                "activations, inputs and outputs scale with the batch: {} of activations at the moment",
                iec(p.activations_bytes)
            ),
            rewrite: Box::new(accumulate),
        });
    }
    // Accumulation shrinks the activations a backward needs: the moment must be in a forward
    // (or the trace must show a backward). A training job whose trace has no backward and
    // whose moment is outside any forward (a zeroth-order method's update) keeps its
    // activations for no backward.
    let saved_for_backward = !f.forward_without_backward || f.phase == Some("forward");
    if f.trains && p.activations_bytes > 0 && saved_for_backward {
        out.push(Candidate {
            id: "gradient_accumulation",
            premise: "a training job whose activations, saved for a backward, scale with the micro-batch".into(),
            for_verdict: false,
            cost: "slower",
            confidence: "medium",
            action: "halve the micro-batch and accumulate gradients over 2 micro-batches (same effective batch)".into(),
            evidence: format!(
                "activations, inputs and outputs scale with the micro-batch: {} of activations at the moment",
                iec(p.activations_bytes)
            ),
            rewrite: Box::new(accumulate),
        });
        if checkpointed_activations(p, a) < p.activations_bytes {
            out.push(Candidate {
                id: "activation_checkpointing",
                premise: "a training job whose activations repeat over layers".into(),
                for_verdict: false,
                cost: "slower",
                confidence: if f.layer_sites >= 3 { "medium" } else { "low" },
                action: "checkpoint each layer (torch.utils.checkpoint), about 20% slower: only layer-boundary tensors stay until backward".into(),
                evidence: format!(
                    "{} layers (the count most repeated activation sites share), boundary tensor about {}; activations {} → about {}",
                    f.layers.unwrap_or(0),
                    iec(f.layer_boundary_bytes.unwrap_or(0)),
                    iec(p.activations_bytes),
                    iec(checkpointed_activations(p, a))
                ),
                rewrite: Box::new(checkpoint),
            });
        }
    }
}

/// Fixes of the optimizer state: offloading it, 8-bit state.
fn optimizer_fixes(a: &Anatomy, out: &mut Vec<Candidate>) {
    let p = &a.parts;
    if p.optimizer_state_bytes > 0 {
        out.push(Candidate {
            id: "offload_optimizer_state",
            premise: "optimizer state is live".into(),
            for_verdict: false,
            cost: "slower",
            confidence: "high",
            action:
                "keep the optimizer state in CPU memory (DeepSpeed ZeRO-Offload, FSDP CPU offload)"
                    .into(),
            evidence: format!(
                "optimizer state {} at the moment",
                iec(p.optimizer_state_bytes)
            ),
            rewrite: Box::new(offload_state),
        });
        let ratio = a
            .setup
            .optimizer_state_per_parameter_byte
            .unwrap_or(f64::MAX);
        if ratio > 0.75 {
            out.push(Candidate {
                id: "eight_bit_optimizer",
                premise: "optimizer state is live, at least 0.75× the parameters (Adam-like)".into(),
                for_verdict: false,
                cost: "changes_results",
                confidence: "medium",
                action: "use an 8-bit optimizer (bitsandbytes AdamW8bit): 2 B of state per parameter instead of 8".into(),
                evidence: format!(
                    "optimizer state {} ({})",
                    iec(p.optimizer_state_bytes),
                    a.setup.reading
                ),
                rewrite: Box::new(eight_bit_state),
            });
        }
    }
}

/// Fixes of the model itself: fused attention, bf16 autocast, LoRA, 8-bit weights.
fn model_fixes(a: &Anatomy, out: &mut Vec<Candidate>) {
    let p = &a.parts;
    let f = &a.flags;
    if let Some(att) = a.attention.as_ref().filter(|s| s.bytes > 0) {
        out.push(Candidate {
            id: "fused_attention",
            premise: "attention-score-shaped (B×H×S×S) tensors are live".into(),
            for_verdict: false,
            cost: "free",
            confidence: if att.softmax_seen { "high" } else { "medium" },
            action: "compute attention with torch.nn.functional.scaled_dot_product_attention (flash / memory-efficient kernels: exact attention, faster): the B×H×S×S scores are never materialised".into(),
            evidence: format!(
                "{} in {} score-shaped tensors (B×H×S×S: {} each{}, up to twice that for fp32 copies, down to half for 16-bit ones) made in {} and its backward",
                iec(att.bytes),
                att.tensors,
                iec(att.score_tensor_bytes),
                if att.softmax_seen { ", the size its softmax allocates" } else { ", its largest allocation" },
                att.function
            ),
            rewrite: Box::new(fused_attention),
        });
    }
    if f.trains && !f.autocast && a.setup.weight_bytes == Some(4) && p.activations_bytes > 0 {
        out.push(Candidate {
            id: "bf16_autocast",
            premise: "a training job with fp32 weights, not under autocast".into(),
            for_verdict: false,
            cost: "changes_results",
            confidence: "low",
            action: "train in bf16 mixed precision (torch.autocast(\"cuda\", dtype=torch.bfloat16)): activations saved in 16 bits".into(),
            evidence: format!(
                "the weights look fp32 ({}); activations {}",
                a.setup.reading,
                iec(p.activations_bytes)
            ),
            rewrite: Box::new(bf16_activations),
        });
    }
    if f.trains && p.gradients_bytes + p.optimizer_state_bytes > 0 {
        out.push(Candidate {
            id: "lora",
            premise: "a training job: gradients or optimizer state of the weights are live".into(),
            for_verdict: false,
            cost: "changes_results",
            confidence: "low",
            action: "fine-tune low-rank adapters (LoRA) with the base weights frozen: no gradients or optimizer state for them".into(),
            evidence: format!(
                "gradients {} and optimizer state {} belong to the weights (adapters keep about 1%)",
                iec(p.gradients_bytes),
                iec(p.optimizer_state_bytes)
            ),
            rewrite: Box::new(lora),
        });
    }
    // The premise (weights serving inference) must be shown: a frameless state without a
    // trace cannot tell weights from gradients and optimizer state of the same sizes.
    if f.no_training_shown && p.parameters_bytes > 0 {
        out.push(Candidate {
            id: "int8_weights",
            premise: "weights in a trace without training".into(),
            for_verdict: false,
            cost: "changes_results",
            confidence: "low",
            action: "load the weights quantized to 8 bits (bitsandbytes / torchao int8), half of 16-bit weights".into(),
            evidence: format!("parameters {} in a trace without backward", iec(p.parameters_bytes)),
            rewrite: Box::new(int8_weights),
        });
    }
}

/// Cost classes in order.
pub const COSTS: [&str; 3] = ["free", "slower", "changes_results"];
