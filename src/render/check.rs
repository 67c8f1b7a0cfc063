//! Renderings of [`CheckReport`]: text (as pytest-memray prints a broken limit), Markdown for a
//! pull-request comment, and JUnit XML for CI systems. An unmeasured budget is never shown as
//! passed: `unmeasured` with its reason in text, ⚠️ in Markdown, `<skipped>` in JUnit.

use super::markdown::{md_code, md_text};
use super::text::Style;
use super::visible::{visible, visible_lines};
use crate::compose::check::{BudgetResult, CheckReport, CheckStatus, SiteLine};
use crate::units::{iec, signed_iec};
use std::io::Write;

fn site_amount(r: &BudgetResult, s: &SiteLine) -> String {
    if r.budget == crate::compose::check::BudgetKind::Baseline {
        signed_iec(s.bytes)
    } else {
        iec(s.bytes.max(0) as u64)
    }
}

/// What accepting an unmeasured budget takes, or that it was accepted.
fn acceptance(r: &CheckReport) -> &'static str {
    if r.allow_unmeasured {
        "accepted by --allow-unmeasured"
    } else {
        "--allow-unmeasured to accept"
    }
}

/// Writes the report as text, fitted to `style`.
pub fn text(out: &mut dyn Write, r: &CheckReport, style: &Style) -> std::io::Result<()> {
    for f in &r.files {
        let head = match f.status {
            CheckStatus::Pass => "PASS",
            CheckStatus::Fail => "FAIL",
            CheckStatus::Unmeasured => "UNMEASURED",
        };
        style.para(out, &format!("{head} "), "  ", &f.file)?;
        for b in &f.budgets {
            if b.status == CheckStatus::Unmeasured {
                style.para(
                    out,
                    &format!("  unmeasured {}: ", b.budget.as_str()),
                    "       ",
                    &format!(
                        "{}; {}",
                        b.reason.as_deref().unwrap_or("nothing to measure"),
                        acceptance(r)
                    ),
                )?;
                continue;
            }
            style.para(
                out,
                &format!(
                    "  {} {}: ",
                    if b.passed { "ok  " } else { "FAIL" },
                    b.budget.as_str()
                ),
                "       ",
                &b.message,
            )?;
            if b.status == CheckStatus::Fail && !b.top_sites.is_empty() {
                writeln!(out, "       top sites:")?;
                for s in &b.top_sites {
                    writeln!(
                        out,
                        "       {:>12} ×{:<4} {}",
                        site_amount(b, s),
                        s.count,
                        visible(&s.site)
                    )?;
                }
            }
        }
        for n in &f.notes {
            style.para(out, "  note: ", "    ", n)?;
        }
    }
    let mut last = format!(
        "{} of {} file(s) broke a budget",
        r.failed_files,
        r.files.len()
    );
    if r.unmeasured_files > 0 {
        last.push_str(&format!(
            "; {} with a budget not measured ({})",
            r.unmeasured_files,
            acceptance(r)
        ));
    }
    writeln!(out)?;
    style.para(out, "", "  ", &last)
}

fn icon(s: CheckStatus) -> &'static str {
    match s {
        CheckStatus::Pass => "✅",
        CheckStatus::Fail => "❌",
        CheckStatus::Unmeasured => "⚠️",
    }
}

/// Writes the report as Markdown: a table per file with ✅/❌ per budget (⚠️ and the reason for
/// an unmeasured one) and the top sites of each broken one.
pub fn markdown(out: &mut dyn Write, r: &CheckReport) -> std::io::Result<()> {
    let n = r.files.len();
    let unmeasured = format!(
        "⚠️ {} of {n} file(s) with a budget not measured ({})",
        r.unmeasured_files,
        acceptance(r)
    );
    let head = match r.status {
        CheckStatus::Pass => format!("✅ {n} file(s) within budget"),
        CheckStatus::Fail if r.unmeasured_files > 0 => {
            format!(
                "❌ {} of {n} file(s) over budget; {unmeasured}",
                r.failed_files
            )
        }
        CheckStatus::Fail => format!("❌ {} of {n} file(s) over budget", r.failed_files),
        CheckStatus::Unmeasured => unmeasured,
    };
    writeln!(out, "## memlens check: {head}\n")?;
    for f in &r.files {
        writeln!(out, "### {} {}\n", icon(f.status), md_code(&f.file))?;
        writeln!(out, "| | budget | limit | result |")?;
        writeln!(out, "|---|---|---|---|")?;
        for b in &f.budgets {
            writeln!(
                out,
                "| {} | {} | {} | {} |",
                icon(b.status),
                b.budget.as_str(),
                md_text(&b.limit),
                md_text(&b.message)
            )?;
        }
        for b in f
            .budgets
            .iter()
            .filter(|b| b.status == CheckStatus::Fail && !b.top_sites.is_empty())
        {
            writeln!(out, "\nTop sites behind **{}**:\n", b.budget.as_str())?;
            writeln!(out, "| bytes | count | site |")?;
            writeln!(out, "|---:|---:|---|")?;
            for s in &b.top_sites {
                writeln!(
                    out,
                    "| {} | {} | {} |",
                    site_amount(b, s),
                    s.count,
                    md_code(&s.site)
                )?;
            }
        }
        for n in &f.notes {
            writeln!(out, "\n> note: {}", md_text(n))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Escapes text for XML attributes and content: controls (none of C0 but tab, newline and
/// carriage return is allowed in XML 1.0), DEL, C1, bidirectional marks and U+FFFE/U+FFFF
/// shown escaped first ([`visible_lines`]; the newlines of a failure's body stay), then `&`,
/// `<`, `>`, `"` and `'` as entities. Valid XML 1.0 for any input.
pub fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in visible_lines(s).chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c => o.push(c),
        }
    }
    o
}

/// Writes the report as JUnit XML: one testsuite, one testcase per file and budget, a
/// `<failure>` with the numbers and the top sites for each broken one, a `<skipped>` with the
/// reason for each unmeasured one.
pub fn junit(out: &mut dyn Write, r: &CheckReport) -> std::io::Result<()> {
    let all = || r.files.iter().flat_map(|f| &f.budgets);
    let tests = all().count();
    let failures = all().filter(|b| b.status == CheckStatus::Fail).count();
    let skipped = all()
        .filter(|b| b.status == CheckStatus::Unmeasured)
        .count();
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuite name="memlens check" tests="{tests}" failures="{failures}" errors="0" skipped="{skipped}">"#
    )?;
    for f in &r.files {
        for b in &f.budgets {
            let name = xml_escape(b.budget.as_str());
            let class = xml_escape(&f.file);
            match b.status {
                CheckStatus::Pass => {
                    writeln!(out, r#"  <testcase classname="{class}" name="{name}"/>"#)?;
                    continue;
                }
                CheckStatus::Unmeasured => {
                    writeln!(out, r#"  <testcase classname="{class}" name="{name}">"#)?;
                    writeln!(
                        out,
                        r#"    <skipped message="{}"/>"#,
                        xml_escape(&format!("{} ({})", b.message, acceptance(r)))
                    )?;
                    writeln!(out, "  </testcase>")?;
                    continue;
                }
                CheckStatus::Fail => {}
            }
            writeln!(out, r#"  <testcase classname="{class}" name="{name}">"#)?;
            let mut body = String::new();
            for s in &b.top_sites {
                body.push_str(&format!(
                    "{} x{} {}\n",
                    site_amount(b, s),
                    s.count,
                    visible(&s.site)
                ));
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
