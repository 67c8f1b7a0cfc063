//! Text rendering of [`LeaksReport`]: per device the steps in a few lines (every step with
//! `--steps`) and what limited the analysis, then one block per finding.

use super::text::{cell, right, Style, Table};
use super::visible::visible;
use crate::analyze::leaks::{DeviceLeaks, Finding, LeaksReport};
use crate::replay::steps::StepSource;
use crate::units::{iec, plural};
use crate::vocab::absence::{Judgement, JudgementState};
use comfy_table::Cell;
use std::io::Write;

fn signed(delta: i64) -> String {
    if delta < 0 {
        format!("−{}", iec(delta.unsigned_abs()))
    } else {
        format!("+{}", iec(delta as u64))
    }
}

/// `2`, `2.5`: a count with the decimals it has.
fn count(n: f64) -> String {
    let s = format!("{n:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `1 tensor`, `2.5 tensors`.
fn tensors(n: f64) -> String {
    if n == 1.0 {
        "1 tensor".into()
    } else {
        format!("{} tensors", count(n))
    }
}

/// `text` with its first letter upper-case.
fn capitalized(text: &str) -> String {
    let mut c = text.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// How the steps were found, in words.
fn found(d: &DeviceLeaks) -> String {
    let marker = d.steps.marker.as_deref().unwrap_or("");
    match d.steps.source {
        Some(StepSource::Annotations) => format!("from {marker} annotations"),
        Some(StepSource::UserDefined) => "from user_defined ProfilerStep# markers".into(),
        Some(StepSource::OptimizerStep) => "from the optimizer's steps (torch/optim frames)".into(),
        Some(StepSource::Periodic) => format!("from a repeating allocation ({marker})"),
        Some(StepSource::Loop) => format!("from the lines of a {marker} jumping back"),
        None => String::new(),
    }
}

fn steps_table(d: &DeviceLeaks, style: &Style) -> Table {
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
        t.add_row(vec![
            cell(&s.name),
            right(format!("{}..={}", s.first_event, s.last_event)),
            right(iec(s.live_at_start)),
            right(iec(s.live_at_end)),
            right(iec(s.peak_bytes)),
            right(signed(s.live_at_end as i64 - s.live_at_start as i64)),
        ]);
    }
    t
}

fn device(
    out: &mut dyn Write,
    d: &DeviceLeaks,
    all_steps: bool,
    style: &Style,
) -> std::io::Result<()> {
    let n = d.steps.steps.len() as u64;
    match &d.summary {
        None => writeln!(out, "\nDevice {}", d.steps.device)?,
        Some(s) => {
            writeln!(
                out,
                "\nDevice {} — {} {}",
                d.steps.device,
                plural(n, "step"),
                found(d)
            )?;
            style.para(
                out,
                "  ",
                "    ",
                &format!(
                    "live {} before {}, {} after {} ({})",
                    iec(s.live_at_start),
                    s.first_step,
                    iec(s.live_at_end),
                    s.last_step,
                    signed(s.delta_bytes)
                ),
            )?;
            style.para(
                out,
                "  ",
                "    ",
                &format!(
                    "highest step peak {} in {}",
                    iec(s.highest_peak_bytes),
                    s.highest_peak_step
                ),
            )?;
            if all_steps {
                writeln!(out, "{}", steps_table(d, style))?;
            } else {
                writeln!(out, "  (--steps lists every step)")?;
            }
        }
    }
    for note in &d.notes {
        style.para(out, "note: ", "  ", &style.sites_in(note))?;
    }
    Ok(())
}

fn finding(out: &mut dyn Write, i: usize, f: &Finding, style: &Style) -> std::io::Result<()> {
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
            "{kind} on device {}: +{} per step over {}, {} per step ({} in {} live at the end, fit R² {:.2})",
            f.device,
            iec(f.bytes_per_step),
            plural(f.steps as u64, "step"),
            tensors(f.tensors_per_step),
            iec(f.live_bytes_at_end),
            plural(f.tensors_at_end, "tensor"),
            f.fit_r2
        ),
    )?;
    // A C++ site (an autograd node, a C++ function) is no line a person can edit.
    let label = if f.site.contains(".py:") {
        "     Line to change: "
    } else {
        "     Made by: "
    };
    style.para(out, label, "     ", &style.site(&f.site))?;
    for a in f.annotations.iter().take(3) {
        style.para(
            out,
            "     Annotated: ",
            "     ",
            &format!(
                "\"{}\" on {} ({})",
                visible(&a.text),
                plural(a.count, "tensor"),
                iec(a.bytes)
            ),
        )?;
    }
    style.para(
        out,
        &format!("     Why {kind}: "),
        "     ",
        &style.sites_in(&format!("{}.", f.why)),
    )?;
    if f.sites.len() > 1 || f.sites.first().is_some_and(|s| s.site != f.site) {
        let mut t = style.table();
        t.set_header(vec![
            "per step",
            "tensors/step",
            "live at end",
            "role",
            "growing site",
        ]);
        for s in &f.sites {
            t.add_row(vec![
                right(format!("+{}", iec(s.bytes_per_step))),
                right(count(s.tensors_per_step)),
                right(iec(s.live_bytes_at_end)),
                Cell::new(s.role),
                Cell::new(style.site(&s.site)),
            ]);
        }
        for line in t.to_string().lines() {
            writeln!(out, "     {line}")?;
        }
    }
    style.para(
        out,
        "     Fix: ",
        "     ",
        &style.sites_in(&format!("{}.", f.fix)),
    )
}

/// Writes the report, fitted to `style`; `all_steps` lists every step of every device
/// (`--steps`).
pub fn text(
    out: &mut dyn Write,
    title: &str,
    r: &LeaksReport,
    all_steps: bool,
    style: &Style,
) -> std::io::Result<()> {
    style.para(out, "", "", title)?;
    for d in &r.devices {
        device(out, d, all_steps, style)?;
    }
    for a in r.absent.iter().filter(|a| a.device.is_none()) {
        style.para(out, "note: ", "  ", &a.message)?;
    }
    if r.findings.is_empty() {
        // `none` or `cannot_judge`: the report's judgement in one sentence, "cannot judge: ..."
        // when some device could not be judged.
        writeln!(out)?;
        let j = &r.judgement;
        let text = if j.state == JudgementState::None {
            format!("{}.", capitalized(&j.sentence()))
        } else {
            format!("{}.", j.sentence())
        };
        style.para(out, "", "  ", &style.sites_in(&text))?;
    } else {
        writeln!(out, "\nFindings, biggest growth first")?;
        for (i, f) in r.findings.iter().enumerate() {
            finding(out, i, f, style)?;
        }
    }
    kinds(out, r, style)
}

/// Each kind of growth's judgement in one line when growth was found (judged without growth,
/// or not judged, both kinds are what the sentence above says).
fn kinds(out: &mut dyn Write, r: &LeaksReport, style: &Style) -> std::io::Result<()> {
    if r.judgement.state != JudgementState::Found {
        return Ok(());
    }
    let word = |j: &Judgement| match j.state {
        JudgementState::Found => "found".to_string(),
        JudgementState::None => "none".to_string(),
        JudgementState::CannotJudge => j.sentence(),
    };
    let text = format!(
        "Leak: {}. Retained graph: {}.",
        word(&r.leak),
        word(&r.retained_graph)
    );
    writeln!(out)?;
    style.para(out, "", "  ", &style.sites_in(&text))
}
