//! `memlens diff BASE CAND --by line`: the `lines` of two snapshots compared line by line.
//!
//! In: each side's [`LinesReport`] (same cost, same kind of moment: default each device's own
//! peak). Lines are summed over devices, as `diff` sums sites. Out: every user source line with
//! its base and candidate `self_bytes` and `total_bytes`, their changes and a status (`diff`'s
//! vocabulary: new, removed, grown, shrunk, unchanged), by the absolute change of the total,
//! then of self.
//!
//! Matching a line of the base with one of the candidate, file by file:
//!
//! - **by text**, where the file's source could be read for every side that has lines in it:
//!   a line's key is (file, function, its text trimmed, its occurrence among the side's lines of
//!   that function with the same text, in line order); line numbers may differ. The source on
//!   disk is one revision: `--source-root` (or the recorded path as it is) is taken as the
//!   *candidate's*; the base is read from `--base-source-root` when given, else from the same
//!   source. Each side's lines are checked against what it read ([`line_text::holds`]): a line
//!   that is blank, a comment, past the end, or in another function than recorded shows that
//!   source is not the revision that side ran, and the file is matched the other way. Without
//!   `--base-source-root`, text keys are kept only where they pair at least as many lines as
//!   the numbers do: read in the candidate's source, a base line that moved within its
//!   function reads another line's text, so fewer pairs mean the file changed between the runs;
//! - **by line number** otherwise: the same (line, function) pair, then `diff`'s moved-line
//!   matching ([`moved::pairs`]: same file and function, the unmatched lines paired in line
//!   order), so lines inserted above hot code change nothing.
//!
//! A line matched at another number keeps the base's as `moved_from`.

use super::{line_text, moved, Gate, Pair, Status, StatusCounts};
use crate::analyze::lines::{self, DeviceLines, LineCost, LinesReport, Reader};
use crate::replay::Moment;
use crate::vocab::absence::{Judgement, JudgementState};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Where each side's source is read.
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    /// The candidate's source tree (`--source-root`); `None`: the recorded paths as they are.
    pub root: Option<&'a Path>,
    /// The base's (`--base-source-root`); `None`: the candidate's source, checked.
    pub base_root: Option<&'a Path>,
    /// Reads one file.
    pub read: Reader<'a>,
}

/// One side of a device.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SideLines {
    /// `trace`, or `final_state` for a device without a trace.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["trace", "final_state"])))]
    pub basis: &'static str,
    /// For the live cost of a traced device: the moment counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<Moment>,
    /// Whether lines could be told (as `lines` says it).
    pub judgement: Judgement,
    /// Everything the cost counts.
    pub counted_bytes: u64,
    /// The cost of allocations with a user line.
    pub framed_bytes: u64,
    /// The cost of allocations with none.
    pub unattributed_bytes: u64,
}

/// One device id on both sides.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceSides {
    /// Device index.
    pub device: u32,
    /// The base side (`null` when the base lacks the device).
    pub base: Option<SideLines>,
    /// The candidate side (`null` when the candidate lacks the device).
    pub cand: Option<SideLines>,
}

/// How one file's lines were matched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileKeying {
    /// The file as recorded.
    pub file: String,
    /// `text` (file, function and the line's text) or `line_number` (same line, then moved
    /// lines of the same function in line order).
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["text", "line_number"])))]
    pub keyed_by: &'static str,
    /// Where the base's text was read (absent when it was not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_source: Option<String>,
    /// Where the candidate's text was read (absent when it was not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cand_source: Option<String>,
    /// Why the text could not key the file (not found, unreadable, not the revision that ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One user source line on both sides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LineDelta {
    /// The file as recorded.
    pub file: String,
    /// The candidate's line number (the base's for a removed line).
    pub line: i64,
    /// The function recorded.
    pub function: String,
    /// The line's text, trimmed, where the file was keyed by text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// new, removed, grown, shrunk or unchanged (by total, then self).
    pub status: Status,
    /// The line's `self_bytes` on both sides: the cost of the allocations whose innermost user
    /// line it is.
    #[serde(rename = "self")]
    pub self_cost: Pair,
    /// The line's `total_bytes` on both sides: the cost of the allocations whose stack holds
    /// it.
    #[serde(rename = "total")]
    pub total_cost: Pair,
    /// Allocations under `total_bytes` in the base.
    pub base_allocations: u64,
    /// Allocations under `total_bytes` in the candidate.
    pub cand_allocations: u64,
    /// When the line was matched at another number: the base's line number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<i64>,
}

/// Two snapshots' `lines` compared line by line.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LinesDiffReport {
    /// Always 1 ([`crate::analyze::SCHEMA_VERSION`]).
    #[cfg_attr(feature = "schema", schemars(extend("const" = 1)))]
    pub schema_version: u32,
    /// Always `line`.
    #[cfg_attr(feature = "schema", schemars(extend("const" = "line")))]
    pub by: &'static str,
    /// The cost counted on both sides.
    pub cost: LineCost,
    /// The moment compared (`peak`, `end`, `oom`, ...; the live cost only).
    pub moment: String,
    /// Unit of every cost: `bytes`, or `byte_us` for the lifetime cost.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = ["bytes", "byte_us"])))]
    pub unit: &'static str,
    /// Everything the cost counts, summed over devices.
    pub counted: Pair,
    /// The cost with a user line, summed over devices.
    pub framed: Pair,
    /// The cost without one, summed over devices.
    pub unattributed: Pair,
    /// Devices matched by id.
    pub devices: Vec<DeviceSides>,
    /// How each file's lines were matched, by file.
    pub files: Vec<FileKeying>,
    /// Lines per status (unchanged ones counted even without `--all`), and the lines that
    /// moved.
    pub counts: StatusCounts,
    /// Changed lines (every line with `--all`), by |total change|, then |self change|
    /// (biggest first), then file, line and function.
    pub lines: Vec<LineDelta>,
    /// The growth gate on `counted`, when `--fail-on-growth` or `--min-abs` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Gate"))]
    pub gate: Option<Gate>,
    /// What limits the answer.
    pub notes: Vec<String>,
}

/// A line's figures on one side, summed over devices.
#[derive(Clone, Copy, Default, Debug)]
struct Fig {
    self_bytes: u64,
    total_bytes: u64,
    allocations: u64,
}

/// A line of one side: (file, line, function).
type Key = (String, i64, String);

/// Compares the lines of two reports taken with the same options; `all`: keep unchanged
/// lines; `gate`: the growth gate's (fraction, bytes).
pub fn run(
    base: &LinesReport,
    cand: &LinesReport,
    sources: Sources,
    all: bool,
    gate: Option<(f64, u64)>,
) -> LinesDiffReport {
    let (b, c) = (figures(base), figures(cand));
    let files: BTreeSet<&String> = b.keys().chain(c.keys()).map(|k| &k.0).collect();
    let mut keyings = Vec::new();
    let mut pairs: Vec<(Option<&Key>, Option<&Key>, Option<String>)> = Vec::new();
    for file in files {
        let (keying, matched) = match_file(file, &b, &c, sources);
        keyings.push(keying);
        pairs.extend(matched);
    }
    let mut counts = StatusCounts::default();
    let mut rows = Vec::new();
    for (bk, ck, text) in pairs {
        let row = delta(bk.map(|k| (k, b[k])), ck.map(|k| (k, c[k])), text);
        match row.status {
            Status::New => counts.new += 1,
            Status::Removed => counts.removed += 1,
            Status::Grown => counts.grown += 1,
            Status::Shrunk => counts.shrunk += 1,
            Status::Unchanged => counts.unchanged += 1,
        }
        counts.moved += usize::from(row.moved_from.is_some());
        if all || row.status != Status::Unchanged {
            rows.push(row);
        }
    }
    rows.sort_by(|x, y| {
        y.total_cost
            .delta_bytes
            .unsigned_abs()
            .cmp(&x.total_cost.delta_bytes.unsigned_abs())
            .then(
                y.self_cost
                    .delta_bytes
                    .unsigned_abs()
                    .cmp(&x.self_cost.delta_bytes.unsigned_abs()),
            )
            .then_with(|| x.file.cmp(&y.file))
            .then(x.line.cmp(&y.line))
            .then_with(|| x.function.cmp(&y.function))
    });
    let sum = |r: &LinesReport, f: fn(&DeviceLines) -> u64| {
        r.devices.iter().fold(0u64, |t, d| t.saturating_add(f(d)))
    };
    let pair = |f: fn(&DeviceLines) -> u64| Pair::new(sum(base, f), sum(cand, f));
    let counted = pair(|d| d.counted_bytes);
    LinesDiffReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        by: "line",
        cost: base.cost,
        moment: base.moment.clone(),
        unit: if base.cost == LineCost::Lifetime {
            "byte_us"
        } else {
            "bytes"
        },
        counted,
        framed: pair(|d| d.framed_bytes),
        unattributed: pair(|d| d.unattributed_bytes),
        devices: devices(base, cand),
        files: keyings,
        counts,
        lines: rows,
        gate: gate.map(|(g, abs)| super::gate(counted, g, abs)),
        notes: notes(base, cand),
    }
}

/// Each line's figures, summed over the report's devices.
fn figures(r: &LinesReport) -> BTreeMap<Key, Fig> {
    let mut out: BTreeMap<Key, Fig> = BTreeMap::new();
    for d in &r.devices {
        for l in &d.lines {
            let f = out
                .entry((l.file.clone(), l.line, l.function.clone()))
                .or_default();
            f.self_bytes = f.self_bytes.saturating_add(l.self_bytes);
            f.total_bytes = f.total_bytes.saturating_add(l.total_bytes);
            f.allocations += l.allocations;
        }
    }
    out
}

/// A matched pair (either side may be missing) and the text it was keyed by.
type Matched<'k> = (Option<&'k Key>, Option<&'k Key>, Option<String>);

/// Matches the lines of one file, by text where both sides' source holds, else by number.
fn match_file<'k>(
    file: &str,
    b: &'k BTreeMap<Key, Fig>,
    c: &'k BTreeMap<Key, Fig>,
    sources: Sources,
) -> (FileKeying, Vec<Matched<'k>>) {
    let of =
        |m: &'k BTreeMap<Key, Fig>| -> Vec<&'k Key> { m.keys().filter(|k| k.0 == file).collect() };
    let (bl, cl) = (of(b), of(c));
    let cand_src = lines::find(file, sources.root, sources.read);
    let base_src = match sources.base_root {
        Some(dir) => lines::find(file, Some(dir), sources.read),
        None => cand_src.clone(),
    };
    let mut keying = FileKeying {
        file: file.to_string(),
        keyed_by: "line_number",
        base_source: None,
        cand_source: None,
        note: None,
    };
    let mut why: Vec<String> = Vec::new();
    let quiet = sources.root.is_none() && sources.base_root.is_none();
    let mut texts = |side: &str,
                     keys: &[&'k Key],
                     src: &Result<(std::path::PathBuf, String), String>| {
        if keys.is_empty() {
            return Some(Vec::new());
        }
        match src {
            Err(e) => {
                if !quiet {
                    why.push(format!("the {side}'s source: {e}"));
                }
                None
            }
            Ok((path, text)) => {
                let source: Vec<&str> = text.lines().collect();
                match keys.iter().find(|k| !line_text::holds(&source, k.1, &k.2)) {
                    Some(k) => {
                        why.push(format!(
                            "line {} of the {side} is not code of {} in {}: not the revision the {side} ran",
                            k.1,
                            k.2,
                            path.display()
                        ));
                        None
                    }
                    None => Some(
                        keys.iter()
                            .map(|k| line_text::text_of(&source, k.1))
                            .collect(),
                    ),
                }
            }
        }
    };
    let bt = texts("base", &bl, &base_src);
    let ct = texts("candidate", &cl, &cand_src);
    let matched = match (bt, ct) {
        (Some(bt), Some(ct)) => {
            keying.keyed_by = "text";
            keying.base_source = (!bl.is_empty())
                .then(|| base_src.as_ref().ok().map(|p| p.0.display().to_string()))
                .flatten();
            keying.cand_source = (!cl.is_empty())
                .then(|| cand_src.as_ref().ok().map(|p| p.0.display().to_string()))
                .flatten();
            let text = by_text(&bl, bt, &cl, ct);
            let number = by_number(&bl, &cl);
            if sources.base_root.is_none() && both(&number) > both(&text) {
                // One source read for both sides, and it pairs fewer lines than their
                // numbers do: the file changed between the runs.
                keying.keyed_by = "line_number";
                keying.base_source = None;
                why.push(format!(
                    "the base's lines read in the candidate's source pair {} of them, their numbers {}: the file changed between the runs (--base-source-root gives the base's source)",
                    both(&text),
                    both(&number)
                ));
                number
            } else {
                text
            }
        }
        _ => by_number(&bl, &cl),
    };
    keying.note = (!why.is_empty()).then(|| why.join("; "));
    (keying, matched)
}

/// How many pairs have both sides.
fn both(m: &[Matched]) -> usize {
    m.iter().filter(|p| p.0.is_some() && p.1.is_some()).count()
}

/// Lines keyed by (function, text, occurrence): equal keys pair.
fn by_text<'k>(
    bl: &[&'k Key],
    bt: Vec<String>,
    cl: &[&'k Key],
    ct: Vec<String>,
) -> Vec<Matched<'k>> {
    fn keyed<'k>(
        keys: &[&'k Key],
        texts: Vec<String>,
    ) -> BTreeMap<(String, String, usize), &'k Key> {
        let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
        let mut out = BTreeMap::new();
        // `keys` are in line order: the k-th line with a text is occurrence k.
        for (k, t) in keys.iter().zip(texts) {
            let n = seen.entry((k.2.clone(), t.clone())).or_default();
            out.insert((k.2.clone(), t, *n), *k);
            *n += 1;
        }
        out
    }
    let (mut b, c) = (keyed(bl, bt), keyed(cl, ct));
    let mut out: Vec<Matched<'k>> = Vec::new();
    for (key, ck) in c {
        let bk = b.remove(&key);
        out.push((bk, Some(ck), Some(key.1)));
    }
    out.extend(b.into_iter().map(|(key, bk)| (Some(bk), None, Some(key.1))));
    out
}

/// Lines keyed by number: the same (line, function), then moved lines of the same function
/// ([`moved::pairs`]).
fn by_number<'k>(bl: &[&'k Key], cl: &[&'k Key]) -> Vec<Matched<'k>> {
    let label = |k: &Key| format!("{}:{}:{}", k.0, k.1, k.2);
    let bset: BTreeSet<&Key> = bl.iter().copied().collect();
    let cset: BTreeSet<&Key> = cl.iter().copied().collect();
    let only_b: BTreeMap<String, &'k Key> = bl
        .iter()
        .filter(|k| !cset.contains(*k))
        .map(|k| (label(k), *k))
        .collect();
    let only_c: BTreeMap<String, &'k Key> = cl
        .iter()
        .filter(|k| !bset.contains(*k))
        .map(|k| (label(k), *k))
        .collect();
    let pairs = moved::pairs(
        only_b.keys().map(String::as_str),
        only_c.keys().map(String::as_str),
    );
    let paired_b: BTreeSet<&str> = pairs.iter().map(|p| p.0).collect();
    let paired_c: BTreeSet<&str> = pairs.iter().map(|p| p.1).collect();
    let mut out: Vec<Matched<'k>> = cl
        .iter()
        .filter(|k| bset.contains(*k))
        .map(|k| (Some(*k), Some(*k), None))
        .collect();
    out.extend(
        pairs
            .iter()
            .map(|(x, y)| (Some(only_b[*x]), Some(only_c[*y]), None)),
    );
    out.extend(
        only_b
            .iter()
            .filter(|(l, _)| !paired_b.contains(l.as_str()))
            .map(|(_, k)| (Some(*k), None, None)),
    );
    out.extend(
        only_c
            .iter()
            .filter(|(l, _)| !paired_c.contains(l.as_str()))
            .map(|(_, k)| (None, Some(*k), None)),
    );
    out
}

/// The row of a matched pair.
fn delta(b: Option<(&Key, Fig)>, c: Option<(&Key, Fig)>, text: Option<String>) -> LineDelta {
    let (bf, cf) = (
        b.map(|x| x.1).unwrap_or_default(),
        c.map(|x| x.1).unwrap_or_default(),
    );
    let status = match (b, c) {
        (None, _) => Status::New,
        (_, None) => Status::Removed,
        _ => match (cf.total_bytes, cf.self_bytes).cmp(&(bf.total_bytes, bf.self_bytes)) {
            std::cmp::Ordering::Greater => Status::Grown,
            std::cmp::Ordering::Less => Status::Shrunk,
            std::cmp::Ordering::Equal => Status::Unchanged,
        },
    };
    let key = c.or(b).expect("a pair has a side").0;
    LineDelta {
        file: key.0.clone(),
        line: key.1,
        function: key.2.clone(),
        text,
        status,
        self_cost: Pair::new(bf.self_bytes, cf.self_bytes),
        total_cost: Pair::new(bf.total_bytes, cf.total_bytes),
        base_allocations: bf.allocations,
        cand_allocations: cf.allocations,
        moved_from: match (b, c) {
            (Some(x), Some(y)) if x.0 .1 != y.0 .1 => Some(x.0 .1),
            _ => None,
        },
    }
}

/// One side of a device.
fn side(d: &DeviceLines) -> SideLines {
    SideLines {
        basis: d.basis,
        at: d.at,
        judgement: d.judgement.clone(),
        counted_bytes: d.counted_bytes,
        framed_bytes: d.framed_bytes,
        unattributed_bytes: d.unattributed_bytes,
    }
}

/// Every device of either side.
fn devices(base: &LinesReport, cand: &LinesReport) -> Vec<DeviceSides> {
    let ids: BTreeSet<u32> = base
        .devices
        .iter()
        .chain(&cand.devices)
        .map(|d| d.device)
        .collect();
    ids.into_iter()
        .map(|id| DeviceSides {
            device: id,
            base: base.devices.iter().find(|d| d.device == id).map(side),
            cand: cand.devices.iter().find(|d| d.device == id).map(side),
        })
        .collect()
}

/// Devices on one side only, what a side cannot judge, and each side's own notes.
fn notes(base: &LinesReport, cand: &LinesReport) -> Vec<String> {
    let mut out = Vec::new();
    for d in devices(base, cand) {
        match (&d.base, &d.cand) {
            (Some(_), None) => out.push(format!("device {} is only in the base", d.device)),
            (None, Some(_)) => out.push(format!("device {} is only in the candidate", d.device)),
            _ => {}
        }
    }
    for (name, r) in [("base", base), ("candidate", cand)] {
        for d in &r.devices {
            if d.judgement.state == JudgementState::CannotJudge {
                out.push(format!(
                    "{name}: device {}: {}",
                    d.device,
                    d.judgement.sentence()
                ));
            }
            out.extend(d.notes.iter().map(|n| format!("{name}: {n}")));
            out.extend(d.warnings.iter().map(|w| format!("{name}: {}", w.message)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::lines::LineRow;

    /// A one-device report of `(line, self, total)` rows of `m.py`'s function `f`.
    fn report(rows: &[(i64, u64, u64)]) -> LinesReport {
        let lines: Vec<LineRow> = rows
            .iter()
            .map(|&(line, self_bytes, total_bytes)| LineRow {
                file: "/p/m.py".into(),
                line,
                function: "f".into(),
                self_bytes,
                total_bytes,
                self_allocations: 1,
                allocations: 1,
            })
            .collect();
        let framed = rows.iter().map(|r| r.1).sum();
        LinesReport {
            schema_version: 1,
            cost: LineCost::Live,
            moment: "peak".into(),
            devices: vec![DeviceLines {
                device: 0,
                basis: "trace",
                at: None,
                unit: "bytes",
                judgement: Judgement::found(String::new()),
                counted_bytes: framed,
                counted_allocations: rows.len() as u64,
                framed_bytes: framed,
                unattributed_bytes: 0,
                unattributed: Vec::new(),
                lines,
                sources: Vec::new(),
                notes: Vec::new(),
                warnings: Vec::new(),
            }],
            top: 20,
        }
    }

    /// GIVEN a line inserted between a function's `def` and its two hot lines (A at 24, B at 25
    /// become 25 and 26) WHEN matched by number THEN the base's B pairs with the candidate's A
    /// (the same number) and the figures cross; WHEN matched by text THEN each line keeps its
    /// own figures and nothing changed.
    #[test]
    fn text_keys_survive_a_line_inserted_between_hot_lines() {
        let base = report(&[(24, 10, 10), (25, 20, 20)]);
        let cand = report(&[(25, 10, 10), (26, 20, 20)]);
        let old = format!("{}def f():\n    a = A()\n    b = B()\n", "#\n".repeat(22));
        let new = format!(
            "{}def f():\n    log()\n    a = A()\n    b = B()\n",
            "#\n".repeat(22)
        );
        let read = |p: &Path| -> std::io::Result<String> {
            match p.to_str() {
                Some("/old/p/m.py") => Ok(old.clone()),
                Some("/new/p/m.py") => Ok(new.clone()),
                _ => Err(std::io::ErrorKind::NotFound.into()),
            }
        };
        let no_source = Sources {
            root: None,
            base_root: None,
            read: &read,
        };
        let r = run(&base, &cand, no_source, true, None);
        assert_eq!(r.files[0].keyed_by, "line_number");
        assert_eq!((r.counts.grown, r.counts.shrunk), (1, 1));

        let both = Sources {
            root: Some(Path::new("/new")),
            base_root: Some(Path::new("/old")),
            read: &read,
        };
        let r = run(&base, &cand, both, true, None);
        assert_eq!(r.files[0].keyed_by, "text", "{:?}", r.files);
        assert_eq!(r.counts.unchanged, 2);
        assert_eq!(r.counts.moved, 2);
        let a = r.lines.iter().find(|l| l.line == 25).unwrap();
        assert_eq!(a.text.as_deref(), Some("a = A()"));
        assert_eq!(
            (a.moved_from, a.total_cost.base, a.total_cost.cand),
            (Some(24), 10, 10)
        );
        let b = r.lines.iter().find(|l| l.line == 26).unwrap();
        assert_eq!(
            (b.moved_from, b.self_cost.base, b.self_cost.cand),
            (Some(25), 20, 20)
        );

        // The candidate's source alone: base lines 24 and 25 read `log()` and `a = A()` there,
        // both code of `f`, but they pair fewer lines than the numbers: matched by number.
        let one = Sources {
            root: Some(Path::new("/new")),
            base_root: None,
            read: &read,
        };
        let r = run(&base, &cand, one, true, None);
        assert_eq!(r.files[0].keyed_by, "line_number");
        let note = r.files[0].note.as_deref().unwrap();
        assert!(note.contains("pair 1 of them, their numbers 2"), "{note}");
    }
}
