//! `top`'s use of `annotate` events ([`crate::replay::annotations`]) and of the entries'
//! `user_metadata` (`--by metadata[:KEY]`).

use super::{CostItem, GroupBy, TopOptions};
use crate::model::{Snapshot, StackId, StrId, TraceEvent};
use crate::replay::{annotations, DeviceReplay};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// Label of allocations without metadata.
pub const NO_METADATA: &str = "(none)";

/// One annotation text of a row.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AnnotationCount {
    /// The annotation's text (its `user_metadata`).
    pub text: String,
    /// Allocations of the row that carry it.
    pub count: u64,
    /// Their requested bytes.
    pub bytes: u64,
}

/// What a traced device adds to grouping: its replay, trace and annotations.
pub struct Ctx<'a> {
    /// The replay the items index.
    pub r: &'a DeviceReplay,
    /// The device's trace.
    pub trace: &'a [TraceEvent],
    /// The annotations attached to `r`'s allocations.
    pub notes: &'a annotations::Annotations,
}

/// An item's first grouping: stack, pre-trace kind, and (`--by metadata`) its metadata.
pub type ItemKey = (StackId, Option<u32>, StrId);

/// The first-level key of `it`.
pub fn item_key(snap: &Snapshot, it: &CostItem, opts: &TopOptions, ctx: Option<&Ctx>) -> ItemKey {
    let md = match (opts.by, ctx, it.alloc) {
        (GroupBy::Metadata, Some(c), Some(i)) => {
            annotations::metadata(snap, c.trace, &c.r.allocations[i as usize]).0
        }
        _ => StrId::EMPTY,
    };
    let pre = it.pretrace.filter(|_| opts.by != GroupBy::Metadata);
    (it.stack, pre, md)
}

/// The row label of metadata `md`: the whole string, or the value of `opts.metadata_key` in
/// its JSON (`(no KEY)` when it is not JSON or lacks the key); `(none)` without metadata.
pub fn label(snap: &Snapshot, md: StrId, opts: &TopOptions) -> String {
    let text = snap.strings.get(md);
    if md == StrId::EMPTY || text.is_empty() {
        return NO_METADATA.to_string();
    }
    let Some(key) = &opts.metadata_key else {
        return text.to_string();
    };
    let value = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get(key).cloned());
    match value {
        Some(serde_json::Value::String(s)) => s,
        Some(v) => v.to_string(),
        None => format!("(no {key})"),
    }
}

/// Per row key (label, context): the annotation texts of its items' allocations.
pub fn annotations(
    snap: &Snapshot,
    items: &[CostItem],
    opts: &TopOptions,
    ctx: Option<&Ctx>,
    key_of: &FxHashMap<ItemKey, (String, Option<String>)>,
) -> FxHashMap<(String, Option<String>), Vec<AnnotationCount>> {
    let mut out: FxHashMap<(String, Option<String>), Vec<AnnotationCount>> = FxHashMap::default();
    let Some(c) = ctx else { return out };
    if c.notes.per_alloc.is_empty() {
        return out;
    }
    /// Per text: allocations carrying it and their bytes.
    type Tally = FxHashMap<StrId, (u64, u64)>;
    let mut per: FxHashMap<(String, Option<String>), Tally> = FxHashMap::default();
    for it in items {
        let Some(i) = it.alloc else { continue };
        let texts = c.notes.of(i);
        if texts.is_empty() {
            continue;
        }
        let Some(key) = key_of.get(&item_key(snap, it, opts, ctx)) else {
            continue;
        };
        let size = c.r.allocations[i as usize].size;
        let row = per.entry(key.clone()).or_default();
        let mut seen: Vec<StrId> = Vec::new();
        for t in texts {
            if seen.contains(t) {
                continue;
            }
            seen.push(*t);
            let e = row.entry(*t).or_default();
            e.0 += 1;
            e.1 += size;
        }
    }
    for (key, texts) in per {
        let mut v: Vec<AnnotationCount> = texts
            .into_iter()
            .map(|(t, (count, bytes))| AnnotationCount {
                text: snap.strings.get(t).to_string(),
                count,
                bytes,
            })
            .collect();
        v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.text.cmp(&b.text)));
        out.insert(key, v);
    }
    out
}
