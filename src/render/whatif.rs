//! Text rendering of [`WhatifReport`]: per device, the capacity and the model's fidelity,
//! then one table with a row per scenario (the recorded run first, then the best first), and
//! the verdict.

use super::text::Style;
use crate::analyze::whatif::{DeviceWhatif, WhatifReport};
use crate::units::{iec, plural, signed_iec};
use std::io::Write;

fn head(out: &mut dyn Write, d: &DeviceWhatif, style: &Style) -> std::io::Result<()> {
    writeln!(
        out,
        "\nDevice {} — {}",
        d.device,
        plural(d.events as u64, "trace entry")
    )?;
    let conf = match &d.recorded_conf {
        Some(c) if c.is_empty() => "PyTorch's defaults".to_string(),
        Some(c) => c.clone(),
        None => "not recorded (defaults assumed)".to_string(),
    };
    style.para(out, "  recorded settings: ", "    ", &conf)?;
    let cap = match d.capacity.bytes {
        Some(b) => format!("{} ({})", iec(b), d.capacity.source),
        None => d.capacity.source.clone(),
    };
    style.para(out, "  capacity: ", "    ", &cap)?;
    let f = &d.fidelity;
    let diff = match f.first_difference_event {
        Some(e) => format!("; first difference at event {e}"),
        None => String::new(),
    };
    style.para(
        out,
        "  fidelity: ",
        "    ",
        &format!(
            "{} of {} recorded segment events reproduced ({} modelled, {:.1}%){diff}; peak \
             reserved {} modelled vs {} recorded; {} of {} allocations at their recorded \
             address",
            f.segment_events_matched,
            f.segment_events_recorded,
            f.segment_events_modelled,
            f.agreement * 100.0,
            iec(f.model_peak_reserved_bytes),
            iec(f.recorded_peak_reserved_bytes),
            f.allocs_at_recorded_address,
            f.allocs,
        ),
    )?;
    style.para(
        out,
        "  start: ",
        "    ",
        &format!(
            "{} reserved in {} before the trace; {} found in the trace",
            iec(d.start_reserved_bytes),
            plural(d.start_segments as u64, "segment"),
            plural(d.empty_cache_calls as u64, "empty_cache call")
        ),
    )
}

/// Writes the report, fitted to `style`.
pub fn text(
    out: &mut dyn Write,
    title: &str,
    r: &WhatifReport,
    style: &Style,
) -> std::io::Result<()> {
    style.para(out, "", "", &format!("{title}  (allocator replay)"))?;
    for d in &r.devices {
        head(out, d, style)?;
        let mut t = style.table();
        t.set_header(vec![
            "settings",
            "peak reserved",
            "change",
            "end reserved",
            "OOMs",
            "first OOM",
            "free at peak",
            "free at OOM",
            "cudaMallocs",
        ]);
        for s in &d.scenarios {
            let label = if s.set.is_empty() {
                s.label.clone()
            } else {
                s.set.replace(',', ", ")
            };
            t.add_row(vec![
                label,
                iec(s.peak_reserved_bytes),
                if s.set.is_empty() {
                    "-".to_string()
                } else {
                    signed_iec(s.peak_reserved_change_bytes)
                },
                iec(s.end_reserved_bytes),
                s.ooms.to_string(),
                s.first_oom_event
                    .map_or("-".into(), |e| format!("event {e}")),
                format!(
                    "{} ({:.0}%)",
                    iec(s.cached_free_at_peak_bytes),
                    s.fragmentation_at_peak * 100.0
                ),
                s.cached_free_at_first_oom_bytes.map_or("-".into(), iec),
                s.device_mallocs.to_string(),
            ]);
        }
        for c in 1..9 {
            if let Some(col) = t.column_mut(c) {
                col.set_cell_alignment(comfy_table::CellAlignment::Right);
            }
        }
        writeln!(out, "{t}")?;
        style.para(out, "verdict: ", "  ", &d.verdict)?;
    }
    for n in &r.notes {
        style.para(out, "note: ", "  ", n)?;
    }
    Ok(())
}
