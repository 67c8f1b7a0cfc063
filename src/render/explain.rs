//! Text rendering of [`ExplainReport`]: the four numbers, the verdict, the fixes cheapest
//! first, and how to record a snapshot. JSON goes through [`super::json::write`].

use super::text::{right, Style};
use super::units::iec;
use crate::analyze::explain::{ExplainReport, OomExplained, Wording};
use comfy_table::Cell;
use std::io::Write;

fn bytes(v: Option<u64>) -> Cell {
    right(v.map_or_else(|| "unknown".to_string(), iec))
}

/// Where an explained OOM's numbers come from: its words differ ("what the message cannot
/// tell", and a snapshot is never told to record one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// An error message (`memlens explain`).
    Message,
    /// A snapshot's `oom` entry (`memlens oom`).
    Snapshot,
}

/// Writes the explanation of every OOM in `r`, fitted to `style`.
pub fn text(out: &mut dyn Write, r: &ExplainReport, style: &Style) -> std::io::Result<()> {
    for (i, o) in r.ooms.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        if r.ooms.len() > 1 {
            write!(out, "OOM {} of {}: ", i + 1, r.ooms.len())?;
        }
        one(out, o, Source::Message, style)?;
    }
    writeln!(out)?;
    snapshot_recipe(out, style)
}

/// Writes one explained OOM: the numbers, the verdict, the evidence and the fixes.
pub fn one(
    out: &mut dyn Write,
    o: &OomExplained,
    from: Source,
    style: &Style,
) -> std::io::Result<()> {
    one_with(out, o, from, style, &|_| Ok(()))
}

/// [`one`], with `after_fixes` writing what belongs right under the list of fixes (`memlens
/// oom`: the fixes too small to matter and the plan).
pub fn one_with(
    out: &mut dyn Write,
    o: &OomExplained,
    from: Source,
    style: &Style,
    after_fixes: &dyn Fn(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let wording = match o.wording {
        Some(Wording::Parenthesized) => "PyTorch ≤ 2.0 message",
        Some(Wording::Sentences) => "PyTorch ≥ 2.1 message",
        Some(Wording::CudaMallocAsync) => "cudaMallocAsync backend",
        None => "from the snapshot",
    };
    let device = o
        .device
        .map_or_else(|| "device ?".to_string(), |d| format!("device {d}"));
    writeln!(out, "{} out of memory on {device} ({wording})", o.backend)?;

    let mut t = style.table();
    t.set_header(vec!["", "bytes", ""]);
    let mut row = |name: &str, v: Option<u64>, note: &str| {
        t.add_row(vec![Cell::new(name), bytes(v), Cell::new(note)]);
    };
    row(
        "requested",
        o.requested_bytes,
        "\"Tried to allocate\": the segment it needed",
    );
    row(
        "device free",
        o.device_free_bytes,
        "free on the device when it failed",
    );
    row("allocated", o.allocated_bytes, "by PyTorch: live tensors");
    row(
        "reserved, unallocated",
        o.reserved_unallocated_bytes,
        "cached by PyTorch, not in use",
    );
    let source = match o.capacity_source.as_deref() {
        Some("message") => "total, from the message".to_string(),
        Some(s) if s.starts_with("inferred") => format!("total, {s}"),
        Some(s) => format!("total, from {s}"),
        None => "total: pass --gpu or --capacity".to_string(),
    };
    if o.largest_free_block_bytes.is_some() {
        row(
            "largest free block",
            o.largest_free_block_bytes,
            "in the pool and stream the request needed",
        );
    }
    row("capacity", o.capacity_bytes, &source);
    if o.non_pytorch_bytes.is_some() {
        row(
            "outside PyTorch",
            o.non_pytorch_bytes,
            "capacity − free − reserved",
        );
    }
    if o.process_bytes.is_some() {
        row(
            "this process",
            o.process_bytes,
            if o.process_bytes_inferred {
                "NVML (listed under another PID); includes the CUDA context"
            } else {
                "NVML; includes the CUDA context"
            },
        );
    }
    if o.private_pool_bytes.is_some() {
        row(
            "in private pools",
            o.private_pool_bytes,
            "CUDA graphs; part of allocated",
        );
    }
    if o.allowed_bytes.is_some() {
        row(
            "allowed",
            o.allowed_bytes,
            "per-process limit (set_per_process_memory_fraction)",
        );
    }
    writeln!(out, "{t}")?;

    writeln!(out)?;
    style.para(out, "Verdict: ", "  ", &o.headline)?;
    if !o.evidence.is_empty() {
        writeln!(out, "\nEvidence")?;
        for line in &o.evidence {
            style.para(out, "  - ", "    ", line)?;
        }
    }
    writeln!(out, "\nWhat to change, cheapest first")?;
    if o.recommendations.is_empty() {
        let nothing = match from {
            Source::Message => "Nothing these numbers justify; record a snapshot (below).",
            Source::Snapshot => {
                "Nothing these numbers justify; the live sites below say what holds the memory."
            }
        };
        style.para(out, "  ", "  ", nothing)?;
    }
    for (i, r) in o.recommendations.iter().enumerate() {
        style.para(
            out,
            &format!("  {}. ", i + 1),
            "     ",
            &match r.saves_bytes {
                Some(b) => format!(
                    "[{}] {} (saves {} here)",
                    r.cost.words(),
                    r.action,
                    crate::units::iec(b)
                ),
                None => format!("[{}] {}", r.cost.words(), r.action),
            },
        )?;
        style.para(out, "     Why: ", "     ", &format!("{}.", r.why))?;
        if let Some(p) = &r.predicted {
            style.para(out, "     Predicted: ", "     ", &format!("{}.", p.words))?;
        }
    }
    after_fixes(out)?;
    if !o.notes.is_empty() {
        writeln!(out, "\nNotes")?;
        for n in &o.notes {
            style.para(out, "  - ", "    ", n)?;
        }
    }
    if !o.cannot_conclude.is_empty() {
        match from {
            Source::Message => writeln!(out, "\nWhat the message cannot tell")?,
            Source::Snapshot => writeln!(out, "\nWhat the snapshot cannot tell")?,
        }
        for c in &o.cannot_conclude {
            style.para(out, "  - ", "    ", c)?;
        }
    }
    Ok(())
}

fn snapshot_recipe(out: &mut dyn Write, style: &Style) -> std::io::Result<()> {
    style.para(
        out,
        "",
        "",
        "What a snapshot would add: the largest free block, which tensors (with the code that \
         allocated them) make up the live set, and how memory grew up to the failure. Record one:",
    )?;
    writeln!(
        out,
        "\n    import torch\n    \
         # before the workload:\n    \
         torch.cuda.memory._record_memory_history(max_entries=100000)\n    \
         try:\n        \
         run()  # your training or inference\n    \
         except torch.cuda.OutOfMemoryError:\n        \
         torch.cuda.memory._dump_snapshot(\"snapshot.pickle\")\n        \
         raise\n\
         \nthen: memlens oom snapshot.pickle"
    )
}
