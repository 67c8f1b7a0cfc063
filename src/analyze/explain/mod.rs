//! `memlens explain`: a PyTorch out-of-memory error message → its numbers → a diagnosis.
//!
//! In: any text holding one or more OOM messages (a bare message, a Python traceback, a log
//! with `[rank0]:` prefixes, hard-wrapped lines). Out: an [`ExplainReport`], one entry per
//! distinct message, each with the parsed numbers and [`advice::diagnose`]'s verdict.
//!
//! Here: the report and the diagnosis of each parsed message; `parse.rs` finds the messages and
//! reads their numbers (the wordings it understands are listed there).

mod parse;

pub use parse::{parse, ParsedOom, Wording};

use crate::vocab::advice::{self, Diagnosis, Evidence, Recommendation, Verdict};
use crate::Error;
use serde::Serialize;

/// Where a capacity given outside the message comes from (`--gpu` / `--capacity`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Capacity to use when a message does not state one.
    pub capacity_bytes: Option<u64>,
    /// How that capacity was given, e.g. `--gpu H100 80GB HBM3` (shown in the report).
    pub capacity_source: Option<String>,
}

/// One explained OOM. The first fields are the contract shared with `memlens oom`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OomExplained {
    /// Device index.
    pub device: Option<u32>,
    /// Index of the `oom` trace event (snapshots only; always `null` here).
    pub event_index: Option<u64>,
    /// The failed request.
    pub requested_bytes: Option<u64>,
    /// Device free memory at the failure.
    pub device_free_bytes: Option<u64>,
    /// Reserved by PyTorch (allocated + reserved-but-unallocated; ≤ 2.0: as printed).
    pub reserved_bytes: Option<u64>,
    /// Allocated by PyTorch.
    pub allocated_bytes: Option<u64>,
    /// Largest free cached block (snapshots only; always `null` here).
    pub largest_free_block_bytes: Option<u64>,
    /// Device capacity (from the message, else `--gpu`/`--capacity`).
    pub capacity_bytes: Option<u64>,
    /// This process's device memory (NVML).
    pub process_bytes: Option<u64>,
    /// The cause.
    pub verdict: Verdict,
    /// What to change, cheapest first.
    pub recommendations: Vec<Recommendation>,
    /// Reserved by PyTorch but unallocated.
    pub reserved_unallocated_bytes: Option<u64>,
    /// capacity − free − reserved.
    pub non_pytorch_bytes: Option<u64>,
    /// How much more memory the request needed: request − device free; under a per-process
    /// limit, reserved + request − the limit when that is more (with a limit a snapshot only
    /// implies, its lower bound).
    pub shortfall_bytes: Option<u64>,
    /// Per-process limit, when one is set.
    pub allowed_bytes: Option<u64>,
    /// Private-pool bytes, when printed.
    pub private_pool_bytes: Option<u64>,
    /// Other processes on the device.
    pub other_processes: Vec<ProcessUse>,
    /// `process_bytes` was inferred from a "Process N" entry.
    pub process_bytes_inferred: bool,
    /// `CUDA`, `HIP`, ...
    pub backend: String,
    /// The message shape.
    pub wording: Option<Wording>,
    /// `message`, or how the capacity was given (`--gpu ...`, `--capacity`); `null` if unknown.
    pub capacity_source: Option<String>,
    /// The verdict in one sentence.
    pub headline: String,
    /// The numbers that decided it, in words.
    pub evidence: Vec<String>,
    /// Remarks that are not fixes.
    pub notes: Vec<String>,
    /// What the message cannot tell.
    pub cannot_conclude: Vec<String>,
}

/// One other process and its device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProcessUse {
    /// Process id (0 when the message did not print one).
    pub pid: u64,
    /// Device memory in use.
    pub bytes: u64,
}

/// A CUDA (HIP, XPU, ...) out-of-memory message explained: its numbers, the cause and fixes
/// cheapest first.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ExplainReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// One entry per distinct OOM message, in input order.
    pub ooms: Vec<OomExplained>,
}

/// Parses and diagnoses every OOM message in `text`.
pub fn run(text: &str, opts: &Options) -> Result<ExplainReport, Error> {
    let parsed = parse(text)?;
    let vllm = text.to_ascii_lowercase().contains("vllm");
    let ooms = parsed.iter().map(|p| explain_one(p, opts, vllm)).collect();
    Ok(ExplainReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        ooms,
    })
}

/// The advice engine's input for one parsed message.
pub fn evidence(p: &ParsedOom, capacity: Option<u64>, vllm: bool) -> Evidence {
    let available = match (p.wording, p.backend.as_str()) {
        (Some(Wording::Parenthesized), _) | (Some(Wording::CudaMallocAsync), _) => Some(false),
        (_, "CUDA") => Some(true),
        (_, "HIP") => None,
        _ => Some(false),
    };
    Evidence {
        requested_bytes: p.requested_bytes,
        device_free_bytes: p.device_free_bytes,
        capacity_bytes: capacity,
        // Messages print the capacity (or `--gpu` gives it): nothing to infer.
        inferred_capacity: None,
        process_bytes: p.process_bytes,
        allocated_bytes: p.allocated_bytes,
        reserved_unallocated_bytes: p.reserved_unallocated_bytes,
        largest_free_block_bytes: None,
        private_pool_bytes: p.private_pool_bytes,
        expandable_segments: None,
        retained_bytes_per_step: None,
        other_processes: p.other_processes.clone(),
        allowed_bytes: p.allowed_bytes,
        // The message says "N allowed" when a limit is set: nothing to infer.
        implied_limit_bytes: None,
        expandable_segments_available: available,
        rocm: p.backend == "HIP",
        vllm,
        process_bytes_inferred: p.process_bytes_inferred,
    }
}

fn explain_one(p: &ParsedOom, opts: &Options, vllm: bool) -> OomExplained {
    let (capacity, source) = match (p.capacity_bytes, opts.capacity_bytes) {
        (Some(c), _) => (Some(c), Some("message".to_string())),
        (None, Some(c)) => (Some(c), opts.capacity_source.clone()),
        (None, None) => (None, None),
    };
    let d: Diagnosis = advice::diagnose(&evidence(p, capacity, vllm));
    let mut notes = d.notes;
    if let (Some(m), Some(o)) = (p.capacity_bytes, opts.capacity_bytes) {
        if m.abs_diff(o) > m / 50 {
            notes.push(format!(
                "{} gives {}, but the message says {}; the message's figure is used.",
                opts.capacity_source.as_deref().unwrap_or("the option"),
                crate::units::iec_words(o),
                crate::units::iec_words(m)
            ));
        }
    }
    OomExplained {
        device: p.device,
        event_index: None,
        requested_bytes: p.requested_bytes,
        device_free_bytes: p.device_free_bytes,
        reserved_bytes: p.reserved_total_bytes.or(d.reserved_bytes),
        allocated_bytes: p.allocated_bytes,
        largest_free_block_bytes: None,
        capacity_bytes: capacity,
        process_bytes: p.process_bytes,
        verdict: d.verdict,
        recommendations: d.recommendations,
        reserved_unallocated_bytes: p.reserved_unallocated_bytes,
        non_pytorch_bytes: d.non_pytorch_bytes,
        shortfall_bytes: d.shortfall_bytes,
        allowed_bytes: p.allowed_bytes,
        private_pool_bytes: p.private_pool_bytes,
        other_processes: p
            .other_processes
            .iter()
            .map(|&(pid, bytes)| ProcessUse { pid, bytes })
            .collect(),
        process_bytes_inferred: p.process_bytes_inferred,
        backend: p.backend.clone(),
        wording: p.wording,
        capacity_source: source,
        headline: d.headline,
        evidence: d.evidence_lines,
        notes,
        cannot_conclude: d.cannot_conclude,
    }
}
