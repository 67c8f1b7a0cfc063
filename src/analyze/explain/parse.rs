//! Finding PyTorch out-of-memory messages in text and reading their numbers.
//!
//! Wordings understood (`c10/cuda/CUDACachingAllocator.cpp` across versions, see
//! `snapshot-format.md` §8):
//!
//! - **parenthesized** (PyTorch ≤ 2.0): `CUDA out of memory. Tried to allocate A (GPU d; T total
//!   capacity; X already allocated; F free; [L allowed; ]R reserved in total by PyTorch)`; ≤ 1.3
//!   ended in `U cached)` (cached = reserved − allocated) instead of the reserved total; forks
//!   (NPU) add items such as `B current active;`, which are skipped.
//! - **sentences** (2.1+): `... Tried to allocate A. GPU d has a total capacity of T of which F
//!   is free. [Process P has M memory in use. ]*[Including non-PyTorch memory, this process has
//!   M memory in use. ][L allowed; ]Of the allocated memory X is allocated by PyTorch, [with P
//!   allocated in private pools (e.g., CUDA Graphs), ]and U is reserved by PyTorch but
//!   unallocated.` 2.1 spelled "total capacty"; ROCm builds say `HIP`, XPU builds `XPU`.
//! - **cuda_malloc_async** (`backend:cudaMallocAsync`): `Allocation on device d would exceed
//!   allowed memory. (out of memory) Currently allocated : X Requested : A Device limit : T Free
//!   (according to CUDA): F PyTorch limit (set by user-supplied memory fraction) : L`.
//!
//! Sizes are PyTorch's `format_size`: two decimals of `bytes`/KiB/MiB/GiB (never TiB; 20 TB is
//! "20480.00 GiB"), so a parsed figure is exact to the rounding of the printed one.

use crate::Error;
use serde::Serialize;

/// Which message shape a parse came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Wording {
    /// `(GPU d; T total capacity; ...)`: PyTorch ≤ 2.0.
    Parenthesized,
    /// `GPU d has a total capacity of T of which F is free. ...`: PyTorch 2.1+.
    Sentences,
    /// `Allocation on device d would exceed allowed memory.`: the cudaMallocAsync backend.
    CudaMallocAsync,
}

/// The numbers of one OOM message, as printed (rounded to the printed two decimals).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ParsedOom {
    /// `CUDA`, `HIP`, `XPU`, ... (the word before "out of memory").
    pub backend: String,
    /// The message shape.
    pub wording: Option<Wording>,
    /// Device index.
    pub device: Option<u32>,
    /// "Tried to allocate" / "Requested".
    pub requested_bytes: Option<u64>,
    /// "of which F is free" / "F free" / "Free (according to CUDA)".
    pub device_free_bytes: Option<u64>,
    /// "total capacity" / "Device limit".
    pub capacity_bytes: Option<u64>,
    /// "is allocated by PyTorch" / "already allocated" / "Currently allocated".
    pub allocated_bytes: Option<u64>,
    /// "is reserved by PyTorch but unallocated" (≤ 1.3: "cached"; ≤ 2.0: reserved − allocated).
    pub reserved_unallocated_bytes: Option<u64>,
    /// "reserved in total by PyTorch" (≤ 2.0 only).
    pub reserved_total_bytes: Option<u64>,
    /// "this process has M memory in use" (or the listed process that must be this one).
    pub process_bytes: Option<u64>,
    /// `process_bytes` comes from a "Process N" entry sized like this process.
    pub process_bytes_inferred: bool,
    /// Other "Process N has M memory in use" entries: (pid, bytes); pid 0 when not printed.
    pub other_processes: Vec<(u64, u64)>,
    /// "with P allocated in private pools".
    pub private_pool_bytes: Option<u64>,
    /// "L allowed" / "PyTorch limit": a per-process memory fraction.
    pub allowed_bytes: Option<u64>,
}

/// What an input without a message is told to hold.
const EXPECTED: &str = "expected a PyTorch out-of-memory message such as \"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of ...\" (CUDA, HIP or XPU; any PyTorch version) or \"Allocation on device 0 would exceed allowed memory\"";

/// Finds and parses every OOM message in `text`; identical repeats are kept once.
pub fn parse(text: &str) -> Result<Vec<ParsedOom>, Error> {
    let flat = flatten(text);
    if flat.is_empty() {
        return Err(Error::Usage(format!("{EXPECTED}; the input is empty")));
    }
    let starts = message_starts(&flat);
    if starts.is_empty() {
        if flat.contains("CUDA error: out of memory") || flat.contains("HIP error: out of memory") {
            return Err(Error::Usage(format!(
                "this is the CUDA runtime's \"CUDA error: out of memory\", not the caching allocator's message: memory ran out outside PyTorch's allocator (CUDA context creation, cuBLAS/cuDNN/NCCL, or another process); {EXPECTED}"
            )));
        }
        return Err(Error::Usage(format!(
            "{EXPECTED}; found none in {} characters",
            text.chars().count()
        )));
    }
    let mut out: Vec<ParsedOom> = Vec::new();
    for (i, &(start, kind)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(flat.len(), |&(s, _)| s);
        let seg = &flat[start..end];
        let p = match kind {
            Start::Allocator => parse_allocator(seg),
            Start::Async => parse_async(seg),
        };
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// Joins the input into one line: drops per-line log prefixes (`[rank0]:`, `(VllmWorker rank=1
/// pid=254)`) and collapses every run of whitespace, so hard-wrapped messages read as one.
fn flatten(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut l = line.trim();
        loop {
            let before = l;
            if let Some(rest) = l.strip_prefix("[rank") {
                if let Some(close) = rest.find("]:") {
                    if rest[..close].bytes().all(|b| b.is_ascii_digit()) {
                        l = rest[close + 2..].trim_start();
                    }
                }
            }
            if l.starts_with('(') {
                if let Some(close) = l.find(')') {
                    if l[..close].contains("pid=") {
                        l = l[close + 1..].trim_start();
                    }
                }
            }
            if l == before {
                break;
            }
        }
        for word in l.split_whitespace() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(word);
        }
    }
    out
}

/// Which parser reads a message: the caching allocator's or cudaMallocAsync's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    Allocator,
    Async,
}

/// Byte offsets where messages start: the backend word before " out of memory. Tried to
/// allocate", or "Allocation on device".
fn message_starts(flat: &str) -> Vec<(usize, Start)> {
    const OOM: &str = " out of memory. Tried to allocate ";
    let mut v = Vec::new();
    let mut from = 0;
    while let Some(i) = flat[from..].find(OOM) {
        let at = from + i;
        let word_start = flat[..at]
            .rfind(|c: char| !c.is_ascii_alphanumeric())
            .map_or(0, |j| j + 1);
        v.push((word_start, Start::Allocator));
        from = at + OOM.len();
    }
    let mut from = 0;
    const ASYNC: &str = "Allocation on device ";
    while let Some(i) = flat[from..].find(ASYNC) {
        let at = from + i;
        if flat[at..].contains("would exceed allowed memory") {
            v.push((at, Start::Async));
        }
        from = at + ASYNC.len();
    }
    v.sort_by_key(|&(s, _)| s);
    v
}

/// Parses `"20.00 MiB..."` at the start of `s`: the size and the bytes consumed.
fn size_at(s: &str) -> Option<(u64, usize)> {
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let num = s[..num_end].trim_end_matches('.');
    let (mantissa, scale) = crate::units::parse_decimal(num)?;
    let rest = &s[num_end..];
    let gap = rest.len() - rest.trim_start().len();
    let rest = rest.trim_start();
    let unit_end = rest
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    let multiplier: u128 = match &rest[..unit_end] {
        "bytes" | "byte" | "B" => 1,
        "KiB" | "KB" => 1 << 10,
        "MiB" | "MB" => 1 << 20,
        "GiB" | "GB" => 1 << 30,
        "TiB" | "TB" => 1 << 40,
        _ => return None,
    };
    let bytes = crate::units::scaled_exact(mantissa, scale, multiplier)?;
    Some((bytes, num_end + gap + unit_end))
}

/// The size right after the first `label` (skipping spaces and colons).
fn size_after(seg: &str, label: &str) -> Option<u64> {
    let i = seg.find(label)? + label.len();
    let rest = seg[i..].trim_start_matches([' ', ':']);
    size_at(rest).map(|(b, _)| b)
}

/// The size written just before the first `label` (`"1.98 GiB is reserved..."`).
fn size_before(seg: &str, label: &str) -> Option<u64> {
    let i = seg.find(label)?;
    let head = seg[..i].trim_end();
    // The unit is the last word; the number the word before it (or glued to the unit).
    let unit_start = head.rfind(' ').map_or(0, |j| j + 1);
    if let Some((b, n)) = size_at(&head[unit_start..]) {
        if n == head.len() - unit_start {
            return Some(b);
        }
    }
    let num_start = head[..unit_start.saturating_sub(1)]
        .rfind(' ')
        .map_or(0, |j| j + 1);
    size_at(&head[num_start..]).map(|(b, _)| b)
}

/// The first word of a message: `CUDA`, `HIP`, `XPU`, ...
fn backend_word(seg: &str) -> String {
    seg.split(' ').next().unwrap_or("").to_string()
}

/// The digits right after `prefix` (`"GPU 3 has"` → 3).
fn number_after(seg: &str, prefix: &str) -> Option<u32> {
    let i = seg.find(prefix)? + prefix.len();
    let digits: String = seg[i..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The caching allocator's message, in either wording.
fn parse_allocator(seg: &str) -> ParsedOom {
    let mut p = ParsedOom {
        backend: backend_word(seg),
        requested_bytes: size_after(seg, "Tried to allocate "),
        ..ParsedOom::default()
    };
    // ≤ 2.0: "Tried to allocate A (GPU d; ...)". The "(" must follow the size directly.
    let after_req = seg
        .find("Tried to allocate ")
        .map(|i| &seg[i + "Tried to allocate ".len()..])
        .and_then(|r| size_at(r).map(|(_, n)| r[n..].trim_start()));
    if let Some(paren) = after_req.filter(|r| r.starts_with('(')) {
        parse_parenthesized(paren, &mut p);
        return p;
    }
    p.wording = Some(Wording::Sentences);
    p.device = seg
        .find(" has a total capac")
        .and_then(|i| seg[..i].rsplit(' ').next())
        .and_then(|d| d.parse().ok());
    p.capacity_bytes =
        size_after(seg, "total capacity of ").or_else(|| size_after(seg, "total capacty of "));
    p.device_free_bytes = seg
        .find(" of which ")
        .and_then(|i| size_at(&seg[i + " of which ".len()..]).map(|(b, _)| b));
    p.allowed_bytes = size_before(seg, " allowed;");
    p.allocated_bytes = size_after(seg, "Of the allocated memory ");
    p.private_pool_bytes = size_before(seg, " allocated in private pools");
    p.reserved_unallocated_bytes = size_before(seg, " is reserved by PyTorch but unallocated");
    parse_processes(seg, &mut p);
    p
}

/// `"(GPU 0; 8.00 GiB total capacity; 7.21 GiB already allocated; ...)"`.
fn parse_parenthesized(paren: &str, p: &mut ParsedOom) {
    p.wording = Some(Wording::Parenthesized);
    let body = &paren[1..paren.find(')').unwrap_or(paren.len())];
    let mut items = body.split(';').map(str::trim);
    if let Some(first) = items.next() {
        // "GPU 0" / "NPU 3" / "GPU  0"
        p.device = first.split_whitespace().nth(1).and_then(|d| d.parse().ok());
    }
    for item in items {
        let Some((bytes, n)) = size_at(item) else {
            continue;
        };
        match item[n..].trim() {
            "total capacity" => p.capacity_bytes = Some(bytes),
            "already allocated" => p.allocated_bytes = Some(bytes),
            "free" => p.device_free_bytes = Some(bytes),
            "allowed" => p.allowed_bytes = Some(bytes),
            "reserved in total by PyTorch" => p.reserved_total_bytes = Some(bytes),
            // ≤ 1.3: what the cache held beyond the allocated bytes.
            "cached" => p.reserved_unallocated_bytes = Some(bytes),
            _ => {}
        }
    }
    if let (Some(r), Some(a)) = (p.reserved_total_bytes, p.allocated_bytes) {
        p.reserved_unallocated_bytes = Some(r.saturating_sub(a));
    }
    if p.reserved_total_bytes.is_none() {
        if let (Some(u), Some(a)) = (p.reserved_unallocated_bytes, p.allocated_bytes) {
            p.reserved_total_bytes = Some(a + u);
        }
    }
}

/// "Process 123 has M memory in use." / "Including non-PyTorch memory, this process has M
/// memory in use." — and, when no entry says "this process", the entry sized like this process
/// (a container's PID namespace hides the match from NVML).
fn parse_processes(seg: &str, p: &mut ParsedOom) {
    const HAS: &str = " has ";
    let mut own = None;
    let mut others = Vec::new();
    let mut from = 0;
    while let Some(i) = seg[from..].find("rocess") {
        let at = from + i;
        from = at + "rocess".len();
        let Some(first) = at.checked_sub(1).map(|j| seg.as_bytes()[j]) else {
            continue;
        };
        let rest = &seg[from..];
        let (pid, rest) = match rest.strip_prefix(' ') {
            Some(r) => {
                let digits: String = r.chars().take_while(char::is_ascii_digit).collect();
                (digits.parse::<u64>().ok(), &r[digits.len()..])
            }
            None => continue,
        };
        let Some(rest) = rest
            .strip_prefix(HAS.trim_start())
            .or_else(|| rest.strip_prefix(HAS))
        else {
            continue;
        };
        let Some((bytes, n)) = size_at(rest) else {
            continue;
        };
        if !rest[n..].starts_with(" memory in use") {
            continue;
        }
        let is_self = first == b'p' && seg[..at - 1].ends_with("this ");
        if is_self {
            own = Some(bytes);
        } else if first == b'P' {
            others.push((pid.unwrap_or(0), bytes));
        }
    }
    if own.is_none() {
        if let (Some(a), Some(u)) = (p.allocated_bytes, p.reserved_unallocated_bytes) {
            let reserved = a + u;
            // This process = PyTorch's reserve plus a few GiB of context and libraries.
            let slack = (3u64 << 30).max(reserved / 10);
            let candidate = others
                .iter()
                .enumerate()
                .filter(|(_, &(_, b))| b >= reserved && b - reserved <= slack)
                .min_by_key(|(_, &(_, b))| b)
                .map(|(i, _)| i);
            if let Some(i) = candidate {
                own = Some(others.remove(i).1);
                p.process_bytes_inferred = true;
            }
        }
    }
    p.process_bytes = own;
    p.other_processes = others;
}

/// cudaMallocAsync backend: labelled lines.
fn parse_async(seg: &str) -> ParsedOom {
    let capacity = size_after(seg, "Device limit");
    ParsedOom {
        backend: "CUDA".into(),
        wording: Some(Wording::CudaMallocAsync),
        device: number_after(seg, "Allocation on device "),
        requested_bytes: size_after(seg, "Requested"),
        device_free_bytes: size_after(seg, "Free (according to CUDA)"),
        capacity_bytes: capacity,
        allocated_bytes: size_after(seg, "Currently allocated"),
        // Unset, the limit prints as a huge number: only a limit below the device counts.
        allowed_bytes: size_after(seg, "(set by user-supplied memory fraction)")
            .filter(|&l| capacity.map_or(true, |c| l < c)),
        ..ParsedOom::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn sizes_parse_exactly() {
        assert_eq!(size_at("20.00 MiB"), Some((20 << 20, 9)));
        assert_eq!(size_at("0 bytes is free"), Some((0, 7)));
        assert_eq!(size_at("79.15 GiB."), Some((84_986_665_370, 9)));
        assert_eq!(size_at("130206.04 GiB"), Some((139_807_670_885_417, 13)));
        assert_eq!(size_at("1.5TiB"), Some((3 << 39, 6)));
        assert_eq!(size_at("GiB"), None);
        assert_eq!(
            size_before("x 1.98 GiB is reserved", " is reserved"),
            Some(2_126_008_812)
        );
        assert_eq!(
            size_before("x 1.98GiB is reserved", " is reserved"),
            Some(2_126_008_812)
        );
    }

    #[test]
    fn flatten_joins_wrapped_and_prefixed_lines() {
        let t = "[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n[rank0]:  Tried to allocate 2.00 GiB.\n(VllmWorker rank=1 pid=254) GPU 0";
        assert_eq!(
            flatten(t),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0"
        );
    }

    #[test]
    fn modern_message() {
        let m = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.23 GiB is free. Process 12345 has 77.91 GiB memory in use. Of the allocated memory 75.21 GiB is allocated by PyTorch, and 1.98 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";
        let p = &parse(m).unwrap()[0];
        assert_eq!(p.backend, "CUDA");
        assert_eq!(p.device, Some(0));
        assert_eq!(p.requested_bytes, Some(2 * GIB));
        assert_eq!(p.capacity_bytes, Some(84_986_665_370));
        // 77.91 GiB ≥ 75.21 + 1.98: the listed process is this one.
        assert_eq!(p.process_bytes, Some(83_655_225_508));
        assert!(p.process_bytes_inferred);
        assert!(p.other_processes.is_empty());
    }

    #[test]
    fn nothing_to_parse_is_a_usage_error() {
        for t in ["", "   \n", "RuntimeError: shape mismatch"] {
            let e = parse(t).unwrap_err();
            assert!(matches!(e, Error::Usage(_)));
            assert!(e
                .to_string()
                .contains("expected a PyTorch out-of-memory message"));
            assert!(!e.to_string().contains('\n'));
        }
        let e =
            parse("RuntimeError: CUDA error: out of memory\nCUDA kernel errors...").unwrap_err();
        assert!(e.to_string().contains("CUDA runtime"), "{e}");
    }
}
