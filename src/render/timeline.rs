//! Timeline renderers: CSV and an SVG plot (peak marked, annotation phases shaded).

use crate::analyze::timeline::{DeviceTimeline, TimelineReport};
use crate::units::iec;
use std::io::Write;

/// One CSV row per point: `device,event_index,time_us,live_requested_bytes,allocated_bytes,reserved_bytes`.
pub fn csv(out: &mut dyn Write, r: &TimelineReport) -> std::io::Result<()> {
    writeln!(
        out,
        "device,event_index,time_us,live_requested_bytes,allocated_bytes,reserved_bytes"
    )?;
    for d in &r.devices {
        for p in &d.points {
            let t = p.time_us.map(|t| t.to_string()).unwrap_or_default();
            writeln!(
                out,
                "{},{},{t},{},{},{}",
                d.device,
                p.event_index,
                p.live_requested_bytes,
                p.allocated_bytes,
                p.reserved_bytes
            )?;
        }
    }
    Ok(())
}

const W: f64 = 1200.0;
const H: f64 = 360.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 40.0;

/// Text in the SVG: valid XML for any input (controls shown escaped, then entities).
fn esc(s: &str) -> String {
    super::check::xml_escape(s)
}

/// An SVG with one plot per device, stacked vertically.
pub fn svg(out: &mut dyn Write, title: &str, r: &TimelineReport) -> std::io::Result<()> {
    let n = r.devices.len();
    let notes_h = 20.0 * r.absent.len() as f64;
    let total_h = H * n as f64 + 30.0 + notes_h.max(if n == 0 { 40.0 } else { 0.0 }) + 10.0;
    writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{total_h}" viewBox="0 0 {W} {total_h}" font-family="sans-serif" font-size="12">"#
    )?;
    writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#)?;
    writeln!(
        out,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">{}</text>"#,
        esc(title)
    )?;
    if r.devices.is_empty() && r.absent.is_empty() {
        writeln!(
            out,
            r#"<text x="10" y="60">No device has a trace: nothing to plot.</text>"#
        )?;
    }
    for (k, d) in r.devices.iter().enumerate() {
        plot(out, d, 30.0 + H * k as f64)?;
    }
    for (k, a) in r.absent.iter().enumerate() {
        writeln!(
            out,
            r#"<text x="10" y="{}">{}</text>"#,
            30.0 + H * n as f64 + 20.0 * (k + 1) as f64,
            esc(&a.message)
        )?;
    }
    writeln!(out, "</svg>")
}

type Series = (
    &'static str,
    &'static str,
    &'static str,
    fn(&crate::analyze::timeline::Point) -> u64,
);

fn plot(out: &mut dyn Write, d: &DeviceTimeline, y0: f64) -> std::io::Result<()> {
    let (x_lo, x_hi) = (
        d.window.first as f64,
        (d.window.last as f64).max(d.window.first as f64 + 1.0),
    );
    let y_max = d
        .points
        .iter()
        .map(|p| {
            p.reserved_bytes
                .max(p.allocated_bytes)
                .max(p.live_requested_bytes)
        })
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.05;
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let x = |i: i64| LEFT + (i as f64 - x_lo) / (x_hi - x_lo) * pw;
    let y = |b: u64| y0 + TOP + ph - b as f64 / y_max * ph;
    writeln!(out, r#"<g>"#)?;
    writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="13">Device {} — {}; peak {} live {}</text>"#,
        y0 + 20.0,
        d.device,
        crate::units::plural(d.events as u64, "event"),
        iec(d.peak_bytes),
        match d.peak.event_index {
            -1 => "before the first event".to_string(),
            i => format!("at event {i}"),
        }
    )?;
    // Phases, shaded alternately; a label only where it does not overlap the previous one.
    let mut label_end = f64::MIN;
    for (i, p) in d.phases.iter().enumerate() {
        let (a, b) = (
            x(p.first_event.max(d.window.first)),
            x(p.last_event.min(d.window.last)),
        );
        let fill = if i % 2 == 0 { "#eef3fb" } else { "#f7f7f7" };
        writeln!(
            out,
            r#"<rect x="{a:.1}" y="{:.1}" width="{:.1}" height="{ph:.1}" fill="{fill}"><title>{}</title></rect>"#,
            y0 + TOP,
            (b - a).max(1.0),
            esc(&p.name)
        )?;
        if b - a > 60.0 && a >= label_end {
            label_end = a + 7.0 * p.name.len() as f64;
            writeln!(
                out,
                r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#666">{}</text>"##,
                a + 3.0,
                y0 + TOP + 12.0,
                esc(&p.name)
            )?;
        }
    }
    // Axes and y ticks.
    writeln!(
        out,
        r##"<line x1="{LEFT}" y1="{:.1}" x2="{LEFT}" y2="{:.1}" stroke="#333"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/>"##,
        y0 + TOP,
        y0 + TOP + ph,
        y0 + TOP + ph,
        LEFT + pw,
        y0 + TOP + ph
    )?;
    for t in 0..=4 {
        let b = (y_max / 1.05 * t as f64 / 4.0) as u64;
        writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{}</text><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#ddd"/>"##,
            LEFT - 6.0,
            y(b) + 4.0,
            iec(b),
            y(b),
            LEFT + pw,
            y(b)
        )?;
    }
    for t in 0..=4 {
        let i = d.window.first + ((d.window.last - d.window.first) as f64 * t as f64 / 4.0) as i64;
        writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#333">{i}</text>"##,
            x(i),
            y0 + TOP + ph + 16.0
        )?;
    }
    writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">event index</text>"##,
        LEFT + pw,
        y0 + TOP + ph + 32.0
    )?;
    // Series.
    let series: [Series; 3] = [
        ("reserved", "#999999", "6,3", |p| p.reserved_bytes),
        ("allocated (rounded)", "#e6862e", "", |p| p.allocated_bytes),
        ("live requested", "#1f5fbf", "", |p| p.live_requested_bytes),
    ];
    for (k, (name, color, dash, get)) in series.iter().enumerate() {
        let pts: Vec<String> = d
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", x(p.event_index), y(get(p))))
            .collect();
        writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" stroke-dasharray="{dash}" points="{}"/>"#,
            pts.join(" ")
        )?;
        let lx = LEFT + pw - 540.0 + 180.0 * k as f64;
        writeln!(
            out,
            r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="3" stroke-dasharray="{dash}"/><text x="{:.1}" y="{:.1}">{name}</text>"#,
            y0 + 16.0,
            lx + 20.0,
            y0 + 16.0,
            lx + 24.0,
            y0 + 20.0
        )?;
    }
    // The peak.
    let (px, py) = (x(d.peak.event_index), y(d.peak_bytes));
    writeln!(
        out,
        r##"<circle cx="{px:.1}" cy="{py:.1}" r="4" fill="#d62728"/><text x="{:.1}" y="{:.1}" fill="#d62728">peak {}</text>"##,
        px + 6.0,
        (py - 6.0).max(y0 + TOP + 10.0),
        iec(d.peak_bytes)
    )?;
    writeln!(out, "</g>")
}
