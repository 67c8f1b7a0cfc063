//! GPU name → capacity in bytes, what a process saw → the GPU it probably ran on, and human
//! size strings → bytes.
//!
//! In: a GPU name as people type it (`h100`, `A100-80GB`, `a100_40`, `NVIDIA GeForce RTX 4090`)
//! or a size (`80GiB`, `81920MiB`, `1.5 TiB`, `85899345920`). Out: bytes. [`infer_capacity`]
//! goes the other way: from reserved + free memory at an OOM to the table's GPUs that explain it.
//!
//! Capacities are what PyTorch reports as `torch.cuda.get_device_properties(d).total_memory`
//! and prints as "total capacity" in OOM messages: less than the advertised size, because the
//! driver and ECC keep part of it. The figure for one model varies by a few hundredths of a GiB
//! with driver, ECC mode and host (T4: 14.56–14.75 GiB seen); the table holds one typical value,
//! stored as the two-decimal GiB figure PyTorch prints, and says where it comes from.

use crate::Error;
use serde::Serialize;

/// One GPU model of the built-in table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gpu {
    /// Display name.
    pub name: &'static str,
    /// Normalized names that select this GPU (see [`normalize`]).
    pub keys: &'static [&'static str],
    /// `total_memory` in bytes.
    pub capacity_bytes: u64,
    /// Where the figure comes from.
    pub source: &'static str,
}

/// `gib` hundredths of a GiB in bytes, rounded: `gib(7915)` is 79.15 GiB as PyTorch prints it.
const fn gib(hundredths: u64) -> u64 {
    (hundredths * (1 << 30) + 50) / 100
}

const OBSERVED: &str = "observed: \"total capacity\" in public PyTorch OOM messages";
const BRIEF: &str = "memlens issue #4 (torch total_memory as reported)";
const MEASURED: &str =
    "measured: torch.cuda.get_device_properties(0).total_memory on an H200 (PyTorch 2.11.0+cu130, driver for CUDA 13.0)";
const NOMINAL: &str = "nominal: advertised size less the usual driver reserve; not measured";

/// The built-in table, in display order.
pub const GPUS: &[Gpu] = &[
    Gpu {
        name: "A100 40GB",
        keys: &["a10040"],
        capacity_bytes: gib(3938),
        source: BRIEF,
    },
    Gpu {
        name: "A100 80GB",
        keys: &["a10080"],
        // 79.15 GiB is the usual figure (79.25 GiB seen on some hosts).
        capacity_bytes: gib(7915),
        source: OBSERVED,
    },
    Gpu {
        name: "H100 80GB HBM3",
        keys: &["h100", "h10080"],
        capacity_bytes: gib(7911),
        source: BRIEF,
    },
    Gpu {
        name: "H100 NVL 94GB",
        keys: &["h100nvl", "h100nvl94", "h10094"],
        // vLLM issue report on 2×H100 NVL: "total capacity of 93.02 GiB".
        capacity_bytes: gib(9302),
        source: OBSERVED,
    },
    Gpu {
        name: "H200 141GB",
        keys: &["h200", "h200141"],
        // 139.80 GiB: total_memory of the H200 that recorded samples/captured.
        capacity_bytes: 150_109_880_320,
        source: MEASURED,
    },
    Gpu {
        name: "L4",
        keys: &["l4", "l424"],
        capacity_bytes: gib(2203),
        source: BRIEF,
    },
    Gpu {
        name: "L40S",
        keys: &["l40s", "l40s48", "l40", "l4048"],
        capacity_bytes: gib(4440),
        source: BRIEF,
    },
    Gpu {
        name: "A10",
        keys: &["a10", "a1024", "a10g", "a10g24"],
        capacity_bytes: gib(2206),
        source: BRIEF,
    },
    Gpu {
        name: "T4",
        keys: &["t4", "t416"],
        capacity_bytes: gib(1458),
        source: BRIEF,
    },
    Gpu {
        name: "V100 16GB",
        keys: &["v10016"],
        capacity_bytes: gib(1577),
        source: OBSERVED,
    },
    Gpu {
        name: "V100 32GB",
        keys: &["v10032"],
        capacity_bytes: gib(3174),
        source: NOMINAL,
    },
    Gpu {
        name: "RTX 3090",
        keys: &["rtx3090", "3090", "rtx309024"],
        capacity_bytes: gib(2357),
        source: BRIEF,
    },
    Gpu {
        name: "RTX 4090",
        keys: &["rtx4090", "4090", "rtx409024"],
        capacity_bytes: gib(2357),
        source: BRIEF,
    },
    Gpu {
        name: "RTX 5090",
        keys: &["rtx5090", "5090", "rtx509032"],
        capacity_bytes: gib(3136),
        source: BRIEF,
    },
    Gpu {
        name: "RTX A6000",
        keys: &["a6000", "rtxa6000", "a600048"],
        capacity_bytes: gib(4740),
        source: BRIEF,
    },
    Gpu {
        name: "MI250X (one GCD)",
        keys: &["mi250x", "mi250", "mi250x64"],
        capacity_bytes: gib(6398),
        source: NOMINAL,
    },
    Gpu {
        name: "MI300X",
        keys: &["mi300x", "mi300x192", "mi300"],
        capacity_bytes: gib(19198),
        source: BRIEF,
    },
];

/// The most a CUDA context and the libraries loaded with it (cuBLAS and cuDNN handles and
/// workspaces, NCCL buffers) take outside the caching allocator: 0.3–1 GiB in practice, up to
/// about 2 GiB with NCCL. A GPU whose capacity exceeds what a process saw by more than this had
/// memory held by someone else.
pub const CONTEXT_MAX_BYTES: u64 = 2 << 30;

/// A table GPU that explains what a process saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GpuMatch {
    /// Display name.
    pub name: &'static str,
    /// Its `total_memory` in bytes.
    pub capacity_bytes: u64,
}

/// A capacity inferred from what a process saw when an allocation failed: the memory PyTorch
/// reserved plus what the device still had free. What is neither is the CUDA context, the
/// libraries' memory, and anything another process holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct InferredCapacity {
    /// Reserved + device free: the device has at least this much.
    pub seen_bytes: u64,
    /// The capacity taken: the closest matching GPU's (at least `seen_bytes`).
    pub capacity_bytes: u64,
    /// `capacity_bytes − seen_bytes`: the context and libraries (and, in the less likely
    /// reading, other processes).
    pub outside_bytes: u64,
    /// Table GPUs whose capacity is at most [`CONTEXT_MAX_BYTES`] (2 GiB) above `seen_bytes` (or at most
    /// 1% below it: table figures vary by host), closest first.
    pub matches: Vec<GpuMatch>,
}

/// The GPUs of the table that explain `seen` bytes (reserved + free) with a CUDA context's
/// share left over, and the capacity to take (see [`InferredCapacity`]); `None` when no GPU of
/// the table does: an unlisted GPU, or one whose memory is partly held elsewhere, which these
/// numbers cannot tell apart.
pub fn infer_capacity(seen: u64) -> Option<InferredCapacity> {
    let mut matches: Vec<(u64, GpuMatch)> = GPUS
        .iter()
        .filter(|g| {
            g.capacity_bytes <= seen.saturating_add(CONTEXT_MAX_BYTES)
                && g.capacity_bytes >= seen.saturating_sub(g.capacity_bytes / 100)
        })
        .map(|g| {
            (
                g.capacity_bytes.abs_diff(seen),
                GpuMatch {
                    name: g.name,
                    capacity_bytes: g.capacity_bytes,
                },
            )
        })
        .collect();
    matches.sort_by_key(|&(d, g)| (d, g.name));
    let capacity = matches.first()?.1.capacity_bytes.max(seen);
    Some(InferredCapacity {
        seen_bytes: seen,
        capacity_bytes: capacity,
        outside_bytes: capacity - seen,
        matches: matches.into_iter().map(|(_, g)| g).collect(),
    })
}

/// Family names that match several table entries: the user must say which.
const AMBIGUOUS: &[(&str, &str)] = &[
    ("a100", "a100-40 or a100-80"),
    ("v100", "v100-16 or v100-32"),
];

/// Reduces a GPU name to the form used by [`Gpu::keys`]: lower case, vendor and form-factor
/// words dropped (`nvidia`, `tesla`, `geforce`, `amd`, `instinct`, `sxm4`, `pcie`, `hbm3`...),
/// `GB`/`G` dropped after a number, separators removed: `NVIDIA A100-SXM4-80GB` → `a10080`.
pub fn normalize(name: &str) -> String {
    const NOISE: &[&str] = &[
        "nvidia", "tesla", "geforce", "amd", "instinct", "radeon", "sxm", "sxm2", "sxm4", "sxm5",
        "pcie", "hbm2", "hbm2e", "hbm3", "hbm3e", "gpu",
    ];
    let lower = name.to_ascii_lowercase();
    let mut out = String::new();
    for token in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
        if token.is_empty() || NOISE.contains(&token) {
            continue;
        }
        // "80gb" / "80g" / "80gib" → "80"; "a100" stays.
        let digits_end = token
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(token.len());
        let t = if digits_end > 0 && matches!(&token[digits_end..], "gb" | "g" | "gib") {
            &token[..digits_end]
        } else {
            token
        };
        out.push_str(t);
    }
    out
}

/// Finds a GPU by name, tolerantly (`h100`, `A100-80GB`, `a100_40`, `rtx 4090`).
pub fn lookup(name: &str) -> Result<&'static Gpu, Error> {
    let key = normalize(name);
    if let Some(g) = GPUS.iter().find(|g| g.keys.contains(&key.as_str())) {
        return Ok(g);
    }
    if let Some((_, hint)) = AMBIGUOUS.iter().find(|(k, _)| *k == key) {
        return Err(Error::Usage(format!(
            "--gpu {name}: ambiguous, say {hint} (or pass --capacity)"
        )));
    }
    let known: Vec<&str> = GPUS.iter().map(|g| g.name).collect();
    Err(Error::Usage(format!(
        "--gpu {name}: unknown GPU; expected one of {} (or pass --capacity SIZE)",
        known.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_tolerantly() {
        for (input, want) in [
            ("h100", "H100 80GB HBM3"),
            ("NVIDIA H100 80GB HBM3", "H100 80GB HBM3"),
            ("A100-80GB", "A100 80GB"),
            ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
            ("a100_40", "A100 40GB"),
            ("A100-PCIE-40GB", "A100 40GB"),
            ("NVIDIA GeForce RTX 4090", "RTX 4090"),
            ("rtx3090", "RTX 3090"),
            ("Tesla T4", "T4"),
            ("NVIDIA L40S", "L40S"),
            ("AMD Instinct MI300X", "MI300X"),
            ("H200", "H200 141GB"),
            ("NVIDIA RTX A6000", "RTX A6000"),
            ("Tesla V100-SXM2-16GB", "V100 16GB"),
        ] {
            assert_eq!(lookup(input).unwrap().name, want, "{input}");
        }
    }

    #[test]
    fn ambiguous_and_unknown_names_are_usage_errors() {
        let e = lookup("a100").unwrap_err().to_string();
        assert!(e.contains("a100-40 or a100-80"), "{e}");
        let e = lookup("gtx 9800").unwrap_err().to_string();
        assert!(
            e.contains("unknown GPU") && e.contains("H100 80GB HBM3"),
            "{e}"
        );
    }

    #[test]
    fn capacities_are_the_printed_figures() {
        assert_eq!(lookup("a100-80").unwrap().capacity_bytes, 84_986_665_370);
        assert_eq!(lookup("h100").unwrap().capacity_bytes, 84_943_715_697);
        assert_eq!(lookup("l4").unwrap().capacity_bytes, 23_654_532_383);
        for g in GPUS {
            assert!(g.capacity_bytes > 10 << 30, "{}", g.name);
            for k in g.keys {
                assert_eq!(normalize(k), *k, "key {k} of {} is not normalized", g.name);
            }
        }
    }

    #[test]
    fn what_a_process_saw_names_its_gpu() {
        // GIVEN 78.42 GiB reserved and 91.25 MiB free at an OOM (an 80 GB GPU)
        let seen = 84_202_749_952 + 95_682_560;
        let i = infer_capacity(seen).unwrap();
        // THEN the 80 GB GPUs, the closest first, with a context's share left over
        let names: Vec<&str> = i.matches.iter().map(|g| g.name).collect();
        assert_eq!(names, ["H100 80GB HBM3", "A100 80GB"]);
        assert_eq!(i.capacity_bytes, lookup("h100").unwrap().capacity_bytes);
        assert_eq!(i.outside_bytes, i.capacity_bytes - seen);
        assert!(i.outside_bytes > 500 << 20 && i.outside_bytes < 1 << 30);
        // AND an H200's figure with 626 MiB of context
        let h200 = lookup("h200").unwrap().capacity_bytes;
        let i = infer_capacity(h200 - (626 << 20)).unwrap();
        assert_eq!(i.matches[0].name, "H200 141GB");
        assert_eq!(i.capacity_bytes, h200);
        // AND nothing for a size no GPU has (or one far below every GPU: memory held elsewhere)
        assert_eq!(infer_capacity(200 << 30), None);
        assert_eq!(infer_capacity(1930 << 20), None);
    }
}
