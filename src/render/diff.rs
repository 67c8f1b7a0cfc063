//! Text rendering of [`DiffReport`].

use super::text::{cell, right, Style, Table};
use crate::analyze::diff::{DiffReport, Pair, SiteDelta};
use crate::units::{iec, plural, signed_iec, signed_percent};
use crate::vocab::absence;
use comfy_table::Cell;
use std::io::Write;

fn pair_row(name: &str, p: Pair) -> Vec<Cell> {
    vec![
        Cell::new(name),
        right(iec(p.base)),
        right(iec(p.cand)),
        right(signed_iec(p.delta_bytes)),
        right(signed_percent(p.delta_bytes, p.base)),
    ]
}

/// How sites were keyed, in words: `by site`, `by stack`, with `, line numbers ignored`.
pub fn keyed_by(r: &DiffReport) -> String {
    format!(
        "by {}{}",
        match r.by {
            crate::analyze::profile::SiteKey::Site => "site",
            crate::analyze::profile::SiteKey::Stack => "stack",
        },
        if r.ignore_lines {
            ", line numbers ignored"
        } else {
            ""
        }
    )
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// Writes the report, fitted to `style`; `limit` caps the site rows (the rest is summarized
/// in one line).
pub fn text(
    out: &mut dyn Write,
    base: &str,
    cand: &str,
    r: &DiffReport,
    limit: usize,
    style: &Style,
) -> std::io::Result<()> {
    style.para(out, "base:      ", "           ", base)?;
    style.para(out, "candidate: ", "           ", cand)?;
    writeln!(
        out,
        "compared at {} (each device at its own), {}",
        r.moment,
        keyed_by(r)
    )?;
    let mut t = style.table();
    t.set_header(vec!["", "base", "candidate", "change", "%"]);
    t.add_row(pair_row("peak (live requested)", r.peak));
    t.add_row(pair_row("reserved", r.reserved));
    t.add_row(pair_row("reserved, unallocated", r.reserved_unallocated));
    t.add_row(vec![
        Cell::new("fragmentation"),
        right(pct(r.fragmentation.base)),
        right(pct(r.fragmentation.cand)),
        right(format!("{:+.1} pts", r.fragmentation.delta * 100.0)),
        right(String::new()),
    ]);
    writeln!(out, "{t}")?;
    phases(out, r, style)?;
    if let Some(cats) = r.categories.as_ref().filter(|c| !c.is_empty()) {
        let mut t = style.table();
        t.set_header(vec!["category", "base", "candidate", "change", "count"]);
        for c in cats {
            t.add_row(vec![
                cell(&c.category),
                right(iec(c.base_bytes)),
                right(iec(c.cand_bytes)),
                right(signed_iec(c.delta_bytes)),
                right(format!("{} → {}", c.base_count, c.cand_count)),
            ]);
        }
        writeln!(out, "{t}")?;
    }
    if r.devices.len() > 1 {
        let mut t = style.table();
        t.set_header(vec![
            "device",
            "base peak",
            "cand peak",
            "change",
            "base reserved",
            "cand reserved",
        ]);
        for d in &r.devices {
            let side = |present: bool, v: u64| if present { iec(v) } else { "-".into() };
            t.add_row(vec![
                right(d.device.to_string()),
                right(side(d.base.is_some(), d.peak.base)),
                right(side(d.cand.is_some(), d.peak.cand)),
                right(signed_iec(d.peak.delta_bytes)),
                right(side(d.base.is_some(), d.reserved.base)),
                right(side(d.cand.is_some(), d.reserved.cand)),
            ]);
        }
        writeln!(out, "{t}")?;
    }
    for a in r
        .absent
        .iter()
        .filter(|a| a.code == absence::CATEGORIES_NOT_COMPARABLE)
    {
        writeln!(out, "\nCategories: {}", a.message)?;
    }
    if !r.sites_compared {
        writeln!(out, "\nSites: not compared")?;
        for a in r
            .absent
            .iter()
            .filter(|a| a.code == absence::SITES_NOT_COMPARABLE)
        {
            writeln!(out, "  {}", a.message)?;
        }
        return gate_and_notes(out, r, style);
    }
    let c = r.counts;
    let moved = peaks_moved(r);
    writeln!(out)?;
    style.para(
        out,
        "",
        "  ",
        &format!(
            "{}: {} {}, {} {}, {} grown, {} shrunk, {} unchanged{}{}",
            if moved {
                "Sites at the two peaks, in different phases"
            } else {
                "Sites"
            },
            c.new,
            if moved {
                "only at the candidate's"
            } else {
                "new"
            },
            c.removed,
            if moved {
                "only at the base's"
            } else {
                "removed"
            },
            c.grown,
            c.shrunk,
            c.unchanged,
            if c.moved > 0 {
                format!(
                    "; {} only moved to another line of the same function (matched, not new)",
                    c.moved
                )
            } else {
                String::new()
            },
            if c.unchanged > 0 && !r.sites.iter().any(|s| s.delta_bytes == 0) {
                " (not listed; --all lists them)"
            } else {
                ""
            }
        ),
    )?;
    if !r.sites.is_empty() {
        writeln!(out, "{}", sites_table(&r.sites, limit, moved, style))?;
        if r.sites.len() > limit {
            let rest = &r.sites[limit..];
            let sum: i64 = rest.iter().map(|s| s.delta_bytes).sum();
            writeln!(
                out,
                "... {}, {} in all (-n shows more)",
                plural(rest.len() as u64, "more site"),
                signed_iec(sum)
            )?;
        }
    }
    runs_sections(out, r, limit, style)?;
    gate_and_notes(out, r, style)
}

/// The runs' settings, steps, the step where they part and the observations.
fn runs_sections(
    out: &mut dyn Write,
    r: &DiffReport,
    limit: usize,
    style: &Style,
) -> std::io::Result<()> {
    if !r.settings.is_empty() {
        writeln!(out, "\nAllocator settings that differ")?;
        for s in &r.settings {
            style.para(
                out,
                &format!("  {}: ", s.key),
                "    ",
                &format!(
                    "{} → {}",
                    s.base.as_deref().unwrap_or("(unset)"),
                    s.cand.as_deref().unwrap_or("(unset)")
                ),
            )?;
        }
    }
    if let Some(st) = &r.steps {
        writeln!(out, "\nSteps of device {} side by side", st.device)?;
        let mut t = style.table();
        t.set_header(vec![
            "step",
            "base peak",
            "candidate peak",
            "change",
            "allocations",
            "duration",
        ]);
        let ms = |f: Option<&crate::analyze::diff::runs::StepFigures>| {
            f.and_then(|f| f.duration_us)
                .map_or("–".to_string(), |d| format!("{:.1} ms", d as f64 / 1e3))
        };
        for row in st.rows.iter().take(limit) {
            let (b, c) = (row.base.as_ref(), row.cand.as_ref());
            let mark = if st.divergence.as_ref().is_some_and(|d| d.step == row.step) {
                " ◀ parts most"
            } else {
                ""
            };
            t.add_row(vec![
                Cell::new(format!(
                    "{} {}{mark}",
                    row.step,
                    b.or(c).map_or("", |f| f.name.as_str())
                )),
                right(b.map_or("–".into(), |f| iec(f.peak_bytes))),
                right(c.map_or("–".into(), |f| iec(f.peak_bytes))),
                right(row.delta_bytes.map_or("–".into(), signed_iec)),
                right(format!(
                    "{} → {}",
                    b.map_or("–".into(), |f| f.allocations.to_string()),
                    c.map_or("–".into(), |f| f.allocations.to_string())
                )),
                right(format!("{} → {}", ms(b), ms(c))),
            ]);
        }
        writeln!(out, "{t}")?;
        if st.rows.len() > limit {
            writeln!(
                out,
                "... {} (-n shows more)",
                plural((st.rows.len() - limit) as u64, "more step")
            )?;
        }
        if let Some(d) = &st.divergence {
            writeln!(
                out,
                "\nWhere the runs part most: step {} (peak {})",
                d.step,
                signed_iec(d.delta_bytes)
            )?;
            if !d.sites.is_empty() {
                let moved = d.phases.as_ref().is_some_and(|p| p.moved);
                writeln!(
                    out,
                    "{}",
                    sites_table(&d.sites, limit.min(10), moved, style)
                )?;
            }
        }
    }
    if !r.observations.is_empty() {
        writeln!(out, "\nObservations")?;
        for o in &r.observations {
            style.para(out, "  - ", "    ", &style.sites_in(o))?;
        }
    }
    Ok(())
}

fn gate_and_notes(out: &mut dyn Write, r: &DiffReport, style: &Style) -> std::io::Result<()> {
    if let Some(g) = &r.gate {
        writeln!(out)?;
        style.para(
            out,
            "",
            "  ",
            &format!(
                "Growth gate (at least {} and {}): peak {} ({}) — {}",
                pct(g.min_growth),
                iec(g.min_abs_bytes),
                signed_iec(r.peak.delta_bytes),
                signed_percent(r.peak.delta_bytes, r.peak.base),
                if g.failed { "FAILED" } else { "passed" }
            ),
        )?;
    }
    for n in &r.notes {
        style.para(out, "note: ", "  ", n)?;
    }
    Ok(())
}

/// True when the two moments compared sit in different phases (a site or category at one
/// only is then not new or removed).
pub fn peaks_moved(r: &DiffReport) -> bool {
    r.peak_phases.as_ref().is_some_and(|p| p.moved)
}

/// The phase of each run's moment and each phase's peak side by side.
fn phases(out: &mut dyn Write, r: &DiffReport, style: &Style) -> std::io::Result<()> {
    if let Some(p) = &r.peak_phases {
        writeln!(out)?;
        style.para(
            out,
            "",
            "  ",
            &format!(
                "Phase of the {}: base {}; candidate {}{}",
                r.moment,
                p.base.words,
                p.cand.words,
                if p.moved { " (moved)" } else { "" }
            ),
        )?;
    }
    if r.by_phase.is_empty() {
        return Ok(());
    }
    let mut t = style.table();
    t.set_header(vec!["phase's peak", "base", "candidate", "change", "%"]);
    let side = |v: Option<u64>| v.map_or("–".to_string(), iec);
    for row in &r.by_phase {
        t.add_row(vec![
            Cell::new(row.phase.as_str()),
            right(side(row.base_peak_bytes)),
            right(side(row.cand_peak_bytes)),
            right(row.delta_bytes.map_or("–".into(), signed_iec)),
            right(match (row.delta_bytes, row.base_peak_bytes) {
                (Some(d), Some(b)) => signed_percent(d, b),
                _ => String::new(),
            }),
        ]);
    }
    writeln!(out, "{t}")
}

/// The site rows as a table, fitted to `style`; `moved`: the two moments sit in different
/// phases, so a site at one only is labelled as such, not new or removed.
pub fn sites_table(sites: &[SiteDelta], limit: usize, moved: bool, style: &Style) -> Table {
    let mut t = style.table();
    t.set_header(vec![
        "status",
        "base",
        "candidate",
        "change",
        "count",
        "site",
    ]);
    for s in sites.iter().take(limit) {
        t.add_row(vec![
            Cell::new(s.status.label(moved)),
            right(iec(s.base_bytes)),
            right(iec(s.cand_bytes)),
            right(signed_iec(s.delta_bytes)),
            right(format!("{} → {}", s.base_count, s.cand_count)),
            match &s.moved_from {
                Some(m) => cell(&format!("{} (moved from {m})", s.site)),
                None => cell(&s.site),
            },
        ]);
    }
    t
}
