//! Text rendering of [`FragReport`].

use crate::analyze::frag::{FragReport, PoolFrag};
use crate::units::iec;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use std::io::Write;

fn right(s: String) -> Cell {
    Cell::new(s).set_alignment(CellAlignment::Right)
}

fn pool_name(p: &PoolFrag) -> String {
    let mut s = p.pool.as_str().to_string();
    if p.pool_id != [0, 0] {
        s.push_str(&format!(" ({}, {})", p.pool_id[0], p.pool_id[1]));
    }
    if p.stream != 0 {
        s.push_str(&format!(" stream 0x{:x}", p.stream));
    }
    s
}

/// Writes the report.
pub fn text(out: &mut dyn Write, title: &str, r: &FragReport) -> std::io::Result<()> {
    writeln!(out, "{title}  (at {})", r.moment)?;
    for d in &r.devices {
        let when = match d.at.event_index {
            -1 if d.exact => "final state".to_string(),
            -1 => "before the first event".to_string(),
            i => format!("after event {i}"),
        };
        writeln!(
            out,
            "\nDevice {} — {when}{}",
            d.device,
            if d.exact { "" } else { " (rebuilt)" }
        )?;
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header(vec![
            "pool",
            "segments",
            "reserved",
            "allocated",
            "waste",
            "pending",
            "cached free",
            "largest free",
            "frag",
            "stranded",
            "releasable",
        ]);
        for p in d.pools.iter().chain(std::iter::once(&d.total)) {
            let name = if std::ptr::eq(p, &d.total) {
                "total".to_string()
            } else {
                pool_name(p)
            };
            t.add_row(vec![
                Cell::new(name),
                right(p.segments.to_string()),
                right(iec(p.reserved_bytes)),
                right(iec(p.allocated_bytes)),
                right(iec(p.rounding_waste_bytes)),
                right(iec(p.pending_free_bytes)),
                right(iec(p.free_bytes)),
                right(iec(p.largest_free_block_bytes)),
                right(format!("{:.0}%", p.fragmentation * 100.0)),
                right(iec(p.stranded_free_bytes)),
                right(iec(p.releasable_bytes)),
            ]);
        }
        writeln!(out, "{t}")?;
        writeln!(
            out,
            "Largest request served without new memory from the driver: {}",
            iec(d.total.largest_request_without_new_memory_bytes)
        )?;
        let hist: Vec<String> = d
            .total
            .free_histogram
            .iter()
            .filter(|b| b.blocks > 0)
            .map(|b| {
                let range = match b.max_bytes {
                    Some(m) => format!("{}–{}", iec(b.min_bytes), iec(m)),
                    None => format!("≥ {}", iec(b.min_bytes)),
                };
                format!("{range}: {} blocks, {}", b.blocks, iec(b.bytes))
            })
            .collect();
        if !hist.is_empty() {
            writeln!(out, "Free blocks by size: {}", hist.join("; "))?;
        }
        if !d.worst_segments.is_empty() {
            writeln!(out, "Segments with the most stranded free memory (' ' free, 1-9 tenths used, '#' full, 'p' pending free):")?;
            for m in &d.worst_segments {
                writeln!(
                    out,
                    "  0x{:012x} {:>11} {:5} [{}] {} stranded, largest free {}",
                    m.address,
                    iec(m.size),
                    m.pool.as_str(),
                    m.map,
                    iec(m.stranded_free_bytes),
                    iec(m.largest_free_block_bytes)
                )?;
            }
        }
        for n in &d.notes {
            writeln!(out, "note: {n}")?;
        }
    }
    Ok(())
}
