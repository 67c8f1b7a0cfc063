//! The OOM diagnosis engine shared by `memlens explain` (numbers from an error message) and
//! `memlens oom` (numbers from a snapshot).
//!
//! In: [`Evidence`], every field optional. Out: a [`Diagnosis`]: a [`Verdict`], the numbers that
//! decided it in words, recommendations cheapest first, and what cannot be concluded.
//!
//! The method (issue #4). Four numbers separate a real shortage from fragmentation: the request,
//! the device's free memory, what PyTorch has allocated, and what it has reserved but not
//! allocated. Allocated close to the capacity means a real shortage; allocated well below with
//! a large reserved-but-unallocated gap means fragmentation. The checks, in order:
//!
//! 1. the request alone exceeds the capacity → [`Verdict::Capacity`];
//! 2. reserved-but-unallocated ≥ the request (and material) → [`Verdict::Fragmentation`]: the
//!    cache holds enough bytes, but the allocator searched it first and found no block that
//!    large (`snapshot-format.md` §8: before raising it has already released every unsplit
//!    cached segment, so what stays reserved sits in segments that hold live tensors);
//! 3. a per-process limit (`set_per_process_memory_fraction`) is what the request hit →
//!    [`Verdict::Capacity`] against that limit; without the message's "N allowed", a snapshot
//!    whose `oom` entry still saw the request's size free on the device implies such a limit
//!    (only it makes the allocator refuse memory the device has: `alloc_block` checks it before
//!    calling cudaMalloc) → [`Verdict::Capacity`] against the limit the trace implies;
//! 4. much of the device is used outside this process's PyTorch (capacity − free − reserved is
//!    well above a CUDA context's share, or other processes are listed) and releasing it would
//!    fit the request → [`Verdict::OutsidePytorch`];
//! 5. the request would fit in reserved-but-unallocated plus device free, the gap is a large
//!    part of it, and allocated is well below the capacity (≤ 85%) → [`Verdict::Fragmentation`]
//!    (expandable segments can remap those pages);
//! 6. the device reported enough free memory → [`Verdict::Unknown`] (released in between);
//! 7. otherwise, with the allocated figure and the capacity known → [`Verdict::Capacity`]:
//!    the live set does not fit.
//!
//! Without the capacity, a snapshot's reserved + device free at the failure (plus a CUDA
//! context) still implies it: [`Evidence::inferred_capacity`] stands in for it, the GPUs of
//! the table it matches are named, and the other reading (a larger GPU partly held by another
//! process) is named as the less likely one.
//!
//! `torch.cuda.empty_cache()` gives a process no memory it could not already use (step 2's
//! note), so it is never a recommendation; notes say so where people reach for it.
//!
//! Here: the types and [`diagnose`]. `rules.rs` derives the shared numbers and picks the rule,
//! `words.rs` writes the headline, evidence, notes and what cannot be concluded, `fixes.rs`
//! the recommendations.

mod fixes;
mod rules;
mod words;

use rules::{Facts, Rule};
use serde::Serialize;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// What a CUDA context and the usual libraries (cuBLAS, cuDNN handles) take outside the caching
/// allocator: 0.3–1 GiB in practice. Memory beyond this outside PyTorch is somebody else's.
const CONTEXT_ALLOWANCE: u64 = GIB;

/// The numbers known about one OOM. Every field is optional: callers fill what they know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    /// "Tried to allocate": the size of the new segment that could not be obtained.
    pub requested_bytes: Option<u64>,
    /// Free device memory (`cudaMemGetInfo`) when the error was raised.
    pub device_free_bytes: Option<u64>,
    /// Total device capacity (`total_memory`).
    pub capacity_bytes: Option<u64>,
    /// A capacity inferred from reserved + free (a snapshot's `oom` entry), used when
    /// `capacity_bytes` is unknown: the GPUs it matches and what the context takes.
    pub inferred_capacity: Option<crate::vocab::gpus::InferredCapacity>,
    /// Memory this process uses on the device, PyTorch or not (NVML).
    pub process_bytes: Option<u64>,
    /// Allocated by PyTorch (live tensors; in 2.1+ messages also free blocks of private pools).
    pub allocated_bytes: Option<u64>,
    /// Reserved by PyTorch but unallocated.
    pub reserved_unallocated_bytes: Option<u64>,
    /// The largest free cached block (a snapshot only).
    pub largest_free_block_bytes: Option<u64>,
    /// Memory held in private pools (CUDA graphs, `MemPool`).
    pub private_pool_bytes: Option<u64>,
    /// Whether `expandable_segments` was on (allocator_settings / `PYTORCH_CUDA_ALLOC_CONF`).
    pub expandable_segments: Option<bool>,
    /// Memory retained per training step, from a leak analysis.
    pub retained_bytes_per_step: Option<u64>,
    /// Other processes on the device: (pid, bytes).
    pub other_processes: Vec<(u64, u64)>,
    /// Per-process limit ("X allowed"), from `torch.cuda.set_per_process_memory_fraction`.
    pub allowed_bytes: Option<u64>,
    /// Bounds `(at_least, below)` of a per-process limit that a snapshot implies but does not
    /// record: the device had the request's size free, so the allocator refused it itself. The
    /// limit is at least the most PyTorch reserved before (every earlier segment fit under it)
    /// and below reserved + the request (this one did not). Ignored when `allowed_bytes` is known.
    pub implied_limit_bytes: Option<(u64, u64)>,
    /// Whether `expandable_segments` exists for this allocator: `Some(false)` before PyTorch 2.1
    /// and for allocators without it (cudaMallocAsync, XPU).
    pub expandable_segments_available: Option<bool>,
    /// The device is an AMD GPU (ROCm/HIP build).
    pub rocm: bool,
    /// The workload is vLLM serving (its flags replace training advice).
    pub vllm: bool,
    /// `process_bytes` was taken from a "Process N" entry that is probably this process (PID
    /// namespaces in containers hide the match).
    pub process_bytes_inferred: bool,
}

/// What caused the OOM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The live set (or one request) does not fit the device or the process's limit.
    Capacity,
    /// Enough cached memory is free, but not in one block.
    Fragmentation,
    /// Another process or non-PyTorch memory holds the device.
    OutsidePytorch,
    /// The numbers do not decide it.
    Unknown,
}

impl Verdict {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Capacity => "capacity",
            Verdict::Fragmentation => "fragmentation",
            Verdict::OutsidePytorch => "outside_pytorch",
            Verdict::Unknown => "unknown",
        }
    }
}

/// What a recommendation costs; recommendations are ordered by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Cost {
    /// Nothing but a setting or a code fix.
    Free,
    /// Slower steps or lower throughput.
    Speed,
    /// Numerically different results.
    Results,
}

impl Cost {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Cost::Free => "free",
            Cost::Speed => "speed",
            Cost::Results => "results",
        }
    }

    /// The cost in the words every text surface uses (`fit`'s classes): `free`, `slower`,
    /// `changes results`.
    pub fn words(self) -> &'static str {
        match self {
            Cost::Free => "free",
            Cost::Speed => "slower",
            Cost::Results => "changes results",
        }
    }
}

/// One thing to change, what it costs, and why these numbers call for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Recommendation {
    /// Stable identifier, shared with `memlens fit`'s fixes where they are the same change
    /// (`expandable_segments`, `gradient_accumulation`, ...; [`RECOMMENDATION_IDS`]): with a
    /// snapshot, `memlens oom` lists `fit`'s ranked fixes under these ids, in `fit`'s order.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = RECOMMENDATION_IDS)))]
    pub id: &'static str,
    /// What to do, with exact names (env vars, APIs, flags).
    pub action: String,
    /// What it costs; recommendations are ordered by it (free → speed → results).
    pub cost: Cost,
    /// Why, quoting the numbers.
    pub why: String,
    /// For an allocator setting, what replaying the snapshot's trace under it predicts
    /// (`memlens oom`; `memlens whatif`); absent where there is no trace to replay.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Prediction"))]
    pub predicted: Option<Prediction>,
    /// What it saves at the OOM, measured by `memlens fit` against the moment's parts (the
    /// recommendations of a snapshot's OOM are fit's ranked fixes); absent where nothing
    /// measured it (a message alone, or a fix that answers the verdict without shrinking a
    /// part).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saves_bytes: Option<u64>,
}

/// Every id a recommendation or a fit's fix can carry: `fit`'s catalogue (measured against
/// the moment's parts) and the fixes only an OOM's verdict calls for (a setting, another
/// process, the request's shape), whose saving no rewrite of the parts measures.
pub const RECOMMENDATION_IDS: [&str; 29] = [
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
    "fix_request_shape",
    "chunk_request",
    "raise_process_limit",
    "watch_device",
    "fewer_cuda_graphs",
    "one_stream_one_pool",
    "max_split_size",
    "fixed_shapes",
    "vllm_max_num_seqs",
    "vllm_enforce_eager",
    "vllm_quantization",
    "free_other_process",
    "cuda_out_of_workers",
    "other_framework",
];

/// What an allocator setting would have done to a recorded OOM, by replaying the trace
/// through the allocator model (`crate::allocator`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Prediction {
    /// The setting replayed, as `PYTORCH_CUDA_ALLOC_CONF` writes it.
    pub set: String,
    /// True when the OOM does not happen under it.
    pub avoids_oom: bool,
    /// Peak reserved of the replay as recorded.
    pub peak_reserved_bytes: u64,
    /// Peak reserved under the setting.
    pub predicted_peak_reserved_bytes: u64,
    /// Requests that still fail under it (this OOM among them unless avoided).
    pub ooms: u64,
    /// The prediction in one sentence, with its numbers.
    pub words: String,
}

/// The outcome of [`diagnose`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Diagnosis {
    /// The cause.
    pub verdict: Verdict,
    /// The verdict in one sentence, with its numbers.
    pub headline: String,
    /// The numbers that decided it, in words.
    pub evidence_lines: Vec<String>,
    /// What to change, cheapest first (free → speed → results).
    pub recommendations: Vec<Recommendation>,
    /// Remarks that are not fixes (e.g. why `torch.cuda.empty_cache()` would not help).
    pub notes: Vec<String>,
    /// What these numbers cannot tell.
    pub cannot_conclude: Vec<String>,
    /// allocated + reserved-but-unallocated, when both are known.
    pub reserved_bytes: Option<u64>,
    /// capacity − free − reserved: device memory not reserved by this process's PyTorch.
    pub non_pytorch_bytes: Option<u64>,
    /// How much more memory the request needed: request − device free; under a per-process
    /// limit, reserved + request − the limit when that is more (with a limit a snapshot only
    /// implies, its lower bound: the most the request can have been short).
    pub shortfall_bytes: Option<u64>,
}

/// Diagnoses one OOM from whatever numbers are known.
pub fn diagnose(e: &Evidence) -> Diagnosis {
    let f = Facts::new(e);
    let rule = f.rule();
    let verdict = match rule {
        Rule::TooBig | Rule::LimitBound | Rule::LimitImplied | Rule::LiveSet => Verdict::Capacity,
        Rule::Fragmented | Rule::FragmentedWithFree => Verdict::Fragmentation,
        Rule::Outside => Verdict::OutsidePytorch,
        Rule::FreeEnough | Rule::Undecided => Verdict::Unknown,
    };
    let mut recommendations = fixes::recommendations(&f, rule);
    // Stable: the order within one cost is the order of relevance chosen above.
    recommendations.sort_by_key(|r| r.cost);
    Diagnosis {
        verdict,
        headline: words::headline(&f, rule),
        evidence_lines: words::evidence_lines(&f, rule),
        recommendations,
        notes: words::notes(&f, verdict),
        cannot_conclude: words::cannot_conclude(&f, verdict),
        reserved_bytes: f.reserved,
        non_pytorch_bytes: f.non_pt,
        shortfall_bytes: f.shortfall,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(req: u64, free: u64, cap: u64, alloc: u64, unalloc: u64) -> Evidence {
        Evidence {
            requested_bytes: Some(req),
            device_free_bytes: Some(free),
            capacity_bytes: Some(cap),
            allocated_bytes: Some(alloc),
            reserved_unallocated_bytes: Some(unalloc),
            ..Evidence::default()
        }
    }

    fn gib(x: f64) -> u64 {
        (x * GIB as f64) as u64
    }

    fn actions(d: &Diagnosis) -> Vec<&str> {
        d.recommendations
            .iter()
            .map(|r| r.action.as_str())
            .collect()
    }

    fn assert_invariants(d: &Diagnosis) {
        let costs: Vec<Cost> = d.recommendations.iter().map(|r| r.cost).collect();
        let mut sorted = costs.clone();
        sorted.sort();
        assert_eq!(costs, sorted, "recommendations not cheapest first");
        for r in &d.recommendations {
            assert!(!r.action.contains("empty_cache"), "{}", r.action);
            assert!(!r.why.is_empty());
        }
        let has_es = d.recommendations.iter().any(|r| {
            r.action.contains("expandable_segments:True") && !r.action.contains("upgrade")
        });
        if has_es {
            assert_eq!(d.verdict, Verdict::Fragmentation);
        }
    }

    #[test]
    fn capacity_when_the_live_set_fills_the_gpu() {
        // GIVEN 75.21 GiB allocated of 79.15, 1.98 GiB cached free, 2 GiB requested.
        let e = ev(gib(2.0), gib(1.23), gib(79.15), gib(75.21), gib(1.98));
        // WHEN diagnosed THEN a real shortage, micro-batch before 8-bit optimizers.
        let d = diagnose(&e);
        assert_eq!(d.verdict, Verdict::Capacity);
        assert_invariants(&d);
        assert!(
            d.headline.contains("75.21 GiB") && d.headline.contains("95%"),
            "{}",
            d.headline
        );
        let a = actions(&d);
        let mb = a.iter().position(|x| x.contains("micro-batch")).unwrap();
        let q = a.iter().position(|x| x.contains("AdamW8bit")).unwrap();
        assert!(mb < q);
        assert!(!a.iter().any(|x| x.contains("expandable_segments")));
        assert!(d.notes[0].contains("empty_cache() would not help"));
    }

    #[test]
    fn fragmentation_when_the_gap_exceeds_the_request() {
        let e = ev(gib(0.75), gib(0.43), gib(47.37), gib(42.40), gib(3.24));
        let d = diagnose(&e);
        assert_eq!(d.verdict, Verdict::Fragmentation);
        assert_invariants(&d);
        assert!(d.recommendations[0]
            .action
            .contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
        assert_eq!(d.recommendations[0].cost, Cost::Free);
        assert!(d.recommendations[0].why.contains("3.24 GiB"));
    }

    #[test]
    fn expandable_segments_is_not_recommended_when_already_on() {
        let mut e = ev(gib(0.75), gib(0.43), gib(47.37), gib(42.40), gib(3.24));
        e.expandable_segments = Some(true);
        let d = diagnose(&e);
        assert_eq!(d.verdict, Verdict::Fragmentation);
        assert!(!actions(&d)
            .iter()
            .any(|a| a.contains("expandable_segments")));
        assert!(d.recommendations[0].why.contains("already on"));
    }

    #[test]
    fn pre_2_1_gets_max_split_size() {
        let mut e = ev(gib(0.25), gib(0.1), gib(14.75), gib(4.12), gib(0.68));
        e.expandable_segments_available = Some(false);
        let d = diagnose(&e);
        assert_eq!(d.verdict, Verdict::Fragmentation);
        assert!(d.recommendations[0].action.contains("max_split_size_mb"));
        assert_invariants(&d);
    }

    #[test]
    fn outside_pytorch_when_the_device_is_held_elsewhere() {
        // HIP: nothing allocated by PyTorch, 630 MiB free of 15.98 GiB.
        let e = ev(978 * MIB, 630 * MIB, gib(15.98), 0, 0);
        let d = diagnose(&e);
        assert_eq!(d.verdict, Verdict::OutsidePytorch);
        assert_invariants(&d);
        assert!(d.recommendations[0].action.contains("CUDA_VISIBLE_DEVICES"));
        assert!(d.non_pytorch_bytes.unwrap() > gib(15.0));
    }

    #[test]
    fn listed_processes_are_named() {
        let mut e = ev(gib(2.0), gib(0.5), gib(79.15), gib(30.0), gib(0.2));
        e.other_processes = vec![(4242, gib(45.0))];
        let d = diagnose(&e);
        assert_eq!(d.verdict, Verdict::OutsidePytorch);
        assert!(d.recommendations[0].action.contains("4242 (45.00 GiB)"));
    }

    #[test]
    fn a_request_larger_than_the_gpu() {
        let e = ev(gib(130206.04), gib(16.57), gib(23.56), gib(5.45), gib(1.17));
        let d = diagnose(&e);
        assert_eq!(d.verdict, Verdict::Capacity);
        assert!(d.recommendations[0].action.contains("fix its shape"));
        assert!(!actions(&d).iter().any(|a| a.contains("AdamW8bit")));
    }

    #[test]
    fn without_capacity_say_what_cannot_be_concluded() {
        let e = Evidence {
            requested_bytes: Some(gib(2.0)),
            allocated_bytes: Some(gib(30.0)),
            reserved_unallocated_bytes: Some(gib(0.1)),
            ..Evidence::default()
        };
        let d = diagnose(&e);
        assert_eq!(d.verdict, Verdict::Unknown);
        assert!(d.cannot_conclude[0].contains("--gpu"));
        assert!(d.recommendations.is_empty());
        // Fragmentation needs no capacity.
        let e = Evidence {
            requested_bytes: Some(gib(2.0)),
            allocated_bytes: Some(gib(30.0)),
            reserved_unallocated_bytes: Some(gib(6.0)),
            ..Evidence::default()
        };
        assert_eq!(diagnose(&e).verdict, Verdict::Fragmentation);
    }

    #[test]
    fn retained_memory_leads_the_list() {
        let mut e = ev(gib(2.0), gib(1.0), gib(79.15), gib(76.0), gib(0.5));
        e.retained_bytes_per_step = Some(64 * MIB);
        let d = diagnose(&e);
        assert!(d.recommendations[0].action.contains("loss.item()"));
        assert!(d.recommendations[0].why.contains("64.00 MiB"));
    }

    #[test]
    fn vllm_gets_vllm_flags_not_training_advice() {
        let mut e = ev(gib(1.25), gib(1.18), gib(93.02), gib(90.63), gib(0.12));
        e.vllm = true;
        let d = diagnose(&e);
        assert_eq!(d.verdict, Verdict::Capacity);
        let a = actions(&d).join("\n");
        assert!(a.contains("--max-num-seqs") && a.contains("--gpu-memory-utilization"));
        assert!(!a.contains("gradient"));
        assert_invariants(&d);
    }

    #[test]
    fn per_process_limit() {
        let mut e = ev(gib(2.0), gib(40.0), gib(79.15), gib(19.0), gib(0.5));
        e.allowed_bytes = Some(gib(20.0));
        let d = diagnose(&e);
        assert_eq!(d.verdict, Verdict::Capacity);
        assert!(d.recommendations[0]
            .action
            .contains("set_per_process_memory_fraction"));
    }

    #[test]
    fn a_limit_implied_by_a_snapshot_is_a_capacity_verdict_against_it() {
        // GIVEN a snapshot's numbers: 1.5 GiB live, 2 MiB cached, a 1 GiB request refused
        // while the device had 137 GiB free, and a trace that reserved at most 1.57 GiB
        let mut e = Evidence {
            requested_bytes: Some(GIB),
            device_free_bytes: Some(gib(137.69)),
            allocated_bytes: Some(gib(1.5)),
            reserved_unallocated_bytes: Some(2 * MIB),
            ..Evidence::default()
        };
        let res = gib(1.5) + 2 * MIB;
        e.implied_limit_bytes = Some((res + 64 * MIB, res + GIB));
        // WHEN diagnosed
        let d = diagnose(&e);
        // THEN a real shortage under a limit, not "released in between" nor another process
        assert_eq!(d.verdict, Verdict::Capacity);
        assert_invariants(&d);
        assert!(d.headline.contains("per-process limit"), "{}", d.headline);
        assert!(d.recommendations[0]
            .action
            .contains("set_per_process_memory_fraction"));
        let all = format!("{d:?}");
        assert!(
            !all.contains("another process") && !all.contains("nvidia-smi"),
            "{all}"
        );
        // the shortfall is against the limit's lower bound, not device free (which had room)
        assert_eq!(d.shortfall_bytes, Some(GIB - 64 * MIB));
        assert!(d
            .cannot_conclude
            .iter()
            .any(|c| c.contains("exact per-process limit")));
        // AND with fragmentation the verdict stays fragmentation, the evidence names the limit
        e.reserved_unallocated_bytes = Some(gib(1.76));
        e.allocated_bytes = Some(200 * MIB);
        e.requested_bytes = Some(72 * MIB);
        let d = diagnose(&e);
        assert_eq!(d.verdict, Verdict::Fragmentation);
        assert!(d
            .evidence_lines
            .iter()
            .any(|l| l.contains("Device free") && l.contains("per-process limit")));
    }

    #[test]
    fn a_known_limit_measures_the_shortfall_against_it() {
        // GIVEN "2.00 GiB allowed", 1.5 GiB + 2 MiB reserved, 1 GiB requested, 137 GiB free
        let mut e = ev(GIB, gib(137.69), gib(139.80), gib(1.5), 2 * MIB);
        e.allowed_bytes = Some(2 * GIB);
        let d = diagnose(&e);
        // THEN reserved + request − limit, as the allocator's check counts it
        assert_eq!(d.verdict, Verdict::Capacity);
        assert_eq!(d.shortfall_bytes, Some(gib(1.5) + 2 * MIB + GIB - 2 * GIB));
    }

    #[test]
    fn enough_free_memory_is_unknown() {
        let e = ev(gib(1.0), gib(5.0), gib(79.15), gib(73.0), gib(0.1));
        assert_eq!(diagnose(&e).verdict, Verdict::Unknown);
    }
}
