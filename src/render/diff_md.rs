//! [`DiffReport`] as GitHub-flavoured Markdown, for a pull-request comment: a heading with the
//! peak's change (and the gate's verdict), the totals, categories, the sites that changed, the
//! allocator settings that differ, the steps side by side with the step where the runs part,
//! and the observations. Every text that came from a file is escaped ([`md_text`], [`md_code`]).

use super::markdown::{md_code, md_text};
use crate::analyze::diff::runs::{StepFigures, StepsCompared};
use crate::analyze::diff::{DiffReport, Pair, SiteDelta};
use crate::units::{iec, plural, signed_iec, signed_percent};
use crate::vocab::absence;
use std::io::{Result, Write};

/// Writes the report; `limit` caps the site and step rows (the rest is summed in one line).
pub fn markdown(
    out: &mut dyn Write,
    base: &str,
    cand: &str,
    r: &DiffReport,
    limit: usize,
) -> Result<()> {
    let verdict = match &r.gate {
        Some(g) if g.failed => "❌ ",
        Some(_) => "✅ ",
        None => "",
    };
    writeln!(
        out,
        "## {verdict}memlens diff: peak {} ({})\n",
        signed_iec(r.peak.delta_bytes),
        signed_percent(r.peak.delta_bytes, r.peak.base)
    )?;
    writeln!(
        out,
        "Base {} → candidate {}, compared at {} (each device at its own), {}.\n",
        md_code(base),
        md_code(cand),
        md_text(&r.moment),
        super::diff::keyed_by(r)
    )?;
    writeln!(out, "| | base | candidate | change | % |")?;
    writeln!(out, "|---|---:|---:|---:|---:|")?;
    pair_row(out, "peak (live requested)", r.peak)?;
    pair_row(out, "reserved", r.reserved)?;
    pair_row(out, "reserved, unallocated", r.reserved_unallocated)?;
    writeln!(
        out,
        "| fragmentation | {:.1}% | {:.1}% | {:+.1} pts | |",
        r.fragmentation.base * 100.0,
        r.fragmentation.cand * 100.0,
        r.fragmentation.delta * 100.0
    )?;
    phases(out, r)?;
    if let Some(cats) = r.categories.as_ref().filter(|c| !c.is_empty()) {
        writeln!(out, "\n### Categories\n")?;
        writeln!(out, "| category | base | candidate | change | count |")?;
        writeln!(out, "|---|---:|---:|---:|---:|")?;
        for c in cats {
            writeln!(
                out,
                "| {} | {} | {} | {} | {} → {} |",
                md_text(&c.category),
                iec(c.base_bytes),
                iec(c.cand_bytes),
                signed_iec(c.delta_bytes),
                c.base_count,
                c.cand_count
            )?;
        }
    }
    for a in r.absent.iter().filter(|a| {
        a.code == absence::CATEGORIES_NOT_COMPARABLE || a.code == absence::SITES_NOT_COMPARABLE
    }) {
        writeln!(out, "\n> {}", md_text(&a.message))?;
    }
    let moved = super::diff::peaks_moved(r);
    if r.sites_compared {
        let c = r.counts;
        writeln!(
            out,
            "\n### {}: {} {}, {} {}, {} grown, {} shrunk, {} unchanged{}\n",
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
                format!(" ({} only moved to another line)", c.moved)
            } else {
                String::new()
            }
        )?;
        sites(out, &r.sites, limit, moved)?;
    }
    if !r.settings.is_empty() {
        writeln!(out, "\n### Allocator settings that differ\n")?;
        writeln!(out, "| setting | base | candidate |")?;
        writeln!(out, "|---|---|---|")?;
        for s in &r.settings {
            let v = |v: &Option<String>| v.as_deref().map_or("(unset)".into(), md_code);
            writeln!(
                out,
                "| {} | {} | {} |",
                md_code(&s.key),
                v(&s.base),
                v(&s.cand)
            )?;
        }
    }
    if let Some(st) = &r.steps {
        steps(out, st, limit)?;
    }
    if !r.observations.is_empty() {
        writeln!(out, "\n### Observations\n")?;
        for o in &r.observations {
            writeln!(out, "- {}", md_text(o))?;
        }
    }
    if let Some(g) = &r.gate {
        writeln!(
            out,
            "\n**Growth gate** (at least {:.1}% and {}): {}",
            g.min_growth * 100.0,
            iec(g.min_abs_bytes),
            if g.failed { "❌ failed" } else { "✅ passed" }
        )?;
    }
    for n in &r.notes {
        writeln!(out, "\n> note: {}", md_text(n))?;
    }
    Ok(())
}

fn pair_row(out: &mut dyn Write, name: &str, p: Pair) -> Result<()> {
    writeln!(
        out,
        "| {name} | {} | {} | {} | {} |",
        iec(p.base),
        iec(p.cand),
        signed_iec(p.delta_bytes),
        signed_percent(p.delta_bytes, p.base)
    )
}

/// The phase of each run's moment and each phase's peak side by side.
fn phases(out: &mut dyn Write, r: &DiffReport) -> Result<()> {
    if let Some(p) = &r.peak_phases {
        writeln!(
            out,
            "\nPhase of the {}: base {}; candidate {}{}.",
            md_text(&r.moment),
            md_text(&p.base.words),
            md_text(&p.cand.words),
            if p.moved { " (**moved**)" } else { "" }
        )?;
    }
    if r.by_phase.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n| phase's peak | base | candidate | change | % |")?;
    writeln!(out, "|---|---:|---:|---:|---:|")?;
    let side = |v: Option<u64>| v.map_or("–".to_string(), iec);
    for row in &r.by_phase {
        writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            row.phase.as_str(),
            side(row.base_peak_bytes),
            side(row.cand_peak_bytes),
            row.delta_bytes.map_or("–".into(), signed_iec),
            match (row.delta_bytes, row.base_peak_bytes) {
                (Some(d), Some(b)) => signed_percent(d, b),
                _ => String::new(),
            }
        )?;
    }
    Ok(())
}

/// The site rows as a table, at most `limit`, the rest summed in a line; `moved`: the two
/// moments sit in different phases (a site at one only is labelled as such).
fn sites(out: &mut dyn Write, rows: &[SiteDelta], limit: usize, moved: bool) -> Result<()> {
    if rows.is_empty() {
        return writeln!(out, "No site changed.");
    }
    writeln!(out, "| status | base | candidate | change | count | site |")?;
    writeln!(out, "|---|---:|---:|---:|---:|---|")?;
    for s in rows.iter().take(limit) {
        writeln!(
            out,
            "| {} | {} | {} | {} | {} → {} | {}{} |",
            s.status.label(moved),
            iec(s.base_bytes),
            iec(s.cand_bytes),
            signed_iec(s.delta_bytes),
            s.base_count,
            s.cand_count,
            md_code(&s.site),
            s.moved_from
                .as_deref()
                .map_or(String::new(), |m| format!(" (moved from {})", md_text(m)))
        )?;
    }
    if rows.len() > limit {
        let rest = &rows[limit..];
        let sum: i64 = rest.iter().map(|s| s.delta_bytes).sum();
        writeln!(
            out,
            "\n… {}, {} in all.",
            plural(rest.len() as u64, "more site"),
            signed_iec(sum)
        )?;
    }
    Ok(())
}

/// The steps side by side (in a collapsed block) and the step where the runs part most.
fn steps(out: &mut dyn Write, st: &StepsCompared, limit: usize) -> Result<()> {
    let parts = st.divergence.as_ref().map(|d| d.step);
    writeln!(
        out,
        "\n<details><summary>Steps of device {} side by side ({})</summary>\n",
        st.device,
        plural(st.rows.len() as u64, "step")
    )?;
    writeln!(
        out,
        "| step | base peak | candidate peak | change | allocations | duration |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|---:|")?;
    let ms = |f: Option<&StepFigures>| {
        f.and_then(|f| f.duration_us)
            .map_or("–".to_string(), |d| format!("{:.1} ms", d as f64 / 1e3))
    };
    let count = |f: Option<&StepFigures>| f.map_or("–".into(), |f| f.allocations.to_string());
    for row in st.rows.iter().take(limit) {
        let (b, c) = (row.base.as_ref(), row.cand.as_ref());
        writeln!(
            out,
            "| {} {}{} | {} | {} | {} | {} → {} | {} → {} |",
            row.step,
            md_text(b.or(c).map_or("", |f| f.name.as_str())),
            if parts == Some(row.step) {
                " ◀ **parts most**"
            } else {
                ""
            },
            b.map_or("–".into(), |f| iec(f.peak_bytes)),
            c.map_or("–".into(), |f| iec(f.peak_bytes)),
            row.delta_bytes.map_or("–".into(), signed_iec),
            count(b),
            count(c),
            ms(b),
            ms(c)
        )?;
    }
    if st.rows.len() > limit {
        writeln!(
            out,
            "\n… {}.",
            plural((st.rows.len() - limit) as u64, "more step")
        )?;
    }
    writeln!(out, "\n</details>")?;
    if let Some(d) = &st.divergence {
        writeln!(
            out,
            "\n### Where the runs part most: step {} (peak {})\n",
            d.step,
            signed_iec(d.delta_bytes)
        )?;
        let moved = d.phases.as_ref().is_some_and(|p| p.moved);
        sites(out, &d.sites, limit.min(10), moved)?;
    }
    Ok(())
}
