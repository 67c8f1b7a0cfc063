//! The report of `memlens oom`, composed: the OOMs [`oom::find`] finds, the predicted outcome
//! of their allocator-setting fixes ([`predict`]), notes about the whole file, and — for the
//! page and `memlens oom` — the fit at each device's first OOM ([`attach_fit`]).

use crate::analyze::fit::{self, DeviceFit, FitOptions};
use crate::analyze::oom::{self, Headroom, OomOptions, Ooms, SnapshotOom};
use crate::analyze::pinners;
use crate::analyze::predict;
use crate::model::Snapshot;
use crate::replay::{DeviceReplay, MomentSpec};
use crate::vocab::advice::{Cost, Recommendation};
use serde::Serialize;

/// Every OOM in a snapshot: the numbers, the cause, what to change first; and every device's
/// headroom.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OomReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Every oom event, by device then event index.
    pub ooms: Vec<SnapshotOom>,
    /// Per device, how close it came (all devices).
    pub headroom: Vec<Headroom>,
    /// Device capacity used (`--capacity`/`--gpu`), `null` when not given.
    pub capacity_bytes: Option<u64>,
    /// Remarks about the whole file.
    pub notes: Vec<String>,
    /// Per device with an OOM, `memlens fit` at its first OOM: the fixes ranked with the bytes
    /// each saves there (filled by [`attach_fit`]; empty until then).
    pub fit: Vec<DeviceFit>,
}

/// Finds and explains every OOM, with the predicted outcome of the allocator-setting fixes.
pub fn run(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &OomOptions,
) -> Result<OomReport, String> {
    let Ooms { mut ooms, headroom } = oom::find(snap, replays, opts)?;
    predict::predict(snap, replays, opts, &mut ooms);
    pinners::at_ooms(snap, replays, &mut ooms);
    let mut notes = Vec::new();
    if ooms.is_empty() {
        notes.push(if snap.events.is_empty() {
            "no trace recorded (allocation history was off), so no oom event can be found; the headroom below is what the final state still says (`memlens frag` and `memlens top` read it in full); an OOM's own numbers need allocation history on in the run that hits it (`torch.cuda.memory._record_memory_history`)".into()
        } else if snap.devices.iter().all(|d| snap.device_trace(d).len() <= 1) {
            // `state` mode or max_entries=1 keeps one entry: an oom before it is gone too.
            "the trace holds at most one entry per device (history recorded in 'state' mode or with max_entries=1), so it cannot say whether the snapshot was taken at an out-of-memory error; the final state below still gives the headroom".into()
        } else {
            "no oom event in the trace: the snapshot was not taken at an out-of-memory error (or the ring buffer dropped it)".into()
        });
    }
    Ok(OomReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        ooms,
        headroom,
        capacity_bytes: opts.capacity_bytes,
        notes,
        fit: Vec::new(),
    })
}

/// Fills `report.fit` with `fit` at the first OOM of every device that has one, against the
/// capacity `oom` was given (else what the OOM implies): what `memlens oom` and the HTML
/// report show as ranked fixes with their savings.
pub fn attach_fit(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    report: &mut OomReport,
    capacity: Option<(u64, String)>,
) -> Result<(), String> {
    if report.ooms.is_empty() {
        return Ok(());
    }
    let opts = FitOptions {
        at: Some(MomentSpec::Oom(1)),
        capacity_bytes: capacity.as_ref().map(|c| c.0),
        capacity_source: capacity.map(|c| c.1),
    };
    let has_oom = |d: u32| report.ooms.iter().any(|o| o.explained.device == Some(d));
    let fits = fit::run_with(snap, replays, &opts, &report.ooms, &has_oom)?;
    report.fit = fits
        .devices
        .into_iter()
        .filter(|d| d.moment == "oom")
        .collect();
    for o in &mut report.ooms {
        let at = |d: &&DeviceFit| {
            Some(d.device) == o.explained.device
                && Some(d.at.event_index) == o.explained.event_index.map(|i| i as i64)
        };
        if let Some(d) = report.fit.iter().find(at) {
            o.explained.recommendations = one_list(d, &o.explained.recommendations);
        }
    }
    Ok(())
}

/// The OOM's recommendations as the one ranked list: `fit`'s fixes at this OOM, in its
/// order and under its ids, each keeping the allocator replay's prediction the diagnosis
/// attached to the same id.
fn one_list(d: &DeviceFit, diagnosed: &[Recommendation]) -> Vec<Recommendation> {
    d.fixes
        .iter()
        .map(|f| Recommendation {
            id: f.id,
            action: f.action.clone(),
            cost: match f.cost {
                "free" => Cost::Free,
                "slower" => Cost::Speed,
                _ => Cost::Results,
            },
            why: f.evidence.clone(),
            predicted: diagnosed
                .iter()
                .find(|r| r.id == f.id)
                .and_then(|r| r.predicted.clone()),
            saves_bytes: (!f.for_verdict).then_some(f.saves_bytes),
        })
        .collect()
}
