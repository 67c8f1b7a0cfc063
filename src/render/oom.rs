//! Text rendering of [`OomReport`] (the per-OOM part is shared with `explain`).

use super::explain;
use super::text::{right, Style};
use crate::compose::oom::OomReport;
use crate::units::iec;
use comfy_table::Cell;
use std::io::Write;

/// The headroom cell: bytes left, `(over)` past the capacity, a range under an implied limit.
fn headroom(h: &crate::analyze::oom::Headroom) -> String {
    let signed = |v: i64| {
        if v < 0 {
            format!("−{} (over)", iec(v.unsigned_abs()))
        } else {
            iec(v as u64)
        }
    };
    match (h.headroom_bytes, h.headroom_basis, h.headroom_at_most_bytes) {
        (Some(lo), Some("implied_limit"), Some(hi)) => {
            format!("{}–{} (limit)", iec(lo.max(0) as u64), iec(hi))
        }
        (Some(v), Some("inferred_capacity"), _) => format!("{} (inferred)", signed(v)),
        (Some(v), _, _) => signed(v),
        (None, _, _) => "pass --gpu or --capacity".into(),
    }
}

/// Writes the report, fitted to `style`.
pub fn text(out: &mut dyn Write, title: &str, r: &OomReport, style: &Style) -> std::io::Result<()> {
    style.para(out, "", "", title)?;
    if r.ooms.is_empty() {
        for n in &r.notes {
            writeln!(out)?;
            style.para(out, "", "", n)?;
        }
    }
    for (k, o) in r.ooms.iter().enumerate() {
        writeln!(
            out,
            "\nOOM {} of {} — event {}{}{}",
            k + 1,
            r.ooms.len(),
            o.explained.event_index.unwrap_or(0),
            o.time_us
                .map(|t| format!(", time_us {t}"))
                .unwrap_or_default(),
            o.phase
                .as_ref()
                .map(|p| format!(", {}", p.words))
                .unwrap_or_default()
        )?;
        let fit = r.fit.iter().find(|d| {
            Some(d.device) == o.explained.device
                && Some(d.at.event_index) == o.explained.event_index.map(|i| i as i64)
        });
        explain::one_with(
            out,
            &o.explained,
            explain::Source::Snapshot,
            style,
            &|out| fit.map_or(Ok(()), |d| super::fit::after_list(out, d, style)),
        )?;
        writeln!(out)?;
        style.para(
            out,
            "",
            "  ",
            &format!(
                "Live at the OOM: {} requested (request rounded to {}, {} cached free in its pool)",
                iec(o.live_requested_bytes),
                iec(o.request_rounded_bytes),
                iec(o.pool_free_bytes)
            ),
        )?;
        if !o.live_sites.is_empty() {
            let mut t = style.table();
            t.set_header(vec!["live", "share", "count", "site"]);
            for s in &o.live_sites {
                t.add_row(vec![
                    right(iec(s.bytes)),
                    right(format!("{:.1}%", s.share * 100.0)),
                    right(s.count),
                    Cell::new(style.site(&s.site)),
                ]);
            }
            writeln!(out, "{t}")?;
        }
        if let Some(p) = &o.pinners {
            writeln!(out)?;
            super::pinners::text(out, p, style)?;
        }
    }
    writeln!(out, "\nHeadroom")?;
    let mut t = style.table();
    t.set_header(vec![
        "device",
        "peak live",
        "peak reserved",
        "reserved now",
        "largest free block",
        "headroom",
    ]);
    for h in &r.headroom {
        t.add_row(vec![
            right(h.device.to_string()),
            right(iec(h.peak_live_bytes)),
            right(iec(h.peak_reserved_bytes)),
            right(iec(h.reserved_bytes)),
            right(iec(h.largest_free_block_bytes)),
            right(headroom(h)),
        ]);
    }
    writeln!(out, "{t}")?;
    for h in &r.headroom {
        if let (Some(b), Some(src)) = (h.headroom_basis, &h.capacity_source) {
            if b != "capacity" {
                style.para(
                    out,
                    "  ",
                    "    ",
                    &format!("device {}: against {src}", h.device),
                )?;
            }
        }
    }
    Ok(())
}
