//! Text rendering of [`SummaryReport`].

use super::units::{duration_us, iec};
use crate::analyze::summary::{DeviceSummary, SummaryReport};
use crate::model::SettingValue;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use std::io::Write;

fn table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t
}

fn right(s: impl ToString) -> Cell {
    Cell::new(s).set_alignment(CellAlignment::Right)
}

/// Writes the summary of one file; `title` names it.
pub fn text(out: &mut dyn Write, title: &str, r: &SummaryReport) -> std::io::Result<()> {
    writeln!(
        out,
        "{title}  ({} layout, {} distinct frames, {} distinct stacks)",
        match r.layout {
            crate::model::Layout::Modern => "modern",
            crate::model::Layout::Legacy => "PyTorch 2.0",
            crate::model::Layout::SegmentList => "segment-list",
        },
        r.distinct_frames,
        r.distinct_stacks
    )?;
    if r.devices.is_empty() {
        writeln!(out, "\nNo device has segments or trace entries.")?;
    }
    for d in &r.devices {
        device(out, d)?;
    }
    if let Some(settings) = &r.allocator_settings {
        writeln!(out, "\nAllocator settings")?;
        for (k, v) in settings {
            writeln!(out, "  {k} = {}", setting(v))?;
        }
    }
    if r.annotations > 0 {
        writeln!(out, "\nExternal annotations: {}", r.annotations)?;
    }
    if !r.warnings.is_empty() {
        writeln!(out, "\nWarnings")?;
        for w in &r.warnings {
            match w.device {
                Some(d) => writeln!(out, "  - [{}] device {d}: {}", w.code, w.message)?,
                None => writeln!(out, "  - [{}] {}", w.code, w.message)?,
            }
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

fn device(out: &mut dyn Write, d: &DeviceSummary) -> std::io::Result<()> {
    writeln!(out, "\nDevice {}", d.device)?;
    let mut t = table();
    t.set_header(vec!["", "bytes", ""]);
    let rows: [(&str, u64, String); 7] = [
        (
            "reserved",
            d.reserved_bytes,
            format!("{} segments, {} blocks", d.segments, d.blocks),
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
        writeln!(
            out,
            "{} expandable segment ranges, {} segments in private pools",
            d.expandable_segments, d.private_pool_segments
        )?;
    }
    if !d.pools.is_empty() {
        let mut t = table();
        t.set_header(vec![
            "pool",
            "private pool",
            "stream",
            "segments",
            "reserved",
            "allocated",
            "cached free",
            "largest free",
        ]);
        for p in &d.pools {
            t.add_row(vec![
                Cell::new(p.pool.as_str()),
                Cell::new(if p.pool_id == [0, 0] {
                    "-".to_string()
                } else {
                    format!("({}, {})", p.pool_id[0], p.pool_id[1])
                }),
                Cell::new(if p.stream == 0 {
                    "default".to_string()
                } else {
                    format!("0x{:x}", p.stream)
                }),
                right(p.segments),
                right(iec(p.reserved_bytes)),
                right(iec(p.allocated_bytes)),
                right(iec(p.inactive_bytes)),
                right(iec(p.largest_inactive_block_bytes)),
            ]);
        }
        writeln!(out, "{t}")?;
    }
    if d.trace_entries == 0 {
        writeln!(out, "Trace: none recorded")?;
    } else {
        let span = match (d.trace.first_time_us, d.trace.last_time_us) {
            (Some(a), Some(b)) => format!(" over {}", duration_us(b - a)),
            _ => String::new(),
        };
        let actions: Vec<String> = d
            .trace
            .by_action
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        writeln!(
            out,
            "Trace: {} entries{span} ({}); {} with stacks",
            d.trace_entries,
            actions.join(", "),
            d.trace.entries_with_frames
        )?;
    }
    Ok(())
}
