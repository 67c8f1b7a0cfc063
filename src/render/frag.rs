//! Text rendering of [`FragReport`].

use super::text::{width, Style};
use crate::analyze::frag::pools::{DevicePools, PoolUse};
use crate::analyze::frag::{FragReport, PoolFrag};
use crate::replay::Moment;
use crate::units::{iec, plural};
use std::io::Write;

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

/// Writes the report, fitted to `style`.
pub fn text(
    out: &mut dyn Write,
    title: &str,
    r: &FragReport,
    style: &Style,
) -> std::io::Result<()> {
    if let Some(pools) = &r.by_pool {
        return by_pool(out, title, pools, style);
    }
    style.para(out, "", "", &format!("{title}  (at {})", r.moment))?;
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
        let rows: Vec<Vec<String>> = d
            .pools
            .iter()
            .chain(std::iter::once(&d.total))
            .map(|p| {
                let name = if std::ptr::eq(p, &d.total) {
                    "total".to_string()
                } else {
                    pool_name(p)
                };
                vec![
                    name,
                    p.segments.to_string(),
                    iec(p.reserved_bytes),
                    iec(p.allocated_bytes),
                    iec(p.rounding_waste_bytes),
                    iec(p.pending_free_bytes),
                    iec(p.free_bytes),
                    iec(p.largest_free_block_bytes),
                    format!("{:.0}%", p.fragmentation * 100.0),
                    iec(p.stranded_free_bytes),
                    iec(p.releasable_bytes),
                ]
            })
            .collect();
        let header = [
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
        ];
        let mut numeric = [true; 11];
        numeric[0] = false;
        for t in style.records(&header, &numeric, &rows) {
            writeln!(out, "{t}")?;
        }
        style.para(out, "Reading: ", "  ", &d.reading.words)?;
        style.para(
            out,
            "",
            "  ",
            &format!(
                "Largest request served without new memory from the driver: {}",
                iec(d.total.largest_request_without_new_memory_bytes)
            ),
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
                format!("{range}: {}, {}", plural(b.blocks, "block"), iec(b.bytes))
            })
            .collect();
        if !hist.is_empty() {
            style.para(out, "Free blocks by size: ", "  ", &hist.join("; "))?;
        }
        if !d.worst_segments.is_empty() {
            style.para(
                out,
                "",
                "  ",
                "Segments with the most stranded free memory (' ' free, 1-9 tenths used, '#' full, 'p' pending free):",
            )?;
            for m in &d.worst_segments {
                let head = format!(
                    "  0x{:012x} {:>11} {:5}",
                    m.address,
                    iec(m.size),
                    m.pool.as_str()
                );
                let map = format!("[{}]", m.map);
                let tail = format!(
                    "{} stranded, largest free {}",
                    iec(m.stranded_free_bytes),
                    iec(m.largest_free_block_bytes)
                );
                let one = format!("{head} {map} {tail}");
                match style.columns() {
                    // Too wide for one line: the figures, then the map under them.
                    Some(w) if width(&one) > w => {
                        writeln!(out, "{head}: {tail}")?;
                        writeln!(out, "    {map}")?;
                    }
                    _ => writeln!(out, "{one}")?,
                }
            }
        }
        if let Some(p) = &d.pinners {
            super::pinners::text(out, p, style)?;
        }
        for n in &d.notes {
            style.para(out, "note: ", "  ", n)?;
        }
    }
    Ok(())
}

fn use_name(p: &PoolUse) -> String {
    match p.pool_id {
        None => "unknown pool".to_string(),
        Some([0, 0]) => "default".to_string(),
        Some([a, b]) => format!("{} ({a}, {b})", p.kind),
    }
}

fn at(m: &Moment) -> String {
    match m.event_index {
        -1 => "start".to_string(),
        i => format!("#{i}"),
    }
}

/// `frag --by pool`: one row per (pool, stream), then the ghost blocks.
fn by_pool(
    out: &mut dyn Write,
    title: &str,
    devices: &[DevicePools],
    style: &Style,
) -> std::io::Result<()> {
    style.para(
        out,
        "",
        "",
        &format!("{title}  (private pools, over the trace)"),
    )?;
    for d in devices {
        writeln!(out, "\nDevice {}", d.device)?;
        let rows: Vec<Vec<String>> = d
            .pools
            .iter()
            .map(|p| {
                vec![
                    use_name(p),
                    format!("0x{:x}", p.stream),
                    p.segments.to_string(),
                    iec(p.reserved_bytes),
                    iec(p.active_bytes),
                    iec(p.inactive_bytes),
                    format!("{} {}", iec(p.peak_reserved_bytes), at(&p.peak_reserved_at)),
                    format!("{} {}", iec(p.peak_active_bytes), at(&p.peak_active_at)),
                    if p.ghost_blocks > 0 {
                        format!("{} ({})", p.ghost_blocks, iec(p.ghost_bytes))
                    } else {
                        "0".to_string()
                    },
                ]
            })
            .collect();
        let header = [
            "pool",
            "stream",
            "segments",
            "reserved",
            "active",
            "inactive",
            "peak reserved",
            "peak active",
            "ghosts",
        ];
        let mut numeric = [true; 9];
        numeric[0] = false;
        numeric[1] = false;
        for t in style.records(&header, &numeric, &rows) {
            writeln!(out, "{t}")?;
        }
        for p in d.pools.iter().filter(|p| p.kind == "graph") {
            style.para(
                out,
                "note: ",
                "  ",
                &format!(
                    "{} on stream 0x{:x} is a CUDA graph's pool: its {} stay reserved for the graph's lifetime ({} inactive, usable only by the graph)",
                    use_name(p), p.stream, iec(p.reserved_bytes), iec(p.inactive_bytes)
                ),
            )?;
        }
        if d.pools.iter().any(|p| p.pool_id.is_none()) {
            style.para(
                out,
                "note: ",
                "  ",
                "unknown pool: segments freed before the dump whose entries carry no pool_id",
            )?;
        }
        if d.ghost_blocks > 0 {
            style.para(
                out,
                "",
                "  ",
                &format!(
                    "Ghost blocks (live at the dump, never allocated in the trace): {}, {}",
                    d.ghost_blocks,
                    iec(d.ghost_bytes)
                ),
            )?;
            for p in d.pools.iter().filter(|p| p.ghost_blocks > 0) {
                for g in &p.ghosts {
                    writeln!(
                        out,
                        "  {:<16} 0x{:012x} {:>11}  {}",
                        use_name(p),
                        g.address,
                        iec(g.size),
                        g.site
                    )?;
                }
            }
        }
        for n in &d.notes {
            style.para(out, "note: ", "  ", n)?;
        }
    }
    Ok(())
}
