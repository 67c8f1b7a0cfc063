//! `memlens oom`: every `oom` event of a snapshot, with the state rebuilt at it, the four
//! numbers of the error message, the verdict and the fixes cheapest first.
//!
//! Snapshots do not record the GPU's capacity. Without `--gpu`/`--capacity`, an `oom` entry's
//! `device_free` plus what PyTorch reserved, plus a CUDA context, still implies it
//! ([`gpus::infer_capacity`]): the verdict is weighed against that, the matching GPUs are named,
//! and headroom is measured against it (against the per-process limit an OOM implies when there
//! is one; see [`implied_limit`]).
//!
//! This module finds the OOMs ([`find`]); the report of `memlens oom` — with the predicted
//! outcome of the allocator-setting fixes and the fit at each first OOM — is composed in
//! [`crate::compose::oom`].

use crate::analyze::explain::OomExplained;
use crate::analyze::frag::{self, FragOptions};
use crate::analyze::pretrace::Kinds;
use crate::analyze::top::{self, SiteRow, TopOptions};
use crate::model::{Action, BlockState, Device, PoolKind, SettingValue, Snapshot, TraceEvent};
use crate::replay::state::{self, AllocatorState};
use crate::replay::{self, DeviceReplay, MomentSpec};
use crate::vocab::advice::{self, Evidence};
use crate::vocab::gpus::{self, InferredCapacity};
use serde::Serialize;
use std::sync::Arc;

/// Options of `oom`.
#[derive(Clone, Debug, Default)]
pub struct OomOptions {
    /// Device capacity (`--capacity` or `--gpu`); snapshots do not record it.
    pub capacity_bytes: Option<u64>,
    /// Where the capacity came from, in words.
    pub capacity_source: Option<String>,
    /// Sites listed per OOM.
    pub sites: usize,
}

/// One OOM found in a snapshot.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SnapshotOom {
    /// The message-shaped fields shared with `memlens explain` (contract fields first).
    #[serde(flatten)]
    pub explained: OomExplained,
    /// `time_us` of the oom event.
    pub time_us: Option<i64>,
    /// The request as the allocator rounded it (`oom.size`); `requested_bytes` is the segment
    /// size it then needed, as "Tried to allocate" prints it.
    pub request_rounded_bytes: u64,
    /// Live requested bytes at the OOM.
    pub live_requested_bytes: u64,
    /// Cached free bytes in the pool the request needed.
    pub pool_free_bytes: u64,
    /// What was live at the OOM, by call site.
    pub live_sites: Vec<SiteRow>,
    /// The per-process limit this OOM implies, when the device still had the request's size
    /// free (see [`implied_limit`]); `null` otherwise.
    pub implied_limit: Option<ImpliedLimit>,
    /// The capacity inferred from reserved + device free when none was given (then also in
    /// `capacity_bytes`, with `capacity_source` saying so); `null` otherwise.
    pub capacity_inferred: Option<InferredCapacity>,
    /// The phase the OOM struck in (`crate::analyze::phase`); `null` for a device without a
    /// replay.
    pub phase: Option<crate::analyze::phase::MomentPhase>,
    /// When the verdict is fragmentation: what pins the stranded bytes at the OOM, the
    /// segments they split and the fixes priced by the allocator replay (filled by the
    /// composed report, `compose::oom`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinners: Option<frag::pinned::DevicePinners>,
}

/// Bounds of a per-process limit (`set_per_process_memory_fraction`) that a snapshot implies
/// but does not record.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ImpliedLimit {
    /// The limit is at least this: the most PyTorch reserved before the OOM.
    pub at_least_bytes: u64,
    /// The limit is below this: reserved at the OOM plus the segment it needed.
    pub below_bytes: u64,
}

/// Headroom of a device, reported when it had no OOM.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Headroom {
    /// Device index.
    pub device: u32,
    /// Highest live requested bytes over the trace (final allocated bytes without a trace).
    pub peak_live_bytes: u64,
    /// Highest reserved bytes over the trace (final reserved without a trace).
    pub peak_reserved_bytes: u64,
    /// Reserved at the end.
    pub reserved_bytes: u64,
    /// Largest free cached block at the end.
    pub largest_free_block_bytes: u64,
    /// capacity − peak reserved, when the capacity is known; under a per-process limit an OOM
    /// implies, its lower bound − peak reserved; with an inferred capacity, reserved + free
    /// seen at the OOM − peak reserved (what PyTorch could still have reserved).
    pub headroom_bytes: Option<i64>,
    /// What `headroom_bytes` is measured against: `capacity` (given), `inferred_capacity` or
    /// `implied_limit`; `null` when it is unknown.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["capacity", "inferred_capacity", "implied_limit", null])))]
    pub headroom_basis: Option<&'static str>,
    /// The capacity (or limit, at least) it is measured against.
    pub capacity_bytes: Option<u64>,
    /// Where that figure comes from, in words.
    pub capacity_source: Option<String>,
    /// Under an implied limit: the most the headroom can be (the limit is below
    /// `limit_below_bytes`).
    pub headroom_at_most_bytes: Option<u64>,
    /// Under an implied limit: the bound the limit is below.
    pub limit_below_bytes: Option<u64>,
}

/// Every OOM of a snapshot and each device's headroom: what [`find`] returns and
/// [`crate::compose::oom::run`] completes into the report.
#[derive(Clone, Debug)]
pub struct Ooms {
    /// Every oom event, by device then event index.
    pub ooms: Vec<SnapshotOom>,
    /// Per device, how close it came (all devices).
    pub headroom: Vec<Headroom>,
}

const MIB: u64 = 1 << 20;

/// `get_allocation_size`: the segment a request of `rounded` bytes needs (snapshot-format.md §8).
pub fn segment_size_for(rounded: u64) -> u64 {
    if rounded <= MIB {
        2 * MIB
    } else if rounded < 10 * MIB {
        20 * MIB
    } else {
        rounded.div_ceil(2 * MIB) * 2 * MIB
    }
}

/// Whether the file ran with expandable segments: its `allocator_settings`, else its
/// `PYTORCH_CUDA_ALLOC_CONF`, else an expandable segment among its segments (`None`: unknown).
pub fn expandable_setting(snap: &Snapshot) -> Option<bool> {
    match snap.setting("expandable_segments") {
        Some(SettingValue::Bool(b)) => Some(*b),
        _ => match snap.setting("PYTORCH_CUDA_ALLOC_CONF") {
            Some(SettingValue::Text(t)) => {
                Some(t.replace(' ', "").contains("expandable_segments:True"))
            }
            _ => snap.segments.iter().any(|s| s.expandable).then_some(true),
        },
    }
}

/// Finds and explains every OOM (the allocator-setting fixes without their predicted
/// outcome: [`crate::analyze::predict`] adds it), and measures each device's headroom.
pub fn find(snap: &Snapshot, replays: &[DeviceReplay], opts: &OomOptions) -> Result<Ooms, String> {
    let expandable = expandable_setting(snap);
    let mut ooms = Vec::new();
    let mut headroom = Vec::new();
    for dev in &snap.devices {
        let trace = snap.device_trace(dev);
        let replay = replays.iter().find(|r| r.device == dev.id);
        // The likely kinds of pre-trace memory without a stack, made once per device.
        let mut kinds: Option<Arc<Kinds>> = None;
        // The phase of each OOM, from one context per device (built only when it has one).
        let has_oom = trace.iter().any(|e| e.action == Action::Oom);
        let steps = replay
            .filter(|_| has_oom)
            .map(|r| crate::replay::steps::find(snap, r));
        let ctx = replay.zip(steps.as_ref()).map(|(r, st)| {
            crate::analyze::categories::rules::Ctx::new(snap, trace, st, &[], &r.allocations)
        });
        for (k, (i, e)) in trace
            .iter()
            .enumerate()
            .filter(|(_, e)| e.action == Action::Oom)
            .enumerate()
        {
            let at = OomAt {
                dev,
                replay,
                nth: k,
                event: i as i64,
                e,
            };
            let mut o = explain(snap, &at, opts, expandable, &mut kinds)?;
            o.phase = ctx
                .as_ref()
                .zip(steps.as_ref())
                .map(|(c, st)| crate::analyze::phase::with_ctx(c, st, i as i64));
            ooms.push(o);
        }
        headroom.push(device_headroom(snap, dev, replay, opts));
    }
    measure_headroom(&mut headroom, &ooms);
    Ok(Ooms { ooms, headroom })
}

/// One oom event of a device's trace.
struct OomAt<'a> {
    dev: &'a Device,
    replay: Option<&'a DeviceReplay>,
    /// Its rank among the device's oom events (0: the first).
    nth: usize,
    /// Its trace index.
    event: i64,
    e: &'a TraceEvent,
}

/// Explains one oom event: the state there, the diagnosis, the live sites (with the kinds of
/// pre-trace memory, made once per device in `kinds`).
fn explain(
    snap: &Snapshot,
    at: &OomAt,
    opts: &OomOptions,
    expandable: Option<bool>,
    kinds: &mut Option<Arc<Kinds>>,
) -> Result<SnapshotOom, String> {
    let (dev, replay, i, e) = (at.dev, at.replay, at.event, at.e);
    let st = state::state_at(snap, dev, i);
    let rounded = e.size;
    let pool = if rounded <= MIB {
        PoolKind::Small
    } else {
        PoolKind::Large
    };
    let (allocated, reserved, pool_free, largest) = numbers(&st, pool, snap.event_stream(e));
    let requested = segment_size_for(rounded);
    let seen = e.device_free().map(|free| reserved.saturating_add(free));
    let inferred = match (opts.capacity_bytes, seen) {
        (None, Some(seen)) => gpus::infer_capacity(seen),
        _ => None,
    };
    let ev = Evidence {
        requested_bytes: Some(requested),
        implied_limit_bytes: implied_limit(replay, i, reserved, requested, e.device_free()),
        device_free_bytes: e.device_free(),
        capacity_bytes: opts.capacity_bytes,
        inferred_capacity: inferred.clone(),
        allocated_bytes: Some(allocated),
        reserved_unallocated_bytes: Some(reserved - allocated),
        largest_free_block_bytes: Some(largest),
        expandable_segments: expandable,
        expandable_segments_available: Some(true),
        ..Evidence::default()
    };
    let d = advice::diagnose(&ev);
    let live_sites = match replay {
        Some(r) => live_sites_at(snap, r, snap.device_trace(dev), at.nth, opts, kinds)?,
        None => Vec::new(),
    };
    let notes = oom_notes(d.notes, &st, opts, &inferred, seen);
    let (capacity, capacity_source) = match &inferred {
        Some(inf) => (Some(inf.capacity_bytes), Some(capacity_source_words(inf))),
        None => (opts.capacity_bytes, opts.capacity_source.clone()),
    };
    Ok(SnapshotOom {
        explained: OomExplained {
            device: Some(dev.id),
            event_index: Some(i as u64),
            requested_bytes: ev.requested_bytes,
            device_free_bytes: ev.device_free_bytes,
            reserved_bytes: Some(reserved),
            allocated_bytes: Some(allocated),
            largest_free_block_bytes: Some(largest),
            capacity_bytes: capacity,
            process_bytes: None,
            verdict: d.verdict,
            recommendations: d.recommendations,
            reserved_unallocated_bytes: Some(reserved - allocated),
            non_pytorch_bytes: d.non_pytorch_bytes,
            shortfall_bytes: d.shortfall_bytes,
            allowed_bytes: None,
            private_pool_bytes: None,
            other_processes: Vec::new(),
            process_bytes_inferred: false,
            backend: "CUDA".into(),
            wording: None,
            capacity_source,
            headline: d.headline,
            evidence: d.evidence_lines,
            notes,
            cannot_conclude: d.cannot_conclude,
        },
        time_us: e.time(),
        request_rounded_bytes: rounded,
        live_requested_bytes: replay.map_or(0, |r| r.live_at(i)),
        pool_free_bytes: pool_free,
        live_sites,
        implied_limit: ev
            .implied_limit_bytes
            .map(|(at_least_bytes, below_bytes)| ImpliedLimit {
                at_least_bytes,
                below_bytes,
            }),
        capacity_inferred: inferred,
        phase: None,
        pinners: None,
    })
}

/// The top sites live at the `nth` oom event (0: the first) of replay `r` of `trace`.
fn live_sites_at(
    snap: &Snapshot,
    r: &DeviceReplay,
    trace: &[TraceEvent],
    nth: usize,
    opts: &OomOptions,
    kinds: &mut Option<Arc<Kinds>>,
) -> Result<Vec<SiteRow>, String> {
    let kinds = kinds
        .get_or_insert_with(|| Arc::new(Kinds::of(snap, r, trace)))
        .clone();
    let opts = TopOptions {
        at: MomentSpec::Oom(nth + 1),
        limit: opts.sites,
        ..TopOptions::default()
    };
    Ok(top::device_top_with(snap, r, trace, &opts, kinds)?.sites)
}

/// An oom's remarks: the diagnosis's `notes`, then whether the state is rebuilt and what the
/// capacity could not be told from.
fn oom_notes(
    mut notes: Vec<String>,
    st: &AllocatorState,
    opts: &OomOptions,
    inferred: &Option<InferredCapacity>,
    seen: Option<u64>,
) -> Vec<String> {
    if !st.exact {
        notes.push("state rebuilt at the oom event by undoing the later trace; block sizes freed afterwards are estimates".into());
    }
    match (opts.capacity_bytes, inferred, seen) {
        (None, None, Some(seen)) => notes.push(format!(
            "reserved + device free at the oom ({}) matches no GPU of memlens's table within a CUDA context's share ({}): an unlisted GPU, or one whose memory is partly held by another process; pass --gpu NAME or --capacity SIZE to weigh real shortage against memory held elsewhere",
            crate::units::iec(seen),
            crate::units::iec(gpus::CONTEXT_MAX_BYTES)
        )),
        (None, None, None) => notes.push("the snapshot records neither the GPU's capacity nor, for this oom entry, the device's free memory: pass --gpu NAME or --capacity SIZE to weigh real shortage against fragmentation".into()),
        _ => {}
    }
    notes
}

/// How close a device came: its peaks and its final state (the headroom itself is measured
/// later, against the capacity or the ooms).
fn device_headroom(
    snap: &Snapshot,
    dev: &Device,
    replay: Option<&DeviceReplay>,
    opts: &OomOptions,
) -> Headroom {
    let trace = snap.device_trace(dev);
    let end = state::state_at(snap, dev, trace.len() as i64 - 1);
    let f = frag::analyze_state(
        &end,
        replay::moment(trace, trace.len() as i64 - 1),
        &FragOptions::default(),
    );
    let (peak_live, peak_reserved) = match replay {
        Some(r) => (
            r.peak_bytes,
            r.reserved
                .iter()
                .copied()
                .max()
                .unwrap_or(r.initial_reserved)
                .max(r.initial_reserved),
        ),
        None => (f.total.allocated_bytes, f.total.reserved_bytes),
    };
    Headroom {
        device: dev.id,
        peak_live_bytes: peak_live,
        peak_reserved_bytes: peak_reserved,
        reserved_bytes: f.total.reserved_bytes,
        largest_free_block_bytes: f.total.largest_free_block_bytes,
        headroom_bytes: opts.capacity_bytes.map(|c| c as i64 - peak_reserved as i64),
        headroom_basis: opts.capacity_bytes.map(|_| "capacity"),
        capacity_bytes: opts.capacity_bytes,
        capacity_source: opts.capacity_source.clone(),
        headroom_at_most_bytes: None,
        limit_below_bytes: None,
    }
}

/// `capacity_source` of an inferred capacity: how it was inferred and the GPUs it matches.
fn capacity_source_words(inf: &InferredCapacity) -> String {
    let names: Vec<&str> = inf.matches.iter().take(3).map(|g| g.name).collect();
    format!(
        "inferred from reserved + device free at the oom: {}",
        names.join(" or ")
    )
}

/// Headroom against what the OOMs imply, where no capacity was given: a device whose OOM
/// implies a per-process limit is measured against the limit's bounds; a device whose OOM gave
/// an inferred capacity against what PyTorch could reach there (reserved + free); the other
/// devices against the first inferred capacity, the same GPU model assumed.
fn measure_headroom(headroom: &mut [Headroom], ooms: &[SnapshotOom]) {
    let first_inferred = ooms
        .iter()
        .find_map(|o| Some((o.explained.device?, o.capacity_inferred.as_ref()?)));
    for h in headroom.iter_mut() {
        let own = ooms.iter().filter(|o| o.explained.device == Some(h.device));
        if let Some(l) = own.clone().find_map(|o| o.implied_limit) {
            h.headroom_bytes = Some(l.at_least_bytes as i64 - h.peak_reserved_bytes as i64);
            h.headroom_at_most_bytes =
                Some((l.below_bytes - 1).saturating_sub(h.peak_reserved_bytes));
            h.limit_below_bytes = Some(l.below_bytes);
            h.capacity_bytes = Some(l.at_least_bytes);
            h.capacity_source = Some(format!(
                "the per-process limit its oom implies (at least {}, below {})",
                crate::units::iec(l.at_least_bytes),
                crate::units::iec(l.below_bytes)
            ));
            h.headroom_basis = Some("implied_limit");
            continue;
        }
        if h.headroom_basis.is_some() {
            continue;
        }
        let names = |inf: &InferredCapacity| {
            let v: Vec<&str> = inf.matches.iter().take(3).map(|g| g.name).collect();
            v.join(" or ")
        };
        let (inf, source) = match own.clone().find_map(|o| o.capacity_inferred.as_ref()) {
            Some(inf) => (
                inf,
                format!(
                    "the capacity inferred from reserved + device free at its oom ({}); headroom is what PyTorch could still have reserved there",
                    names(inf)
                ),
            ),
            None => match first_inferred {
                Some((d, inf)) => (
                    inf,
                    format!(
                        "the capacity inferred from device {d}'s oom, the same GPU model assumed ({})",
                        names(inf)
                    ),
                ),
                None => continue,
            },
        };
        h.headroom_bytes = Some(inf.seen_bytes as i64 - h.peak_reserved_bytes as i64);
        h.capacity_bytes = Some(inf.capacity_bytes);
        h.capacity_source = Some(source);
        h.headroom_basis = Some("inferred_capacity");
    }
}

/// Bounds `(at_least, below)` of the per-process limit an `oom` event at `index` implies, when
/// the device still had the request's size free (`device_free`, read after the allocator's
/// last retry): then the allocator refused the memory itself, which only a limit set with
/// `set_per_process_memory_fraction` does (`alloc_block` checks reserved + size against it
/// before cudaMalloc). Every reserved level the trace reached before fit under the limit;
/// `reserved` + `requested` did not. `None` when the device was short itself, or when the
/// bounds contradict each other (a limit lowered at run time, a trace missing segments).
pub fn implied_limit(
    replay: Option<&DeviceReplay>,
    index: i64,
    reserved: u64,
    requested: u64,
    device_free: Option<u64>,
) -> Option<(u64, u64)> {
    if device_free? < requested {
        return None;
    }
    let before = replay.filter(|r| !r.reserved_incomplete).map_or(0, |r| {
        let upto = (index.max(0) as usize).min(r.reserved.len());
        r.reserved[..upto]
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(r.initial_reserved)
    });
    let at_least = before.max(reserved);
    let below = reserved.saturating_add(requested);
    (at_least < below).then_some((at_least, below))
}

/// (allocated as the message counts it, reserved, free in the request's pool, largest free
/// block in that pool) of a state; the pool is the default one on `stream`.
fn numbers(st: &AllocatorState, pool: PoolKind, stream: u64) -> (u64, u64, u64, u64) {
    let (mut allocated, mut reserved, mut pool_free, mut largest) = (0, 0, 0, 0);
    for s in &st.segments {
        reserved += s.size;
        let private = s.pool_id != (0, 0);
        for b in &s.blocks {
            match b.state {
                BlockState::ActiveAllocated => allocated += b.size,
                // Inactive blocks of private pools count as allocated in the message (§8).
                BlockState::Inactive if private => allocated += b.size,
                BlockState::Inactive if s.pool == pool && s.stream == stream => {
                    pool_free += b.size;
                    largest = largest.max(b.size);
                }
                _ => {}
            }
        }
    }
    (allocated, reserved, pool_free, largest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_implied_only_when_the_device_had_room() {
        // GIVEN 1.5 GiB reserved at the oom event, a 1 GiB request, no replay
        let (res, req) = (1536 * MIB, 1024 * MIB);
        // WHEN the device had room THEN the limit lies in [reserved, reserved + request)
        assert_eq!(
            implied_limit(None, 5, res, req, Some(100 * 1024 * MIB)),
            Some((res, res + req))
        );
        // WHEN the device itself was short (or its free memory is unknown) THEN nothing
        assert_eq!(implied_limit(None, 5, res, req, Some(512 * MIB)), None);
        assert_eq!(implied_limit(None, 5, res, req, None), None);
    }

    #[test]
    fn segment_sizes_follow_the_allocator() {
        assert_eq!(segment_size_for(512), 2 * MIB);
        assert_eq!(segment_size_for(MIB), 2 * MIB);
        assert_eq!(segment_size_for(1536 * 1024), 20 * MIB);
        assert_eq!(segment_size_for(10 * MIB), 10 * MIB);
        assert_eq!(segment_size_for(11 * MIB + 1), 12 * MIB);
    }
}
