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
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceLoad {
    /// Device index.
    pub device: u32,
    /// Live requested bytes at the device's own peak (a device without a trace: its final
    /// live blocks).
    pub peak_bytes: u64,
    /// `trace`, or `final_state` for a device without a trace.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["trace", "final_state"])))]
    pub basis: &'static str,
}

/// A device holding far more than the others.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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

/// The accelerator a snapshot was taken on, where the file says it. No key names the device
/// type (CUDA, XPU and torch_npu write the same shape), so it is read from what the file
/// holds: the allocator's own frames (`c10::cuda::CUDACachingAllocator`,
/// `c10::xpu::XPUCachingAllocator`, `c10_npu::NPUCachingAllocator`), the Python package a frame
/// lives in (`torch/cuda/`, `torch/xpu/`, `torch_npu/`, `torch_mlu/`, `torch_musa/`), or the
/// allocator settings' key set (CUDA writes `PYTORCH_CUDA_ALLOC_CONF`; XPU only
/// `PYTORCH_ALLOC_CONF` and `expandable_segments`).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceType {
    /// `cuda`, `xpu`, `npu`, `mlu` or `musa`: the prefix of device names (`xpu:0`).
    pub name: &'static str,
    /// What says so, in words.
    pub evidence: String,
}

/// Marks of each device type in a frame's function name or file, most specific first.
const FRAME_MARKS: &[(&str, &[&str], &[&str])] = &[
    (
        "npu",
        &["c10_npu::", "NPUCachingAllocator"],
        &["torch_npu/"],
    ),
    (
        "mlu",
        &["torch_mlu::", "MLUCachingAllocator"],
        &["torch_mlu/"],
    ),
    (
        "musa",
        &["c10::musa::", "MUSACachingAllocator"],
        &["torch_musa/"],
    ),
    (
        "xpu",
        &["c10::xpu::", "XPUCachingAllocator"],
        &["torch/xpu/"],
    ),
    (
        "cuda",
        &["c10::cuda::", "CUDACachingAllocator"],
        &["torch/cuda/"],
    ),
];

/// The device type of `snap`, when its frames or settings say it; `None` otherwise (the page
/// and text then say "device N").
pub fn device_type(snap: &Snapshot) -> Option<DeviceType> {
    let mut seen = [false; FRAME_MARKS.len()];
    let mut example: [Option<String>; FRAME_MARKS.len()] = Default::default();
    for i in 0..snap.frames.len() {
        let f = snap.frames.get(crate::model::FrameId(i as u32));
        let name = snap.strings.get(f.name);
        let file = snap.strings.get(f.filename).replace('\\', "/");
        for (k, (_, names, files)) in FRAME_MARKS.iter().enumerate() {
            if seen[k] {
                continue;
            }
            if names.iter().any(|m| name.contains(m)) {
                seen[k] = true;
                example[k] = Some(name.to_string());
            } else if files.iter().any(|m| file.contains(m)) {
                seen[k] = true;
                example[k] = Some(file.clone());
            }
        }
    }
    if let Some(k) = seen.iter().position(|&s| s) {
        let what = example[k].take().unwrap_or_default();
        let what: String = what.chars().take(120).collect();
        return Some(DeviceType {
            name: FRAME_MARKS[k].0,
            evidence: format!("a recorded frame names {what}"),
        });
    }
    let settings = snap.allocator_settings.as_ref()?;
    let has = |key: &str| settings.iter().any(|(k, _)| k == key);
    if has("PYTORCH_CUDA_ALLOC_CONF") {
        return Some(DeviceType {
            name: "cuda",
            evidence: "allocator_settings has PYTORCH_CUDA_ALLOC_CONF, which CUDA writes".into(),
        });
    }
    let xpu_keys = ["PYTORCH_ALLOC_CONF", "expandable_segments"];
    if settings.len() == 2 && xpu_keys.iter().all(|k| has(k)) {
        return Some(DeviceType {
            name: "xpu",
            evidence: "allocator_settings has exactly PYTORCH_ALLOC_CONF and expandable_segments, which XPU writes".into(),
        });
    }
    None
}
