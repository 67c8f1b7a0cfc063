//! Text rendering of [`LeaksReport`]: the per-step table and the findings.

use crate::analyze::leaks::LeaksReport;
use crate::units::iec;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use std::io::Write;

/// Writes the report.
pub fn text(out: &mut dyn Write, title: &str, r: &LeaksReport) -> std::io::Result<()> {
    writeln!(out, "{title}")?;
    let right = |s: String| Cell::new(s).set_alignment(CellAlignment::Right);
    for d in &r.devices {
        let source = match d.steps.source {
            Some(s) => serde_json::to_value(s)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            None => "none found".into(),
        };
        writeln!(
            out,
            "\nDevice {} — {} steps (from {source})",
            d.steps.device,
            d.steps.steps.len()
        )?;
        if !d.steps.steps.is_empty() {
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED);
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
            writeln!(out, "note: {n}")?;
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
        writeln!(
            out,
            "  {}. {kind} on device {}: {} grows {} per step over {} steps ({} live at the end, fit R² {:.2})",
            i + 1,
            f.device,
            f.site,
            iec(f.bytes_per_step),
            f.steps,
            iec(f.live_bytes_at_end),
            f.fit_r2
        )?;
        writeln!(out, "     Fix: {}.", f.fix)?;
    }
    Ok(())
}
