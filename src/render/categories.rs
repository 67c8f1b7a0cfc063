//! Text rendering of [`CategoriesReport`]: one table per device, its notes, and what could
//! not be categorised.

use crate::analyze::categories::CategoriesReport;
use crate::units::iec;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use std::io::Write;

/// Writes the report.
pub fn text(out: &mut dyn Write, title: &str, r: &CategoriesReport) -> std::io::Result<()> {
    writeln!(out, "{title}  (at {})", r.moment)?;
    for d in &r.devices {
        if d.basis == "final_state" {
            writeln!(
                out,
                "\nDevice {} — final state (no allocation recorded): {} live (requested)",
                d.device,
                iec(d.live_requested_bytes)
            )?;
        } else {
            writeln!(
                out,
                "\nDevice {} — after event {}: {} live (requested)",
                d.device,
                d.at.event_index,
                iec(d.live_requested_bytes)
            )?;
        }
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header(vec![
            "category",
            "live",
            "share",
            "count",
            "confidence",
            "main rule",
        ]);
        for c in &d.categories {
            t.add_row(vec![
                Cell::new(&c.category),
                Cell::new(iec(c.bytes)).set_alignment(CellAlignment::Right),
                Cell::new(format!("{:.1}%", c.share * 100.0)).set_alignment(CellAlignment::Right),
                Cell::new(c.count).set_alignment(CellAlignment::Right),
                Cell::new(c.confidence),
                Cell::new(c.rules.first().map(|h| h.rule.as_str()).unwrap_or("")),
            ]);
        }
        writeln!(out, "{t}")?;
        for n in &d.notes {
            writeln!(out, "note: {n}")?;
        }
    }
    // Devices left out (a moment their data cannot place) are not in `devices`.
    for a in &r.absent {
        if !r.devices.iter().any(|d| Some(d.device) == a.device) {
            writeln!(out, "\nnote: {}", a.message)?;
        }
    }
    if r.devices.is_empty() && r.absent.is_empty() {
        writeln!(out, "\nNo device holds memory: nothing to categorise.")?;
    }
    Ok(())
}
