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
//! `torch.cuda.empty_cache()` gives a process no memory it could not already use (step 2's
//! note), so it is never a recommendation; notes say so where people reach for it.

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
}

/// One thing to change, what it costs, and why these numbers call for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recommendation {
    /// What to do, with exact names (env vars, APIs, flags).
    pub action: String,
    /// What it costs.
    pub cost: Cost,
    /// Why, quoting the numbers.
    pub why: String,
}

/// The outcome of [`diagnose`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

/// Sizes in words, as PyTorch prints them (`20.00 MiB`, `512 bytes`).
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.2} {}", UNITS[i])
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "?%".into();
    }
    format!("{:.0}%", part as f64 * 100.0 / whole as f64)
}

/// Which rule decided the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    TooBig,
    Fragmented,
    LimitBound,
    LimitImplied,
    Outside,
    FragmentedWithFree,
    FreeEnough,
    LiveSet,
    Undecided,
}

/// The numbers every rule and sentence needs, derived once.
struct Facts<'a> {
    e: &'a Evidence,
    req: Option<u64>,
    free: Option<u64>,
    cap: Option<u64>,
    alloc: Option<u64>,
    unalloc: Option<u64>,
    reserved: Option<u64>,
    limit: Option<u64>,
    /// Bounds of a limit implied by a snapshot, when no limit is known.
    implied: Option<(u64, u64)>,
    non_pt: Option<u64>,
    others: u64,
    in_process_non_pt: Option<u64>,
    shortfall: Option<u64>,
}

impl<'a> Facts<'a> {
    fn new(e: &'a Evidence) -> Self {
        let reserved = match (e.allocated_bytes, e.reserved_unallocated_bytes) {
            (Some(a), Some(u)) => Some(a.saturating_add(u)),
            _ => None,
        };
        let cap = e.capacity_bytes;
        let non_pt = match (cap, e.device_free_bytes, reserved) {
            (Some(c), Some(f), Some(r)) => Some(c.saturating_sub(f).saturating_sub(r)),
            _ => None,
        };
        // A limit at or above the capacity limits nothing.
        let limit = e.allowed_bytes.filter(|&l| cap.map_or(true, |c| l < c));
        let implied = e.implied_limit_bytes.filter(|_| limit.is_none());
        let device_short = e
            .requested_bytes
            .zip(e.device_free_bytes)
            .map(|(r, f)| r.saturating_sub(f));
        // Under a limit the allocator checks reserved + request against it, not device free.
        let limit_short = limit
            .or(implied.map(|(lo, _)| lo))
            .zip(reserved.zip(e.requested_bytes))
            .map(|(l, (res, r))| res.saturating_add(r).saturating_sub(l));
        let shortfall = match (device_short, limit_short) {
            (Some(d), Some(l)) => Some(d.max(l)),
            (d, l) => d.or(l),
        };
        Facts {
            e,
            req: e.requested_bytes,
            free: e.device_free_bytes,
            cap,
            alloc: e.allocated_bytes,
            unalloc: e.reserved_unallocated_bytes,
            reserved,
            limit,
            implied,
            non_pt,
            others: e.other_processes.iter().map(|&(_, b)| b).sum(),
            in_process_non_pt: e
                .process_bytes
                .zip(reserved)
                .map(|(p, r)| p.saturating_sub(r)),
            shortfall,
        }
    }

    /// The shortfall in words: "up to" when it rests on an implied limit's lower bound.
    fn short(&self) -> String {
        match (self.implied, self.shortfall) {
            (Some(_), Some(x)) => format!("up to {}", size(x)),
            (_, x) => s(x),
        }
    }

    /// What the request fell short of, in words: free memory, or what the limit leaves.
    fn short_of(&self) -> String {
        match (self.limit, self.implied) {
            (Some(l), _) => format!(
                "{} short of what the {} limit leaves",
                self.short(),
                size(l)
            ),
            (None, Some(_)) => format!(
                "{} short of what the per-process limit leaves",
                self.short()
            ),
            (None, None) => format!("{} short of free memory", self.short()),
        }
    }

    /// Reserved-but-unallocated worth acting on: 2% of the capacity, between 128 MiB and 1 GiB.
    fn material_gap(&self) -> u64 {
        self.cap
            .map_or(256 * MIB, |c| (c / 50).clamp(128 * MIB, GIB))
    }

    /// Memory outside PyTorch worth blaming: 10% of the capacity, at least 2 GiB.
    fn outside_threshold(&self) -> u64 {
        self.cap.map_or(2 * GIB, |c| (c / 10).max(2 * GIB))
    }

    /// Memory held outside this process's PyTorch: the device figure, or the listed processes.
    /// Listed processes count only once this process is told apart from them (its own entry,
    /// or PyTorch's reserve to compare against): a lone "Process N" may be this process.
    fn outside(&self) -> Option<u64> {
        let others_known = self.e.process_bytes.is_some() || self.reserved.is_some();
        let others = if others_known { self.others } else { 0 };
        match self.non_pt {
            Some(n) => Some(n.max(others)),
            None if others > 0 => Some(others),
            None => None,
        }
    }

    fn rule(&self) -> Rule {
        let Facts {
            req,
            free,
            cap,
            unalloc,
            reserved,
            limit,
            ..
        } = *self;
        if let (Some(r), Some(c)) = (req, cap) {
            if r > c {
                return Rule::TooBig;
            }
        }
        if let (Some(r), Some(u)) = (req, unalloc) {
            if u >= r && u >= self.material_gap() {
                return Rule::Fragmented;
            }
        }
        if let (Some(r), Some(l), Some(res)) = (req, limit, reserved) {
            if res.saturating_add(r) > l {
                return Rule::LimitBound;
            }
        }
        if let (Some(r), Some(f), Some(_)) = (req, free, self.implied) {
            if f >= r {
                return Rule::LimitImplied;
            }
        }
        if let (Some(r), Some(out)) = (req, self.outside()) {
            let f = free.unwrap_or(0);
            if out >= self.outside_threshold()
                && f.saturating_add(out.saturating_sub(CONTEXT_ALLOWANCE)) >= r
            {
                return Rule::Outside;
            }
        }
        if let (Some(r), Some(u), Some(f)) = (req, unalloc, free) {
            // Only when the live set is well below the capacity: near it, the shortage is real.
            let well_below = match (self.alloc, cap) {
                (Some(a), Some(c)) => a <= c / 100 * 85,
                _ => true,
            };
            if u.saturating_add(f) >= r && u >= self.material_gap() && u >= r / 2 && well_below {
                return Rule::FragmentedWithFree;
            }
        }
        if let (Some(r), Some(f)) = (req, free) {
            if f >= r {
                return Rule::FreeEnough;
            }
        }
        if cap.is_some() && self.alloc.is_some() && req.is_some() {
            return Rule::LiveSet;
        }
        Rule::Undecided
    }
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
    let mut recommendations = recommendations(&f, rule);
    // Stable: the order within one cost is the order of relevance chosen above.
    recommendations.sort_by_key(|r| r.cost);
    Diagnosis {
        verdict,
        headline: headline(&f, rule),
        evidence_lines: evidence_lines(&f, rule),
        recommendations,
        notes: notes(&f, verdict),
        cannot_conclude: cannot_conclude(&f, verdict),
        reserved_bytes: f.reserved,
        non_pytorch_bytes: f.non_pt,
        shortfall_bytes: f.shortfall,
    }
}

/// `size` of an optional value, `?` when unknown.
fn s(v: Option<u64>) -> String {
    v.map_or_else(|| "?".into(), size)
}

fn headline(f: &Facts, rule: Rule) -> String {
    match rule {
        Rule::TooBig => format!(
            "Real shortage: the single {} request is larger than the whole GPU ({}); no allocator setting can make it fit.",
            s(f.req),
            s(f.cap)
        ),
        Rule::Fragmented => format!(
            "Fragmentation: {} is reserved by PyTorch but unallocated, more than the {} request, yet no cached block was large enough to hold it.",
            s(f.unalloc),
            s(f.req)
        ),
        Rule::FragmentedWithFree => format!(
            "Fragmentation: the {} request would fit in the {} reserved-but-unallocated plus the {} free on the device, but neither has it in one piece.",
            s(f.req),
            s(f.unalloc),
            s(f.free)
        ),
        Rule::LimitBound => format!(
            "Real shortage under a per-process limit: PyTorch reserves {} of the {} this process is allowed, and the {} request does not fit in the rest.",
            s(f.reserved),
            s(f.limit),
            s(f.req)
        ),
        Rule::LimitImplied => {
            let (lo, hi) = f.implied.unwrap_or_default();
            format!(
                "Real shortage under a per-process limit: the device had {} free, so the allocator refused the {} request itself; the process is capped (torch.cuda.set_per_process_memory_fraction) at between {} and {}, and PyTorch already reserves {} of it.",
                s(f.free),
                s(f.req),
                size(lo),
                size(hi),
                s(f.reserved)
            )
        }
        Rule::Outside => match (f.non_pt, f.cap) {
            (Some(n), Some(c)) => format!(
                "Memory held outside PyTorch: {} of the {} GPU is used by something other than this process's PyTorch allocator, which reserves only {}.",
                size(n),
                size(c),
                s(f.reserved)
            ),
            _ => format!(
                "Memory held outside PyTorch: other processes hold {} on this GPU, more than the {} request.",
                size(f.others),
                s(f.req)
            ),
        },
        Rule::FreeEnough => format!(
            "Unclear: the device reported {} free, more than the {} request, when the error was raised.",
            s(f.free),
            s(f.req)
        ),
        Rule::LiveSet => {
            let (a, c) = (f.alloc.unwrap_or(0), f.cap.unwrap_or(0));
            format!(
                "Real shortage: PyTorch's tensors hold {} ({} of the {} GPU) and the {} request does not fit in the {} left.",
                size(a),
                pct(a, c),
                size(c),
                s(f.req),
                s(f.free)
            )
        }
        Rule::Undecided => match (f.cap, f.alloc, f.req) {
            (None, Some(_), Some(_)) => format!(
                "Not decidable without the GPU's capacity: PyTorch holds {} and asked for {} more; pass --gpu or --capacity.",
                s(f.alloc),
                s(f.req)
            ),
            _ => "Not decidable: the message lacks the numbers that separate a shortage from fragmentation.".into(),
        },
    }
}

fn evidence_lines(f: &Facts, rule: Rule) -> Vec<String> {
    let mut v = Vec::new();
    let e = f.e;
    if let (Some(a), Some(c)) = (f.alloc, f.cap) {
        v.push(format!(
            "Allocated by PyTorch: {}, {} of the {} capacity.",
            size(a),
            pct(a, c),
            size(c)
        ));
        if a > c {
            v.push(format!(
                "PyTorch reports more allocated ({}) than the capacity ({}): the driver is paging GPU memory to system RAM (Windows' \"CUDA - Sysmem Fallback Policy\"), or the capacity is wrong.",
                size(a),
                size(c)
            ));
        }
    } else if let Some(a) = f.alloc {
        v.push(format!("Allocated by PyTorch: {}.", size(a)));
    }
    if let (Some(u), Some(r)) = (f.unalloc, f.req) {
        if u >= r && u < f.material_gap() {
            v.push(format!(
                "Reserved but unallocated: {}, more than the {} request but too little to matter: slivers between live tensors.",
                size(u),
                size(r)
            ));
        } else if u >= r {
            v.push(format!(
                "Reserved but unallocated: {}, {:.1}× the {} request, yet the allocator found no free block that large.",
                size(u),
                u as f64 / r.max(1) as f64,
                size(r)
            ));
        } else {
            v.push(format!(
                "Reserved but unallocated: only {}, less than the {} request: even a perfectly packed cache could not serve it.",
                size(u),
                size(r)
            ));
        }
    }
    if let (Some(fr), Some(r)) = (f.free, f.req) {
        if let (true, Some((lo, hi))) = (fr >= r, f.implied) {
            v.push(format!(
                "Device free: {}, more than the {} request, yet the allocator refused it: only a per-process limit does that (torch.cuda.set_per_process_memory_fraction, or per_process_memory_fraction in PYTORCH_CUDA_ALLOC_CONF). The snapshot does not record it; the trace puts it at {} or more (PyTorch reserved that much before) and below {} (reserved + the request).",
                size(fr),
                size(r),
                size(lo),
                size(hi)
            ));
        } else if fr >= r {
            v.push(format!(
                "Device free: {}, more than the {} request.",
                size(fr),
                size(r)
            ));
        } else {
            v.push(format!(
                "Device free: {} against a {} request ({} short).",
                size(fr),
                size(r),
                size(r - fr)
            ));
        }
    }
    if let (Some(n), Some(c), Some(fr), Some(res)) = (f.non_pt, f.cap, f.free, f.reserved) {
        let usual = if n <= CONTEXT_ALLOWANCE {
            "about what a CUDA context and libraries take"
        } else if n < f.outside_threshold() {
            "somewhat more than a CUDA context and libraries take"
        } else {
            "far more than a CUDA context and libraries take (0.3–1 GiB)"
        };
        v.push(format!(
            "Outside PyTorch's reserve: {} (capacity {} − free {} − reserved {}), {usual}.",
            size(n),
            size(c),
            size(fr),
            size(res)
        ));
    }
    if let Some(p) = e.process_bytes {
        let how = if e.process_bytes_inferred {
            " (listed under another PID, as happens in containers; its size matches this process)"
        } else {
            ""
        };
        match f.in_process_non_pt {
            Some(x) => v.push(format!(
                "This process uses {} on the device{how}; {} of it is outside PyTorch's allocator (CUDA context, cuBLAS/cuDNN workspaces, NCCL buffers, other libraries).",
                size(p),
                size(x)
            )),
            None => v.push(format!("This process uses {} on the device{how}.", size(p))),
        }
    }
    for &(pid, b) in &e.other_processes {
        v.push(format!("Process {pid} holds {} on this GPU.", size(b)));
    }
    if let Some(pp) = e.private_pool_bytes.filter(|&p| p > 0) {
        v.push(format!(
            "{} of the allocated memory is in private pools (CUDA graphs, torch.compile mode=\"reduce-overhead\"), unusable by other allocations.",
            size(pp)
        ));
    }
    if let (Some(l), Some(res)) = (f.limit, f.reserved) {
        v.push(format!(
            "A per-process limit of {} is set (torch.cuda.set_per_process_memory_fraction); PyTorch reserves {} of it.",
            size(l),
            size(res)
        ));
    }
    if let Some(b) = e.largest_free_block_bytes {
        v.push(format!("Largest free cached block: {}.", size(b)));
    }
    if e.expandable_segments == Some(true) {
        v.push("expandable_segments is already on.".into());
    }
    if let Some(x) = e.retained_bytes_per_step {
        v.push(format!(
            "A leak analysis found {} retained per step.",
            size(x)
        ));
    }
    if rule == Rule::TooBig {
        v.push(format!(
            "The request alone ({}) exceeds the capacity ({}).",
            s(f.req),
            s(f.cap)
        ));
    }
    v
}

fn rec(cost: Cost, action: impl Into<String>, why: impl Into<String>) -> Recommendation {
    Recommendation {
        action: action.into(),
        cost,
        why: why.into(),
    }
}

fn recommendations(f: &Facts, rule: Rule) -> Vec<Recommendation> {
    let e = f.e;
    let mut v = Vec::new();
    if let Some(x) = e.retained_bytes_per_step {
        v.push(rec(
            Cost::Free,
            "Stop keeping graph-attached tensors across steps: accumulate `loss.item()` (or `loss.detach()`), not `loss`, and log `.item()` values",
            format!(
                "memory grows by {} every step: tensors kept alive across iterations (e.g. `total_loss += loss` keeps each step's graph)",
                size(x)
            ),
        ));
    }
    match rule {
        Rule::TooBig => {
            v.push(rec(
                Cost::Free,
                format!("Find the tensor that asked for {} and fix its shape or dtype", s(f.req)),
                format!(
                    "it is larger than the whole {} GPU, so no setting helps; usual causes are an attention or distance matrix over an unbounded length (N² growth), a broadcast that materialized, or float32 where bf16 was meant",
                    s(f.cap)
                ),
            ));
            v.push(rec(
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
                Cost::Free,
                "Raise or remove the per-process limit: `torch.cuda.set_per_process_memory_fraction(...)`, or per_process_memory_fraction in PYTORCH_CUDA_ALLOC_CONF",
                format!(
                    "the device had {} free, but this process may use only between {} and {}; it reserves {} and needed {} more",
                    s(f.free),
                    size(lo),
                    size(hi),
                    s(f.reserved),
                    s(f.req)
                ),
            ));
            live_set_recs(f, &mut v);
        }
        Rule::Outside => outside_recs(f, &mut v),
        Rule::LiveSet => live_set_recs(f, &mut v),
        Rule::FreeEnough => v.push(rec(
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
                Cost::Speed,
                "Capture fewer CUDA graphs: torch.compile(mode=\"default\") instead of \"reduce-overhead\", or share one pool between graphs (`torch.cuda.graph_pool_handle()`)",
                format!(
                    "private pools hold {}, which no other allocation can use",
                    size(pp)
                ),
            ));
        }
    }
    v
}

fn fragmentation_recs(f: &Facts, v: &mut Vec<Recommendation>) {
    let e = f.e;
    let gap = s(f.unalloc);
    let req = s(f.req);
    match (e.expandable_segments, e.expandable_segments_available) {
        (Some(true), _) => {
            let pools = match e.private_pool_bytes.filter(|&p| p > 0) {
                Some(p) => format!(" ({} sits in private pools here)", size(p)),
                None => String::new(),
            };
            v.push(rec(
                Cost::Free,
                "Look for allocations spread over several streams or CUDA-graph pools: keep the hot path on one stream, drop needless `record_stream` calls",
                format!(
                    "expandable_segments is already on, yet {gap} is reserved but unallocated; with it on, gaps remain only between streams (one segment each) or in private pools{pools}"
                ),
            ));
        }
        (_, Some(false)) => v.push(rec(
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
                size(a),
                pct(a, c),
                size(c)
            )));
        }
    }
}

fn micro_batch(why: String) -> Recommendation {
    rec(
        Cost::Speed,
        "Halve the micro-batch and double the gradient-accumulation steps (same effective batch)",
        why,
    )
}

fn live_set_recs(f: &Facts, v: &mut Vec<Recommendation>) {
    let e = f.e;
    let short = f.short();
    let (a, c) = (s(f.alloc), s(f.cap));
    if e.vllm {
        v.push(rec(
            Cost::Speed,
            "Lower --max-num-seqs and/or --max-model-len",
            format!(
                "fewer concurrent sequences and shorter contexts shrink the activation peak and the KV cache; PyTorch holds {a} of the {c} GPU and the {} request was {short} short",
                s(f.req)
            ),
        ));
        v.push(rec(
            Cost::Speed,
            "Lower --gpu-memory-utilization (default 0.9) to leave headroom outside the KV cache",
            format!(
                "vLLM reserves that fraction of the GPU up front, mostly for the KV cache; activations, sampling and CUDA graphs must fit in the rest, and this {} request did not",
                s(f.req)
            ),
        ));
        v.push(rec(
            Cost::Speed,
            "Add --enforce-eager",
            "skips CUDA-graph capture, whose private pools hold memory for every captured batch size; decoding gets slower".to_string(),
        ));
        v.push(rec(
            Cost::Results,
            "Serve a quantized model (--quantization fp8, or an AWQ/GPTQ checkpoint) and/or --kv-cache-dtype fp8",
            format!("halves weight or KV-cache bytes against a shortfall of {short}, at some accuracy cost"),
        ));
        return;
    }
    v.push(rec(
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
        Cost::Speed,
        "Turn on activation checkpointing: `model.gradient_checkpointing_enable()` (Hugging Face) or `torch.utils.checkpoint.checkpoint(...)` per block",
        format!(
            "recomputes activations in backward instead of storing them: about 20% more step time for several times less activation memory, against a shortfall of {short}"
        ),
    ));
    v.push(rec(
        Cost::Speed,
        "Offload optimizer state (and parameters) to CPU: DeepSpeed ZeRO `offload_optimizer`, FSDP `CPUOffload(offload_params=True)`",
        match f.cap {
            Some(c) => format!("moves state that sits idle between steps off the {} GPU; each step pays PCIe transfers", size(c)),
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
        Cost::Results,
        "If you train with AdamW: switch to an 8-bit optimizer (`bitsandbytes.optim.AdamW8bit`)",
        format!(
            "optimizer state drops from 8 to 2 bytes per parameter, 6 GB per billion parameters{params}"
        ),
    ));
    v.push(rec(
        Cost::Results,
        "Quantize the weights (`BitsAndBytesConfig(load_in_4bit=True)` / 8-bit) and, for fine-tuning, train QLoRA adapters instead of all weights",
        format!(
            "4-bit weights take about 0.5 byte per parameter instead of 2 in bf16, and LoRA keeps optimizer state for the adapters only; the {a} live set shrinks by more than the shortfall ({short}) for most models"
        ),
    ));
}

fn outside_recs(f: &Facts, v: &mut Vec<Recommendation>) {
    let e = f.e;
    let out = s(f.outside());
    if e.other_processes.is_empty() {
        v.push(rec(
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
            .map(|&(p, b)| format!("{p} ({})", size(b)))
            .collect();
        v.push(rec(
            Cost::Free,
            format!(
                "Stop process {} or run the jobs on separate GPUs with CUDA_VISIBLE_DEVICES",
                list.join(", ")
            ),
            format!(
                "other processes hold {} on this GPU; the {} request needed {} more than was free",
                size(f.others),
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
                Cost::Free,
                "Check for another framework or library allocating in this process: JAX (XLA_PYTHON_CLIENT_PREALLOCATE=false), TensorFlow (`tf.config.experimental.set_memory_growth`), CuPy's memory pool, large NCCL buffers",
                format!(
                    "this process uses {} but its PyTorch reserves only {}: {} is outside PyTorch's allocator",
                    s(e.process_bytes),
                    s(f.reserved),
                    size(x)
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

fn notes(f: &Facts, verdict: Verdict) -> Vec<String> {
    let mut v = Vec::new();
    match verdict {
        Verdict::Fragmentation | Verdict::Capacity => v.push(format!(
            "torch.cuda.empty_cache() would not help: before raising, the allocator already returned every fully free cached segment to CUDA and retried; the {} still reserved sits in segments that hold live tensors.",
            s(f.unalloc)
        )),
        Verdict::OutsidePytorch => v.push(format!(
            "torch.cuda.empty_cache() in this process would not help: its PyTorch reserves only {}; the memory is held elsewhere.",
            s(f.reserved)
        )),
        Verdict::Unknown => {}
    }
    v
}

fn cannot_conclude(f: &Facts, verdict: Verdict) -> Vec<String> {
    let e = f.e;
    let mut v = Vec::new();
    if f.cap.is_none() {
        v.push("Whether the live set simply does not fit: the GPU's capacity is unknown (pass --gpu NAME or --capacity SIZE).".into());
    }
    if f.req.is_none() {
        v.push("How large the failing request was: no \"Tried to allocate\" figure.".into());
    }
    if f.alloc.is_none() || f.unalloc.is_none() {
        v.push("How much PyTorch allocated, and how much it reserved without allocating: the message does not say (was it cut off?).".into());
    }
    if f.free.is_none() {
        v.push("How much the device had free when the allocation failed.".into());
    }
    if f.implied.is_some() {
        v.push("The exact per-process limit: a snapshot does not record it (the error message says \"N allowed\"); pass the message to `memlens explain` for it.".into());
    }
    if verdict == Verdict::OutsidePytorch
        && e.other_processes.is_empty()
        && e.process_bytes.is_none()
    {
        v.push("Who holds the memory: the message lists no processes (NVML unavailable, e.g. WSL or a container without it); `nvidia-smi` on the host shows them.".into());
    }
    if e.largest_free_block_bytes.is_none()
        && matches!(verdict, Verdict::Fragmentation | Verdict::Capacity)
    {
        v.push(format!(
            "The largest free block, and which tensors make up the {} allocated: only a snapshot has them.",
            s(f.alloc)
        ));
    }
    v
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

    #[test]
    fn sizes_read_like_pytorch() {
        assert_eq!(size(0), "0 bytes");
        assert_eq!(size(20 << 20), "20.00 MiB");
        assert_eq!(size(3 << 29), "1.50 GiB");
    }
}
