//! Text rendering of [`TopReport`].

use super::text::{cell, right, Style};
use super::units::iec;
use super::visible::visible;
use crate::analyze::top::{Cost, DeviceTop, GroupBy, TopReport};
use comfy_table::Cell;
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

/// Writes the report, fitted to `style`.
pub fn text(out: &mut dyn Write, title: &str, r: &TopReport, style: &Style) -> std::io::Result<()> {
    style.para(out, "", "", title)?;
    if r.devices.is_empty() && r.final_state_devices.is_empty() {
        writeln!(out, "\nNo device has allocations.")?;
    }
    for d in r.devices.iter().chain(&r.final_state_devices) {
        device(out, r, d, style)?;
    }
    if let Some(i) = &r.device_imbalance {
        let least = if i.least_device != i.next_device {
            format!(
                " and {:.1}× device {}'s {}",
                i.ratio_to_least,
                i.least_device,
                iec(i.least_peak_bytes)
            )
        } else {
            String::new()
        };
        writeln!(out)?;
        style.para(
            out,
            "note: ",
            "      ",
            &format!(
                "device {} holds far more than the others: {} live at its peak, {:.1}× device {}'s {}{least}. One device carrying the others' load (a DataParallel replica gathering outputs, a pipeline stage or rank given more work) runs out first.",
                i.device,
                iec(i.peak_bytes),
                i.ratio_to_next,
                i.next_device,
                iec(i.next_peak_bytes),
            ),
        )?;
    }
    Ok(())
}

fn device(out: &mut dyn Write, r: &TopReport, d: &DeviceTop, style: &Style) -> std::io::Result<()> {
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
    writeln!(out)?;
    style.para(
        out,
        "",
        "  ",
        &format!(
            "Device {} — {}{}: {} live (requested)",
            d.device,
            when,
            d.moment_phase
                .as_ref()
                .map(|p| format!(", {}", p.words))
                .unwrap_or_default(),
            iec(d.live_requested_bytes)
        ),
    )?;
    if d.basis == "trace" && cost != Cost::Live {
        style.para(
            out,
            "",
            "  ",
            &format!(
                "Cost: {} over events {}..={}, total {}",
                cost_title(cost),
                d.window.first,
                d.window.last,
                amount(d.unit, d.total)
            ),
        )?;
    }
    let mut t = style.table();
    let group = match (r.by, &r.metadata_key) {
        (GroupBy::Site, _) => "site".to_string(),
        (GroupBy::Stack, _) => "stack".to_string(),
        (GroupBy::File, _) => "file".to_string(),
        (GroupBy::Function, _) => "function".to_string(),
        (GroupBy::Metadata, None) => "user metadata".to_string(),
        (GroupBy::Metadata, Some(k)) => format!("user metadata: {}", visible(k)),
    };
    t.set_header(vec![
        "#",
        cost_title(cost),
        "share",
        "count",
        group.as_str(),
    ]);
    for (i, row) in d.sites.iter().enumerate() {
        let mut site = style.site(&row.site);
        if let Some(c) = &row.context {
            site.push_str("\n  via ");
            // Shortened as a site is (`einops/_backends.py:291:einsum`, a Windows path's
            // `\` as `/`), as the page shows it; a C++ function stays.
            site.push_str(&style.site(c));
        }
        for a in row.annotations.iter().take(3) {
            site.push_str(&format!(
                "\n  annotated \"{}\" on {} ({})",
                visible(&a.text),
                a.count,
                iec(a.bytes)
            ));
        }
        if let Some(frames) = &row.frames {
            for f in frames {
                site.push_str("\n  ");
                site.push_str(&style.site(f));
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
            cell(&o.site),
        ]);
    }
    writeln!(out, "{t}")?;
    for n in &d.notes {
        style.para(out, "note: ", "  ", &style.sites_in(n))?;
    }
    for w in &d.warnings {
        style.para(out, &format!("warning [{}]: ", w.code), "  ", &w.message)?;
    }
    Ok(())
}
