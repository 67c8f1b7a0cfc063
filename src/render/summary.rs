//! Text rendering of [`SummaryReport`].

use super::text::{right, Style};
use super::units::{duration_us, iec, plural};
use crate::analyze::summary::{DeviceSummary, HostSummary, SummaryReport, TraceSummary};
use crate::model::SettingValue;
use comfy_table::Cell;
use std::io::Write;

/// Writes the summary of one file, fitted to `style`; `title` names it.
pub fn text(
    out: &mut dyn Write,
    title: &str,
    r: &SummaryReport,
    style: &Style,
) -> std::io::Result<()> {
    style.para(
        out,
        "",
        "  ",
        &format!(
            "{title}  ({} layout, {} distinct frames, {} distinct stacks)",
            match r.layout {
                crate::model::Layout::Modern => "modern",
                crate::model::Layout::Legacy => "PyTorch 2.0",
                crate::model::Layout::SegmentList => "segment-list",
            },
            r.distinct_frames,
            r.distinct_stacks
        ),
    )?;
    if let Some(t) = &r.device_type {
        style.para(
            out,
            "",
            "  ",
            &format!("Accelerator: {} ({})", t.name, t.evidence),
        )?;
    }
    if r.devices.is_empty() {
        writeln!(out, "\nNo device has segments or trace entries.")?;
    }
    for d in &r.devices {
        device(out, d, style)?;
    }
    if let Some(h) = &r.host {
        host(out, h, style)?;
    }
    if let Some(settings) = &r.allocator_settings {
        writeln!(out, "\nAllocator settings")?;
        for (k, v) in settings {
            style.para(out, &format!("  {k} = "), "    ", &setting(v))?;
        }
    }
    if r.annotations > 0 {
        writeln!(out, "\nExternal annotations: {}", r.annotations)?;
    }
    if !r.unknown_actions.is_empty() {
        writeln!(out, "\nUnknown actions (kept, not interpreted)")?;
        for a in &r.unknown_actions {
            writeln!(
                out,
                "  {}: {} entries",
                super::visible::visible(&a.action),
                crate::units::grouped(a.entries)
            )?;
        }
    }
    if !r.warnings.is_empty() {
        writeln!(out, "\nWarnings")?;
        for w in &r.warnings {
            let text = match w.device {
                Some(d) => format!("[{}] device {d}: {}", w.code, w.message),
                None => format!("[{}] {}", w.code, w.message),
            };
            style.para(out, "  - ", "    ", &text)?;
        }
    }
    Ok(())
}

fn setting(v: &SettingValue) -> String {
    match v {
        SettingValue::Bool(b) => b.to_string(),
        SettingValue::Int(i) => i.to_string(),
        SettingValue::UInt(u) => u.to_string(),
        SettingValue::Float(f) => f.to_string(),
        SettingValue::Text(s) => format!("{s:?}"),
        SettingValue::Map(m) => {
            let parts: Vec<String> = m
                .iter()
                .filter(|(_, v)| !matches!(v, SettingValue::Int(0)))
                .map(|(k, v)| format!("{k}: {}", setting(v)))
                .collect();
            if parts.is_empty() {
                "{} (all off)".into()
            } else {
                format!("{{{}}}", parts.join(", "))
            }
        }
        SettingValue::Other(s) => format!("<{s}>"),
    }
}

fn device(out: &mut dyn Write, d: &DeviceSummary, style: &Style) -> std::io::Result<()> {
    writeln!(out, "\nDevice {}", d.device)?;
    let mut t = style.table();
    t.set_header(vec!["", "bytes", ""]);
    let rows: [(&str, u64, String); 7] = [
        (
            "reserved",
            d.reserved_bytes,
            format!(
                "{}, {}",
                plural(d.segments as u64, "segment"),
                plural(d.blocks as u64, "block")
            ),
        ),
        (
            "allocated",
            d.allocated_bytes,
            "active_allocated blocks".into(),
        ),
        (
            "requested",
            d.requested_bytes,
            "what tensors asked for".into(),
        ),
        (
            "rounding waste",
            d.rounding_waste_bytes,
            "allocated − requested".into(),
        ),
        (
            "pending free",
            d.pending_free_bytes,
            "freed, awaiting other streams".into(),
        ),
        ("cached free", d.inactive_bytes, "inactive blocks".into()),
        (
            "largest free block",
            d.largest_inactive_block_bytes,
            String::new(),
        ),
    ];
    for (name, bytes, note) in rows {
        t.add_row(vec![Cell::new(name), right(iec(bytes)), Cell::new(note)]);
    }
    writeln!(out, "{t}")?;
    if d.expandable_segments > 0 || d.private_pool_segments > 0 {
        style.para(
            out,
            "",
            "  ",
            &format!(
                "{}, {} in private pools",
                plural(d.expandable_segments as u64, "expandable segment range"),
                plural(d.private_pool_segments as u64, "segment")
            ),
        )?;
    }
    if !d.pools.is_empty() {
        let header = [
            "pool",
            "private pool",
            "stream",
            "segments",
            "reserved",
            "allocated",
            "cached free",
            "largest free",
        ];
        let numeric = [false, false, false, true, true, true, true, true];
        let rows: Vec<Vec<String>> = d
            .pools
            .iter()
            .map(|p| {
                vec![
                    p.pool.as_str().to_string(),
                    if p.pool_id == [0, 0] {
                        "-".to_string()
                    } else {
                        format!("({}, {})", p.pool_id[0], p.pool_id[1])
                    },
                    if p.stream == 0 {
                        "default".to_string()
                    } else {
                        format!("0x{:x}", p.stream)
                    },
                    p.segments.to_string(),
                    iec(p.reserved_bytes),
                    iec(p.allocated_bytes),
                    iec(p.inactive_bytes),
                    iec(p.largest_inactive_block_bytes),
                ]
            })
            .collect();
        for t in style.records(&header, &numeric, &rows) {
            writeln!(out, "{t}")?;
        }
    }
    trace(out, d.trace_entries, &d.trace, style)
}

/// The trace line, and the compiled regions the trace was recorded in.
fn trace(
    out: &mut dyn Write,
    entries: usize,
    t: &TraceSummary,
    style: &Style,
) -> std::io::Result<()> {
    if entries == 0 {
        writeln!(out, "Trace: none recorded")?;
        return Ok(());
    }
    let span = match (t.first_time_us, t.last_time_us) {
        (Some(a), Some(b)) => format!(" over {}", duration_us(b.saturating_sub(a))),
        _ => String::new(),
    };
    let actions: Vec<String> = t
        .by_action
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    style.para(
        out,
        "",
        "  ",
        &format!(
            "Trace: {}{span} ({}); {} with stacks",
            plural(entries as u64, "entry"),
            actions.join(", "),
            t.entries_with_frames
        ),
    )?;
    if !t.compile_contexts.is_empty() {
        let regions: Vec<String> = t
            .compile_contexts
            .iter()
            .map(|c| {
                format!(
                    "{}: {} ({})",
                    c.context,
                    plural(c.allocs, "allocation"),
                    iec(c.alloc_bytes)
                )
            })
            .collect();
        style.para(out, "Compiled regions: ", "  ", &regions.join("; "))?;
    }
    Ok(())
}

/// Pinned host memory: its own pool, apart from every device.
fn host(out: &mut dyn Write, h: &HostSummary, style: &Style) -> std::io::Result<()> {
    writeln!(out, "\nPinned host memory (not on any device)")?;
    let mut t = style.table();
    t.set_header(vec!["", "bytes", ""]);
    let rows: [(&str, u64, String); 5] = [
        (
            "reserved",
            h.reserved_bytes,
            format!(
                "{}, {}",
                plural(h.segments as u64, "segment"),
                plural(h.blocks as u64, "block")
            ),
        ),
        (
            "allocated",
            h.allocated_bytes,
            format!(
                "active_allocated blocks; {} requested",
                iec(h.requested_bytes)
            ),
        ),
        (
            "pending free",
            h.pending_free_bytes,
            "freed, awaiting stream work".into(),
        ),
        ("cached free", h.inactive_bytes, "inactive blocks".into()),
        (
            "largest free block",
            h.largest_inactive_block_bytes,
            String::new(),
        ),
    ];
    for (name, bytes, note) in rows {
        t.add_row(vec![Cell::new(name), right(iec(bytes)), Cell::new(note)]);
    }
    writeln!(out, "{t}")?;
    trace(out, h.trace_entries, &h.trace, style)?;
    if let Some(p) = h.peak_live_bytes {
        writeln!(out, "Peak live over the trace: {} (requested)", iec(p))?;
    }
    Ok(())
}
