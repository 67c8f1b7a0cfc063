//! The decoder's callbacks: how a driver (the model's builder) converts each container as it
//! is filled, takes flat dicts in one step and supplies the chunks it decoded elsewhere.

use super::value::{Heap, ObjId, Value};

/// Callbacks run as containers are filled; each returns the value to store in place of the
/// item (the item itself, or a converted `Ext` handle). Errors become [`DecodeError`]s at the
/// offset of the opcode being executed.
pub trait Hooks {
    /// `item` is being appended to the list `list`.
    fn on_append(&mut self, heap: &mut Heap, list: ObjId, item: Value) -> Result<Value, String>;
    /// `value` is being stored under `key` in the dict `dict`.
    fn on_setitem(
        &mut self,
        heap: &mut Heap,
        dict: ObjId,
        key: Value,
        value: Value,
    ) -> Result<Value, String>;
    /// Called about every 16 MiB of input with the current offset.
    fn on_progress(&mut self, _offset: u64) {}
    /// Only with [`decode_planned`]: the elements of chunk `index` (decoded elsewhere) are
    /// needed now; returns `(kind, first id, count)` of the `Ext` handles that stand for them.
    fn on_skip(&mut self, _heap: &mut Heap, _index: usize) -> Result<(u8, u32, u32), String> {
        Err("unexpected chunk".into())
    }
    /// How many records the driver has produced so far. A memo definition decoded on demand
    /// (a second time, out of file order) must not produce any: the decoder refuses it then.
    fn records(&self) -> usize {
        0
    }
    /// Whether `value`, a memo definition just decoded on demand, may stand in for the
    /// object the file defined there. A record (a trace entry, a block...) is converted where
    /// its list holds it, so a copy decoded elsewhere would differ from it: the decoder
    /// refuses such a definition.
    fn accepts_definition(&self, _heap: &Heap, _value: Value) -> bool {
        true
    }
    /// Whether the decoder should offer flat dicts to [`Hooks::on_flat`] (checked per dict).
    fn wants_flat(&self) -> bool {
        false
    }
    /// A dict built directly inside a list, read in one step because it is flat: string keys,
    /// scalar, string or converted values, and at most one list of such values, whose pair
    /// index and items `list` gives (its value in `pairs` is a placeholder). Returns the
    /// dict's value and the list's (`Value::None` without a list), or `None` to have the
    /// dict decoded opcode by opcode instead. Must be equivalent to what `on_setitem` and
    /// `on_append` would do with that dict, and the list's value must depend on its items
    /// alone: the decoder may hand it back for a list of the same items ([`FlatList::Known`]).
    fn on_flat(
        &mut self,
        _heap: &mut Heap,
        _pairs: &mut [(Value, Value)],
        _list: Option<(usize, FlatList<'_>)>,
    ) -> Option<(Value, Value)> {
        None
    }
    /// A dict defined inside the list of a dict read by [`Hooks::on_flat`] (a frame dict
    /// written inline in a trace entry's frames list), read in one step: string keys and
    /// scalar or string values. Returns the value its list will hold, or `None` to have the
    /// whole outer dict decoded opcode by opcode. Must be equivalent to what `on_append`
    /// would return for that dict (it is converted where `on_append` would convert it).
    fn on_flat_item(&mut self, _heap: &mut Heap, _pairs: &[(Value, Value)]) -> Option<Value> {
        None
    }
    /// The value [`Hooks::on_flat_item`] returned before for a dict of three pairs that held
    /// the same [`item_words`], if the hooks remember it; `None` sends the dict through
    /// `on_flat_item`. Lets the decoder skip building the pairs of a dict it has seen.
    fn seen_flat_item(&mut self, _words: &[u64; 6]) -> Option<Value> {
        None
    }
}

/// The list of a dict read by [`Hooks::on_flat`].
#[derive(Clone, Copy, Debug)]
pub enum FlatList<'a> {
    /// Its items, read one by one.
    Items(&'a [Value]),
    /// The value `on_flat` returned before for a list of the same items: the list's bytes
    /// named the same memo entries, which have not changed since.
    Known(Value),
}

/// Hooks that convert nothing: the decoder then builds a plain value tree (tests, small inputs).
pub struct NoHooks;

impl Hooks for NoHooks {
    fn on_append(&mut self, _: &mut Heap, _: ObjId, item: Value) -> Result<Value, String> {
        Ok(item)
    }
    fn on_setitem(&mut self, _: &mut Heap, _: ObjId, _: Value, v: Value) -> Result<Value, String> {
        Ok(v)
    }
}

/// What a dict of three pairs holds, as six words: each key's offset in the input (keys are
/// strings), each value's offset if a string, else its integer with the top bit set. Two dicts
/// with equal words hold the same keys and values (equal offsets are the same bytes). `None`
/// for any other shape (see [`Hooks::seen_flat_item`]).
pub fn item_words(pairs: &[(Value, Value)]) -> Option<[u64; 6]> {
    let [(k0, v0), (k1, v1), (k2, v2)] = pairs else {
        return None;
    };
    Some([
        key_word(*k0)?,
        value_word(*v0)?,
        key_word(*k1)?,
        value_word(*v1)?,
        key_word(*k2)?,
        value_word(*v2)?,
    ])
}

/// A key's word in [`item_words`].
#[inline]
pub fn key_word(v: Value) -> Option<u64> {
    match v {
        Value::Str { off, .. } if off >> 62 == 0 => Some(off),
        _ => None,
    }
}

/// A value's word in [`item_words`].
#[inline]
pub fn value_word(v: Value) -> Option<u64> {
    match v {
        Value::Str { off, .. } if off >> 62 == 0 => Some(off),
        Value::Int(i) if (0..1 << 62).contains(&i) => Some(i as u64 | 1 << 63),
        _ => None,
    }
}
