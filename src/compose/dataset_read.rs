//! A dataset read back (`batch --from-dataset`, `python -m memlens fleet report`): the rows of
//! the `files`, `sites`, `ooms` and `steps` tables that `batch --format parquet` wrote (by one
//! process, or by a fleet of them), turned into what `batch` computes from the snapshots
//! themselves: each file's [`FileRow`], its sites at the peak and its [`RankFacts`]. The
//! cross-rank answer then runs on them as on snapshots read, so the rule lives in one place
//! and a dataset's report equals the report of the files it came from.
//!
//! In: the tables' rows ([`parse_part`] reads a Parquet part into [`DataRow`]s). Out: one
//! [`ReadFile`] per file, by file name.

use super::batch::FileRow;
use super::cross_rank::names::{coords_of_path, step_of_path};
use super::cross_rank::steps::TraceSteps;
use super::cross_rank::{OomAt, RankFacts};
use crate::analyze::profile::{sorted_sites, SiteTotal};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use std::collections::BTreeMap;

/// One value of a part's row.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Null.
    Null,
    /// int64.
    Int(i64),
    /// double.
    Float(f64),
    /// boolean.
    Bool(bool),
    /// string.
    Text(String),
    /// Anything else (a list: `warning_codes`), not read back.
    Other,
}

/// A row of a part: its columns by name.
pub type DataRow = BTreeMap<String, Value>;

/// The rows of one Parquet part (`bytes`: the whole file).
pub fn parse_part(bytes: bytes::Bytes) -> Result<Vec<DataRow>, String> {
    let reader =
        SerializedFileReader::new(bytes).map_err(|e| format!("not a Parquet file: {e}"))?;
    let rows = reader.get_row_iter(None).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for row in rows {
        let row = row.map_err(|e| e.to_string())?;
        out.push(
            row.get_column_iter()
                .map(|(name, f)| {
                    let v = match f {
                        Field::Null => Value::Null,
                        Field::Long(v) => Value::Int(*v),
                        Field::Double(v) => Value::Float(*v),
                        Field::Bool(v) => Value::Bool(*v),
                        Field::Str(s) => Value::Text(s.clone()),
                        _ => Value::Other,
                    };
                    (name.clone(), v)
                })
                .collect(),
        );
    }
    Ok(out)
}

/// A file of the dataset as `batch` would have read it.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadFile {
    /// Its row.
    pub row: FileRow,
    /// Its sites at the peak, summed over devices (`None` for a file that failed).
    pub sites: Option<BTreeMap<String, SiteTotal>>,
    /// What the cross-rank answer needs of it (`None` without a rank or when it failed).
    pub facts: Option<RankFacts>,
}

/// The tables read back: each one's rows, all parts together.
#[derive(Default)]
pub struct Tables {
    /// `files`.
    pub files: Vec<DataRow>,
    /// `sites`.
    pub sites: Vec<DataRow>,
    /// `ooms`.
    pub ooms: Vec<DataRow>,
    /// `steps` (empty in a dataset written before it existed).
    pub steps: Vec<DataRow>,
}

/// A column's value, checked: `table.column` and the file in the message when it is not the
/// type the dataset's schema gives it.
struct Col<'a> {
    table: &'static str,
    row: &'a DataRow,
}

impl Col<'_> {
    fn value(&self, name: &str) -> Result<&Value, String> {
        self.row
            .get(name)
            .ok_or_else(|| format!("table {}: no column {name}", self.table))
    }
    fn int(&self, name: &str) -> Result<Option<i64>, String> {
        match self.value(name)? {
            Value::Int(v) => Ok(Some(*v)),
            Value::Null => Ok(None),
            v => Err(format!(
                "table {}: column {name}: expected an int64, found {v:?}",
                self.table
            )),
        }
    }
    fn bytes(&self, name: &str) -> Result<u64, String> {
        let v = self.int(name)?.unwrap_or(0);
        u64::try_from(v).map_err(|_| {
            format!(
                "table {}: column {name}: expected bytes, found {v}",
                self.table
            )
        })
    }
    fn device(&self) -> Result<Option<u32>, String> {
        self.int("device")?
            .map(|d| {
                u32::try_from(d).map_err(|_| format!("table {}: column device: {d}", self.table))
            })
            .transpose()
    }
    fn text(&self, name: &str) -> Result<Option<&str>, String> {
        match self.value(name)? {
            Value::Text(s) => Ok(Some(s)),
            Value::Null => Ok(None),
            v => Err(format!(
                "table {}: column {name}: expected a string, found {v:?}",
                self.table
            )),
        }
    }
}

/// Rows of a table by file.
fn by_file<'a>(
    table: &'static str,
    rows: &'a [DataRow],
) -> Result<BTreeMap<&'a str, Vec<Col<'a>>>, String> {
    let mut out: BTreeMap<&str, Vec<Col>> = BTreeMap::new();
    for row in rows {
        let file = match row.get("file") {
            Some(Value::Text(f)) => f.as_str(),
            _ => return Err(format!("table {table}: a row without a file")),
        };
        out.entry(file).or_default().push(Col { table, row });
    }
    Ok(out)
}

/// Every file of `t`, by name, as `batch` reads it.
pub fn read_back(t: &Tables) -> Result<Vec<ReadFile>, String> {
    let files = by_file("files", &t.files)?;
    let sites = by_file("sites", &t.sites)?;
    let ooms = by_file("ooms", &t.ooms)?;
    let steps = by_file("steps", &t.steps)?;
    let none = Vec::new();
    let mut out = Vec::new();
    for (file, rows) in &files {
        let failed = rows
            .iter()
            .map(|r| r.value("ok").map(|v| *v == Value::Bool(false)))
            .collect::<Result<Vec<bool>, String>>()?;
        if failed.iter().any(|&f| f) {
            let error = rows
                .iter()
                .find_map(|r| r.text("error").ok().flatten())
                .unwrap_or("");
            out.push(ReadFile {
                row: FileRow::failed(file, error.to_string()),
                sites: None,
                facts: None,
            });
            continue;
        }
        out.push(one(
            file,
            rows,
            sites.get(file).unwrap_or(&none),
            ooms.get(file).unwrap_or(&none),
            steps.get(file).unwrap_or(&none),
        )?);
    }
    Ok(out)
}

/// One file that was read: its row, sites and facts from its rows in each table.
fn one(
    file: &str,
    rows: &[Col],
    sites: &[Col],
    ooms: &[Col],
    steps: &[Col],
) -> Result<ReadFile, String> {
    // Device rows, by device; the biggest device is the first with the most live bytes.
    let mut devices: Vec<(u32, &Col)> = Vec::new();
    for r in rows {
        if let Some(d) = r.device()? {
            devices.push((d, r));
        }
    }
    devices.sort_by_key(|d| d.0);
    if let Some(w) = devices.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!(
            "table files: {file} has two rows for device {} (the same file in two datasets, or a part copied?)",
            w[0].0
        ));
    }
    let mut peak: Option<(u32, u64)> = None;
    let mut reserved = 0;
    let mut fragmentation: f64 = 0.0;
    for (d, r) in &devices {
        let p = r.bytes("peak_bytes")?;
        if peak.map_or(true, |(_, b)| p > b) {
            peak = Some((*d, p));
        }
        reserved = reserved.max(r.bytes("reserved_bytes")?);
        if let Value::Float(f) = r.value("fragmentation")? {
            fragmentation = fragmentation.max(*f);
        }
    }
    let mut site_map: BTreeMap<String, SiteTotal> = BTreeMap::new();
    for s in sites {
        let t = site_map
            .entry(s.text("site")?.unwrap_or_default().to_string())
            .or_insert(SiteTotal { bytes: 0, count: 0 });
        t.bytes += s.bytes("bytes")?;
        t.count += s.bytes("count")?;
    }
    let mut verdicts: Vec<&str> = Vec::new();
    let mut first: Option<(bool, Option<i64>, Option<i64>, OomAt)> = None;
    for o in ooms {
        let verdict = o.text("verdict")?.unwrap_or("unknown");
        verdicts.push(verdict);
        let time = o.int("time_us")?;
        let key = (time.is_none(), time, o.int("event_index")?);
        if first.as_ref().map_or(true, |f| key < (f.0, f.1, f.2)) {
            first = Some((
                key.0,
                key.1,
                key.2,
                OomAt {
                    time_us: time,
                    device: o.device()?,
                    requested_bytes: o
                        .int("requested_bytes")?
                        .and_then(|v| u64::try_from(v).ok()),
                    verdict: verdict.to_string(),
                },
            ));
        }
    }
    verdicts.sort_unstable();
    verdicts.dedup();
    let top = sorted_sites(&site_map, 1).into_iter().next();
    let rank = rows[0].int("rank")?.and_then(|r| u32::try_from(r).ok());
    let row = FileRow {
        schema_version: crate::analyze::SCHEMA_VERSION,
        kind: "file",
        file: file.to_string(),
        rank,
        ok: true,
        error: None,
        devices: devices.len(),
        peak_bytes: peak.map_or(0, |p| p.1),
        peak_device: peak.map(|p| p.0),
        reserved_bytes: reserved,
        fragmentation,
        ooms: ooms.len(),
        oom: if verdicts.is_empty() {
            "none".into()
        } else {
            verdicts.join("+")
        },
        top_site_bytes: top.as_ref().map_or(0, |t| t.1.bytes),
        top_site: top.map(|t| t.0),
    };
    let settings = match rows[0].text("allocator_settings")? {
        None => None,
        Some(json) => {
            let v: serde_json::Value = serde_json::from_str(json)
                .map_err(|e| format!("table files: column allocator_settings of {file}: {e}"))?;
            let map = v.as_object().ok_or_else(|| {
                format!("table files: column allocator_settings of {file}: expected a JSON object")
            })?;
            Some(
                map.iter()
                    .map(|(k, v)| (k.clone(), v.to_string()))
                    .collect(),
            )
        }
    };
    let facts = rank.map(|rank| {
        let mut trace: Vec<(i64, String, u64, String)> = Vec::new();
        for s in steps {
            if s.device().ok().flatten() == row.peak_device {
                trace.push((
                    s.int("step").ok().flatten().unwrap_or(0),
                    s.text("name")
                        .ok()
                        .flatten()
                        .unwrap_or_default()
                        .to_string(),
                    s.bytes("peak_bytes").unwrap_or(0),
                    s.text("found_by")
                        .ok()
                        .flatten()
                        .unwrap_or_default()
                        .to_string(),
                ));
            }
        }
        trace.sort_by_key(|t| t.0);
        RankFacts {
            rank,
            file: file.to_string(),
            peak_bytes: row.peak_bytes,
            sites: site_map.iter().map(|(k, t)| (k.clone(), t.bytes)).collect(),
            first_oom: first.map(|f| f.3),
            settings,
            path_step: step_of_path(file),
            coords: coords_of_path(file),
            trace_steps: trace.first().map(|t| TraceSteps {
                found_by: t.3.clone(),
                peaks: trace.iter().map(|t| (t.1.clone(), t.2)).collect(),
            }),
        }
    });
    Ok(ReadFile {
        row,
        sites: Some(site_map),
        facts,
    })
}
