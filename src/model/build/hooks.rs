//! The builder as the decoder's [`Hooks`]: each dict appended to a list is classified and
//! converted on the spot, a `frames` list becomes a stack, and flat trace entries take the
//! decoder's fast path.

use super::builder::Builder;
use super::kinds::*;
use crate::model::ids::FrameId;
use crate::pickle::{item_words, FlatList, Heap, Hooks, ObjData, ObjId, Value};

impl Hooks for Builder<'_> {
    // Chunks are only skipped through `Skipper`.
    fn on_append(&mut self, heap: &mut Heap, _list: ObjId, item: Value) -> Result<Value, String> {
        let Value::Obj(id) = item else {
            return Ok(item);
        };
        let ObjData::Dict(pairs) = heap.data(id) else {
            return Ok(item);
        };
        let converted = match classify(heap, pairs) {
            Some(FRAME) => {
                let f = self
                    .convert_frame(heap, pairs)
                    .map_err(|e| format!("frame: {e}"))?;
                Value::Ext {
                    kind: FRAME,
                    id: f.0,
                }
            }
            Some(EVENT) => {
                let e = self
                    .convert_event(heap, pairs)
                    .map_err(|e| format!("trace entry: {e}"))?;
                self.events.push(e);
                Value::Ext {
                    kind: EVENT,
                    id: self.events.len() as u32 - 1,
                }
            }
            Some(BLOCK) => {
                let b = self
                    .convert_block(heap, pairs)
                    .map_err(|e| format!("block: {e}"))?;
                self.blocks.push(b);
                Value::Ext {
                    kind: BLOCK,
                    id: self.blocks.len() as u32 - 1,
                }
            }
            Some(SEGMENT) => {
                let s = self
                    .convert_segment(heap, pairs)
                    .map_err(|e| format!("segment: {e}"))?;
                self.segments.push(s);
                Value::Ext {
                    kind: SEGMENT,
                    id: self.segments.len() as u32 - 1,
                }
            }
            Some(ANNOTATION) => {
                let a = self.convert_annotation(heap, pairs)?;
                self.annotations.push(a);
                Value::Ext {
                    kind: ANNOTATION,
                    id: self.annotations.len() as u32 - 1,
                }
            }
            _ => return Ok(item),
        };
        heap.convert(id, converted);
        Ok(converted)
    }

    fn on_setitem(
        &mut self,
        heap: &mut Heap,
        _dict: ObjId,
        key: Value,
        value: Value,
    ) -> Result<Value, String> {
        if !key_is(heap, key, b"frames") {
            return Ok(value);
        }
        let Value::Obj(id) = value else {
            return Ok(value);
        };
        if !matches!(heap.data(id), ObjData::List(_)) {
            return Ok(value);
        }
        let sid = self.convert_stack(heap, value, "frames")?;
        let converted = Value::Ext {
            kind: STACK,
            id: sid.0,
        };
        heap.convert(id, converted);
        Ok(converted)
    }

    fn records(&self) -> usize {
        self.events.len() + self.blocks.len() + self.segments.len() + self.annotations.len()
    }

    fn wants_flat(&self) -> bool {
        self.flat
    }

    /// Trace entries only (what `on_append` would classify as one), their frames list given
    /// as frame handles; anything else, or any error, is left to the general path.
    fn on_flat(
        &mut self,
        heap: &mut Heap,
        pairs: &mut [(Value, Value)],
        list: Option<(usize, FlatList<'_>)>,
    ) -> Option<(Value, Value)> {
        let keys = &mut self.keys;
        if classify_by(pairs, |k| keys.key(heap, k)) != Some(EVENT) {
            return None;
        }
        let mut stack = Value::None;
        if let Some((at, items)) = list {
            if !key_is(heap, pairs[at].0, b"frames") {
                return None;
            }
            stack = match items {
                // Frame ids read straight from the values; an item that is not a frame: `None`.
                FlatList::Items(items) => {
                    let sid = self.stacks.intern_mapped(items, |v| match *v {
                        Value::Ext { kind: FRAME, id } => Some(FrameId(id)),
                        _ => None,
                    });
                    Value::Ext {
                        kind: STACK,
                        id: sid?.0,
                    }
                }
                // What the arm above returned for these items before.
                FlatList::Known(stack) => stack,
            };
            pairs[at].1 = stack;
        }
        let e = self.convert_event(heap, pairs).ok()?;
        self.events.push(e);
        self.flat_taken += 1;
        let id = self.events.len() as u32 - 1;
        Some((Value::Ext { kind: EVENT, id }, stack))
    }

    /// Frame dicts only (what `on_append` would classify as one), converted as it would.
    fn on_flat_item(&mut self, heap: &mut Heap, pairs: &[(Value, Value)]) -> Option<Value> {
        let keys = &mut self.keys;
        if classify_by(pairs, |k| keys.key(heap, k)) != Some(FRAME) {
            return None;
        }
        let f = self.convert_frame(heap, pairs).ok()?;
        if let Some(words) = item_words(pairs) {
            self.frame_at[frame_slot(&words)] = (words, f);
        }
        Some(Value::Ext {
            kind: FRAME,
            id: f.0,
        })
    }

    fn seen_flat_item(&mut self, words: &[u64; 6]) -> Option<Value> {
        let (at, id) = self.frame_at[frame_slot(words)];
        (at == *words).then_some(Value::Ext {
            kind: FRAME,
            id: id.0,
        })
    }

    fn accepts_definition(&self, heap: &Heap, value: Value) -> bool {
        match dict_pairs(heap, value) {
            Some((_, pairs)) => matches!(classify(heap, pairs), None | Some(FRAME)),
            None => true,
        }
    }

    fn on_progress(&mut self, offset: u64) {
        if let Some(p) = self.progress.as_mut() {
            p(offset)
        }
        // Keep 4 MiB behind the decoder mapped, hand back 8 MiB at a time; strings read
        // again later fault back in from the page cache.
        let upto = offset.saturating_sub(4 << 20);
        if let Some(r) = self.release {
            if upto >= self.released + (8 << 20) {
                r(self.released as usize, (upto - self.released) as usize);
                self.released = upto;
            }
        }
    }
}

/// The slot of [`Builder::frame_at`] for a frame dict's words.
fn frame_slot(words: &[u64; 6]) -> usize {
    let mut h = 0u64;
    for w in words {
        h = (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    (h >> 40) as usize & (super::builder::FRAME_AT_SLOTS - 1)
}
