//! Text rendering of [`TopReport`].

use super::units::iec;
use crate::analyze::top::{Cost, DeviceTop, TopReport};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use std::io::Write;

fn amount(unit: &str, v: u64) -> String {
    match unit {
        "byte_us" => format!("{}·s", iec(v / 1_000_000)),
        "byte_events" => format!("{v} B·events"),
        _ => iec(v),
    }
}

fn cost_title(cost: Cost) -> &'static str {
    match cost {
        Cost::Live => "live",
        Cost::Allocated => "allocated in window",
        Cost::Lifetime => "bytes × lifetime",
        Cost::NeverFreed => "never freed",
    }
}

/// Writes the report.
pub fn text(out: &mut dyn Write, title: &str, r: &TopReport) -> std::io::Result<()> {
    writeln!(out, "{title}")?;
    if r.devices.is_empty() && r.final_state_devices.is_empty() {
        writeln!(out, "\nNo device has allocations.")?;
    }
    for d in r.devices.iter().chain(&r.final_state_devices) {
        device(out, r, d)?;
    }
    Ok(())
}

fn device(out: &mut dyn Write, r: &TopReport, d: &DeviceTop) -> std::io::Result<()> {
    let cost = r.cost;
    let when = if d.basis == "final_state" {
        "final state".to_string()
    } else {
        let state = match d.at.event_index {
            -1 => "before the first event".to_string(),
            i => format!("after event {i}"),
        };
        let time =
            d.at.time_us
                .map(|t| format!(", time_us {t}"))
                .unwrap_or_default();
        format!("at {} ({state}{time})", r.moment)
    };
    writeln!(
        out,
        "\nDevice {} — {}: {} live (requested)",
        d.device,
        when,
        iec(d.live_requested_bytes)
    )?;
    if d.basis == "trace" && cost != Cost::Live {
        writeln!(
            out,
            "Cost: {} over events {}..={}, total {}",
            cost_title(cost),
            d.window.first,
            d.window.last,
            amount(d.unit, d.total)
        )?;
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["#", cost_title(cost), "share", "count", "site"]);
    let right = |s: String| Cell::new(s).set_alignment(CellAlignment::Right);
    for (i, row) in d.sites.iter().enumerate() {
        let mut site = row.site.clone();
        if let Some(frames) = &row.frames {
            for f in frames {
                site.push_str("\n  ");
                site.push_str(f);
            }
        }
        t.add_row(vec![
            right((i + 1).to_string()),
            right(amount(d.unit, row.bytes)),
            right(format!("{:.1}%", row.share * 100.0)),
            right(row.count.to_string()),
            Cell::new(site),
        ]);
    }
    if let Some(o) = &d.other {
        t.add_row(vec![
            right(String::new()),
            right(amount(d.unit, o.bytes)),
            right(format!("{:.1}%", o.share * 100.0)),
            right(o.count.to_string()),
            Cell::new(&o.site),
        ]);
    }
    writeln!(out, "{t}")?;
    for n in &d.notes {
        writeln!(out, "note: {n}")?;
    }
    for w in &d.warnings {
        writeln!(out, "warning [{}]: {}", w.code, w.message)?;
    }
    Ok(())
}
