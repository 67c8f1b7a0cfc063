//! Flamegraph renderers: folded lines (the text contract `a;b;c weight`), an SVG drawn
//! in-process with inferno (no perl, no network), and speedscope JSON.

use super::visible::visible;
use crate::analyze::flame::FlameReport;
use serde_json::json;
use std::io::Write;

/// A frame as a folded line holds it: controls and line breaks escaped ([`visible`]), so a
/// frame is one line of text and the SVG drawn from it valid XML, and `;` (the folded
/// format's separator) written `,`.
fn clean(frame: &str) -> String {
    visible(frame).replace(';', ",")
}

/// Folded lines, rooted at `device_N`.
pub fn folded(out: &mut dyn Write, r: &FlameReport) -> std::io::Result<()> {
    for line in folded_lines(r) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

fn folded_lines(r: &FlameReport) -> Vec<String> {
    let mut lines = Vec::new();
    for d in &r.devices {
        for s in &d.stacks {
            if s.weight == 0 {
                continue;
            }
            let mut parts = vec![format!("device_{}", d.device)];
            parts.extend(s.frames.iter().map(|f| clean(f)));
            lines.push(format!("{} {}", parts.join(";"), s.weight));
        }
    }
    lines
}

/// A flamegraph SVG.
pub fn svg(out: &mut dyn Write, title: &str, r: &FlameReport) -> std::io::Result<()> {
    let lines = folded_lines(r);
    let unit = r.devices.first().map_or("bytes", |d| d.unit);
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = visible(title).into_owned();
    opts.count_name = unit.to_string();
    opts.subtitle = Some(format!("memlens flame at {}", r.moment));
    opts.deterministic = true;
    if lines.is_empty() {
        // inferno refuses empty input; draw one explicit empty frame.
        let empty = ["<nothing live> 1".to_string()];
        return inferno::flamegraph::from_lines(&mut opts, empty.iter().map(|s| s.as_str()), out)
            .map_err(std::io::Error::other);
    }
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(|s| s.as_str()), out)
        .map_err(std::io::Error::other)
}

/// speedscope's file format: one sampled profile per device, weights in the cost's unit.
pub fn speedscope(out: &mut dyn Write, title: &str, r: &FlameReport) -> std::io::Result<()> {
    let mut frame_index: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut frames = Vec::new();
    for d in &r.devices {
        for s in &d.stacks {
            for f in &s.frames {
                if !frame_index.contains_key(f.as_str()) {
                    frame_index.insert(f, frames.len());
                    frames.push(json!({ "name": f }));
                }
            }
        }
    }
    let profiles: Vec<_> = r
        .devices
        .iter()
        .map(|d| {
            let samples: Vec<Vec<usize>> = d
                .stacks
                .iter()
                .map(|s| s.frames.iter().map(|f| frame_index[f.as_str()]).collect())
                .collect();
            let weights: Vec<u64> = d.stacks.iter().map(|s| s.weight).collect();
            json!({
                "type": "sampled",
                "name": format!("device {} at {}", d.device, r.moment),
                "unit": if d.unit == "bytes" { "bytes" } else { "none" },
                "startValue": 0,
                "endValue": d.total,
                "samples": samples,
                "weights": weights,
            })
        })
        .collect();
    let doc = json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "name": title,
        "exporter": format!("memlens {}", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": profiles,
    });
    serde_json::to_writer(&mut *out, &doc)?;
    writeln!(out)
}
