//! What `memlens slice` wrote, one paragraph per device, for people.

use crate::analyze::export::slice::SliceReport;
use crate::render::text::Style;
use crate::units::iec;
use std::io::{Result, Write};

/// One paragraph per device: the events kept and the state at the window's end.
pub fn text(out: &mut dyn Write, r: &SliceReport, style: &Style) -> Result<()> {
    style.para(out, "", "  ", &format!("{} → {}", r.file, r.output))?;
    for d in &r.devices {
        let what = match d.window {
            Some(w) => format!(
                "events {}..{} ({} {})",
                w.first.max(0),
                w.last,
                d.entries,
                if d.entries == 1 { "entry" } else { "entries" }
            ),
            None => "no trace: its final state".to_string(),
        };
        let text = format!(
            "device {}: {what}; at the end {} reserved in {} {}, {} allocated, {} requested ({} {})",
            d.device,
            iec(d.reserved_bytes),
            d.segments,
            if d.segments == 1 { "segment" } else { "segments" },
            iec(d.allocated_bytes),
            iec(d.requested_bytes),
            d.blocks,
            if d.blocks == 1 { "block" } else { "blocks" },
        );
        style.para(out, "  ", "    ", &text)?;
        if d.inconsistencies > 0 {
            style.para(
                out,
                "    ",
                "    ",
                &format!(
                    "{} could not be undone consistently: the state at the end is an estimate",
                    if d.inconsistencies == 1 {
                        "1 trace event".to_string()
                    } else {
                        format!("{} trace events", d.inconsistencies)
                    }
                ),
            )?;
        }
    }
    for n in &r.notes {
        style.para(out, "  note: ", "    ", n)?;
    }
    Ok(())
}
