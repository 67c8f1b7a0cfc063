//! A snapshot measured at one moment, with call sites normalized so that two snapshots (two
//! commits, two ranks, two machines) can be compared: the common input of `diff`, `check` and
//! `batch`.
//!
//! In: a [`Snapshot`], its replays and [`ProfileOptions`]. Out: per device the moment, live
//! requested bytes, reserved bytes and fragmentation there, whether those live bytes were
//! recorded at that moment ([`Unrecorded`]: no trace, or a trace without allocator activity at
//! `peak`), and the live bytes per normalized site (or stack), summed over devices.
//!
//! Normalization (never by address), of a Windows path as of a POSIX one (`\` becomes `/`
//! first, so a label reads the same whichever system recorded it and two runs' keys compare):
//! - a path inside `site-packages/` or `dist-packages/` keeps only what follows the last one
//!   (`transformers/models/llama/modeling_llama.py`);
//! - a path under the snapshot's *root* — the longest common directory of its user files
//!   (absolute, not native, not in torch, not in a package directory or the standard library) —
//!   loses the root (`/home/alice/proj/train.py` → `train.py`);
//! - a standard-library path keeps what follows `lib/pythonX.Y/` (a Windows install's `Lib\`:
//!   [`sites::kinds::stdlib_rest`]);
//! - a frame is `path:line:function`, or `path:function` with `ignore_lines`.
//!
//! Memory alive before the trace with no stack recorded is keyed by its likely kind
//! (`<before trace, no stack> likely parameters`, [`crate::analyze::pretrace`]) on both sides, so two
//! runs' pre-trace memory compares as one row per kind, never as `<no frames>`.

use crate::analyze::frag::{self, FragOptions};
mod keyer;
pub mod moments;

pub use keyer::Keyer;

use crate::analyze::pretrace::{Kinds, Pretrace};
use crate::model::{Snapshot, StackId};
use crate::replay::{self, state, DeviceReplay, Moment, MomentSpec};
use crate::vocab::sites::{self, SiteOptions, NO_FRAMES};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;

/// What allocations are keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SiteKey {
    /// The normalized site frame (`train.py:44:build_rope_cache`).
    #[default]
    Site,
    /// The normalized Python frames of the whole stack, innermost first, joined by ` < `.
    Stack,
}

/// Options of [`profile`].
#[derive(Clone, Copy, Debug)]
pub struct ProfileOptions {
    /// The moment of every device (`peak`: each device's own peak).
    pub at: MomentSpec,
    /// Site or whole stack.
    pub key: SiteKey,
    /// Drop line numbers from keys.
    pub ignore_lines: bool,
    /// Site attribution.
    pub sites: SiteOptions,
    /// Also split the live bytes by category ([`crate::analyze::categories`]; costs a steps pass).
    pub categories: bool,
    /// With site keys: this many of the site's callers (the next Python frames outward, not
    /// native ones) join the key, `site < caller < caller` (`diff --frame-depth N`).
    pub frame_depth: usize,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            at: MomentSpec::Peak,
            key: SiteKey::Site,
            ignore_lines: false,
            sites: SiteOptions::default(),
            categories: false,
            frame_depth: 0,
        }
    }
}

/// Bytes and allocations of one key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SiteTotal {
    /// Live requested bytes.
    pub bytes: u64,
    /// Live allocations.
    pub count: u64,
}

/// One device at the moment.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceProfile {
    /// Device index.
    pub device: u32,
    /// `trace` or `final_state` (no trace: the recorded final blocks).
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["trace", "final_state"])))]
    pub basis: &'static str,
    /// The moment measured.
    pub at: Moment,
    /// Live requested bytes at the moment.
    pub live_bytes: u64,
    /// Reserved bytes at the moment (replayed; the final segments without a trace).
    pub reserved_bytes: u64,
    /// Highest reserved bytes over the trace (the final reserved without a trace).
    pub peak_reserved_bytes: u64,
    /// `total.fragmentation` of [`frag`] at the moment (1 − largest free / free).
    pub fragmentation: f64,
    /// Reserved but unallocated bytes at the moment (`total.free_bytes` of [`frag`]: the
    /// inactive blocks of the reserved segments): fragmentation as bytes.
    pub free_bytes: u64,
    /// Why `live_bytes` is not what was recorded at the moment, when it is not (see
    /// [`Unrecorded`]); `None` when it is: a trace recording the moment, or `end`, which the
    /// final state is.
    pub unrecorded: Option<Unrecorded>,
    /// Why the final segments do not bound this device's reserved bytes, when they do not
    /// (see [`Uncovered`]); `None` when they cover what the trace leaves live.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Uncovered"))]
    pub uncovered: Option<Uncovered>,
    /// Live bytes per key on this device.
    pub sites: BTreeMap<String, SiteTotal>,
    /// The keys of memory alive before the trace with no stack ([`crate::analyze::pretrace`]) and
    /// what the category rules say of it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pretrace: BTreeMap<String, Pretrace>,
}

/// Why a device's live bytes at the moment were not recorded, so that a budget on them
/// (`check --max-peak`, `--baseline`) has nothing to measure on that device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Unrecorded {
    /// One line naming the device and what is missing, e.g. `no trace on device 0: the peak
    /// was not recorded`.
    pub reason: String,
    /// True when `live_bytes` (the final state) is still at most the moment's value — at
    /// `peak`, since no state exceeds the peak — so a budget it already breaks is broken.
    pub lower_bound: bool,
}

/// The final segments of a traced device do not cover what its trace leaves live (the
/// segment list is empty or partial, see [`crate::model::coverage`]): its reserved bytes and
/// fragmentation are not measured, only bounded from below, and its live bytes lack what was
/// live before the trace in the unlisted segments, so they are a lower bound too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Uncovered {
    /// One line naming the device and by how much the segments fall short.
    pub reason: String,
    /// The least the highest reserved bytes over the trace can be: the replayed reserved
    /// bytes, the live bytes at the peak and at the end, whichever is most (reserved bytes
    /// never fall below live ones).
    pub peak_reserved_floor: u64,
}

/// True when a trace records allocator activity that moves live bytes (an alloc or a free); a
/// trace without any (PyTorch 2.0's single `snapshot` entry of `max_entries=1`) only repeats
/// the final state, so it recorded no peak.
pub fn records_activity(trace: &[crate::model::TraceEvent]) -> bool {
    use crate::model::Action;
    trace.iter().any(|e| {
        matches!(
            e.action,
            Action::Alloc | Action::FreeCompleted | Action::Free
        )
    })
}

/// What names the moment in a reason: `the peak`, `the moment oom`.
fn moment_words(at: MomentSpec) -> String {
    match at {
        MomentSpec::Peak => "the peak".into(),
        other => format!("the moment {other}"),
    }
}

/// A snapshot measured at one moment.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Profile {
    /// The moment asked for.
    pub moment: String,
    /// The stripped common directory of user files, if any.
    pub root: Option<String>,
    /// Devices with segments or trace events, by id.
    pub devices: Vec<DeviceProfile>,
    /// Live bytes per key, summed over devices.
    pub sites: BTreeMap<String, SiteTotal>,
    /// Live bytes per category summed over devices, when asked for and available.
    pub categories: Option<BTreeMap<String, SiteTotal>>,
    /// What limits the answer.
    pub notes: Vec<String>,
    /// Whether the snapshot records any stack frame (without, every site is `<no frames>`).
    pub frames: bool,
    /// What the categories were computed from: `trace` (every device's trace), `final_state`
    /// (every device's final blocks, by their frames alone) or `mixed`; `None` without
    /// categories.
    pub categories_basis: Option<&'static str>,
    /// The keys of memory alive before the trace with no stack, over devices, and what the
    /// category rules say of it (the first device's verdict where devices differ).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pretrace: BTreeMap<String, Pretrace>,
}

impl Profile {
    /// Σ live bytes over devices.
    pub fn live_bytes(&self) -> u64 {
        self.devices.iter().map(|d| d.live_bytes).sum()
    }

    /// Σ reserved bytes at the moment over devices.
    pub fn reserved_bytes(&self) -> u64 {
        self.devices.iter().map(|d| d.reserved_bytes).sum()
    }

    /// Σ reserved but unallocated bytes at the moment over devices.
    pub fn free_bytes(&self) -> u64 {
        self.devices.iter().map(|d| d.free_bytes).sum()
    }

    /// The highest fragmentation of any device (0 without devices).
    pub fn fragmentation(&self) -> f64 {
        self.devices
            .iter()
            .map(|d| d.fragmentation)
            .fold(0.0, f64::max)
    }

    /// The device with the most live bytes (lowest id on ties).
    pub fn biggest_device(&self) -> Option<&DeviceProfile> {
        self.devices.iter().rev().max_by_key(|d| d.live_bytes)
    }

    /// The biggest keys (see [`sorted_sites`]).
    pub fn top_sites(&self, n: usize) -> Vec<(String, SiteTotal)> {
        sorted_sites(&self.sites, n)
    }
}

/// The biggest entries of a site map: bytes descending, then named sites before the
/// labels of memory no frame names (`<no frames>`, `<before trace, no stack> likely ...`),
/// then key ascending.
pub fn sorted_sites(map: &BTreeMap<String, SiteTotal>, n: usize) -> Vec<(String, SiteTotal)> {
    let unnamed = |k: &str| k == NO_FRAMES || k.starts_with(crate::analyze::pretrace::LABEL);
    let mut v: Vec<(String, SiteTotal)> = map.iter().map(|(k, t)| (k.clone(), *t)).collect();
    v.sort_by(|a, b| {
        b.1.bytes
            .cmp(&a.1.bytes)
            .then_with(|| unnamed(&a.0).cmp(&unnamed(&b.0)))
            .then_with(|| a.0.cmp(&b.0))
    });
    v.truncate(n);
    v
}

/// True for files of installed packages and the standard library ([`sites::kinds::is_library`]).
fn is_library(path: &str) -> bool {
    sites::kinds::is_library(path)
}

fn is_absolute(path: &str) -> bool {
    path.starts_with('/') || (path.len() > 2 && path.as_bytes()[1] == b':')
}

/// The longest common directory (ending in `/`) of `paths`; `None` for none or no common one.
pub fn common_root<'a>(paths: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut root: Option<String> = None;
    for p in paths {
        let dir = match p.rfind('/') {
            Some(i) => &p[..=i],
            None => return None,
        };
        root = Some(match root {
            None => dir.to_string(),
            Some(r) => {
                let mut end = 0;
                for ((i, a), b) in r.char_indices().zip(dir.chars()) {
                    if a != b {
                        break;
                    }
                    if a == '/' {
                        end = i + 1;
                    }
                }
                r[..end].to_string()
            }
        });
    }
    root.filter(|r| r.len() > 1)
}

/// The root of a snapshot: the common directory of its user files (see the module doc).
pub fn snapshot_root(snap: &Snapshot) -> Option<String> {
    let mut files: Vec<&str> = Vec::new();
    let mut seen = rustc_hash::FxHashSet::default();
    for i in 0..snap.frames.len() {
        let f = snap.frames.get(crate::model::FrameId(i as u32));
        if !seen.insert(f.filename) {
            continue;
        }
        files.push(snap.strings.get(f.filename));
    }
    user_root(files)
}

/// The common directory of the user files among `files` (as recorded, `\` or `/`): absolute,
/// not native, not in torch, not in a package directory or the standard library; written
/// with `/`.
fn user_root<'a>(files: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let user: Vec<String> = files
        .into_iter()
        .map(|f| f.replace('\\', "/"))
        .filter(|p| is_absolute(p) && !sites::is_native(p) && !sites::is_torch(p) && !is_library(p))
        .collect();
    common_root(user.iter().map(String::as_str))
}

/// `path` normalized (see the module doc) against `root`.
pub fn normalize_path(path: &str, root: Option<&str>) -> String {
    let p = path.replace('\\', "/");
    for marker in ["site-packages/", "dist-packages/"] {
        if let Some(i) = p.rfind(marker) {
            return p[i + marker.len()..].to_string();
        }
    }
    if let Some(rest) = root.and_then(|r| p.strip_prefix(r)) {
        return rest.to_string();
    }
    if let Some(rest) = sites::kinds::stdlib_rest(&p) {
        return rest.to_string();
    }
    p
}

/// A normalized frame: `path:line:function`, or `path:function` without lines.
pub fn normalize_frame(
    snap: &Snapshot,
    frame: &crate::model::Frame,
    root: Option<&str>,
    ignore_lines: bool,
) -> String {
    let path = normalize_path(snap.strings.get(frame.filename), root);
    let name = snap.strings.get(frame.name);
    if ignore_lines {
        format!("{path}:{name}")
    } else {
        format!("{path}:{}:{name}", frame.line)
    }
}

/// A site label as other analyses write it (`filename:line:name`, the filename as recorded)
/// normalized like [`normalize_frame`]; `<no frames>` and other labels without two `:` stay.
pub fn normalize_label(label: &str, root: Option<&str>, ignore_lines: bool) -> String {
    let mut parts = label.rsplitn(3, ':');
    let (Some(name), Some(line), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
        return label.to_string();
    };
    if line.parse::<i64>().is_err() {
        return label.to_string();
    }
    let path = normalize_path(file, root);
    if ignore_lines {
        format!("{path}:{name}")
    } else {
        format!("{path}:{line}:{name}")
    }
}

/// Whether `segments` (one device's) cover what its replay `r` leaves live at the end of the
/// trace; when they do not, the reason and the floor of the highest reserved bytes.
fn uncovered(
    segments: &[crate::model::Segment],
    r: &DeviceReplay,
    peak_reserved_bytes: u64,
) -> Option<Uncovered> {
    use crate::replay::{Origin, NEVER};
    let live_end = r
        .allocations
        .iter()
        .filter(|a| a.origin == Origin::Trace && a.end == NEVER)
        .map(|a| (a.addr, a.size));
    let c = crate::model::coverage::of_live(segments, live_end);
    if c.covered() {
        return None;
    }
    let iec = crate::units::iec;
    Some(Uncovered {
        reason: format!(
            "the segments of device {} do not cover its trace: {} it leaves live ({} allocation{}) lie{} in no segment ({} reserved listed)",
            r.device,
            iec(c.uncovered_bytes),
            c.uncovered_allocations,
            if c.uncovered_allocations == 1 { "" } else { "s" },
            if c.uncovered_allocations == 1 { "s" } else { "" },
            iec(c.segment_bytes),
        ),
        peak_reserved_floor: peak_reserved_bytes
            .max(r.peak_bytes)
            .max(c.reserved_floor()),
    })
}

/// What one device holds at the moment before it is keyed: bytes per stack, and per label
/// those of allocations older than the trace.
#[derive(Default)]
struct Held {
    per_stack: FxHashMap<StackId, SiteTotal>,
    older: BTreeMap<String, SiteTotal>,
    pretrace: BTreeMap<String, Pretrace>,
}

impl Held {
    /// Counts one allocation of `bytes` made at `stack`.
    fn add(&mut self, stack: StackId, bytes: u64) {
        let e = self.per_stack.entry(stack).or_default();
        e.bytes += bytes;
        e.count += 1;
    }

    /// `d` with its sites (keyed by `keyer`, older allocations under their labels) and the
    /// kinds of its older allocations.
    fn into_device(self, mut d: DeviceProfile, keyer: &Keyer) -> DeviceProfile {
        d.sites = keyer.by_key(self.per_stack);
        for (k, t) in self.older {
            let e = d.sites.entry(k).or_default();
            e.bytes += t.bytes;
            e.count += t.count;
        }
        d.pretrace = self.pretrace;
        d
    }
}

/// Measures every device of `snap` at `opts.at`. Devices without a trace are measured at their
/// final state (marked [`Unrecorded`] unless the moment is `end`); with `oom`, traced devices
/// without an oom event are left out (an error when no device has one).
pub fn profile(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &ProfileOptions,
) -> Result<Profile, String> {
    let keyer = Keyer::new(snap, *opts);
    let mut devices = Vec::new();
    let mut notes = Vec::new();
    let mut missing = Vec::new();
    for dev in &snap.devices {
        let trace = snap.device_trace(dev);
        let segments = snap.device_segments(dev);
        if trace.is_empty() && segments.is_empty() {
            continue;
        }
        let mut held = Held::default();
        let d = match replays.iter().find(|r| r.device == dev.id) {
            Some(r) => {
                let at = match replay::resolve_in(snap, opts.at, r, trace) {
                    Ok(at) => at,
                    Err(m) if matches!(opts.at, MomentSpec::Oom(_)) => {
                        missing.push(m);
                        continue;
                    }
                    Err(m) => return Err(m),
                };
                traced_device(snap, dev, r, at, opts, &mut held)
            }
            None => final_state_device(snap, dev, opts, &mut held, &mut notes),
        };
        devices.push(held.into_device(d, &keyer));
    }
    if !missing.is_empty() {
        if devices.is_empty() {
            return Err(missing.join("; "));
        }
        notes.extend(missing.into_iter().map(|m| format!("{m}: device left out")));
    }
    let (sites, pretrace) = all_sites(&devices);
    let (categories, categories_basis) = if opts.categories {
        categories_of(snap, replays, &devices, opts, &mut notes)
    } else {
        (None, None)
    };
    Ok(Profile {
        moment: opts.at.to_string(),
        root: keyer.root().map(str::to_string),
        devices,
        sites,
        categories,
        notes,
        frames: snap.has_frames(),
        categories_basis,
        pretrace,
    })
}

/// Traced device `dev` measured after event `at` of its replay `r`, keyed as `opts` says:
/// what `diff` compares at the step where two runs part most.
pub fn device_at(
    snap: &Snapshot,
    dev: &crate::model::Device,
    r: &DeviceReplay,
    at: i64,
    opts: &ProfileOptions,
) -> DeviceProfile {
    let keyer = Keyer::new(snap, *opts);
    let mut held = Held::default();
    let d = traced_device(snap, dev, r, at, opts, &mut held);
    held.into_device(d, &keyer)
}

/// A traced device measured after event `at` of its replay `r`; its live allocations go to
/// `held`.
fn traced_device(
    snap: &Snapshot,
    dev: &crate::model::Device,
    r: &DeviceReplay,
    at: i64,
    opts: &ProfileOptions,
    held: &mut Held,
) -> DeviceProfile {
    let trace = snap.device_trace(dev);
    let kinds = Kinds::of(snap, r, trace);
    for a in r.live_allocations(at) {
        match kinds.of_alloc(snap, a) {
            Some(p) => {
                let key = p.label();
                let e = held.older.entry(key.clone()).or_default();
                e.bytes += a.size;
                e.count += 1;
                held.pretrace.entry(key).or_insert_with(|| p.clone());
            }
            None => held.add(a.stack, a.size),
        }
    }
    let st = state::state_at(snap, dev, at);
    let moment = replay::moment(trace, at);
    let f = frag::analyze_state(&st, moment, &FragOptions::default());
    let unrecorded = (opts.at == MomentSpec::Peak && !records_activity(trace))
        .then(|| Unrecorded {
            reason: format!(
                "the trace of device {} records no allocation or free ({}): the peak was not recorded",
                dev.id,
                if trace.len() == 1 { "1 entry".to_string() } else { format!("{} entries", trace.len()) }
            ),
            lower_bound: true,
        });
    let peak_reserved_bytes = r
        .reserved
        .iter()
        .copied()
        .fold(r.initial_reserved, u64::max);
    DeviceProfile {
        device: dev.id,
        basis: "trace",
        at: moment,
        live_bytes: r.live_at(at),
        reserved_bytes: r.reserved_at(at),
        peak_reserved_bytes,
        fragmentation: f.total.fragmentation,
        free_bytes: f.total.free_bytes,
        unrecorded,
        uncovered: uncovered(snap.device_segments(dev), r, peak_reserved_bytes),
        sites: BTreeMap::new(),
        pretrace: BTreeMap::new(),
    }
}

/// A device without a trace measured at its final state; its live blocks go to `held`.
fn final_state_device(
    snap: &Snapshot,
    dev: &crate::model::Device,
    opts: &ProfileOptions,
    held: &mut Held,
    notes: &mut Vec<String>,
) -> DeviceProfile {
    let mut live = 0;
    for b in snap.live_blocks(dev) {
        held.add(b.stack, b.requested_size);
        live += b.requested_size;
    }
    let st = state::state_at(snap, dev, -1);
    let moment = Moment {
        event_index: -1,
        time_us: None,
    };
    let f = frag::analyze_state(&st, moment, &FragOptions::default());
    if opts.at != MomentSpec::End {
        notes.push(format!(
            "device {} has no trace: measured at its final state",
            dev.id
        ));
    }
    DeviceProfile {
        device: dev.id,
        basis: "final_state",
        at: moment,
        live_bytes: live,
        reserved_bytes: f.total.reserved_bytes,
        peak_reserved_bytes: f.total.reserved_bytes,
        fragmentation: f.total.fragmentation,
        free_bytes: f.total.free_bytes,
        unrecorded: (opts.at != MomentSpec::End).then(|| Unrecorded {
            reason: format!(
                "no trace on device {}: {} was not recorded",
                dev.id,
                moment_words(opts.at)
            ),
            lower_bound: opts.at == MomentSpec::Peak,
        }),
        uncovered: None,
        sites: BTreeMap::new(),
        pretrace: BTreeMap::new(),
    }
}

/// The devices' sites summed, and the kinds of their older allocations.
fn all_sites(
    devices: &[DeviceProfile],
) -> (BTreeMap<String, SiteTotal>, BTreeMap<String, Pretrace>) {
    let mut sites: BTreeMap<String, SiteTotal> = BTreeMap::new();
    let mut pretrace: BTreeMap<String, Pretrace> = BTreeMap::new();
    for d in devices {
        for (k, t) in &d.sites {
            let e = sites.entry(k.clone()).or_default();
            e.bytes += t.bytes;
            e.count += t.count;
        }
        for (k, p) in &d.pretrace {
            pretrace.entry(k.clone()).or_insert_with(|| p.clone());
        }
    }
    (sites, pretrace)
}

/// The measured devices' categories summed, with their basis (`mixed` when the devices'
/// differ); none, and a note, when `categories` fails.
fn categories_of(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    devices: &[DeviceProfile],
    opts: &ProfileOptions,
    notes: &mut Vec<String>,
) -> (Option<BTreeMap<String, SiteTotal>>, Option<&'static str>) {
    let copts = crate::analyze::categories::CategoryOptions {
        at: opts.at,
        ..Default::default()
    };
    let included: Vec<DeviceReplay> = replays
        .iter()
        .filter(|r| devices.iter().any(|d| d.device == r.device))
        .cloned()
        .collect();
    match crate::analyze::categories::run(snap, &included, &copts) {
        Ok(c) => {
            let mut m: BTreeMap<String, SiteTotal> = BTreeMap::new();
            for row in c.devices.iter().flat_map(|d| &d.categories) {
                let e = m.entry(row.category.clone()).or_default();
                e.bytes += row.bytes;
                e.count += row.count;
            }
            let bases: std::collections::BTreeSet<&str> =
                c.devices.iter().map(|d| d.basis).collect();
            let basis = match bases.len() {
                1 => *bases.iter().next().expect("one basis"),
                _ => "mixed",
            };
            (Some(m), Some(basis))
        }
        Err(m) => {
            notes.push(format!("categories unavailable: {m}"));
            (None, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_lose_package_dirs_and_the_root() {
        let root = Some("/home/u/proj/");
        assert_eq!(
            normalize_path(
                "/opt/conda/lib/python3.11/site-packages/transformers/x.py",
                root
            ),
            "transformers/x.py"
        );
        assert_eq!(
            normalize_path("/usr/lib/python3/dist-packages/a/b.py", root),
            "a/b.py"
        );
        assert_eq!(
            normalize_path("/home/u/proj/pkg/train.py", root),
            "pkg/train.py"
        );
        assert_eq!(
            normalize_path("/usr/lib/python3.11/threading.py", root),
            "threading.py"
        );
        assert_eq!(
            normalize_path("C:\\w\\proj\\a.py", Some("C:/w/")),
            "proj/a.py"
        );
        assert_eq!(normalize_path("<string>", root), "<string>");
        assert_eq!(
            normalize_label("/home/u/proj/serve.py:42:infer_loop", root, false),
            "serve.py:42:infer_loop"
        );
        assert_eq!(
            normalize_label("/home/u/proj/serve.py:42:infer_loop", root, true),
            "serve.py:infer_loop"
        );
        assert_eq!(normalize_label(NO_FRAMES, root, false), NO_FRAMES);
    }

    #[test]
    fn windows_paths_lose_the_same_prefixes() {
        // The files of ZidongLiu__DeComFL__memory.pickle: a uv-installed Python's standard
        // library beside the project and its virtual environment.
        let files = [
            "C:\\Users\\Zidong\\AppData\\Roaming\\uv\\python\\cpython-3.10.19-windows-x86_64-none\\lib\\copy.py",
            "C:\\research\\DeComFL\\cezo_fl\\client.py",
            "C:\\research\\DeComFL\\cezo_fl\\util\\model_helpers.py",
            "C:\\research\\DeComFL\\decomfl_main.py",
            "C:\\research\\DeComFL\\.venv\\lib\\site-packages\\transformers\\modeling_utils.py",
            "C:\\research\\DeComFL\\.venv\\lib\\site-packages\\torch\\nn\\functional.py",
        ];
        let root = user_root(files);
        assert_eq!(root.as_deref(), Some("C:/research/DeComFL/"));
        let shown: Vec<String> = files
            .iter()
            .map(|f| normalize_path(f, root.as_deref()))
            .collect();
        assert_eq!(
            shown,
            [
                "copy.py",
                "cezo_fl/client.py",
                "cezo_fl/util/model_helpers.py",
                "decomfl_main.py",
                "transformers/modeling_utils.py",
                "torch/nn/functional.py",
            ]
        );
        assert_eq!(
            normalize_label(
                "C:\\research\\DeComFL\\.venv\\lib\\dist-packages\\transformers\\models\\opt\\modeling_opt.py:160:forward",
                root.as_deref(),
                false
            ),
            "transformers/models/opt/modeling_opt.py:160:forward"
        );
        // POSIX files keep their root as before.
        assert_eq!(
            user_root([
                "/usr/lib/python3.11/copy.py",
                "/home/u/p/a.py",
                "/home/u/p/b/c.py"
            ]),
            Some("/home/u/p/".into())
        );
    }

    #[test]
    fn common_roots_are_directories() {
        assert_eq!(
            common_root(["/home/u/proj/a.py", "/home/u/proj/pkg/b.py"]),
            Some("/home/u/proj/".into())
        );
        assert_eq!(
            common_root(["/home/u/proj/a.py", "/home/u/project/b.py"]),
            Some("/home/u/".into())
        );
        assert_eq!(common_root(["/a.py", "/b/c.py"]), None);
        assert_eq!(common_root(["/w/x.py"]), Some("/w/".into()));
        assert_eq!(common_root([]), None);
        assert!(is_library("/usr/lib/python3.10/runpy.py"));
        assert!(!is_library("/home/u/lib/pythonic/x.py"));
    }
}
