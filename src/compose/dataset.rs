//! The rows `memlens batch --format parquet` writes for one snapshot: six tables whose
//! column names are the batch and report JSON's field names, sizes as int64 bytes.
//!
//! - `files`: one row per device of the file (one row with `device` null when the file has
//!   no device, its sizes 0; or when it could not be read: `ok` false, `error`, sizes null): `schema_version`,
//!   `memlens_version`, `file`, `sha256`, `rank`, `device`, `ok`, `error`,
//!   `allocator_settings` (JSON text), `peak_bytes` (live requested at the device's peak),
//!   `peak_event_index`, `peak_time_us`, `allocated_bytes` (rounded live bytes there),
//!   `reserved_bytes` (the most reserved over the trace), `fragmentation` (at the peak),
//!   `ooms`, `oom` (verdicts joined by `+`, or `none`), `top_site`, `top_site_bytes`,
//!   `warning_codes` (a list: the file's warnings for this device or for no device),
//!   `path_step` (the step its path names, `iteration_30/`), `tp`, `cp`, `ep`, `dp`, `pp`
//!   (the parallel coordinates its path names, `tp1_pp0`; null where it names none).
//! - `sites`: per device at its peak, per normalized site (as `diff` and `batch` key them)
//!   and category (`memlens categories`' rules): `file`, `device`, `moment` (`peak`),
//!   `site`, `category`, `bytes`, `count`. A site's rows add up to its bytes in `batch`'s
//!   profile.
//! - `timeline`: `memlens timeline`'s points (2000 per device, every bucket's maximum kept):
//!   `file`, `device`, `event_index`, `time_us`, `live_requested_bytes`, `allocated_bytes`,
//!   `reserved_bytes`.
//! - `ooms`: per oom event, `memlens oom`'s numbers: `file`, `device`, `event_index`,
//!   `time_us`, `requested_bytes`, `request_rounded_bytes`, `device_free_bytes`,
//!   `reserved_bytes`, `allocated_bytes`, `live_requested_bytes`, `largest_free_block_bytes`,
//!   `verdict`.
//! - `leaks`: per `memlens leaks` finding: `file`, `device`, `kind`, `site`,
//!   `bytes_per_step`, `steps`, `live_bytes_at_end`, `tensors_per_step`, `tensors_at_end`,
//!   `fit_r2`.
//! - `steps`: per device, per step its trace marks (`memlens timeline`'s steps): `file`,
//!   `device`, `step` (1-based), `name` (`ProfilerStep#3`, `step 3`), `found_by`
//!   (`annotations`, `user_defined`, `optimizer_step`, `periodic`, `loop`), `first_event`,
//!   `last_event`, `live_at_start_bytes`, `live_at_end_bytes`, `peak_bytes`,
//!   `peak_event_index`.
//!
//! Each file's rows depend on that file alone, so shards of files can be written by separate
//! processes into one dataset.

use crate::analyze::categories::{self, CategoryOptions};
use crate::analyze::leaks::{self, LeaksOptions};
use crate::analyze::oom::OomOptions;
use crate::analyze::profile::{self, Keyer, ProfileOptions};
use crate::analyze::timeline::{self, TimelineOptions};
use crate::compose::batch::rank_of;
use crate::compose::cross_rank::names::{coords_of_path, step_of_path, AXES};
use crate::compose::oom;
use crate::model::Snapshot;
use crate::replay::DeviceReplay;
use crate::vocab::sites::NO_FRAMES;
use std::collections::BTreeMap;

/// The type of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// int64 (sizes in bytes, counts, indices, times in µs).
    Int,
    /// double.
    Float,
    /// boolean.
    Bool,
    /// UTF-8 string.
    Text,
    /// A list of UTF-8 strings.
    TextList,
}

/// One value; `None` is null.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// An int64.
    Int(Option<i64>),
    /// A double.
    Float(Option<f64>),
    /// A boolean.
    Bool(Option<bool>),
    /// A string.
    Text(Option<String>),
    /// A list of strings (never null; empty for none).
    TextList(Vec<String>),
}

/// One table's rows for one file.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// `files`, `sites`, `timeline`, `ooms` or `leaks`.
    pub name: &'static str,
    /// Column names and types.
    pub columns: &'static [(&'static str, Kind)],
    /// Rows, each with one cell per column, in column order.
    pub rows: Vec<Vec<Cell>>,
}

/// Columns of `files`.
pub const FILES: &[(&str, Kind)] = &[
    ("schema_version", Kind::Int),
    ("memlens_version", Kind::Text),
    ("file", Kind::Text),
    ("sha256", Kind::Text),
    ("rank", Kind::Int),
    ("device", Kind::Int),
    ("ok", Kind::Bool),
    ("error", Kind::Text),
    ("allocator_settings", Kind::Text),
    ("peak_bytes", Kind::Int),
    ("peak_event_index", Kind::Int),
    ("peak_time_us", Kind::Int),
    ("allocated_bytes", Kind::Int),
    ("reserved_bytes", Kind::Int),
    ("fragmentation", Kind::Float),
    ("ooms", Kind::Int),
    ("oom", Kind::Text),
    ("top_site", Kind::Text),
    ("top_site_bytes", Kind::Int),
    ("warning_codes", Kind::TextList),
    ("path_step", Kind::Int),
    ("tp", Kind::Int),
    ("cp", Kind::Int),
    ("ep", Kind::Int),
    ("dp", Kind::Int),
    ("pp", Kind::Int),
];

/// Columns of `sites`.
pub const SITES: &[(&str, Kind)] = &[
    ("file", Kind::Text),
    ("device", Kind::Int),
    ("moment", Kind::Text),
    ("site", Kind::Text),
    ("category", Kind::Text),
    ("bytes", Kind::Int),
    ("count", Kind::Int),
];

/// Columns of `timeline`.
pub const TIMELINE: &[(&str, Kind)] = &[
    ("file", Kind::Text),
    ("device", Kind::Int),
    ("event_index", Kind::Int),
    ("time_us", Kind::Int),
    ("live_requested_bytes", Kind::Int),
    ("allocated_bytes", Kind::Int),
    ("reserved_bytes", Kind::Int),
];

/// Columns of `ooms`.
pub const OOMS: &[(&str, Kind)] = &[
    ("file", Kind::Text),
    ("device", Kind::Int),
    ("event_index", Kind::Int),
    ("time_us", Kind::Int),
    ("requested_bytes", Kind::Int),
    ("request_rounded_bytes", Kind::Int),
    ("device_free_bytes", Kind::Int),
    ("reserved_bytes", Kind::Int),
    ("allocated_bytes", Kind::Int),
    ("live_requested_bytes", Kind::Int),
    ("largest_free_block_bytes", Kind::Int),
    ("verdict", Kind::Text),
];

/// Columns of `leaks`.
pub const LEAKS: &[(&str, Kind)] = &[
    ("file", Kind::Text),
    ("device", Kind::Int),
    ("kind", Kind::Text),
    ("site", Kind::Text),
    ("bytes_per_step", Kind::Int),
    ("steps", Kind::Int),
    ("live_bytes_at_end", Kind::Int),
    ("tensors_per_step", Kind::Float),
    ("tensors_at_end", Kind::Int),
    ("fit_r2", Kind::Float),
];

/// Columns of `steps`.
pub const STEPS: &[(&str, Kind)] = &[
    ("file", Kind::Text),
    ("device", Kind::Int),
    ("step", Kind::Int),
    ("name", Kind::Text),
    ("found_by", Kind::Text),
    ("first_event", Kind::Int),
    ("last_event", Kind::Int),
    ("live_at_start_bytes", Kind::Int),
    ("live_at_end_bytes", Kind::Int),
    ("peak_bytes", Kind::Int),
    ("peak_event_index", Kind::Int),
];

/// Who the rows are about: the file as named, its content's SHA-256 (hex; `None` for
/// standard input).
pub struct Source<'a> {
    /// The file as named.
    pub file: &'a str,
    /// SHA-256 of its bytes as stored, lowercase hex.
    pub sha256: Option<String>,
}

fn int(v: u64) -> Cell {
    Cell::Int(Some(i64::try_from(v).unwrap_or(i64::MAX)))
}

fn text(s: &str) -> Cell {
    Cell::Text(Some(s.to_string()))
}

fn empty(name: &'static str, columns: &'static [(&'static str, Kind)]) -> Table {
    Table {
        name,
        columns,
        rows: Vec::new(),
    }
}

fn base_name(file: &str) -> &str {
    file.rsplit(['/', '\\']).next().unwrap_or(file)
}

/// The tables of a file that could not be read: one `files` row saying why.
pub fn failed(src: &Source, error: &str) -> Vec<Table> {
    let mut files = empty("files", FILES);
    files.rows.push(file_row(src, None, Some(error), None));
    vec![
        files,
        empty("sites", SITES),
        empty("timeline", TIMELINE),
        empty("ooms", OOMS),
        empty("leaks", LEAKS),
        empty("steps", STEPS),
    ]
}

/// A `files` row; `None` measures for a file without a device or one that failed.
fn file_row(
    src: &Source,
    device: Option<u32>,
    error: Option<&str>,
    m: Option<(Option<String>, [Cell; 10], Vec<String>)>,
) -> Vec<Cell> {
    let mut row = vec![
        int(crate::analyze::SCHEMA_VERSION as u64),
        text(env!("CARGO_PKG_VERSION")),
        text(src.file),
        Cell::Text(src.sha256.clone()),
        Cell::Int(rank_of(base_name(src.file)).map(i64::from)),
        Cell::Int(device.map(i64::from)),
        Cell::Bool(Some(error.is_none())),
        Cell::Text(error.map(str::to_string)),
    ];
    match m {
        Some((settings, measures, codes)) => {
            row.push(Cell::Text(settings));
            row.extend(measures);
            row.push(Cell::TextList(codes));
        }
        None => {
            row.push(Cell::Text(None));
            row.extend([
                Cell::Int(None),
                Cell::Int(None),
                Cell::Int(None),
                Cell::Int(None),
                Cell::Int(None),
                Cell::Float(None),
                Cell::Int(None),
                Cell::Text(None),
                Cell::Text(None),
                Cell::Int(None),
            ]);
            row.push(Cell::TextList(Vec::new()));
        }
    }
    // Where the path places the file: its step and parallel coordinates.
    row.push(Cell::Int(
        step_of_path(src.file).map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
    ));
    let coords = coords_of_path(src.file);
    for axis in AXES {
        row.push(Cell::Int(coords.get(*axis).map(|&v| i64::from(v))));
    }
    row
}

/// The allocator settings as JSON text (`None` when the file records none).
fn settings_json(snap: &Snapshot) -> Option<String> {
    let s = snap.allocator_settings.as_ref()?;
    let map: serde_json::Map<String, serde_json::Value> = s
        .iter()
        .map(|(k, v)| (k.clone(), super::cross_rank::setting_json(v)))
        .collect();
    Some(serde_json::Value::Object(map).to_string())
}

/// The six tables of one snapshot (`files`, `sites`, `timeline`, `ooms`, `leaks`, `steps`).
pub fn tables(
    src: &Source,
    snap: &Snapshot,
    replays: &[DeviceReplay],
) -> Result<Vec<Table>, String> {
    let popts = ProfileOptions::default();
    let prof = profile::profile(snap, replays, &popts)?;
    let ooms = oom::run(snap, replays, &OomOptions::default())?;
    let leaks = leaks::run(snap, replays, &LeaksOptions::default());
    let tl = timeline::run(snap, replays, &TimelineOptions::default())?;
    let cats = categories::run(
        snap,
        replays,
        &CategoryOptions {
            per_stack: true,
            ..CategoryOptions::default()
        },
    )?;
    Ok(vec![
        files_table(src, snap, replays, &prof, &ooms),
        sites_table(src, &Keyer::new(snap, popts), &cats, &prof),
        timeline_table(src, &tl),
        ooms_table(src, &ooms),
        leaks_table(src, &leaks),
        steps_table(src, &leaks),
    ])
}

/// The `steps` table: per device, the steps its trace marks (`replay::steps::find`, as the
/// leaks report found them: not looked for twice).
fn steps_table(src: &Source, leaks: &leaks::LeaksReport) -> Table {
    let mut rows = empty("steps", STEPS);
    for d in &leaks.devices {
        let found = &d.steps;
        let Some(by) = found
            .source
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| v.as_str().map(str::to_string))
        else {
            continue;
        };
        for s in &found.steps {
            rows.rows.push(vec![
                text(src.file),
                int(found.device as u64),
                int(s.index as u64),
                text(&s.name),
                text(&by),
                Cell::Int(Some(s.first_event)),
                Cell::Int(Some(s.last_event)),
                int(s.live_at_start),
                int(s.live_at_end),
                int(s.peak_bytes),
                Cell::Int(Some(s.peak_event)),
            ]);
        }
    }
    rows
}

/// The `files` table: a row per measured device, or one of zeros for a file without one.
fn files_table(
    src: &Source,
    snap: &Snapshot,
    replays: &[DeviceReplay],
    prof: &profile::Profile,
    ooms: &oom::OomReport,
) -> Table {
    let settings = settings_json(snap);
    let mut files = empty("files", FILES);
    for d in &prof.devices {
        let r = replays.iter().find(|r| r.device == d.device);
        let allocated = match r {
            Some(r) => r.rounded_at(d.at.event_index),
            None => snap
                .device(d.device)
                .map_or(0, |dev| snap.live_blocks(dev).map(|b| b.size).sum()),
        };
        let dev_ooms: Vec<&str> = ooms
            .ooms
            .iter()
            .filter(|o| o.explained.device == Some(d.device))
            .map(|o| o.explained.verdict.as_str())
            .collect();
        let mut verdicts: Vec<&str> = dev_ooms.clone();
        verdicts.sort_unstable();
        verdicts.dedup();
        let top = profile::sorted_sites(&d.sites, 1).into_iter().next();
        let mut codes: Vec<String> = snap
            .warnings
            .iter()
            .filter(|w| !matches!(w.device, Some(x) if x != d.device))
            .map(|w| w.code.to_string())
            .collect();
        codes.sort();
        codes.dedup();
        let measures = [
            int(d.live_bytes),
            Cell::Int(r.map(|_| d.at.event_index)),
            Cell::Int(d.at.time_us),
            int(allocated),
            int(d.peak_reserved_bytes),
            Cell::Float(Some(d.fragmentation)),
            int(dev_ooms.len() as u64),
            text(&if verdicts.is_empty() {
                "none".to_string()
            } else {
                verdicts.join("+")
            }),
            Cell::Text(top.as_ref().map(|t| t.0.clone())),
            int(top.map_or(0, |t| t.1.bytes)),
        ];
        files.rows.push(file_row(
            src,
            Some(d.device),
            None,
            Some((settings.clone(), measures, codes)),
        ));
    }
    if files.rows.is_empty() {
        // Read, but without a device: zeros, as `batch --format json` writes them.
        let mut codes: Vec<String> = snap.warnings.iter().map(|w| w.code.to_string()).collect();
        codes.sort();
        codes.dedup();
        let zeros = [
            int(0),
            Cell::Int(None),
            Cell::Int(None),
            int(0),
            int(0),
            Cell::Float(Some(0.0)),
            int(0),
            text("none"),
            Cell::Text(None),
            int(0),
        ];
        files
            .rows
            .push(file_row(src, None, None, Some((settings, zeros, codes))));
    }
    files
}

/// The `sites` table: live bytes at the peak per device, site (keyed by `keyer`, as the
/// profile keys them) and category, adding up to `batch`'s profile by construction: memory
/// alive before the trace with no stack is keyed as the profile keys it (`<before trace, no
/// stack> likely parameters`, [`crate::analyze::pretrace`]) under the category the rules give
/// it, and a site whose categorised bytes differ from the profile's (categories read a trace
/// that records no allocation at its end, the profile before it) is one row of the profile's
/// bytes under `unknown` (or the pre-trace memory's likely kind).
fn sites_table(
    src: &Source,
    keyer: &Keyer,
    cats: &categories::CategoriesReport,
    prof: &profile::Profile,
) -> Table {
    let mut sites = empty("sites", SITES);
    let mut devices: Vec<u32> = cats.devices.iter().map(|d| d.device).collect();
    devices.extend(prof.devices.iter().map(|d| d.device));
    devices.sort_unstable();
    devices.dedup();
    for device in devices {
        let mut by: BTreeMap<(String, &str), (u64, u64)> = BTreeMap::new();
        if let Some(d) = cats.devices.iter().find(|d| d.device == device) {
            for (stack, cat, bytes, count) in &d.per_stack {
                let t = by
                    .entry((keyer.key(*stack).to_string(), cat.as_str()))
                    .or_default();
                t.0 += bytes;
                t.1 += count;
            }
        }
        if let Some(p) = prof.devices.iter().find(|p| p.device == device) {
            reconcile(&mut by, p);
        }
        for ((site, cat), (bytes, count)) in by {
            sites.rows.push(vec![
                text(src.file),
                int(device as u64),
                text("peak"),
                text(&site),
                text(cat),
                int(bytes),
                int(count),
            ]);
        }
    }
    sites
}

/// Makes the categorised rows `by` of a device add up to its profile `p`, site by site.
fn reconcile<'a>(by: &mut BTreeMap<(String, &'a str), (u64, u64)>, p: &'a profile::DeviceProfile) {
    let cat_of = |site: &str| -> &'a str {
        p.pretrace
            .get(site)
            .and_then(|x| x.likely_kind.as_deref())
            .unwrap_or("unknown")
    };
    // Pre-trace memory: from the `<no frames>` row of its category to its own key.
    for (label, pre) in &p.pretrace {
        let Some(t) = p.sites.get(label) else {
            continue;
        };
        let cat = pre.likely_kind.as_deref().unwrap_or("unknown");
        let key = (NO_FRAMES.to_string(), cat);
        let Some(from) = by.get_mut(&key) else {
            continue;
        };
        if from.0 < t.bytes || from.1 < t.count {
            continue;
        }
        from.0 -= t.bytes;
        from.1 -= t.count;
        if *from == (0, 0) {
            by.remove(&key);
        }
        let e = by.entry((label.clone(), cat)).or_default();
        e.0 += t.bytes;
        e.1 += t.count;
    }
    // Any site whose rows still differ from the profile: the profile's bytes, one row.
    let mut totals: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for ((site, _), (b, c)) in by.iter() {
        let t = totals.entry(site.as_str()).or_default();
        t.0 += b;
        t.1 += c;
    }
    let mut differ: Vec<String> = totals
        .iter()
        .filter(|(site, t)| p.sites.get(**site).map(|s| (s.bytes, s.count)) != Some(**t))
        .map(|(site, _)| site.to_string())
        .collect();
    differ.extend(
        p.sites
            .keys()
            .filter(|k| !totals.contains_key(k.as_str()))
            .cloned(),
    );
    for site in differ {
        by.retain(|(s, _), _| *s != site);
        if let Some(t) = p.sites.get(&site) {
            if t.bytes > 0 || t.count > 0 {
                by.insert((site.clone(), cat_of(&site)), (t.bytes, t.count));
            }
        }
    }
}

/// The `timeline` table: the timeline's points per device.
fn timeline_table(src: &Source, tl: &timeline::TimelineReport) -> Table {
    let mut timeline = empty("timeline", TIMELINE);
    for d in &tl.devices {
        for p in &d.points {
            timeline.rows.push(vec![
                text(src.file),
                int(d.device as u64),
                Cell::Int(Some(p.event_index)),
                Cell::Int(p.time_us),
                int(p.live_requested_bytes),
                int(p.allocated_bytes),
                int(p.reserved_bytes),
            ]);
        }
    }
    timeline
}

/// The `ooms` table: a row per oom event.
fn ooms_table(src: &Source, ooms: &oom::OomReport) -> Table {
    let opt = |v: Option<u64>| Cell::Int(v.map(|x| i64::try_from(x).unwrap_or(i64::MAX)));
    let mut oom_rows = empty("ooms", OOMS);
    for o in &ooms.ooms {
        let e = &o.explained;
        oom_rows.rows.push(vec![
            text(src.file),
            Cell::Int(e.device.map(i64::from)),
            opt(e.event_index),
            Cell::Int(o.time_us),
            opt(e.requested_bytes),
            int(o.request_rounded_bytes),
            opt(e.device_free_bytes),
            opt(e.reserved_bytes),
            opt(e.allocated_bytes),
            int(o.live_requested_bytes),
            opt(e.largest_free_block_bytes),
            text(e.verdict.as_str()),
        ]);
    }
    oom_rows
}

/// The `leaks` table: a row per finding.
fn leaks_table(src: &Source, leaks: &leaks::LeaksReport) -> Table {
    let mut leak_rows = empty("leaks", LEAKS);
    for f in &leaks.findings {
        leak_rows.rows.push(vec![
            text(src.file),
            int(f.device as u64),
            text(f.kind),
            text(&f.site),
            int(f.bytes_per_step),
            int(f.steps as u64),
            int(f.live_bytes_at_end),
            Cell::Float(Some(f.tensors_per_step)),
            int(f.tensors_at_end),
            Cell::Float(Some(f.fit_r2)),
        ]);
    }
    leak_rows
}
