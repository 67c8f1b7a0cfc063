//! The recommendations for a rule, each with its cost and the numbers that call for it; the
//! caller orders them cheapest first.

use super::rules::{Facts, Rule};
use super::words::{pct, s};
use super::{Cost, Recommendation, GIB};
use crate::units::iec_words;

/// A recommendation from its parts.
fn rec(
    id: &'static str,
    cost: Cost,
    action: impl Into<String>,
    why: impl Into<String>,
) -> Recommendation {
    Recommendation {
        id,
        predicted: None,
        saves_bytes: None,
        action: action.into(),
        cost,
        why: why.into(),
    }
}

/// The recommendations `rule` calls for, plus those any evidence calls for (retained memory
/// per step, large private pools), in order of relevance within each cost.
pub(super) fn recommendations(f: &Facts, rule: Rule) -> Vec<Recommendation> {
    let e = f.e;
    let mut v = Vec::new();
    if let Some(x) = e.retained_bytes_per_step {
        v.push(rec(
            "detach_retained_graph",
            Cost::Free,
            "Stop keeping graph-attached tensors across steps: accumulate `loss.item()` (or `loss.detach()`), not `loss`, and log `.item()` values",
            format!(
                "memory grows by {} every step: tensors kept alive across iterations (e.g. `total_loss += loss` keeps each step's graph)",
                iec_words(x)
            ),
        ));
    }
    match rule {
        Rule::TooBig => {
            v.push(rec(
                "fix_request_shape",
                Cost::Free,
                format!("Find the tensor that asked for {} and fix its shape or dtype", s(f.req)),
                format!(
                    "it is larger than the whole {} GPU, so no setting helps; usual causes are an attention or distance matrix over an unbounded length (N² growth), a broadcast that materialized, or float32 where bf16 was meant",
                    s(f.cap)
                ),
            ));
            v.push(rec(
                "chunk_request",
                Cost::Speed,
                "Compute it in chunks (loop over slices of the batch or sequence and concatenate the results)",
                format!(
                    "peak memory becomes one chunk's share of the {} instead of all of it",
                    s(f.req)
                ),
            ));
        }
        Rule::Fragmented | Rule::FragmentedWithFree => fragmentation_recs(f, &mut v),
        Rule::LimitBound => {
            v.push(rec(
                "raise_process_limit",
                Cost::Free,
                "Raise or remove the limit set with `torch.cuda.set_per_process_memory_fraction(...)`",
                format!(
                    "this process may use {} of the {} GPU; it reserves {} and needed {} more",
                    s(f.limit),
                    s(f.cap),
                    s(f.reserved),
                    s(f.req)
                ),
            ));
            live_set_recs(f, &mut v);
        }
        Rule::LimitImplied => {
            let (lo, hi) = f.implied.unwrap_or_default();
            v.push(rec(
                "raise_process_limit",
                Cost::Free,
                "Raise or remove the per-process limit: `torch.cuda.set_per_process_memory_fraction(...)`, or per_process_memory_fraction in PYTORCH_CUDA_ALLOC_CONF",
                format!(
                    "the device had {} free, but this process may use only between {} and {}; it reserves {} and needed {} more",
                    s(f.free),
                    iec_words(lo),
                    iec_words(hi),
                    s(f.reserved),
                    s(f.req)
                ),
            ));
            live_set_recs(f, &mut v);
        }
        Rule::Outside => outside_recs(f, &mut v),
        Rule::LiveSet => live_set_recs(f, &mut v),
        Rule::FreeEnough => v.push(rec(
            "watch_device",
            Cost::Free,
            "Watch the device around the failure: `nvidia-smi --query-compute-apps=pid,used_memory --format=csv -l 1`",
            format!(
                "the device reported {} free, more than the {} request, so the memory was probably released between the failed cudaMalloc and the message (another process exiting), or cudaMalloc failed for another reason (MIG slice, WSL/WDDM paging)",
                s(f.free),
                s(f.req)
            ),
        )),
        Rule::Undecided => {}
    }
    if let Some(pp) = e.private_pool_bytes {
        if pp >= (f.cap.unwrap_or(0) / 20).max(GIB) && !e.vllm {
            v.push(rec(
                "fewer_cuda_graphs",
                Cost::Speed,
                "Capture fewer CUDA graphs: torch.compile(mode=\"default\") instead of \"reduce-overhead\", or share one pool between graphs (`torch.cuda.graph_pool_handle()`)",
                format!(
                    "private pools hold {}, which no other allocation can use",
                    iec_words(pp)
                ),
            ));
        }
    }
    v
}

/// Fixes for fragmentation: the allocator setting this PyTorch has, then fixed shapes.
fn fragmentation_recs(f: &Facts, v: &mut Vec<Recommendation>) {
    let e = f.e;
    let gap = s(f.unalloc);
    let req = s(f.req);
    match (e.expandable_segments, e.expandable_segments_available) {
        (Some(true), _) => {
            let pools = match e.private_pool_bytes.filter(|&p| p > 0) {
                Some(p) => format!(" ({} sits in private pools here)", iec_words(p)),
                None => String::new(),
            };
            v.push(rec(
                "one_stream_one_pool",
                Cost::Free,
                "Look for allocations spread over several streams or CUDA-graph pools: keep the hot path on one stream, drop needless `record_stream` calls",
                format!(
                    "expandable_segments is already on, yet {gap} is reserved but unallocated; with it on, gaps remain only between streams (one segment each) or in private pools{pools}"
                ),
            ));
        }
        (_, Some(false)) => v.push(rec(
            "max_split_size",
            Cost::Free,
            "Set PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512 before the process starts (or upgrade to PyTorch ≥ 2.1 and use expandable_segments:True, the stronger fix)",
            format!(
                "{gap} is cached in pieces none of which holds the {req} request; blocks above max_split_size are never cut up for small tensors, so large requests keep finding whole blocks (this PyTorch predates expandable_segments)"
            ),
        )),
        _ => {
            let rocm = if e.rocm {
                " (ROCm builds also read PYTORCH_HIP_ALLOC_CONF)"
            } else {
                ""
            };
            v.push(rec(
                "expandable_segments",
                Cost::Free,
                format!(
                    "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the environment before the process starts{rocm}"
                ),
                format!(
                    "{gap} is stranded in partly used segments while the {req} request needed one contiguous block; expandable segments grow one segment per stream and remap freed pages, so such slivers stop forming"
                ),
            ));
        }
    }
    v.push(rec(
        "fixed_shapes",
        Cost::Speed,
        "Pad inputs to a few fixed shapes (bucket sequence lengths or image sizes)",
        format!(
            "fragmentation comes from tensor sizes that change from step to step; repeated sizes reuse the same cached blocks instead of leaving {gap} of odd-sized gaps"
        ),
    ));
    if let (Some(a), Some(c)) = (f.alloc, f.cap) {
        if a >= c / 10 * 9 {
            v.push(micro_batch(format!(
                "even with the gaps closed, live tensors hold {} ({} of the {} GPU): the next larger batch will fail for real",
                iec_words(a),
                pct(a, c),
                iec_words(c)
            )));
        }
    }
}

/// Halving the micro-batch, with `why`.
fn micro_batch(why: String) -> Recommendation {
    rec(
        "gradient_accumulation",
        Cost::Speed,
        "Halve the micro-batch and double the gradient-accumulation steps (same effective batch)",
        why,
    )
}

/// Fixes for a live set that does not fit: vLLM flags for vLLM, else training and inference
/// savings from free to results-changing.
fn live_set_recs(f: &Facts, v: &mut Vec<Recommendation>) {
    let e = f.e;
    let short = f.short();
    let (a, c) = (s(f.alloc), s(f.cap));
    if e.vllm {
        v.push(rec(
            "vllm_max_num_seqs",
            Cost::Speed,
            "Lower --max-num-seqs and/or --max-model-len",
            format!(
                "fewer concurrent sequences and shorter contexts shrink the activation peak and the KV cache; PyTorch holds {a} of the {c} GPU and the {} request was {short} short",
                s(f.req)
            ),
        ));
        v.push(rec(
            "vllm_gpu_memory_utilization",
            Cost::Speed,
            "Lower --gpu-memory-utilization (default 0.9) to leave headroom outside the KV cache",
            format!(
                "vLLM reserves that fraction of the GPU up front, mostly for the KV cache; activations, sampling and CUDA graphs must fit in the rest, and this {} request did not",
                s(f.req)
            ),
        ));
        v.push(rec(
            "vllm_enforce_eager",
            Cost::Speed,
            "Add --enforce-eager",
            "skips CUDA-graph capture, whose private pools hold memory for every captured batch size; decoding gets slower".to_string(),
        ));
        v.push(rec(
            "vllm_quantization",
            Cost::Results,
            "Serve a quantized model (--quantization fp8, or an AWQ/GPTQ checkpoint) and/or --kv-cache-dtype fp8",
            format!("halves weight or KV-cache bytes against a shortfall of {short}, at some accuracy cost"),
        ));
        return;
    }
    v.push(rec(
        "inference_mode",
        Cost::Free,
        "If this happened in validation or generation: run it under `torch.inference_mode()` (and `model.eval()`)",
        format!(
            "without autograd no activations are kept for backward, which is most of a {a} live set beyond the weights"
        ),
    ));
    v.push(micro_batch(
        format!(
            "the {} request was {}; activations scale with the micro-batch, so halving it frees about half of them while the effective batch stays the same",
            s(f.req),
            f.short_of()
        ),
    ));
    v.push(rec(
        "activation_checkpointing",
        Cost::Speed,
        "Turn on activation checkpointing: `model.gradient_checkpointing_enable()` (Hugging Face) or `torch.utils.checkpoint.checkpoint(...)` per block",
        format!(
            "recomputes activations in backward instead of storing them: about 20% more step time for several times less activation memory, against a shortfall of {short}"
        ),
    ));
    v.push(rec(
        "offload_optimizer_state",
        Cost::Speed,
        "Offload optimizer state (and parameters) to CPU: DeepSpeed ZeRO `offload_optimizer`, FSDP `CPUOffload(offload_params=True)`",
        match f.cap {
            Some(c) => format!("moves state that sits idle between steps off the {} GPU; each step pays PCIe transfers", iec_words(c)),
            None => "moves state that sits idle between steps off the GPU; each step pays PCIe transfers".to_string(),
        },
    ));
    // AdamW keeps 8 bytes of state per parameter, the 8-bit version 2.
    let params = f
        .shortfall
        .map(|x| {
            // Parameters whose 6 saved bytes each cover the shortfall.
            let params = x as f64 / 6.0;
            let n = if params >= 1e9 {
                format!("{:.1} billion", params / 1e9)
            } else {
                format!("{:.0} million", (params / 1e6).max(1.0))
            };
            format!(", more than a shortfall of {short} once the model has over {n} parameters")
        })
        .unwrap_or_default();
    v.push(rec(
        "eight_bit_optimizer",
        Cost::Results,
        "If you train with AdamW: switch to an 8-bit optimizer (`bitsandbytes.optim.AdamW8bit`)",
        format!(
            "optimizer state drops from 8 to 2 bytes per parameter, 6 GB per billion parameters{params}"
        ),
    ));
    v.push(rec(
        "int8_weights",
        Cost::Results,
        "Quantize the weights (`BitsAndBytesConfig(load_in_4bit=True)` / 8-bit) and, for fine-tuning, train QLoRA adapters instead of all weights",
        format!(
            "4-bit weights take about 0.5 byte per parameter instead of 2 in bf16, and LoRA keeps optimizer state for the adapters only; the {a} live set shrinks by more than the shortfall ({short}) for most models"
        ),
    ));
}

/// Fixes for memory held outside this process's PyTorch: find or stop the holder, or fit in
/// what is left.
fn outside_recs(f: &Facts, v: &mut Vec<Recommendation>) {
    let e = f.e;
    let out = s(f.outside());
    if e.other_processes.is_empty() {
        v.push(rec(
            "free_other_process",
            Cost::Free,
            "Find what holds the memory (`nvidia-smi --query-compute-apps=pid,used_memory --format=csv`), stop it, or give each job its own GPU with CUDA_VISIBLE_DEVICES",
            format!(
                "{out} of the {} GPU is in use outside this process's PyTorch allocator, which reserves only {}",
                s(f.cap),
                s(f.reserved)
            ),
        ));
    } else {
        let list: Vec<String> = e
            .other_processes
            .iter()
            .map(|&(p, b)| format!("{p} ({})", iec_words(b)))
            .collect();
        v.push(rec(
            "free_other_process",
            Cost::Free,
            format!(
                "Stop process {} or run the jobs on separate GPUs with CUDA_VISIBLE_DEVICES",
                list.join(", ")
            ),
            format!(
                "other processes hold {} on this GPU; the {} request needed {} more than was free",
                iec_words(f.others),
                s(f.req),
                s(f.shortfall)
            ),
        ));
        let small = e
            .other_processes
            .iter()
            .filter(|&&(_, b)| b < 3 * GIB / 2)
            .count();
        if small >= 2 {
            v.push(rec(
                "cuda_out_of_workers",
                Cost::Free,
                "Keep CUDA out of DataLoader workers and subprocesses: no `.cuda()` / `.to(\"cuda\")` in Dataset or collate_fn, and start workers with the 'spawn' method after moving that code",
                format!(
                    "{small} processes hold under 1.5 GiB each, the size of a bare CUDA context: helpers that touched the GPU"
                ),
            ));
        }
    }
    if let Some(x) = f.in_process_non_pt {
        if x >= (f.cap.unwrap_or(0) / 20).max(2 * GIB) {
            v.push(rec(
                "other_framework",
                Cost::Free,
                "Check for another framework or library allocating in this process: JAX (XLA_PYTHON_CLIENT_PREALLOCATE=false), TensorFlow (`tf.config.experimental.set_memory_growth`), CuPy's memory pool, large NCCL buffers",
                format!(
                    "this process uses {} but its PyTorch reserves only {}: {} is outside PyTorch's allocator",
                    s(e.process_bytes),
                    s(f.reserved),
                    iec_words(x)
                ),
            ));
        }
    }
    v.push(micro_batch(
        format!(
            "if the other memory cannot be released, this process must fit in what is left: the {} request was {} short",
            s(f.req),
            s(f.shortfall)
        ),
    ));
}
