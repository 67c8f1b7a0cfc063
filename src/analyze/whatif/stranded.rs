//! Stranded bytes at one moment under changes to the run: another allocator setting, or the
//! trace's requests reordered (allocations freed earlier or made up front). The price of a
//! fix for fragmentation, as the allocator replay measures it; and the probed replays
//! [`super::unreleasable_at`] reads (what stays reserved once the cache is released).

use super::{file_settings, va_bytes};
use crate::allocator::drive::{self, Outcome, Reorder, Scenario};
use crate::allocator::recorded;
use crate::model::Snapshot;
use crate::Error;

/// One change to the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// `PYTORCH_CUDA_ALLOC_CONF` settings applied over the file's (`expandable_segments:True`).
    Conf(String),
    /// The trace's requests replayed otherwise.
    Reorder(Reorder),
}

/// The free bytes the allocator replay leaves stranded (cached, not releasable) on `device`
/// after trace index `probe`: first under the file's settings and order, then under each
/// change. `None` when the device has no trace.
pub fn stranded_at(
    snap: &Snapshot,
    device: u32,
    probe: i64,
    changes: &[Change],
) -> Result<Option<Vec<u64>>, Error> {
    Ok(probed(snap, device, probe, changes, false)?.map(|runs| {
        runs.iter()
            .map(|o| o.stranded_at_probe.unwrap_or(0))
            .collect()
    }))
}

/// The replays behind [`stranded_at`] and [`super::unreleasable_at`], each stopped after
/// `probe` without a capacity: the file's settings and order first, then each change. A
/// setting run rebuilds the state before the trace under its settings (its live blocks
/// requested again, as a run with them from the start would hold it) when `repack_settings`,
/// else only when the segment kind changes. `None` when the device has no trace.
pub fn probed(
    snap: &Snapshot,
    device: u32,
    probe: i64,
    changes: &[Change],
    repack_settings: bool,
) -> Result<Option<Vec<Outcome>>, Error> {
    let Some(dev) = snap.device(device) else {
        return Ok(None);
    };
    if snap.device_trace(dev).is_empty() {
        return Ok(None);
    }
    let base = file_settings(snap);
    let rec = recorded::read(snap, dev, &base);
    let va_bytes = va_bytes(&rec, &None);
    let mut scenarios = vec![(base.clone(), false, Reorder::default())];
    for c in changes {
        scenarios.push(match c {
            Change::Conf(conf) => {
                let mut s = base.clone();
                s.apply(conf)?;
                let repack = repack_settings || s.expandable_segments != base.expandable_segments;
                (s, repack, Reorder::default())
            }
            Change::Reorder(r) => (base.clone(), false, r.clone()),
        });
    }
    let out = scenarios
        .into_iter()
        .map(|(settings, repack_start, mut reorder)| {
            reorder.stop_at_probe = true;
            drive::run(
                snap,
                &rec,
                &Scenario {
                    settings,
                    capacity: None,
                    va_bytes,
                    follow_recorded: false,
                    probe: Some(probe),
                    repack_start,
                    reorder,
                },
            )
        })
        .collect();
    Ok(Some(out))
}
