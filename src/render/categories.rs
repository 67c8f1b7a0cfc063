//! Text rendering of [`CategoriesReport`].

use super::text::{right, Style};
use crate::analyze::categories::CategoriesReport;
use crate::units::iec;
use comfy_table::Cell;
use std::io::Write;

/// Writes the report, fitted to `style`.
pub fn text(
    out: &mut dyn Write,
    title: &str,
    r: &CategoriesReport,
    style: &Style,
) -> std::io::Result<()> {
    style.para(out, "", "", &format!("{title}  (at {})", r.moment))?;
    for d in &r.devices {
        // Event -1 is the state before the first event.
        let when = match d.at.event_index {
            -1 => "before the first event".to_string(),
            i => format!("after event {i}"),
        };
        writeln!(
            out,
            "\nDevice {} — {when}: {} live (requested)",
            d.device,
            iec(d.live_requested_bytes)
        )?;
        let mut t = style.table();
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
                right(iec(c.bytes)),
                right(format!("{:.1}%", c.share * 100.0)),
                right(c.count),
                Cell::new(c.confidence),
                Cell::new(c.rules.first().map(|h| h.rule.as_str()).unwrap_or("")),
            ]);
        }
        writeln!(out, "{t}")?;
        for n in &d.notes {
            style.para(out, "note: ", "  ", &style.sites_in(n))?;
        }
    }
    Ok(())
}
