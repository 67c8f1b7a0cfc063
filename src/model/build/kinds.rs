//! What a decoded dict is, judged by its keys, and the `Ext` kinds the builder stores for
//! what it converted.

use crate::model::keys::Key;
use crate::pickle::{Heap, ObjData, ObjId, Value};

pub(super) const FRAME: u8 = 1;
pub(super) const STACK: u8 = 2;
pub(super) const EVENT: u8 = 3;
pub(super) const BLOCK: u8 = 4;
pub(super) const SEGMENT: u8 = 5;
pub(super) const ANNOTATION: u8 = 6;

pub(super) fn key_is(heap: &Heap, k: Value, key: &[u8]) -> bool {
    heap.str_bytes(k) == Some(key)
}

pub(super) fn dict_pairs<'h>(heap: &'h Heap, v: Value) -> Option<(ObjId, &'h [(Value, Value)])> {
    match heap.resolve(v) {
        Value::Obj(id) => match heap.data(id) {
            ObjData::Dict(d) => Some((id, d)),
            _ => None,
        },
        _ => None,
    }
}

/// What a dict appended to a list is, judged by its keys.
pub(super) fn classify(heap: &Heap, pairs: &[(Value, Value)]) -> Option<u8> {
    classify_by(pairs, |k| heap.str_bytes(k).map_or(Key::Other, Key::of))
}

/// [`classify`] with the keys named by `key` (inlined: the fast path calls it per entry).
#[inline]
pub(super) fn classify_by(
    pairs: &[(Value, Value)],
    mut key: impl FnMut(Value) -> Key,
) -> Option<u8> {
    let mut has = [false; 6];
    for (k, _) in pairs {
        match key(*k) {
            Key::Action => return Some(EVENT),
            Key::Blocks => return Some(SEGMENT),
            Key::Filename => has[0] = true,
            Key::State => has[1] = true,
            Key::Size => has[2] = true,
            Key::Stage => has[3] = true,
            Key::TotalSize => has[4] = true,
            _ => {}
        }
    }
    if has[0] {
        Some(FRAME)
    } else if has[1] && has[2] && !has[4] {
        Some(BLOCK)
    } else if has[4] {
        Some(SEGMENT)
    } else if has[3] {
        Some(ANNOTATION)
    } else {
        None
    }
}
