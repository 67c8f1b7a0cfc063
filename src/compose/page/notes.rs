//! What the page shows of an allocation besides its size and stack: the `annotate` texts
//! attached to it ([`crate::replay::annotations`]) and its `alloc` entry's `user_metadata` and
//! `internal_metadata` (PyTorch 2.14+), for the hovers of the timeline's bands and the state's
//! blocks.

use crate::model::{Action, Snapshot, StrId, TraceEvent};
use crate::replay::{annotations, DeviceReplay};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// The notes of one allocation; at least one field is set.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AllocNote {
    /// `annotate` texts attached to it, in trace order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<String>,
    /// Its `alloc` entry's `user_metadata` (absent when empty).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_metadata: String,
    /// Its `alloc` entry's `internal_metadata`, allocator tags such as `mallocWithAddress`
    /// (absent when empty).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub internal_metadata: String,
}

/// Where the notes of one device's allocations come from, made once per device.
#[derive(Clone, Debug, Default)]
pub struct NoteSource {
    /// The annotations attached to the replay's allocations.
    annotations: annotations::Annotations,
    /// Some `alloc` entry of the trace carries user or internal metadata.
    metadata: bool,
    /// Some `alloc` entry of the trace carries user metadata.
    user_metadata: bool,
    /// Allocation indices by address, to find the one a block of a state holds (made only
    /// when the device has notes at all).
    by_addr: FxHashMap<u64, Vec<u32>>,
}

impl NoteSource {
    /// The notes of replay `r` of `trace`.
    pub fn of(snap: &Snapshot, r: &DeviceReplay, trace: &[TraceEvent]) -> NoteSource {
        let (mut metadata, mut user_metadata) = (false, false);
        for e in trace.iter().filter(|e| e.action == Action::Alloc) {
            let t = snap.event_tags(e);
            user_metadata |= t.user_metadata != StrId::EMPTY;
            metadata |= user_metadata || t.internal_metadata != StrId::EMPTY;
            if user_metadata {
                break;
            }
        }
        let annotations = annotations::attach(r, trace, snap);
        let mut by_addr: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
        if metadata || !annotations.per_alloc.is_empty() {
            for (i, a) in r.allocations.iter().enumerate() {
                by_addr.entry(a.addr).or_default().push(i as u32);
            }
        }
        NoteSource {
            annotations,
            metadata,
            user_metadata,
            by_addr,
        }
    }

    /// True when some allocation has a note.
    pub fn any(&self) -> bool {
        self.metadata || !self.annotations.per_alloc.is_empty()
    }

    /// True when some `alloc` entry carries user metadata (what `top --by metadata` groups).
    pub fn has_user_metadata(&self) -> bool {
        self.user_metadata
    }

    /// The note of allocation `i` of `r`; `None` when it has none.
    pub fn note(
        &self,
        snap: &Snapshot,
        r: &DeviceReplay,
        trace: &[TraceEvent],
        i: u32,
    ) -> Option<AllocNote> {
        if !self.any() {
            return None;
        }
        let texts = self.annotations.of(i);
        let (user, internal) = if self.metadata {
            annotations::metadata(snap, trace, &r.allocations[i as usize])
        } else {
            (StrId::EMPTY, StrId::EMPTY)
        };
        if texts.is_empty() && user == StrId::EMPTY && internal == StrId::EMPTY {
            return None;
        }
        Some(AllocNote {
            annotations: texts
                .iter()
                .map(|t| snap.strings.get(*t).to_string())
                .collect(),
            user_metadata: snap.strings.get(user).to_string(),
            internal_metadata: snap.strings.get(internal).to_string(),
        })
    }

    /// The allocation of `r` live at address `addr` right after event `at`, if any.
    pub fn live_at(&self, r: &DeviceReplay, addr: u64, at: i64) -> Option<u32> {
        self.by_addr
            .get(&addr)?
            .iter()
            .copied()
            .find(|&i| r.allocations[i as usize].live_at(at))
    }
}

/// Notes interned for one view: each distinct note once, referred to by index.
#[derive(Debug, Default)]
pub struct NoteTable {
    notes: Vec<AllocNote>,
    index: FxHashMap<AllocNote, u32>,
}

impl NoteTable {
    /// The index of `note`, adding it when new.
    pub fn intern(&mut self, note: AllocNote) -> u32 {
        if let Some(&k) = self.index.get(&note) {
            return k;
        }
        let k = self.notes.len() as u32;
        self.notes.push(note.clone());
        self.index.insert(note, k);
        k
    }

    /// The notes, in index order.
    pub fn into_notes(self) -> Vec<AllocNote> {
        self.notes
    }
}
