//! What the allocator replay says changes would leave stranded at the moment: expandable
//! segments, `max_split_size_mb`, and the top pinning site's allocations made up front or
//! freed before they are needed ([`whatif::stranded`]).

use super::NO_STACK;
use crate::allocator::drive::Reorder;
use crate::analyze::frag::pinned::{DevicePinners, PinnerPrice};
use crate::analyze::whatif::{self, stranded::Change};
use crate::model::{Action, Snapshot};
use crate::units::plural;
use std::collections::BTreeMap;

/// `max_split_size_mb` priced when the file sets none (the value the OOM advice names).
pub const MAX_SPLIT_MB: u64 = 512;

/// `a`, `a and b`, `a, b and c`.
pub fn names(sites: &[String]) -> String {
    match sites {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The changes worth pricing for `p`, replayed; `Err` says why none can be.
pub(super) fn price(
    snap: &Snapshot,
    p: &DevicePinners,
    site_blocks: &BTreeMap<String, Vec<u64>>,
) -> Result<Vec<PinnerPrice>, String> {
    let dev = snap
        .device(p.device)
        .ok_or("the device is not in the file")?;
    let trace = snap.device_trace(dev);
    // Without a trace there is nothing to replay ([`super::words`] says so).
    if p.stranded_bytes == 0 || trace.is_empty() {
        return Ok(Vec::new());
    }
    let settings = whatif::file_settings(snap);
    let mut changes: Vec<(&str, String, Change)> = Vec::new();
    if !settings.expandable_segments {
        let conf = "expandable_segments:True".to_string();
        changes.push(("expandable_segments", conf.clone(), Change::Conf(conf)));
        if settings.max_split_size.is_none() {
            let conf = format!("max_split_size_mb:{MAX_SPLIT_MB}");
            changes.push(("max_split_size_mb", conf.clone(), Change::Conf(conf)));
        }
    }
    // The set of sites that pins the most stranded bytes (its blocks allocated in the trace),
    // its allocations made up front, or never.
    let target = p.groups.iter().find(|g| {
        g.sites
            .iter()
            .all(|s| s != NO_STACK && site_blocks.contains_key(s))
    });
    if let Some(g) = target {
        let mut events: Vec<u32> = g
            .sites
            .iter()
            .flat_map(|s| &site_blocks[s])
            .map(|&e| e as u32)
            .collect();
        events.sort_unstable();
        events.dedup();
        let before: u64 = p
            .pinners
            .iter()
            .filter(|s| g.sites.contains(&s.site))
            .map(|s| s.allocated_before_trace)
            .sum();
        let kept = if before > 0 {
            format!(
                "; {} allocated before the trace stay",
                plural(before, "block")
            )
        } else {
            String::new()
        };
        let who = names(&g.sites);
        let n = plural(events.len() as u64, "pinning allocation");
        changes.push((
            "pinners_allocated_first",
            format!("{who}'s {n} made before the trace's first request{kept}"),
            Change::Reorder(Reorder {
                first: events.clone(),
                ..Reorder::default()
            }),
        ));
        changes.push((
            "pinners_freed",
            format!("{who}'s {n} freed before this moment (never made){kept}"),
            Change::Reorder(Reorder {
                dropped: events,
                ..Reorder::default()
            }),
        ));
    }
    if changes.is_empty() {
        return Ok(Vec::new());
    }
    // At an `oom` entry the replay, without a capacity, would serve the request: probe the
    // state just before it.
    let dev = snap
        .device(p.device)
        .ok_or("the device is not in the file")?;
    let trace = snap.device_trace(dev);
    let mut probe = p.at.event_index;
    if probe >= 0
        && trace
            .get(probe as usize)
            .is_some_and(|e| e.action == Action::Oom)
    {
        probe -= 1;
    }
    let specs: Vec<Change> = changes.iter().map(|c| c.2.clone()).collect();
    let got = whatif::stranded::stranded_at(snap, p.device, probe, &specs)
        .map_err(|e| format!("cannot price changes: {e}"))?
        .ok_or(
            "cannot price changes: the device has no trace for the allocator replay to replay",
        )?;
    let baseline = got[0];
    Ok(changes
        .into_iter()
        .zip(&got[1..])
        .map(|((change, what, _), &stranded)| PinnerPrice {
            change: change.to_string(),
            what,
            stranded_bytes: stranded,
            baseline_stranded_bytes: baseline,
            stranded_change_bytes: stranded as i64 - baseline as i64,
        })
        .collect())
}
