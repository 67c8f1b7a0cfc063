//! Renderings of [`CheckReport`]: text (as pytest-memray prints a broken limit), Markdown for a
//! pull-request comment, and JUnit XML for CI systems.

use crate::analyze::check::{BudgetResult, CheckReport, SiteLine};
use crate::units::{iec, signed_iec};
use std::io::Write;

fn site_amount(r: &BudgetResult, s: &SiteLine) -> String {
    if r.budget == crate::analyze::check::BudgetKind::Baseline {
        signed_iec(s.bytes)
    } else {
        iec(s.bytes.max(0) as u64)
    }
}

/// Writes the report as text.
pub fn text(out: &mut dyn Write, r: &CheckReport) -> std::io::Result<()> {
    for f in &r.files {
        writeln!(out, "{} {}", if f.passed { "PASS" } else { "FAIL" }, f.file)?;
        for b in &f.budgets {
            writeln!(
                out,
                "  {} {}: {}",
                if b.passed { "ok  " } else { "FAIL" },
                b.budget.as_str(),
                b.message
            )?;
            if !b.passed && !b.top_sites.is_empty() {
                writeln!(out, "       top sites:")?;
                for s in &b.top_sites {
                    writeln!(
                        out,
                        "       {:>12} ×{:<4} {}",
                        site_amount(b, s),
                        s.count,
                        s.site
                    )?;
                }
            }
        }
        for n in &f.notes {
            writeln!(out, "  note: {n}")?;
        }
    }
    writeln!(
        out,
        "\n{} of {} file(s) broke a budget",
        r.failed_files,
        r.files.len()
    )
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Writes the report as Markdown: a table per file with ✅/❌ per budget and the top sites of
/// each broken one.
pub fn markdown(out: &mut dyn Write, r: &CheckReport) -> std::io::Result<()> {
    writeln!(
        out,
        "## memlens check: {}\n",
        if r.passed {
            format!("✅ {} file(s) within budget", r.files.len())
        } else {
            format!(
                "❌ {} of {} file(s) over budget",
                r.failed_files,
                r.files.len()
            )
        }
    )?;
    for f in &r.files {
        writeln!(
            out,
            "### {} `{}`\n",
            if f.passed { "✅" } else { "❌" },
            md_cell(&f.file)
        )?;
        writeln!(out, "| | budget | limit | result |")?;
        writeln!(out, "|---|---|---|---|")?;
        for b in &f.budgets {
            writeln!(
                out,
                "| {} | {} | {} | {} |",
                if b.passed { "✅" } else { "❌" },
                b.budget.as_str(),
                md_cell(&b.limit),
                md_cell(&b.message)
            )?;
        }
        for b in f
            .budgets
            .iter()
            .filter(|b| !b.passed && !b.top_sites.is_empty())
        {
            writeln!(out, "\nTop sites behind **{}**:\n", b.budget.as_str())?;
            writeln!(out, "| bytes | count | site |")?;
            writeln!(out, "|---:|---:|---|")?;
            for s in &b.top_sites {
                writeln!(
                    out,
                    "| {} | {} | `{}` |",
                    site_amount(b, s),
                    s.count,
                    md_cell(&s.site)
                )?;
            }
        }
        for n in &f.notes {
            writeln!(out, "\n> note: {}", md_cell(n))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Escapes text for XML attributes and content.
pub fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// Writes the report as JUnit XML: one testsuite, one testcase per file and budget, a
/// `<failure>` with the numbers and the top sites for each broken one.
pub fn junit(out: &mut dyn Write, r: &CheckReport) -> std::io::Result<()> {
    let tests: usize = r.files.iter().map(|f| f.budgets.len()).sum();
    let failures: usize = r
        .files
        .iter()
        .flat_map(|f| &f.budgets)
        .filter(|b| !b.passed)
        .count();
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuite name="memlens check" tests="{tests}" failures="{failures}" errors="0" skipped="0">"#
    )?;
    for f in &r.files {
        for b in &f.budgets {
            let name = xml_escape(b.budget.as_str());
            let class = xml_escape(&f.file);
            if b.passed {
                writeln!(out, r#"  <testcase classname="{class}" name="{name}"/>"#)?;
                continue;
            }
            writeln!(out, r#"  <testcase classname="{class}" name="{name}">"#)?;
            let mut body = String::new();
            for s in &b.top_sites {
                body.push_str(&format!("{} x{} {}\n", site_amount(b, s), s.count, s.site));
            }
            writeln!(
                out,
                r#"    <failure message="{}" type="budget">{}</failure>"#,
                xml_escape(&b.message),
                xml_escape(&body)
            )?;
            writeln!(out, "  </testcase>")?;
        }
    }
    writeln!(out, "</testsuite>")
}
