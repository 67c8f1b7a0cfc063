//! Text rendering of [`CategoriesReport`]: one table per device, its notes, and what could
//! not be categorised.

use super::text::{cell, right, Style};
use crate::analyze::categories::CategoriesReport;
use crate::units::iec;
use crate::vocab::absence::JudgementState;
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
        let when = if d.basis == "final_state" {
            "final state (no allocation recorded)".to_string()
        } else {
            match d.at.event_index {
                -1 => "before the first event".to_string(),
                i => format!("after event {i}"),
            }
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
                cell(&c.category),
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
        // The table is the finding; what could not be told (or nothing alive) is said.
        match d.judgement.state {
            JudgementState::Found => {}
            JudgementState::None => writeln!(out, "Nothing is alive at the moment.")?,
            JudgementState::CannotJudge => {
                style.para(out, "", "  ", &format!("{}.", d.judgement.sentence()))?
            }
        }
    }
    // Devices left out (a moment their data cannot place) are not in `devices`.
    for a in &r.absent {
        if !r.devices.iter().any(|d| Some(d.device) == a.device) {
            writeln!(out)?;
            style.para(out, "note: ", "  ", &a.message)?;
        }
    }
    if r.devices.is_empty() && r.absent.is_empty() {
        writeln!(out, "\nNo device holds memory: nothing to categorise.")?;
    }
    Ok(())
}
