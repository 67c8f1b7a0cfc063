//! The diagnosis in words: the headline, the evidence lines, the notes and what cannot be
//! concluded, each quoting the numbers of [`Facts`] (sizes as [`iec_words`] prints them).

use super::rules::{Facts, Rule};
use super::{Verdict, CONTEXT_ALLOWANCE};
use crate::units::iec_words;
use crate::vocab::gpus::InferredCapacity;

/// `part` as a whole percentage of `whole`, `?%` when `whole` is 0.
pub(super) fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "?%".into();
    }
    format!("{:.0}%", part as f64 * 100.0 / whole as f64)
}

/// The GPUs an inferred capacity matches (at most three), in words: `H100 80GB HBM3 (79.11
/// GiB) or A100 80GB (79.15 GiB)`, or only their names.
pub(super) fn gpu_words(i: &InferredCapacity, sizes: bool) -> String {
    let shown = &i.matches[..i.matches.len().min(3)];
    let names: Vec<String> = shown
        .iter()
        .map(|g| {
            if sizes {
                format!("{} ({})", g.name, iec_words(g.capacity_bytes))
            } else {
                g.name.to_string()
            }
        })
        .collect();
    names.join(" or ")
}

/// [`iec_words`] of an optional value, `?` when unknown.
pub(super) fn s(v: Option<u64>) -> String {
    v.map_or_else(|| "?".into(), iec_words)
}

impl Facts<'_> {
    /// The shortfall in words: "up to" when it rests on an implied limit's lower bound.
    pub(super) fn short(&self) -> String {
        match (self.implied, self.shortfall) {
            (Some(_), Some(x)) => format!("up to {}", iec_words(x)),
            (_, x) => s(x),
        }
    }

    /// What the request fell short of, in words: free memory, or what the limit leaves.
    pub(super) fn short_of(&self) -> String {
        match (self.limit, self.implied) {
            (Some(l), _) => format!(
                "{} short of what the {} limit leaves",
                self.short(),
                iec_words(l)
            ),
            (None, Some(_)) => format!(
                "{} short of what the per-process limit leaves",
                self.short()
            ),
            (None, None) => format!("{} short of free memory", self.short()),
        }
    }
}

/// The verdict in one sentence, with the numbers of the rule that decided it.
pub(super) fn headline(f: &Facts, rule: Rule) -> String {
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
                iec_words(lo),
                iec_words(hi),
                s(f.reserved)
            )
        }
        Rule::Outside => match (f.non_pt, f.cap) {
            (Some(n), Some(c)) => format!(
                "Memory held outside PyTorch: {} of the {} GPU is used by something other than this process's PyTorch allocator, which reserves only {}.",
                iec_words(n),
                iec_words(c),
                s(f.reserved)
            ),
            _ => format!(
                "Memory held outside PyTorch: other processes hold {} on this GPU, more than the {} request.",
                iec_words(f.others),
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
            match f.inferred {
                None => format!(
                    "Real shortage: PyTorch's tensors hold {} ({} of the {} GPU) and the {} request does not fit in the {} left.",
                    iec_words(a),
                    pct(a, c),
                    iec_words(c),
                    s(f.req),
                    s(f.free)
                ),
                Some(i) => format!(
                    "Real shortage: PyTorch's tensors hold {}, {} of this GPU's {} (inferred: {}), and the {} request does not fit in the {} left.",
                    iec_words(a),
                    pct(a, c),
                    iec_words(c),
                    gpu_words(i, false),
                    s(f.req),
                    s(f.free)
                ),
            }
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

/// Every known number that bears on the verdict, one sentence each.
pub(super) fn evidence_lines(f: &Facts, rule: Rule) -> Vec<String> {
    let mut v = Vec::new();
    let e = f.e;
    capacity_lines(f, &mut v);
    room_lines(f, &mut v);
    outside_lines(f, &mut v);
    if let Some(b) = e.largest_free_block_bytes {
        v.push(format!("Largest free cached block: {}.", iec_words(b)));
    }
    if e.expandable_segments == Some(true) {
        v.push("expandable_segments is already on.".into());
    }
    if let Some(x) = e.retained_bytes_per_step {
        v.push(format!(
            "A leak analysis found {} retained per step.",
            iec_words(x)
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

/// The evidence of the capacity (inferred, or given) and of what PyTorch allocated of it.
fn capacity_lines(f: &Facts, v: &mut Vec<String>) {
    if let (Some(i), Some(fr), Some(res)) = (f.inferred, f.free, f.reserved) {
        // When the device still had the request free, nobody else's memory is in question.
        let short = f.req.is_some_and(|r| fr < r);
        v.push(format!(
            "Capacity inferred (a snapshot does not record it): reserved {} + device free {} = {}; the {} left of a {} GPU is what a CUDA context and its libraries take, so this is {}.{}",
            iec_words(res),
            iec_words(fr),
            iec_words(i.seen_bytes),
            iec_words(i.outside_bytes),
            iec_words(i.capacity_bytes),
            gpu_words(i, true),
            if short {
                " The less likely reading: a larger GPU, with another process holding the difference (`nvidia-smi` would show it; --gpu NAME settles it)."
            } else {
                ""
            }
        ));
    }
    if let (Some(a), Some(c)) = (f.alloc, f.cap) {
        v.push(format!(
            "Allocated by PyTorch: {}, {} of the {} capacity.",
            iec_words(a),
            pct(a, c),
            iec_words(c)
        ));
        if a > c {
            v.push(format!(
                "PyTorch reports more allocated ({}) than the capacity ({}): the driver is paging GPU memory to system RAM (Windows' \"CUDA - Sysmem Fallback Policy\"), or the capacity is wrong.",
                iec_words(a),
                iec_words(c)
            ));
        }
    } else if let Some(a) = f.alloc {
        v.push(format!("Allocated by PyTorch: {}.", iec_words(a)));
    }
}

/// The evidence of the room left for the request: in PyTorch's cache, on the device.
fn room_lines(f: &Facts, v: &mut Vec<String>) {
    if let (Some(u), Some(r)) = (f.unalloc, f.req) {
        if u >= r && u < f.material_gap() {
            v.push(format!(
                "Reserved but unallocated: {}, more than the {} request but too little to matter: slivers between live tensors.",
                iec_words(u),
                iec_words(r)
            ));
        } else if u >= r {
            v.push(format!(
                "Reserved but unallocated: {}, {:.1}× the {} request, yet the allocator found no free block that large.",
                iec_words(u),
                u as f64 / r.max(1) as f64,
                iec_words(r)
            ));
        } else {
            v.push(format!(
                "Reserved but unallocated: only {}, less than the {} request: even a perfectly packed cache could not serve it.",
                iec_words(u),
                iec_words(r)
            ));
        }
    }
    if let (Some(fr), Some(r)) = (f.free, f.req) {
        if let (true, Some((lo, hi))) = (fr >= r, f.implied) {
            v.push(format!(
                "Device free: {}, more than the {} request, yet the allocator refused it: only a per-process limit does that (torch.cuda.set_per_process_memory_fraction, or per_process_memory_fraction in PYTORCH_CUDA_ALLOC_CONF). The snapshot does not record it; the trace puts it at {} or more (PyTorch reserved that much before) and below {} (reserved + the request).",
                iec_words(fr),
                iec_words(r),
                iec_words(lo),
                iec_words(hi)
            ));
        } else if fr >= r {
            v.push(format!(
                "Device free: {}, more than the {} request.",
                iec_words(fr),
                iec_words(r)
            ));
        } else {
            v.push(format!(
                "Device free: {} against a {} request ({} short).",
                iec_words(fr),
                iec_words(r),
                iec_words(r - fr)
            ));
        }
    }
}

/// The evidence of memory outside PyTorch's allocator or unusable by the request: other
/// libraries, processes, private pools, a per-process limit.
fn outside_lines(f: &Facts, v: &mut Vec<String>) {
    let e = f.e;
    if let (Some(n), Some(c), Some(fr), Some(res), None) =
        (f.non_pt, f.cap, f.free, f.reserved, f.inferred)
    {
        let usual = if n <= CONTEXT_ALLOWANCE {
            "about what a CUDA context and libraries take"
        } else if n < f.outside_threshold() {
            "somewhat more than a CUDA context and libraries take"
        } else {
            "far more than a CUDA context and libraries take (0.3–1 GiB)"
        };
        v.push(format!(
            "Outside PyTorch's reserve: {} (capacity {} − free {} − reserved {}), {usual}.",
            iec_words(n),
            iec_words(c),
            iec_words(fr),
            iec_words(res)
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
                iec_words(p),
                iec_words(x)
            )),
            None => v.push(format!("This process uses {} on the device{how}.", iec_words(p))),
        }
    }
    for &(pid, b) in &e.other_processes {
        v.push(format!("Process {pid} holds {} on this GPU.", iec_words(b)));
    }
    if let Some(pp) = e.private_pool_bytes.filter(|&p| p > 0) {
        v.push(format!(
            "{} of the allocated memory is in private pools (CUDA graphs, torch.compile mode=\"reduce-overhead\"), unusable by other allocations.",
            iec_words(pp)
        ));
    }
    if let (Some(l), Some(res)) = (f.limit, f.reserved) {
        v.push(format!(
            "A per-process limit of {} is set (torch.cuda.set_per_process_memory_fraction); PyTorch reserves {} of it.",
            iec_words(l),
            iec_words(res)
        ));
    }
}

/// Remarks that are not fixes: why `torch.cuda.empty_cache()` would not help.
pub(super) fn notes(f: &Facts, verdict: Verdict) -> Vec<String> {
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

/// What the missing numbers leave open.
pub(super) fn cannot_conclude(f: &Facts, verdict: Verdict) -> Vec<String> {
    let e = f.e;
    let mut v = Vec::new();
    if f.cap.is_none() {
        v.push("Whether the live set simply does not fit: the GPU's capacity is unknown (pass --gpu NAME or --capacity SIZE).".into());
    }
    if f.inferred.is_some() {
        v.push("Which GPU this is, exactly: a snapshot does not record it, so the capacity above is inferred from reserved + free memory (pass --gpu NAME or --capacity SIZE to state it).".into());
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
