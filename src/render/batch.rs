//! Renderings of a batch: a table, CSV, or JSON lines (one object per file, then one
//! `{"kind":"imbalance",...}` line and one `{"kind":"cross_rank",...}` line).

use super::text::{cell, right, width, Style};
use super::visible::visible;
use crate::compose::batch::{BatchReport, FileRow, Imbalance};
use crate::compose::cross_rank::parallel::Parallel;
use crate::compose::cross_rank::steps::StepMatrix;
use crate::compose::cross_rank::{CrossRank, CrossRankLine};
use crate::units::{iec, plural};
use std::io::Write;

/// Writes the rows and the imbalance as tables, fitted to `style`. Files in one directory
/// are named below it (`Files in runs/7/:` then `rank0.pickle`, ...).
pub fn table(out: &mut dyn Write, r: &BatchReport, style: &Style) -> std::io::Result<()> {
    let dir = if r.files.len() > 1 {
        common_dir(r.files.iter().map(|f| f.file.as_str()))
    } else {
        ""
    };
    let name = |file: &str| file.strip_prefix(dir).unwrap_or(file).to_string();
    if !dir.is_empty() {
        style.para(out, "Files in ", "  ", dir)?;
    }
    // One row of strings per file: name, rank, peak, reserved, frag, oom, top site.
    let rows: Vec<[String; 7]> = r
        .files
        .iter()
        .map(|f| {
            let rank = f.rank.map(|k| k.to_string()).unwrap_or_default();
            if !f.ok {
                let e = f.error.as_deref().unwrap_or("");
                let e = e
                    .strip_prefix(f.file.as_str())
                    .and_then(|r| r.strip_prefix(": "))
                    .unwrap_or(e);
                let dash = || "-".to_string();
                return [
                    name(&f.file),
                    rank,
                    dash(),
                    dash(),
                    dash(),
                    dash(),
                    format!("error: {e}"),
                ];
            }
            [
                name(&f.file),
                rank,
                iec(f.peak_bytes),
                iec(f.reserved_bytes),
                format!("{:.1}%", f.fragmentation * 100.0),
                f.oom.clone(),
                match &f.top_site {
                    Some(s) => format!("{} ({})", s, iec(f.top_site_bytes)),
                    None => "-".into(),
                },
            ]
        })
        .collect();
    let header = [
        "file", "rank", "peak", "reserved", "frag", "oom", "top site",
    ];
    let table = |style: &Style| {
        let mut t = style.table();
        t.set_header(header.to_vec());
        for row in &rows {
            t.add_row(row.iter().enumerate().map(|(i, v)| {
                if (1..=4).contains(&i) {
                    right(v)
                } else {
                    cell(v)
                }
            }));
        }
        t
    };
    let whole = table(&Style::plain()).to_string();
    match style.columns() {
        // Too wide for the terminal: a short block per file reads better than a table of
        // seven narrow columns.
        Some(w) if whole.lines().any(|l| width(l) > w) => {
            for row in &rows {
                let [file, rank, peak, reserved, frag, oom, top] = row;
                let rank = if rank.is_empty() {
                    String::new()
                } else {
                    format!(" (rank {rank})")
                };
                style.para(out, "", "  ", &format!("{file}{rank}"))?;
                if peak == "-" {
                    style.para(out, "  ", "    ", top)?;
                    continue;
                }
                style.para(
                    out,
                    "  ",
                    "    ",
                    &format!("peak {peak}, reserved {reserved}, frag {frag}, oom {oom}"),
                )?;
                style.para(out, "  top site: ", "    ", top)?;
            }
        }
        _ => writeln!(out, "{}", table(style))?,
    }
    writeln!(
        out,
        "{}, {} failed",
        plural(r.files.len() as u64, "file"),
        r.failed
    )?;
    if let Some(i) = &r.imbalance {
        imbalance(out, i, style, &name)?;
    }
    if let Some(x) = &r.cross_rank {
        cross_rank(out, x, style, &name)?;
    }
    Ok(())
}

/// The cross-rank answer: outlier ranks with their site, sites with their outlier ranks, the
/// first OOM, settings that differ, and what could not be judged.
fn cross_rank(
    out: &mut dyn Write,
    x: &CrossRank,
    style: &Style,
    name: &dyn Fn(&str) -> String,
) -> std::io::Result<()> {
    writeln!(out)?;
    if let Some(step) = x.at_step {
        style.para(
            out,
            "",
            "  ",
            &format!("The files come from several steps; the answer below is about step {step}, the one with the most ranks (the first OOM is over every file)."),
        )?;
    }
    let head = match x.peak_threshold_bytes {
        Some(thr) if x.outliers.is_empty() => format!(
            "Across {} ranks: no rank's peak stands out (median {}; standing out takes more than {} above it)",
            x.ranks,
            iec(x.median_peak_bytes),
            iec(thr)
        ),
        Some(thr) => format!(
            "Across {} ranks: {} stand{} out (peak more than {} above the median {}):",
            x.ranks,
            plural(x.outliers.len() as u64, "rank"),
            if x.outliers.len() == 1 { "s" } else { "" },
            iec(thr),
            iec(x.median_peak_bytes)
        ),
        None => format!("Across {} ranks (median peak {}):", x.ranks, iec(x.median_peak_bytes)),
    };
    style.para(out, "", "  ", &head)?;
    if !x.outliers.is_empty() {
        let mut t = style.table();
        t.set_header(vec![
            "rank",
            "peak",
            "excess",
            "vs median",
            "site that makes it",
            "file",
        ]);
        for o in &x.outliers {
            let site = match &o.site {
                Some(s) => format!(
                    "{s} ({} vs median {})",
                    iec(o.site_bytes),
                    iec(o.site_median_bytes)
                ),
                None => "-".into(),
            };
            t.add_row(vec![
                right(o.rank.to_string()),
                right(iec(o.peak_bytes)),
                right(format!("+{}", iec(o.excess_bytes))),
                right(format!("{:.2}×", o.over_median)),
                cell(&site),
                cell(&name(&o.file)),
            ]);
        }
        writeln!(out, "{t}")?;
    }
    if !x.sites.is_empty() {
        writeln!(
            out,
            "Sites where a rank stands out ({} of {}):",
            x.sites.len(),
            x.sites_with_outliers
        )?;
        let mut t = style.table();
        t.set_header(vec!["median", "min", "max", "ranks that stand out", "site"]);
        for s in &x.sites {
            let mut ranks: Vec<String> = s.outliers.iter().map(|r| r.rank.to_string()).collect();
            if s.outlier_ranks > s.outliers.len() {
                ranks.push(format!("+{} more", s.outlier_ranks - s.outliers.len()));
            }
            t.add_row(vec![
                right(iec(s.median_bytes)),
                right(iec(s.min_bytes)),
                right(iec(s.max_bytes)),
                cell(&ranks.join(", ")),
                cell(&s.site),
            ]);
        }
        writeln!(out, "{t}")?;
    }
    if let Some(f) = &x.first_oom {
        let then: Vec<String> = f
            .then
            .iter()
            .map(|r| format!("rank {} +{:.3} s", r.rank, r.after_us as f64 / 1e6))
            .collect();
        let req = f.oom.requested_bytes.map_or("a request".to_string(), iec);
        style.para(
            out,
            "",
            "  ",
            &format!(
                "First out of memory: rank {} ({} ran out), asking {} on device {} ({}){}",
                f.rank,
                plural(x.ranks_with_oom as u64, "rank"),
                req,
                f.oom.device.map_or("?".to_string(), |d| d.to_string()),
                f.oom.verdict,
                if then.is_empty() {
                    String::new()
                } else {
                    format!("; then {}", then.join(", "))
                }
            ),
        )?;
    }
    for d in &x.settings_differ {
        let values: Vec<String> = d
            .values
            .iter()
            .map(|v| {
                let ranks: Vec<String> = v.ranks.iter().take(8).map(u32::to_string).collect();
                let more = if v.ranks.len() > 8 {
                    format!(" +{} more", v.ranks.len() - 8)
                } else {
                    String::new()
                };
                format!(
                    "{} on rank{} {}{more}",
                    v.value.as_deref().unwrap_or("(not recorded)"),
                    if v.ranks.len() == 1 { "" } else { "s" },
                    ranks.join(", ")
                )
            })
            .collect();
        style.para(
            out,
            "Setting differs: ",
            "  ",
            &format!("{}: {}", d.key, values.join("; ")),
        )?;
    }
    if let Some(p) = &x.parallel {
        parallel(out, p, style)?;
    }
    if let Some(m) = &x.steps {
        step_matrix(out, m, style)?;
    }
    for c in &x.cannot_judge {
        style.para(out, "cannot judge ", "  ", c)?;
    }
    Ok(())
}

/// Steps shown in text (the last ones; JSON has every step kept).
const STEPS_SHOWN: usize = 12;

/// The step × rank matrix, a line per step: its ranks' median and highest peak, and the ranks
/// that stand out.
fn step_matrix(out: &mut dyn Write, m: &StepMatrix, style: &Style) -> std::io::Result<()> {
    let whence = if m.source == "path" {
        "the paths name the steps".to_string()
    } else {
        format!("steps from the traces: {}", m.found_by.join(", "))
    };
    let shown = m.columns.len().min(STEPS_SHOWN);
    let whence = if m.steps_of_one_rank > 0 {
        format!(
            "{whence}; {} only one rank has left out",
            plural(m.steps_of_one_rank as u64, "step")
        )
    } else {
        whence
    };
    let head = if m.steps_found > shown {
        format!(
            "Peak per step across ranks ({whence}; the last {shown} of {} steps, every rank's in JSON):",
            m.steps_found
        )
    } else {
        format!("Peak per step across ranks ({whence}):")
    };
    style.para(out, "", "  ", &head)?;
    let mut t = style.table();
    t.set_header(vec![
        "step",
        "ranks",
        "median",
        "highest (rank)",
        "stand out",
    ]);
    for c in &m.columns[m.columns.len() - shown..] {
        let mut outl: Vec<String> = c.outlier_ranks.iter().take(8).map(u32::to_string).collect();
        if c.outlier_ranks.len() > 8 {
            outl.push(format!("+{} more", c.outlier_ranks.len() - 8));
        }
        t.add_row(vec![
            cell(&c.step),
            right(c.ranks.to_string()),
            right(iec(c.median_bytes)),
            right(format!("{} ({})", iec(c.max_bytes), c.max_rank)),
            cell(&if c.ranks < crate::compose::cross_rank::MIN_RANKS {
                "cannot judge".to_string()
            } else if outl.is_empty() {
                "none".to_string()
            } else {
                outl.join(", ")
            }),
        ]);
    }
    writeln!(out, "{t}")
}

/// The ranks by parallel coordinates: per dimension its groups' medians, how far they lie
/// apart against how far one group's ranks do, and the ranks that stand out in their stage.
fn parallel(out: &mut dyn Write, p: &Parallel, style: &Style) -> std::io::Result<()> {
    style.para(
        out,
        "",
        "  ",
        &format!(
            "By parallel coordinates ({}, {} placed):",
            if p.source == "topology" {
                "from --topology"
            } else {
                "from the paths"
            },
            plural(p.ranks_placed as u64, "rank")
        ),
    )?;
    for a in &p.by_axis {
        let groups: Vec<String> = a
            .groups
            .iter()
            .take(8)
            .map(|g| format!("{} {}: {}", a.axis, g.value, iec(g.median_peak_bytes)))
            .collect();
        let more = if a.groups.len() > 8 {
            format!(", +{} more", a.groups.len() - 8)
        } else {
            String::new()
        };
        style.para(
            out,
            "  ",
            "    ",
            &format!(
                "{}: medians {}{more}; they lie {} apart, ranks of one {} at most {}",
                a.axis,
                groups.join(", "),
                iec(a.between_bytes),
                a.axis,
                iec(a.within_bytes)
            ),
        )?;
    }
    if let Some(w) = p
        .by_axis
        .iter()
        .find(|a| Some(&a.axis) == p.widest_axis.as_ref())
    {
        style.para(
            out,
            "  ",
            "    ",
            &format!(
                "Peaks follow {}: its medians lie {} apart.",
                w.axis,
                iec(w.between_bytes)
            ),
        )?;
    }
    if p.stages_judged > 0 && p.stage_outliers.is_empty() {
        style.para(
            out,
            "  ",
            "    ",
            &format!(
                "No rank stands out within its pipeline stage ({} judged).",
                plural(p.stages_judged as u64, "stage")
            ),
        )?;
    }
    for o in p.stage_outliers.iter().take(16) {
        style.para(
            out,
            "  ",
            "    ",
            &format!(
                "Stands out within pipeline stage {}: rank {}, {} ({} above the median of its {} ranks)",
                o.stage,
                o.rank,
                iec(o.peak_bytes),
                iec(o.excess_bytes),
                o.stage_ranks
            ),
        )?;
    }
    if p.stage_outliers.len() > 16 {
        writeln!(
            out,
            "  … and {} more ranks that stand out in their stage",
            p.stage_outliers.len() - 16
        )?;
    }
    Ok(())
}

/// The directory (ending in `/`) every path of `files` lies in, or `""`.
fn common_dir<'a>(mut files: impl Iterator<Item = &'a str>) -> &'a str {
    let Some(first) = files.next() else {
        return "";
    };
    let mut end = first.rfind('/').map_or(0, |i| i + 1);
    for f in files {
        while end > 0 && !(f.len() >= end && f.as_bytes()[..end] == first.as_bytes()[..end]) {
            end = first[..end - 1].rfind('/').map_or(0, |i| i + 1);
        }
    }
    &first[..end]
}

/// Ranks listed one by one in the imbalance table; with more, the [`RANKS_HIGHEST`] highest.
const RANKS_LISTED: usize = 32;

/// Ranks listed when there are more than [`RANKS_LISTED`].
const RANKS_HIGHEST: usize = 16;

fn imbalance(
    out: &mut dyn Write,
    i: &Imbalance,
    style: &Style,
    name: &dyn Fn(&str) -> String,
) -> std::io::Result<()> {
    writeln!(out)?;
    style.para(
        out,
        "",
        "  ",
        &format!(
            "Imbalance over {} ranks: max / median = {:.2} (rank {}: {} vs median {})",
            i.ranks.len(),
            i.max_over_median,
            i.outlier_rank,
            iec(i.max_peak_bytes),
            iec(i.median_peak_bytes)
        ),
    )?;
    let mut t = style.table();
    t.set_header(vec!["rank", "peak", "vs median", "file"]);
    // Every rank up to [`RANKS_LISTED`]; beyond, the highest peaks (the file table above has
    // every rank already) and a line for the rest.
    let mut shown: Vec<&crate::compose::batch::RankPeak> = i.ranks.iter().collect();
    if shown.len() > RANKS_LISTED {
        shown.sort_by(|a, b| b.peak_bytes.cmp(&a.peak_bytes).then(a.rank.cmp(&b.rank)));
        shown.truncate(RANKS_HIGHEST);
    }
    for r in &shown {
        t.add_row(vec![
            right(r.rank.to_string()),
            right(iec(r.peak_bytes)),
            right(if i.median_peak_bytes == 0 {
                "-".into()
            } else {
                format!("{:.2}×", r.peak_bytes as f64 / i.median_peak_bytes as f64)
            }),
            cell(&name(&r.file)),
        ]);
    }
    writeln!(out, "{t}")?;
    if shown.len() < i.ranks.len() {
        let rest: Vec<u64> = {
            let mut v: Vec<u64> = i.ranks.iter().map(|r| r.peak_bytes).collect();
            v.sort_unstable_by(|a, b| b.cmp(a));
            v.split_off(shown.len())
        };
        writeln!(
            out,
            "… and {} more ranks, peaks {} to {} (the highest {} above)",
            rest.len(),
            iec(*rest.last().unwrap_or(&0)),
            iec(*rest.first().unwrap_or(&0)),
            shown.len()
        )?;
    }
    if !i.sites.is_empty() {
        writeln!(out, "Sites that explain rank {}:", i.outlier_rank)?;
        let mut t = style.table();
        t.set_header(vec![
            "excess".to_string(),
            format!("rank {}", i.outlier_rank),
            "median".to_string(),
            "site".to_string(),
        ]);
        for s in &i.sites {
            t.add_row(vec![
                right(format!("+{}", iec(s.excess_bytes))),
                right(iec(s.outlier_bytes)),
                right(iec(s.median_bytes)),
                cell(&s.site),
            ]);
        }
        writeln!(out, "{t}")?;
    }
    for n in &i.notes {
        style.para(out, "note: ", "  ", n)?;
    }
    Ok(())
}

/// A CSV field: controls escaped ([`visible`]), quoted when it needs it (RFC 4180).
pub fn csv_field(s: &str) -> String {
    let s = visible(s);
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes one CSV line per file (sizes in bytes); the imbalance is left to JSON lines.
pub fn csv(out: &mut dyn Write, r: &BatchReport) -> std::io::Result<()> {
    writeln!(
        out,
        "file,rank,ok,devices,peak_bytes,peak_device,reserved_bytes,fragmentation,ooms,oom,top_site,top_site_bytes,error"
    )?;
    for f in &r.files {
        writeln!(out, "{}", csv_row(f))?;
    }
    Ok(())
}

fn csv_row(f: &FileRow) -> String {
    let opt = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_default();
    [
        csv_field(&f.file),
        opt(f.rank),
        f.ok.to_string(),
        f.devices.to_string(),
        f.peak_bytes.to_string(),
        opt(f.peak_device),
        f.reserved_bytes.to_string(),
        format!("{:.6}", f.fragmentation),
        f.ooms.to_string(),
        csv_field(&f.oom),
        csv_field(f.top_site.as_deref().unwrap_or("")),
        f.top_site_bytes.to_string(),
        csv_field(f.error.as_deref().unwrap_or("")),
    ]
    .join(",")
}

/// Writes one JSON object per file per line, then the imbalance line and the cross-rank line
/// if any.
pub fn jsonl(out: &mut dyn Write, r: &BatchReport) -> std::io::Result<()> {
    for f in &r.files {
        serde_json::to_writer(&mut *out, f)?;
        out.write_all(b"\n")?;
    }
    if let Some(i) = &r.imbalance {
        serde_json::to_writer(&mut *out, i)?;
        out.write_all(b"\n")?;
    }
    if let Some(x) = &r.cross_rank {
        serde_json::to_writer(&mut *out, &CrossRankLine::new(x))?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::common_dir;

    #[test]
    fn the_common_directory_of_files() {
        assert_eq!(common_dir(["a/b/x.p", "a/b/y.p"].into_iter()), "a/b/");
        assert_eq!(common_dir(["a/b/x.p", "a/c/y.p"].into_iter()), "a/");
        assert_eq!(common_dir(["a/bc/x.p", "a/b/y.p"].into_iter()), "a/");
        assert_eq!(common_dir(["x.p", "a/y.p"].into_iter()), "");
        assert_eq!(common_dir(["/r/x.p", "/r/y.p"].into_iter()), "/r/");
        assert_eq!(common_dir(["/x.p", "/y.p"].into_iter()), "/");
    }
}
