//! The pinners reading in sentences, from the figures [`super::device_pinners`] computed.

use super::prices::names;
use crate::analyze::frag::pinned::{DevicePinners, PinnerPrice, PinnerSite};
use crate::model::Snapshot;
use crate::units::{iec, plural};

/// Sites named in the reading.
const NAMED: usize = 3;

fn age(us: i64) -> String {
    let s = us as f64 / 1e6;
    if s >= 1.0 {
        format!("{s:.1} s")
    } else {
        format!("{:.1} ms", us as f64 / 1e3)
    }
}

fn site_words(s: &PinnerSite, grouped: bool) -> String {
    let mut detail = format!("{}, {}", plural(s.blocks, "live block"), iec(s.block_bytes));
    match (s.oldest_allocated_event, s.allocated_before_trace) {
        (_, n) if n > 0 => detail.push_str(&format!(", {n} of them allocated before the trace")),
        (Some(e), _) => {
            detail.push_str(&format!(", the oldest allocated at event {e}"));
            if let Some(a) = s.oldest_age_us {
                detail.push_str(&format!(", {} before this moment", age(a)));
            }
        }
        (None, _) => {}
    }
    match (s.sole_bytes, s.shared_bytes) {
        (0, _) if grouped => format!("{}: {detail}", s.site),
        (0, shared) => format!(
            "{} pins {} together with other sites ({detail})",
            s.site,
            iec(shared)
        ),
        (sole, 0) => format!("{} alone pins {} ({detail})", s.site, iec(sole)),
        (sole, shared) => format!(
            "{} alone pins {} and {} more together with other sites ({detail})",
            s.site,
            iec(sole),
            iec(shared)
        ),
    }
}

fn price_words(p: &PinnerPrice) -> String {
    let verdict = match p.stranded_change_bytes {
        c if c < 0 => format!("{} less", iec(c.unsigned_abs())),
        0 => "no less".into(),
        c => format!("{} more", iec(c as u64)),
    };
    format!(
        "with {}, the allocator replay leaves {} stranded at this moment, {verdict} than the same replay as run ({})",
        p.what,
        iec(p.stranded_bytes),
        iec(p.baseline_stranded_bytes)
    )
}

/// The sentences: the stranded bytes and who pins them, the worst segment and what split it,
/// the prices, and `notes` (what cannot be judged).
pub(super) fn words(p: &DevicePinners, snap: &Snapshot, notes: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    if p.stranded_bytes == 0 {
        out.push("no cached free byte is stranded at this moment: every free byte lies in a segment (or page) that could be released".into());
        return out;
    }
    out.push(format!(
        "{} of the cached free memory is stranded: live blocks keep the segments (or pages) it lies in from being released",
        iec(p.stranded_bytes)
    ));
    let told: Vec<&crate::analyze::frag::pinned::PinnerGroup> = p
        .groups
        .iter()
        .take(2)
        .filter(|g| g.sites.len() > 1)
        .collect();
    for g in &told {
        out.push(format!(
            "{} pin {} together: each one's blocks alone keep it stranded, so only freeing or moving all of them releases it",
            names(&g.sites),
            iec(g.stranded_bytes)
        ));
    }
    for s in p.pinners.iter().take(NAMED) {
        let grouped = told.iter().any(|g| g.sites.contains(&s.site));
        out.push(site_words(s, grouped));
    }
    if p.unattributed_bytes > 0 {
        out.push(format!(
            "cannot name the site of {}: only blocks without a recorded stack pin it (allocated before allocation history was recorded)",
            iec(p.unattributed_bytes)
        ));
    }
    if let Some(seg) = p.segments.first() {
        let created = seg
            .created_event
            .map_or("before the trace".to_string(), |e| format!("at event {e}"));
        let mut w = format!(
            "the worst segment, {} at {:#x} (created {created}), strands {}",
            iec(seg.size),
            seg.address,
            iec(seg.stranded_bytes)
        );
        if let Some(b) = seg.split_by.first() {
            let when = b
                .allocated_event
                .map_or("before the trace".to_string(), |e| format!("at event {e}"));
            let which = if seg.pinning_blocks == 1 {
                "its one pinning block".to_string()
            } else {
                format!("the oldest of its {} pinning blocks", seg.pinning_blocks)
            };
            w.push_str(&format!(
                "; {which} is {} of {} allocated {when}",
                iec(b.size),
                b.site
            ));
        }
        out.push(w);
    }
    out.extend(p.prices.iter().map(price_words));
    let has_trace = snap
        .device(p.device)
        .is_some_and(|d| !snap.device_trace(d).is_empty());
    if !has_trace {
        out.push("cannot price a change: without a trace the allocator replay has nothing to replay, and the blocks' allocation times are unknown".into());
    }
    out.extend(notes);
    out
}

/// The chain from a failed request to what pins the free bytes it could not use: the first
/// sentence of the reading at a fragmentation OOM.
pub(super) fn chain(p: &DevicePinners, request: u64, pool_free: u64, largest: u64) -> String {
    let mut w = format!(
        "the {} request found {} cached free in its pool but no free block that large (the largest: {})",
        iec(request),
        iec(pool_free),
        iec(largest)
    );
    if p.stranded_bytes > 0 {
        w.push_str(&format!(
            ", and {} of the device's free bytes could not be returned to the driver to make room: live blocks pin them",
            iec(p.stranded_bytes)
        ));
        if let Some(g) = p.groups.first() {
            w.push_str(&format!(
                " ({} {} the most, {})",
                names(&g.sites),
                if g.sites.len() == 1 { "pins" } else { "pin" },
                iec(g.stranded_bytes)
            ));
        }
    }
    w
}
