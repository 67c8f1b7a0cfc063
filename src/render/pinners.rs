//! Text of what pins the stranded bytes ([`DevicePinners`]), shared by `frag` and `oom`.

use super::text::Style;
use crate::analyze::frag::pinned::DevicePinners;
use crate::units::iec;
use std::io::Write;

/// Sites listed in the table.
const ROWS: usize = 8;

/// Writes the pinners of one device: its sites as a table, then the reading's sentences.
/// Nothing when no byte is stranded.
pub fn text(out: &mut dyn Write, p: &DevicePinners, style: &Style) -> std::io::Result<()> {
    if p.stranded_bytes == 0 {
        return Ok(());
    }
    style.para(
        out,
        "",
        "  ",
        &format!("What pins the {} stranded:", iec(p.stranded_bytes)),
    )?;
    let rows: Vec<Vec<String>> = p
        .pinners
        .iter()
        .take(ROWS)
        .map(|s| {
            vec![
                s.site.clone(),
                iec(s.sole_bytes),
                iec(s.shared_bytes),
                s.blocks.to_string(),
                iec(s.block_bytes),
                match (s.oldest_allocated_event, s.allocated_before_trace) {
                    (_, n) if n > 0 => "before trace".to_string(),
                    (Some(e), _) => format!("#{e}"),
                    (None, _) => "-".to_string(),
                },
            ]
        })
        .collect();
    let header = ["site", "alone", "shared", "blocks", "block bytes", "oldest"];
    let numeric = [false, true, true, true, true, true];
    for t in style.records(&header, &numeric, &rows) {
        writeln!(out, "{t}")?;
    }
    if p.pinning_sites > ROWS as u64 {
        style.para(
            out,
            "  ",
            "  ",
            &format!(
                "… and {} more sites (--format json lists them)",
                p.pinning_sites - ROWS as u64
            ),
        )?;
    }
    for w in &p.words {
        style.para(out, "  - ", "    ", w)?;
    }
    Ok(())
}
