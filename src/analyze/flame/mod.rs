//! `memlens flame`: the chosen cost per whole stack, root first, ready for a flamegraph.

use crate::analyze::top::{self, Selection, TopOptions};
use crate::model::{Snapshot, StackId};
use crate::replay::{self, DeviceReplay, Moment};
use crate::vocab::sites::{self, StackView};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// A frame as a flamegraph shows it: `name (path:line)`, the path shortened after
/// `site-packages/` (or to its last two components), so the function name stays readable; a
/// C++ frame by its function's name without arguments ([`sites::cpp::short_name`]).
pub fn flame_label(snap: &Snapshot, f: crate::model::FrameId) -> String {
    let fr = snap.frames.get(f);
    let file = snap.strings.get(fr.filename);
    let name = snap.strings.get(fr.name);
    if sites::is_native_frame(file, name) {
        return sites::cpp::short_name(name).to_string();
    }
    let short = match file.rfind("-packages/") {
        Some(i) => &file[i + "-packages/".len()..],
        None => {
            let mut cut = file.len();
            for _ in 0..2 {
                match file[..cut].rfind('/') {
                    Some(i) => cut = i,
                    None => {
                        cut = 0;
                        break;
                    }
                }
            }
            file[cut..].trim_start_matches('/')
        }
    };
    format!("{} ({short}:{})", snap.strings.get(fr.name), fr.line)
}

/// One stack and its weight.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WeightedStack {
    /// Frames, outermost first ([`flame_label`]); `<no frames>` alone when none, or for memory
    /// alive before the trace with no stack, its label with the likely kind alone
    /// (`<before trace, no stack> likely parameters`, [`crate::analyze::pretrace`]).
    pub frames: Vec<String>,
    /// The cost.
    pub weight: u64,
}

/// One device's stacks.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceFlame {
    /// Device index.
    pub device: u32,
    /// The moment of a live cost.
    pub at: Moment,
    /// Unit of the weights.
    pub unit: &'static str,
    /// Σ weights.
    pub total: u64,
    /// Stacks, heaviest first (ties by frames).
    pub stacks: Vec<WeightedStack>,
}

/// The report.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FlameReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// The moment asked for.
    pub moment: String,
    /// Devices with a trace.
    pub devices: Vec<DeviceFlame>,
}

fn device_flame(
    snap: &Snapshot,
    device: u32,
    at: Moment,
    unit: &'static str,
    per_stack: FxHashMap<StackId, u64>,
    pretrace: FxHashMap<String, u64>,
    view: StackView,
) -> DeviceFlame {
    let mut merged: FxHashMap<Vec<String>, u64> = FxHashMap::default();
    for (label, w) in pretrace {
        *merged.entry(vec![label]).or_default() += w;
    }
    for (stack, w) in per_stack {
        let mut frames: Vec<String> = sites::shown_frames(snap, stack, view)
            .into_iter()
            .rev()
            .map(|f| flame_label(snap, f))
            .collect();
        if frames.is_empty() {
            frames.push(sites::NO_FRAMES.to_string());
        }
        *merged.entry(frames).or_default() += w;
    }
    let mut stacks: Vec<WeightedStack> = merged
        .into_iter()
        .map(|(frames, weight)| WeightedStack { frames, weight })
        .collect();
    stacks.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then_with(|| a.frames.cmp(&b.frames))
    });
    DeviceFlame {
        device,
        at,
        unit,
        total: stacks.iter().map(|s| s.weight).sum(),
        stacks,
    }
}

/// Collects the weighted stacks of every replayed device (`opts.by`/`limit` are ignored), and
/// the final live blocks of devices without a trace. Stacks hold the frames
/// `opts.sites.frames` names, Python and C++ in call order ([`sites::shown_frames`]), the
/// allocator's own frames only with `opts.allocator_frames`.
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &TopOptions,
) -> Result<FlameReport, String> {
    let view = StackView {
        frames: opts.sites.frames,
        allocator: opts.allocator_frames,
    };
    let mut devices = Vec::new();
    for r in replays {
        let dev = snap.device(r.device).expect("replayed device exists");
        let trace = snap.device_trace(dev);
        let Selection {
            at,
            items,
            unit,
            pretrace: kinds,
            ..
        } = top::select(snap, r, trace, opts)?;
        let mut per_stack: FxHashMap<StackId, u64> = FxHashMap::default();
        let mut pretrace: FxHashMap<String, u64> = FxHashMap::default();
        for it in items {
            match it.pretrace {
                Some(id) => *pretrace.entry(kinds.get(id).label()).or_default() += it.bytes,
                None => *per_stack.entry(it.stack).or_default() += it.bytes,
            }
        }
        devices.push(device_flame(
            snap,
            r.device,
            replay::moment(trace, at),
            unit,
            per_stack,
            pretrace,
            view,
        ));
    }
    // Devices without a trace: only the final state exists.
    for dev in snap.devices.iter().filter(|d| d.trace.is_empty()) {
        let mut per_stack: FxHashMap<StackId, u64> = FxHashMap::default();
        for b in snap.live_blocks(dev) {
            *per_stack.entry(b.stack).or_default() += b.requested_size;
        }
        devices.push(device_flame(
            snap,
            dev.id,
            Moment {
                event_index: -1,
                time_us: None,
            },
            "bytes",
            per_stack,
            FxHashMap::default(),
            view,
        ));
    }
    devices.sort_by_key(|d| d.device);
    Ok(FlameReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        moment: opts.at.to_string(),
        devices,
    })
}
