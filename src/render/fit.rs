//! Text rendering of [`FitReport`]: per device, the anatomy at the moment, the setup it
//! suggests, the fixes cheapest first with their savings, and the plan for a capacity.

use super::text::{cell, right, Style};
use crate::analyze::fit::{DeviceFit, FitReport};
use crate::units::iec;
use comfy_table::Cell;
use std::io::Write;

/// Writes the report, fitted to `style`.
pub fn text(out: &mut dyn Write, title: &str, r: &FitReport, style: &Style) -> std::io::Result<()> {
    style.para(out, "", "", title)?;
    if r.devices.is_empty() {
        writeln!(out, "\nNo device has live memory.")?;
    }
    for d in &r.devices {
        device(out, d, style)?;
    }
    for a in &r.absent {
        style.para(out, "note: ", "  ", &a.message)?;
    }
    Ok(())
}

fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        String::new()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

fn device(out: &mut dyn Write, d: &DeviceFit, style: &Style) -> std::io::Result<()> {
    let p = &d.anatomy.parts;
    let when = match d.at.event_index {
        -1 => "before the first event".to_string(),
        i => format!("after event {i}"),
    };
    writeln!(out)?;
    style.para(
        out,
        "",
        "  ",
        &format!(
            "Device {} — at {} ({when}, {}): {} to hold",
            d.device,
            d.moment,
            d.moment_phase.words,
            iec(d.demand_bytes)
        ),
    )?;
    let mut t = style.table();
    t.set_header(vec!["part", "bytes", "share"]);
    let rows: [(&str, u64); 13] = [
        ("parameters", p.parameters_bytes),
        ("gradients", p.gradients_bytes),
        ("optimizer state", p.optimizer_state_bytes),
        ("activations", p.activations_bytes),
        ("  of which attention scores", p.attention_scores_bytes),
        ("KV cache", p.kv_cache_bytes),
        ("outputs", p.outputs_bytes),
        ("temporaries", p.temporaries_bytes),
        ("inputs", p.inputs_bytes),
        ("workspaces", p.workspaces_bytes),
        ("other", p.other_bytes),
        ("allocator cache", p.allocator_cache_bytes),
        ("pending request (OOM)", p.pending_request_bytes),
    ];
    for (name, bytes) in rows.iter().filter(|(_, b)| *b > 0) {
        t.add_row(vec![
            Cell::new(name),
            right(iec(*bytes)),
            right(share(*bytes, d.demand_bytes)),
        ]);
    }
    writeln!(out, "{t}")?;
    let s = &d.anatomy.setup;
    let mut setup = s.reading.clone();
    if let Some(b) = s.static_bytes_per_parameter {
        setup.push_str(&format!(
            "; {b:.1} B per parameter before activations ({} parameters of {} B)",
            s.parameter_count.unwrap_or(0),
            s.weight_bytes.unwrap_or(0)
        ));
    }
    setup.push_str(&format!(
        "; activations {:.1}% of live",
        s.activation_share * 100.0
    ));
    style.para(out, "setup: ", "  ", &setup)?;
    for n in &d.notes {
        style.para(out, "note: ", "  ", n)?;
    }
    if d.fixes.is_empty() {
        writeln!(out, "\nNo fix that matters applies at this moment.")?;
    } else {
        writeln!(out, "\nFixes, cheapest first")?;
        let mut t = style.table();
        t.set_header(vec![
            "#",
            "cost",
            "saves",
            "peak after",
            "confidence",
            "fix",
        ]);
        for (i, f) in d.fixes.iter().enumerate() {
            let (saves, after) = if f.for_verdict {
                ("the cause".to_string(), "—".to_string())
            } else {
                (iec(f.saves_bytes), iec(f.peak_after_bytes))
            };
            t.add_row(vec![
                right((i + 1).to_string()),
                Cell::new(f.cost.replace('_', " ")),
                right(saves),
                right(after),
                Cell::new(f.confidence),
                cell(&f.action),
            ]);
        }
        writeln!(out, "{t}")?;
        writeln!(out, "Evidence")?;
        for (i, f) in d.fixes.iter().enumerate() {
            style.para(out, &format!("  {}. ", i + 1), "     ", &f.evidence)?;
        }
    }
    immaterial(out, d, style)?;
    if let Some(plan) = &d.plan {
        let head = format!(
            "capacity {} ({}), {} kept free: the moment must come to {} or less",
            iec(plan.capacity_bytes),
            plan.capacity_source,
            iec(plan.margin_bytes),
            iec(plan.target_bytes)
        );
        writeln!(out)?;
        style.para(out, "Plan: ", "  ", &head)?;
        if plan.fits_now {
            style.para(out, "  ", "  ", "it fits as it is; no fix is needed")?;
        }
        for (i, s) in plan.steps.iter().enumerate() {
            style.para(
                out,
                &format!("  {}. ", i + 1),
                "     ",
                &format!(
                    "{} ({}) → {}",
                    s.action,
                    s.cost.replace('_', " "),
                    iec(s.peak_after_bytes)
                ),
            )?;
        }
        match plan.short_by_bytes {
            Some(short) => style.para(
                out,
                "  ",
                "  ",
                &format!(
                    "with every fix it is still {} short: a larger GPU, or sharding across devices (FSDP/ZeRO), is needed",
                    iec(short)
                ),
            )?,
            None if !plan.fits_now => {
                style.para(out, "  ", "  ", "after these it fits with the margin")?
            }
            None => {}
        }
    } else {
        // Without a capacity, whether the moment fits is undetermined: said, with what to give.
        writeln!(out)?;
        style.para(
            out,
            "Capacity: ",
            "  ",
            &format!("{}.", d.capacity.sentence()),
        )?;
    }
    Ok(())
}

/// What `memlens oom` prints under an OOM after its one list of fixes (the OOM's
/// recommendations, which are `d`'s fixes): the fixes too small to matter, and the plan's
/// verdict.
pub fn after_list(out: &mut dyn Write, d: &DeviceFit, style: &Style) -> std::io::Result<()> {
    immaterial(out, d, style)?;
    if let Some(plan) = &d.plan {
        let words = if plan.fits_now {
            "it fits as it is".to_string()
        } else if plan.fits {
            let ids: Vec<&str> = plan.steps.iter().map(|s| s.id).collect();
            format!(
                "{} makes it fit in {} with {} kept free",
                ids.join(" + "),
                iec(plan.capacity_bytes),
                iec(plan.margin_bytes)
            )
        } else {
            format!(
                "with every fix it is still {} short of {} (a larger GPU, or sharding across devices)",
                iec(plan.short_by_bytes.unwrap_or(0)),
                iec(plan.target_bytes)
            )
        };
        style.para(out, "  Plan: ", "  ", &words)?;
    }
    Ok(())
}

/// The fixes whose premise holds but that save too little to matter, on one line.
fn immaterial(out: &mut dyn Write, d: &DeviceFit, style: &Style) -> std::io::Result<()> {
    if d.immaterial_fixes.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = d
        .immaterial_fixes
        .iter()
        .map(|f| format!("{} ({})", f.id, iec(f.saves_bytes)))
        .collect();
    style.para(
        out,
        "  Immaterial (each saves under 1% of the ",
        "  ",
        &format!("{} to hold): {}", iec(d.demand_bytes), list.join(", ")),
    )
}
