//! Text rendering of [`LeaksReport`]: the per-step table and the findings.

use super::text::{right, Style};
use crate::analyze::leaks::LeaksReport;
use crate::units::{iec, plural};
use comfy_table::Cell;
use std::io::Write;

/// Writes the report, fitted to `style`.
pub fn text(
    out: &mut dyn Write,
    title: &str,
    r: &LeaksReport,
    style: &Style,
) -> std::io::Result<()> {
    style.para(out, "", "", title)?;
    for d in &r.devices {
        // Where the steps came from; nothing to say when none were found.
        let source = d
            .steps
            .source
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| v.as_str().map(|s| format!(" (from {s})")))
            .unwrap_or_default();
        writeln!(
            out,
            "\nDevice {} — {}{source}",
            d.steps.device,
            plural(d.steps.steps.len() as u64, "step")
        )?;
        if !d.steps.steps.is_empty() {
            let mut t = style.table();
            t.set_header(vec![
                "step",
                "events",
                "live at start",
                "live at end",
                "step peak",
                "growth",
            ]);
            for s in &d.steps.steps {
                let growth = s.live_at_end as i64 - s.live_at_start as i64;
                t.add_row(vec![
                    Cell::new(&s.name),
                    right(format!("{}..={}", s.first_event, s.last_event)),
                    right(iec(s.live_at_start)),
                    right(iec(s.live_at_end)),
                    right(iec(s.peak_bytes)),
                    right(if growth < 0 {
                        format!("−{}", iec(growth.unsigned_abs()))
                    } else {
                        format!("+{}", iec(growth as u64))
                    }),
                ]);
            }
            writeln!(out, "{t}")?;
        }
        for n in &d.notes {
            style.para(out, "note: ", "  ", &style.sites_in(n))?;
        }
    }
    if r.findings.is_empty() {
        writeln!(out, "\nNo memory grows step after step.")?;
        return Ok(());
    }
    writeln!(out, "\nFindings, biggest growth first")?;
    for (i, f) in r.findings.iter().enumerate() {
        let kind = if f.kind == "retained_graph" {
            "retained autograd graph"
        } else {
            "leak"
        };
        style.para(
            out,
            &format!("  {}. ", i + 1),
            "     ",
            &format!(
                "{kind} on device {}: {} grows {} per step over {} ({} live at the end, fit R² {:.2})",
                f.device,
                style.site(&f.site),
                iec(f.bytes_per_step),
                plural(f.steps as u64, "step"),
                iec(f.live_bytes_at_end),
                f.fit_r2
            ),
        )?;
        style.para(
            out,
            "     Fix: ",
            "     ",
            &style.sites_in(&format!("{}.", f.fix)),
        )?;
    }
    Ok(())
}
