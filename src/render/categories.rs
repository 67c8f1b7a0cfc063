//! Text rendering of [`CategoriesReport`].

use crate::analyze::categories::CategoriesReport;
use crate::units::iec;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use std::io::Write;

/// Writes the report.
pub fn text(out: &mut dyn Write, title: &str, r: &CategoriesReport) -> std::io::Result<()> {
    writeln!(out, "{title}  (at {})", r.moment)?;
    for d in &r.devices {
        writeln!(
            out,
            "\nDevice {} — after event {}: {} live (requested)",
            d.device,
            d.at.event_index,
            iec(d.live_requested_bytes)
        )?;
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
    Ok(())
}
