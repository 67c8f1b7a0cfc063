//! The opcode walk of pass 1: one match arm per opcode, each a step of the scanner; anything
//! the plan cannot express gives the plan up.

use super::scanner::*;
use crate::pickle::ops::{self, op};

impl Scanner<'_, '_> {
    /// Walks the opcodes to the pickle's STOP, emitting chunks on the way; `None` gives the
    /// plan up.
    pub(super) fn run(&mut self) -> S<()> {
        loop {
            let mut op_at = self.pos;
            // Refills, region starts; an adopted region moves the position on, maybe to the
            // next region's start.
            while op_at >= self.watch_at {
                if self.watch(op_at)? {
                    return Some(());
                }
                if self.pos == op_at {
                    break;
                }
                op_at = self.pos;
            }
            let code = *self.buf.get(self.pos)?;
            self.pos += 1;
            match code {
                op::PROTO => {
                    if self.u8()? > 5 {
                        return None;
                    }
                }
                op::FRAME => {
                    self.u64()?;
                }
                op::STOP => {
                    if !self.marks.is_empty() || self.stack.len() != 1 || self.region {
                        return None;
                    }
                    self.consume_above(0)?;
                    self.close_open();
                    return Some(());
                }
                op::MARK => {
                    if self.marks.len() >= 1000 {
                        return None;
                    }
                    self.marks.push(Mark {
                        at: self.stack.len(),
                    });
                }
                op::EMPTY_DICT
                    if self.skim
                        && self.in_trace_batch()
                        && self.publish_first(op_at)
                        && self.skim_entry(op_at)? =>
                {
                    self.fill_early()?;
                }
                op::EMPTY_DICT => {
                    let tag = if self.stack.is_empty() {
                        T_TOP_DICT
                    } else {
                        T_PLAIN
                    };
                    self.push_container(op_at, tag)?;
                }
                op::EMPTY_LIST => {
                    let tag = self.list_tag();
                    self.push_container(op_at, tag)?;
                }
                op::EMPTY_TUPLE | op::NONE | op::NEWTRUE | op::NEWFALSE => {
                    self.push(op_at, T_PLAIN)?
                }
                op::TUPLE1
                | op::TUPLE2
                | op::TUPLE3
                | op::APPEND
                | op::APPENDS
                | op::SETITEM
                | op::SETITEMS
                | op::POP
                | op::POP_MARK => {
                    if self.fill_op(code, op_at)? {
                        return Some(());
                    }
                }
                // Lengths from the opcode table (`ops::OPS`).
                op::SHORT_BINUNICODE | op::BINUNICODE | op::BINUNICODE8 => {
                    let n = self.len_field(code)?;
                    self.string(op_at, n)?;
                }
                op::SHORT_BINBYTES | op::BINBYTES | op::BINBYTES8 | op::LONG1 | op::LONG4 => {
                    let n = usize::try_from(self.len_field(code)?).ok()?;
                    self.take(n)?;
                    self.push(op_at, T_PLAIN)?;
                }
                op::BININT1 | op::BININT2 | op::BININT | op::BINFLOAT => {
                    self.take(SCALAR[code as usize] as usize - 1)?;
                    self.push(op_at, T_PLAIN)?;
                }
                op::MEMOIZE => {
                    let idx = self.memo_next;
                    self.define(idx)?;
                    self.memo_next += 1;
                }
                op::BINPUT | op::LONG_BINPUT => {
                    let idx = if code == op::BINPUT {
                        self.u8()? as u64
                    } else {
                        self.u32()? as u64
                    };
                    self.define(idx)?;
                    self.memo_next = self.memo_next.max(idx + 1);
                }
                op::BINGET | op::LONG_BINGET => {
                    // A batch starts right after its MARK; other references (dict keys) skip
                    // the batch check.
                    if self.marks.last().is_some_and(|m| m.at == self.stack.len())
                        && self.ref_batch(op_at)?
                    {
                        continue;
                    }
                    let idx = if code == op::BINGET {
                        self.u8()? as u64
                    } else {
                        self.u32()? as u64
                    };
                    self.get(idx, op_at)?;
                }
                // Text opcodes (protocols 0/1), DUP, LIST/DICT/TUPLE with marks and every
                // code opcode: not planned; the sequential decoder handles or refuses them.
                _ => return None,
            }
        }
    }

    /// The opcodes that take values off the stack into a container or drop them: POP,
    /// POP_MARK, TUPLE1-3, APPEND(S), SETITEM(S). `Some(true)`: a region's list ended here.
    #[inline(always)]
    fn fill_op(&mut self, code: u8, op_at: usize) -> S<bool> {
        match code {
            op::POP => {
                let n = self.stack.len();
                if n <= self.floor() {
                    return None;
                }
                self.consume_above(n - 1)?;
            }
            op::POP_MARK => {
                let m = self.marks.pop()?;
                self.consume_above(m.at)?;
            }
            op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => {
                let k = (code - op::TUPLE1 + 1) as usize;
                let n = self.stack.len();
                if n < self.floor() + k {
                    return None;
                }
                let first = self.stack[n - k];
                self.consume_above(n - k)?;
                self.push(first.start as usize, T_PLAIN)?;
                let top = self.stack.len() - 1;
                self.stack[top].memo_at = first.memo_at;
            }
            op::APPEND => {
                let n = self.stack.len();
                if n < self.floor() + 2 {
                    return None;
                }
                self.list_fill(n - 2, n - 1, op_at, false)?;
            }
            op::APPENDS => {
                let m = self.marks.pop()?.at;
                if m == 0 || m <= self.floor() {
                    return None;
                }
                self.list_fill(m - 1, m, op_at, true)?;
                if self.region && self.marks.is_empty() && self.region_list_ends()? {
                    return Some(true);
                }
            }
            op::SETITEM => {
                let n = self.stack.len();
                if n < self.floor() + 3 {
                    return None;
                }
                self.fill(n - 3)?;
                self.consume_above(n - 2)?;
            }
            op::SETITEMS => {
                let m = self.marks.pop()?.at;
                if m == 0 || m <= self.floor() {
                    return None;
                }
                self.fill(m - 1)?;
                self.consume_above(m)?;
            }
            _ => return None,
        }
        Some(false)
    }
}

/// Widths of the fixed-width scalars the walk pushes as plain values.
const SCALAR: [u8; 256] = ops::widths(&[op::BININT1, op::BININT2, op::BININT, op::BINFLOAT]);
