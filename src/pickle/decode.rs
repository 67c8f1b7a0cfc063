//! The decoder's four entry points: a whole pickle ([`decode`]), a damaged one kept as far as
//! it goes ([`decode_salvage`]), and the two halves of the parallel decoder: one planned
//! chunk ([`decode_chunk`]) and the rest of the file around the chunks ([`decode_planned`]).

use super::error::DecodeError;
use super::hooks::Hooks;
use super::limits::Limits;
use super::machine::Machine;
use super::scan::{Chunk, Defs};
use super::value::{Heap, ListData, ObjData, Value};

/// Decodes one pickle from `buf`, returning the heap and the top-level value.
pub fn decode<'a, H: Hooks>(
    buf: &'a [u8],
    hooks: &mut H,
    limits: Limits,
) -> Result<(Heap<'a>, Value), DecodeError> {
    let mut m = Machine::new(buf, limits);
    let top = m.run(hooks)?;
    Ok((m.heap, top))
}

/// Decodes like [`decode`], but when the input is cut short or corrupt, keeps everything
/// that was complete before the failure: open containers are closed, partly built dicts
/// (an event whose fields were still being written) are dropped, lists keep the items they
/// had. Returns the failure alongside the salvaged top-level value.
pub fn decode_salvage<'a, H: Hooks>(
    buf: &'a [u8],
    hooks: &mut H,
    limits: Limits,
) -> Result<(Heap<'a>, Value, Option<DecodeError>), DecodeError> {
    let mut m = Machine::new(buf, limits);
    m.salvage = true;
    match m.run(hooks) {
        Ok(top) => Ok((m.heap, top, None)),
        Err(e) => match m.close_open(hooks) {
            Some(top) => Ok((m.heap, top, Some(e))),
            None => Err(e),
        },
    }
}

/// Decodes the whole pickle like [`decode`], except that the element ranges of `chunks`
/// (pass 1's plan) are not decoded: [`Hooks::on_skip`] supplies handles for them. Memo
/// entries defined inside skipped ranges are decoded on demand from `defs`.
pub fn decode_planned<'a, H: Hooks>(
    buf: &'a [u8],
    hooks: &mut H,
    limits: Limits,
    chunks: &'a [Chunk],
    defs: &'a Defs,
) -> Result<(Heap<'a>, Value), DecodeError> {
    let mut m = Machine::new(buf, limits);
    m.defs = Some(defs);
    m.chunks = chunks;
    m.next_skip = chunks.first().map_or(usize::MAX, |c| c.start as usize);
    let top = m.run(hooks)?;
    Ok((m.heap, top))
}

/// Decodes the elements of one chunk into a fresh list (returned with the heap). Memo
/// entries defined before the chunk are decoded on demand from `defs`.
pub fn decode_chunk<'a, H: Hooks>(
    buf: &'a [u8],
    hooks: &mut H,
    limits: Limits,
    chunk: &Chunk,
    defs: &'a Defs,
) -> Result<(Heap<'a>, Value), DecodeError> {
    let mut m = Machine::new(buf, limits);
    m.defs = Some(defs);
    m.heap.memo_base = chunk.memo_base;
    m.pos = chunk.start as usize;
    m.end = (chunk.end as usize).min(buf.len());
    m.ranged = true;
    m.next_progress = u64::MAX;
    let list = m.heap.alloc(ObjData::List(ListData::Items(Vec::new())));
    let Value::Obj(id) = list else { unreachable!() };
    m.stack.push(list);
    if chunk.mark_open {
        m.marks.push(1);
    }
    if m.run_inner(hooks)?.is_some() {
        return m.err("STOP inside a chunk");
    }
    m.op_at = m.pos;
    let floor = m.marks.last().copied().unwrap_or(1);
    if floor < 1 || m.marks.len() > 1 {
        return m.err("chunk ends inside a container");
    }
    m.fill_list(hooks, id, floor)?;
    m.marks.clear();
    if m.stack.len() != 1 {
        return m.err("chunk leaves values on the stack");
    }
    Ok((m.heap, list))
}
