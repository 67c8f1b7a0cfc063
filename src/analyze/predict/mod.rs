//! What the allocator-setting fixes of `memlens oom` would do: each device's trace replayed
//! under the setting (`memlens whatif`), the outcome for each OOM written into the fix
//! (`Recommendation::predicted`).

use crate::analyze::oom::{OomOptions, SnapshotOom};
use crate::analyze::whatif;
use crate::model::Snapshot;
use crate::replay::DeviceReplay;
use crate::vocab::advice;

/// The allocator setting a recommendation sets (`expandable_segments:True`,
/// `max_split_size_mb:N`), if it sets one that exists in this PyTorch.
fn setting_of(action: &str) -> Option<String> {
    if action.contains("upgrade") {
        return None;
    }
    if action.contains("expandable_segments:True") {
        return Some("expandable_segments:True".into());
    }
    let at = action.find("max_split_size_mb:")? + "max_split_size_mb:".len();
    let mb: String = action[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!mb.is_empty()).then(|| format!("max_split_size_mb:{mb}"))
}

/// Adds to each allocator-setting fix what replaying the device's trace under that setting
/// predicts for the OOM (`memlens whatif`); nothing when the capacity is unknown.
pub fn predict(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &OomOptions,
    ooms: &mut [SnapshotOom],
) {
    let mut devices: Vec<u32> = ooms.iter().filter_map(|o| o.explained.device).collect();
    devices.dedup();
    for dev in devices {
        let mine = |o: &&mut SnapshotOom| o.explained.device == Some(dev);
        let mut sets: Vec<String> = ooms
            .iter_mut()
            .filter(mine)
            .flat_map(|o| {
                o.explained
                    .recommendations
                    .iter()
                    .filter_map(|r| setting_of(&r.action))
            })
            .collect();
        sets.sort();
        sets.dedup();
        if sets.is_empty() {
            continue;
        }
        let w = whatif::WhatifOptions {
            scenarios: sets,
            suggest: false,
            capacity: opts
                .capacity_bytes
                .map(|b| (b, opts.capacity_source.clone().unwrap_or_default())),
            only_device: Some(dev),
        };
        let Ok(report) = whatif::run(snap, replays, &w) else {
            continue;
        };
        let Some(d) = report
            .devices
            .first()
            .filter(|d| d.capacity.bytes.is_some())
        else {
            continue;
        };
        let base = &d.scenarios[0];
        for o in ooms.iter_mut().filter(mine) {
            let Some(event) = o.explained.event_index.map(|e| e as u32) else {
                continue;
            };
            for r in &mut o.explained.recommendations {
                let Some(set) = setting_of(&r.action) else {
                    continue;
                };
                let Some(s) = d.scenarios.iter().find(|s| s.set == set) else {
                    continue;
                };
                let listed = s.ooms as usize <= s.oom_events.len()
                    || s.oom_events.last().is_some_and(|&l| event < l);
                let avoids = listed && !s.oom_events.contains(&event);
                let peaks = format!(
                    "peak reserved {} → {}",
                    crate::units::iec_words(base.peak_reserved_bytes),
                    crate::units::iec_words(s.peak_reserved_bytes)
                );
                let mut words = if avoids {
                    format!("replaying the trace with {set}: the OOM at event {event} does not happen; {peaks}")
                } else {
                    format!("replaying the trace with {set}: the OOM at event {event} still happens; {peaks}")
                };
                let others = s.oom_events.iter().filter(|&&e| e != event).count() as u64
                    + s.ooms.saturating_sub(s.oom_events.len() as u64);
                if others > 0 {
                    words.push_str(&format!(
                        " ({} still fail{})",
                        crate::units::plural(others, "other request"),
                        if others == 1 { "s" } else { "" }
                    ));
                }
                r.predicted = Some(advice::Prediction {
                    set,
                    avoids_oom: avoids,
                    peak_reserved_bytes: base.peak_reserved_bytes,
                    predicted_peak_reserved_bytes: s.peak_reserved_bytes,
                    ooms: s.ooms,
                    words,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::setting_of;

    #[test]
    fn the_setting_is_read_from_the_fix() {
        assert_eq!(
            setting_of("Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the environment")
                .as_deref(),
            Some("expandable_segments:True")
        );
        assert_eq!(
            setting_of("Set PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512 before the process starts (or upgrade to PyTorch ≥ 2.1 and use expandable_segments:True, the stronger fix)"),
            None
        );
        assert_eq!(
            setting_of("Set PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:256").as_deref(),
            Some("max_split_size_mb:256")
        );
        assert_eq!(setting_of("Halve the micro-batch"), None);
    }
}
