//! Text rendering of [`LinesReport`]: per device the hottest lines as a table, the framed and
//! unattributed totals, and the hottest files' source beside its bytes.

use super::text::{cell, right, Style};
use super::units::iec;
use super::visible::visible;
use crate::analyze::lines::{DeviceLines, LineCost, LinesReport, SourceFile};
use crate::vocab::absence::JudgementState;
use std::io::Write;

/// A cost in its unit: IEC bytes, or byte-seconds for `byte_us`.
fn amount(unit: &str, v: u64) -> String {
    match unit {
        "byte_us" => format!("{}·s", iec(v / 1_000_000)),
        _ => iec(v),
    }
}

/// Writes the report, fitted to `style`.
pub fn text(
    out: &mut dyn Write,
    title: &str,
    r: &LinesReport,
    style: &Style,
) -> std::io::Result<()> {
    style.para(out, "", "", title)?;
    if r.devices.is_empty() {
        writeln!(out, "\nNo device has allocations.")?;
    }
    for d in &r.devices {
        device(out, r, d, style)?;
    }
    Ok(())
}

/// What a device's figures count, in words.
fn counted(r: &LinesReport, d: &DeviceLines) -> String {
    if d.basis == "final_state" {
        return "live in the final state".to_string();
    }
    match (r.cost, &d.at) {
        (LineCost::Live, Some(at)) => {
            let state = match at.event_index {
                -1 => "before the first event".to_string(),
                i => format!("after event {i}"),
            };
            let time = at
                .time_us
                .map(|t| format!(", time_us {t}"))
                .unwrap_or_default();
            format!("live at {} ({state}{time})", r.moment)
        }
        (LineCost::Live, None) => format!("live at {}", r.moment),
        (LineCost::Allocated, _) => "allocated over the trace".to_string(),
        (LineCost::Lifetime, _) => "bytes × lifetime over the trace".to_string(),
    }
}

fn device(
    out: &mut dyn Write,
    r: &LinesReport,
    d: &DeviceLines,
    style: &Style,
) -> std::io::Result<()> {
    writeln!(out)?;
    let head = format!("Device {} — {}", d.device, counted(r, d));
    let judged = d.judgement.state != JudgementState::CannotJudge;
    if !judged && d.counted_allocations == 0 {
        style.para(
            out,
            "",
            "  ",
            &format!("{head}: {}", d.judgement.sentence()),
        )?;
        return notes(out, d, style);
    }
    style.para(
        out,
        "",
        "  ",
        &format!("{head}: {} counted", amount(d.unit, d.counted_bytes)),
    )?;
    style.para(
        out,
        "  ",
        "    ",
        &format!(
            "{} under {} user {}; {} without a user line",
            amount(d.unit, d.framed_bytes),
            d.lines.len(),
            if d.lines.len() == 1 { "line" } else { "lines" },
            amount(d.unit, d.unattributed_bytes),
        ),
    )?;
    for u in &d.unattributed {
        style.para(
            out,
            "    ",
            "      ",
            &format!(
                "{}: {} ({} {})",
                amount(d.unit, u.bytes),
                u.why,
                u.allocations,
                if u.allocations == 1 {
                    "allocation"
                } else {
                    "allocations"
                }
            ),
        )?;
    }
    if !d.lines.is_empty() {
        let mut t = style.table();
        t.set_header(vec!["#", "line", "function", "self", "total"]);
        for (i, l) in d.lines.iter().take(r.top).enumerate() {
            t.add_row(vec![
                right((i + 1).to_string()),
                cell(&style.site(&format!("{}:{}", l.file, l.line))),
                cell(&l.function),
                right(amount(d.unit, l.self_bytes)),
                right(amount(d.unit, l.total_bytes)),
            ]);
        }
        writeln!(out, "{t}")?;
        if d.lines.len() > r.top {
            style.para(
                out,
                "  ",
                "  ",
                &format!(
                    "{} of {} lines shown (--top N; --format json has them all)",
                    r.top.min(d.lines.len()),
                    d.lines.len()
                ),
            )?;
        }
    }
    if !judged {
        style.para(out, "", "  ", &d.judgement.sentence())?;
    }
    for s in &d.sources {
        source(out, d, s, style)?;
    }
    notes(out, d, style)
}

/// The device's notes and warnings.
fn notes(out: &mut dyn Write, d: &DeviceLines, style: &Style) -> std::io::Result<()> {
    for n in &d.notes {
        style.para(out, "note: ", "  ", &style.sites_in(n))?;
    }
    for w in &d.warnings {
        style.para(out, &format!("warning [{}]: ", w.code), "  ", &w.message)?;
    }
    Ok(())
}

/// One hot file: its source near the hot lines, each line after its self bytes and its total
/// where that differs.
fn source(
    out: &mut dyn Write,
    d: &DeviceLines,
    s: &SourceFile,
    style: &Style,
) -> std::io::Result<()> {
    writeln!(out)?;
    let name = style.site(&s.file);
    let Some(path) = &s.path else {
        let why = s.note.as_deref().unwrap_or("not read");
        return style.para(out, "", "  ", &format!("{name}: {}", visible(why)));
    };
    style.para(
        out,
        "",
        "  ",
        &format!(
            "{name} ({} self; read from {})",
            amount(d.unit, s.self_bytes),
            visible(path)
        ),
    )?;
    let w = s
        .lines
        .iter()
        .map(|l| l.line.to_string().len())
        .max()
        .unwrap_or(1);
    writeln!(out, "  {:>11} {:>11}", "self", "total")?;
    let mut last: Option<i64> = None;
    for l in &s.lines {
        if last.is_some_and(|p| l.line > p + 1) {
            writeln!(out, "  {:>11} {:>11}  {:>w$} ┆", "", "", "")?;
        }
        last = Some(l.line);
        let own = if l.self_bytes > 0 {
            amount(d.unit, l.self_bytes)
        } else {
            String::new()
        };
        let total = if l.total_bytes > 0 && l.total_bytes != l.self_bytes {
            amount(d.unit, l.total_bytes)
        } else {
            String::new()
        };
        writeln!(
            out,
            "  {own:>11} {total:>11}  {:>w$} │ {}",
            l.line,
            visible(&l.text)
        )?;
    }
    if let Some(n) = &s.note {
        style.para(out, "note: ", "  ", n)?;
    }
    Ok(())
}
