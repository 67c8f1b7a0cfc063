//! What the page's header says before any section: the capacity (given, or inferred at an
//! OOM, so the header never says "not known" beside an OOM card that names the GPU) and the
//! device the page opens on (the first OOM's, else the one with the highest peak).

use crate::analyze::oom::OomOptions;
use crate::compose::oom::OomReport;
use crate::replay::DeviceReplay;
use serde::Serialize;

/// The capacity the header shows, and where it came from.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ShownCapacity {
    /// Bytes.
    pub bytes: u64,
    /// `given` (`--capacity`, `--gpu`) or `inferred` (from an OOM's reserved + device free,
    /// matched to a GPU of the table, as `memlens oom` says).
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["given", "inferred"])))]
    pub basis: &'static str,
    /// In words: what was given (`--gpu H100`), or the OOM's device and the GPUs that match
    /// (`inferred at the OOM on device 0: V100 16GB`).
    pub source: String,
}

/// The capacity given, else the one the first OOM with an inferred capacity implies.
pub fn capacity(opts: &OomOptions, oom: Option<&OomReport>) -> Option<ShownCapacity> {
    if let Some(bytes) = opts.capacity_bytes {
        return Some(ShownCapacity {
            bytes,
            basis: "given",
            source: opts
                .capacity_source
                .clone()
                .unwrap_or_else(|| "given".into()),
        });
    }
    let (o, inf) = oom?
        .ooms
        .iter()
        .find_map(|o| Some((o, o.capacity_inferred.as_ref()?)))?;
    let names: Vec<&str> = inf.matches.iter().map(|m| m.name).collect();
    let on = o
        .explained
        .device
        .map_or(String::new(), |d| format!(" on device {d}"));
    Some(ShownCapacity {
        bytes: inf.capacity_bytes,
        basis: "inferred",
        source: if names.is_empty() {
            format!("inferred at the OOM{on}")
        } else {
            format!("inferred at the OOM{on}: {}", names.join(" or "))
        },
    })
}

/// The device the page opens on: the first OOM's, else the replayed device with the highest
/// peak (the first on ties), else `None` (the page's first device).
pub fn first_device(oom: Option<&OomReport>, replays: &[DeviceReplay]) -> Option<u32> {
    if let Some(d) = oom.and_then(|r| r.ooms.iter().find_map(|o| o.explained.device)) {
        return Some(d);
    }
    replays
        .iter()
        .rev()
        .max_by_key(|r| r.peak_bytes)
        .map(|r| r.device)
}
