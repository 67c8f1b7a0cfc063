//! Text rendering of [`LinesDiffReport`] (`diff --by line`): the totals on both sides, how
//! each file was matched, and the lines that changed most.

use super::text::{cell, right, Style};
use super::visible::visible;
use crate::analyze::diff::lines::{LineDelta, LinesDiffReport};
use crate::analyze::diff::Pair;
use crate::analyze::lines::LineCost;
use crate::units::{iec, plural, signed_iec, signed_percent};
use comfy_table::Cell;
use std::io::Write;

/// A cost in the report's unit: IEC bytes, or byte-seconds for `byte_us`.
fn amount(unit: &str, v: u64) -> String {
    match unit {
        "byte_us" => format!("{}·s", iec(v / 1_000_000)),
        _ => iec(v),
    }
}

/// A change in the report's unit.
fn change(unit: &str, d: i64) -> String {
    match unit {
        "byte_us" => format!("{}·s", signed_iec(d / 1_000_000)),
        _ => signed_iec(d),
    }
}

fn pair_row(unit: &str, name: &str, p: Pair) -> Vec<Cell> {
    vec![
        Cell::new(name),
        right(amount(unit, p.base)),
        right(amount(unit, p.cand)),
        right(change(unit, p.delta_bytes)),
        right(signed_percent(p.delta_bytes, p.base)),
    ]
}

/// Writes the report, fitted to `style`; `limit` caps the line rows (the rest is summarized
/// in one line).
pub fn text(
    out: &mut dyn Write,
    base: &str,
    cand: &str,
    r: &LinesDiffReport,
    limit: usize,
    style: &Style,
) -> std::io::Result<()> {
    style.para(out, "base:      ", "           ", base)?;
    style.para(out, "candidate: ", "           ", cand)?;
    let what = match r.cost {
        LineCost::Live => format!("live at {} (each device at its own)", r.moment),
        LineCost::Allocated => "allocated over the trace".to_string(),
        LineCost::Lifetime => "bytes × lifetime over the trace".to_string(),
    };
    writeln!(out, "compared by line: {what}")?;
    let u = r.unit;
    let mut t = style.table();
    t.set_header(vec!["", "base", "candidate", "change", "%"]);
    t.add_row(pair_row(u, "counted", r.counted));
    t.add_row(pair_row(u, "under a user line", r.framed));
    t.add_row(pair_row(u, "without a user line", r.unattributed));
    writeln!(out, "{t}")?;
    for f in &r.files {
        let how = match (f.keyed_by, &f.cand_source, &f.base_source) {
            ("text", Some(c), Some(b)) if c != b => {
                format!(
                    "matched by text (read from {} and, the base, {})",
                    visible(c),
                    visible(b)
                )
            }
            ("text", c, b) => format!(
                "matched by text (read from {})",
                visible(c.as_ref().or(b.as_ref()).map_or("", |s| s.as_str()))
            ),
            _ => "matched by line number, moved lines by function".to_string(),
        };
        style.para(out, "", "  ", &format!("{}: {how}", style.site(&f.file)))?;
        if let Some(n) = &f.note {
            style.para(out, "  note: ", "    ", &visible(n))?;
        }
    }
    let c = r.counts;
    writeln!(out)?;
    style.para(
        out,
        "",
        "  ",
        &format!(
            "Lines: {} new, {} removed, {} grown, {} shrunk, {} unchanged{}{}",
            c.new,
            c.removed,
            c.grown,
            c.shrunk,
            c.unchanged,
            if c.moved > 0 {
                format!("; {} only moved (matched, not new)", c.moved)
            } else {
                String::new()
            },
            if c.unchanged > 0 && !r.lines.iter().any(|l| l.total_cost.delta_bytes == 0) {
                " (unchanged not listed; --all lists them)"
            } else {
                ""
            }
        ),
    )?;
    if !r.lines.is_empty() {
        table(out, r, limit, style)?;
    }
    if let Some(g) = &r.gate {
        writeln!(out)?;
        style.para(
            out,
            "",
            "  ",
            &format!(
                "Growth gate (at least {:.1}% and {}): counted {} ({}) — {}",
                g.min_growth * 100.0,
                iec(g.min_abs_bytes),
                change(u, r.counted.delta_bytes),
                signed_percent(r.counted.delta_bytes, r.counted.base),
                if g.failed { "FAILED" } else { "passed" }
            ),
        )?;
    }
    for n in &r.notes {
        style.para(out, "note: ", "  ", &style.sites_in(n))?;
    }
    Ok(())
}

/// The rows that changed most, as a table.
fn table(
    out: &mut dyn Write,
    r: &LinesDiffReport,
    limit: usize,
    style: &Style,
) -> std::io::Result<()> {
    let u = r.unit;
    let mut t = style.table();
    t.set_header(vec![
        "status",
        "total base",
        "total cand",
        "change",
        "self change",
        "line",
        "function",
    ]);
    for l in r.lines.iter().take(limit) {
        t.add_row(vec![
            Cell::new(l.status.as_str()),
            right(amount(u, l.total_cost.base)),
            right(amount(u, l.total_cost.cand)),
            right(change(u, l.total_cost.delta_bytes)),
            right(change(u, l.self_cost.delta_bytes)),
            cell(&place(l, style)),
            cell(&l.function),
        ]);
    }
    writeln!(out, "{t}")?;
    if r.lines.len() > limit {
        let rest = &r.lines[limit..];
        let sum = rest
            .iter()
            .fold(0i64, |s, l| s.saturating_add(l.self_cost.delta_bytes));
        writeln!(
            out,
            "... {}, self {} in all (-n shows more)",
            plural(rest.len() as u64, "more line"),
            change(u, sum)
        )?;
    }
    Ok(())
}

/// `file:line`, shortened, with the base's line where it moved.
fn place(l: &LineDelta, style: &Style) -> String {
    let at = style.site(&format!("{}:{}", l.file, l.line));
    match l.moved_from {
        Some(m) => format!("{at} (was :{m})"),
        None => at,
    }
}
