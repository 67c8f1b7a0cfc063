//! How the devices of one snapshot compare: one device holding far more than every other
//! (a `DataParallel` replica that gathers outputs, a pipeline stage with more layers, a rank
//! given the whole batch) is the first thing to fix in a multi-GPU job.

use crate::model::Snapshot;
use crate::replay::DeviceReplay;
use serde::Serialize;

/// A device holds far more than the others when its peak is at least this many times the
/// next largest.
pub const FAR_MORE: f64 = 2.0;

/// One device's load.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct DeviceLoad {
    /// Device index.
    pub device: u32,
    /// Live requested bytes at the device's own peak (a device without a trace: its final
    /// live blocks).
    pub peak_bytes: u64,
    /// `trace`, or `final_state` for a device without a trace.
    #[schemars(extend("enum" = ["trace", "final_state"]))]
    pub basis: &'static str,
}

/// A device holding far more than the others.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema, PartialEq)]
pub struct Imbalance {
    /// The device.
    pub device: u32,
    /// Its peak (live requested bytes).
    pub peak_bytes: u64,
    /// The device with the next largest peak.
    pub next_device: u32,
    /// That peak.
    pub next_peak_bytes: u64,
    /// `peak_bytes / next_peak_bytes` (at least [`FAR_MORE`], 2).
    pub ratio_to_next: f64,
    /// The device with the smallest peak.
    pub least_device: u32,
    /// That peak.
    pub least_peak_bytes: u64,
    /// `peak_bytes / least_peak_bytes`.
    pub ratio_to_least: f64,
    /// Every device with allocations, by device.
    pub loads: Vec<DeviceLoad>,
}

/// The loads of every device of `snap` that holds anything: its replay's peak, or its final
/// live blocks without a trace.
pub fn loads(snap: &Snapshot, replays: &[DeviceReplay]) -> Vec<DeviceLoad> {
    let mut out: Vec<DeviceLoad> = snap
        .devices
        .iter()
        .map(|dev| match replays.iter().find(|r| r.device == dev.id) {
            Some(r) => DeviceLoad {
                device: dev.id,
                peak_bytes: r.peak_bytes,
                basis: "trace",
            },
            None => DeviceLoad {
                device: dev.id,
                peak_bytes: snap.live_blocks(dev).map(|b| b.requested_size).sum(),
                basis: "final_state",
            },
        })
        .filter(|l| l.peak_bytes > 0)
        .collect();
    out.sort_by_key(|l| l.device);
    out
}

/// The device whose peak is at least [`FAR_MORE`] times every other device's, if any (two
/// devices with allocations at least).
pub fn imbalance(snap: &Snapshot, replays: &[DeviceReplay]) -> Option<Imbalance> {
    let loads = loads(snap, replays);
    if loads.len() < 2 {
        return None;
    }
    let mut by_peak: Vec<&DeviceLoad> = loads.iter().collect();
    by_peak.sort_by(|a, b| {
        b.peak_bytes
            .cmp(&a.peak_bytes)
            .then(a.device.cmp(&b.device))
    });
    let (top, next, least) = (by_peak[0], by_peak[1], by_peak[by_peak.len() - 1]);
    let ratio = top.peak_bytes as f64 / next.peak_bytes as f64;
    (ratio >= FAR_MORE).then(|| Imbalance {
        device: top.device,
        peak_bytes: top.peak_bytes,
        next_device: next.device,
        next_peak_bytes: next.peak_bytes,
        ratio_to_next: ratio,
        least_device: least.device,
        least_peak_bytes: least.peak_bytes,
        ratio_to_least: top.peak_bytes as f64 / least.peak_bytes as f64,
        loads: loads.clone(),
    })
}
