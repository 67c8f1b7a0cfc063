//! The opcode loop: one match arm per opcode of the data-only subset, every other opcode
//! refused with the reason.

use super::{Machine, EXT_CACHE, PROGRESS_STEP, R};
use crate::pickle::error::DecodeError;
use crate::pickle::hooks::Hooks;
use crate::pickle::ops::{self, op};
use crate::pickle::value::{ListData, ObjData, Value};

impl Machine<'_> {
    pub(in crate::pickle) fn run<H: Hooks>(&mut self, hooks: &mut H) -> R<Value> {
        if self.buf.is_empty() {
            return self.err("file is empty: expected a pickle (the dump probably crashed)");
        }
        match self.run_inner(hooks)? {
            Some(v) => Ok(v),
            None => self.eof("the pickle: no STOP opcode"),
        }
    }

    /// Runs opcodes until STOP (`Some(top)`) or until `end` (`None`).
    pub(in crate::pickle) fn run_inner<H: Hooks>(&mut self, hooks: &mut H) -> R<Option<Value>> {
        loop {
            self.op_at = self.pos;
            if self.pos == self.next_skip {
                self.do_skip(hooks)?;
                continue;
            }
            if self.pos as u64 >= self.next_progress {
                hooks.on_progress(self.pos as u64);
                self.next_progress = (self.pos as u64 / PROGRESS_STEP + 1) * PROGRESS_STEP;
            }
            if self.pos >= self.end {
                if self.ranged {
                    return Ok(None);
                }
                return self.eof("the pickle: no STOP opcode");
            }
            let code = self.buf[self.pos];
            self.pos += 1;
            let was_memoize = std::mem::replace(&mut self.prev_memoize, false);
            match code {
                op::PROTO => {
                    let v = self.u8("PROTO")?;
                    if v > 5 {
                        return self.err(format!(
                            "pickle protocol {v} is newer than any memlens knows (0-5)"
                        ));
                    }
                }
                op::FRAME => {
                    let len = self.u64le("FRAME")?;
                    let left = (self.buf.len() - self.pos) as u64;
                    if len > left && !self.salvage {
                        return Err(DecodeError {
                            offset: self.op_at as u64,
                            message: format!(
                                "FRAME announces {len} bytes but only {left} are left; the snapshot is truncated"
                            ),
                            truncated: true,
                        });
                    }
                }
                op::STOP => {
                    if self.ranged {
                        return self.err("STOP inside a planned range");
                    }
                    if !self.marks.is_empty() {
                        return self.err(format!(
                            "STOP with {} MARK(s) never closed; the pickle is malformed",
                            self.marks.len()
                        ));
                    }
                    let v = self.pop("STOP")?;
                    if !self.stack.is_empty() {
                        return self.err(format!(
                            "STOP leaves {} values unused on the stack; the pickle is malformed",
                            self.stack.len()
                        ));
                    }
                    return Ok(Some(v));
                }
                op::MARK => {
                    if self.marks.len() >= self.limits.max_marks {
                        return self.err(format!(
                            "containers nested deeper than {} levels; not a snapshot",
                            self.limits.max_marks
                        ));
                    }
                    self.marks.push(self.stack.len());
                }
                op::POP => {
                    self.flat_consumed(self.stack.len().saturating_sub(1))?;
                    self.pop("POP")?;
                }
                op::POP_MARK => {
                    let m = self.pop_mark("POP_MARK")?;
                    self.flat_consumed(m)?;
                    self.stack.truncate(m);
                }
                op::DUP => {
                    self.bare_value()?;
                    self.flat_consumed(self.stack.len().saturating_sub(1))?;
                    let v = self.top("DUP")?;
                    self.heap.note_escaped(v);
                    self.push(v)?;
                }
                op::EMPTY_DICT => {
                    self.bare_value()?;
                    if hooks.wants_flat() && self.depth == 0 {
                        if self.flat_skip > 0 {
                            self.flat_skip -= 1;
                        } else if let Some(v) = self.try_flat(hooks) {
                            self.push(v)?;
                            continue;
                        }
                    }
                    let v = self.heap.new_dict();
                    self.push(v)?;
                }
                op::EMPTY_LIST => {
                    self.bare_value()?;
                    let v = self.heap.new_list();
                    self.push(v)?;
                }
                op::EMPTY_TUPLE => {
                    self.bare_value()?;
                    let v = self.heap.alloc(ObjData::Tuple(Box::new([])));
                    self.push(v)?;
                }
                op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => {
                    let n = (code - op::TUPLE1 + 1) as usize;
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + n {
                        return self.err(format!(
                            "{} needs {n} values on the stack",
                            ops::name(code).unwrap()
                        ));
                    }
                    self.flat_consumed(self.stack.len() - n)?;
                    let items: Box<[Value]> = self.stack.split_off(self.stack.len() - n).into();
                    let v = self.heap.alloc(ObjData::Tuple(items));
                    self.push(v)?;
                }
                op::TUPLE => {
                    let m = self.pop_mark("TUPLE")?;
                    self.flat_consumed(m)?;
                    let items: Box<[Value]> = self.stack.split_off(m).into();
                    let v = self.heap.alloc(ObjData::Tuple(items));
                    self.push(v)?;
                }
                op::LIST => {
                    let m = self.pop_mark("LIST")?;
                    self.flat_consumed(m)?;
                    let v = self.heap.alloc(ObjData::List(ListData::Items(Vec::new())));
                    let Value::Obj(id) = v else { unreachable!() };
                    self.fill_list(hooks, id, m)?;
                    self.push(v)?;
                }
                op::DICT => {
                    let m = self.pop_mark("DICT")?;
                    self.flat_consumed(m)?;
                    let v = self.heap.alloc(ObjData::Dict(Vec::new()));
                    let Value::Obj(id) = v else { unreachable!() };
                    self.fill_dict(hooks, id, m, "DICT")?;
                    self.push(v)?;
                }
                op::APPEND => {
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + 2 {
                        return self.err("APPEND needs a list and a value on the stack");
                    }
                    let m = self.stack.len() - 1;
                    let id = self.container(&self.heap, self.stack[m - 1], "APPEND", true)?;
                    self.fill_list(hooks, id, m)?;
                    self.flat_appended(m);
                }
                op::APPENDS => {
                    let m = self.pop_mark("APPENDS")?;
                    if m == 0 || m <= self.marks.last().copied().unwrap_or(0) {
                        return self.err("APPENDS needs a list below its MARK");
                    }
                    let target = self.stack[m - 1];
                    let id = self.container(&self.heap, target, "APPENDS", true)?;
                    self.fill_list(hooks, id, m)?;
                    self.flat_appended(m);
                }
                op::SETITEM => {
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + 3 {
                        return self.err("SETITEM needs a dict, a key and a value on the stack");
                    }
                    let m = self.stack.len() - 2;
                    self.flat_consumed(m - 1)?;
                    let id = self.container(&self.heap, self.stack[m - 1], "SETITEM", false)?;
                    self.fill_dict(hooks, id, m, "SETITEM")?;
                }
                op::SETITEMS => {
                    let m = self.pop_mark("SETITEMS")?;
                    if m == 0 || m <= self.marks.last().copied().unwrap_or(0) {
                        return self.err("SETITEMS needs a dict below its MARK");
                    }
                    self.flat_consumed(m - 1)?;
                    let target = self.stack[m - 1];
                    let id = self.container(&self.heap, target, "SETITEMS", false)?;
                    self.fill_dict(hooks, id, m, "SETITEMS")?;
                }
                op::SHORT_BINUNICODE => {
                    let n = self
                        .len_arg::<{ ops::len_bytes(op::SHORT_BINUNICODE) }>("SHORT_BINUNICODE")?;
                    let v = self.str_value(n, "SHORT_BINUNICODE")?;
                    self.push(v)?;
                }
                op::BINUNICODE => {
                    let n = self.len_arg::<{ ops::len_bytes(op::BINUNICODE) }>("BINUNICODE")?;
                    let v = self.str_value(n, "BINUNICODE")?;
                    self.push(v)?;
                }
                op::BINUNICODE8 => {
                    let n = self.len_arg::<{ ops::len_bytes(op::BINUNICODE8) }>("BINUNICODE8")?;
                    let v = self.str_value(n, "BINUNICODE8")?;
                    self.push(v)?;
                }
                op::UNICODE => {
                    let raw = self.line("UNICODE")?;
                    let s = unescape_raw_unicode(raw);
                    self.heap.owned.push(s);
                    let v = Value::Owned(self.heap.owned.len() as u32 - 1);
                    self.push(v)?;
                }
                op::SHORT_BINBYTES => {
                    let n =
                        self.len_arg::<{ ops::len_bytes(op::SHORT_BINBYTES) }>("SHORT_BINBYTES")?;
                    let v = self.bytes_value(n, "SHORT_BINBYTES")?;
                    self.push(v)?;
                }
                op::BINBYTES => {
                    let n = self.len_arg::<{ ops::len_bytes(op::BINBYTES) }>("BINBYTES")?;
                    let v = self.bytes_value(n, "BINBYTES")?;
                    self.push(v)?;
                }
                op::BINBYTES8 => {
                    let n = self.len_arg::<{ ops::len_bytes(op::BINBYTES8) }>("BINBYTES8")?;
                    let v = self.bytes_value(n, "BINBYTES8")?;
                    self.push(v)?;
                }
                op::BININT1 => {
                    let v = self.u8("BININT1")?;
                    self.push(Value::Int(v as i64))?;
                }
                op::BININT2 => {
                    let b = self.take(const { ops::arg_bytes(op::BININT2) }, "BININT2")?;
                    self.push(Value::Int(u16::from_le_bytes([b[0], b[1]]) as i64))?;
                }
                op::BININT => {
                    let v = self.u32le("BININT")? as i32;
                    self.push(Value::Int(v as i64))?;
                }
                op::LONG1 => {
                    let n = self.u8("LONG1")? as usize;
                    let b = self.take(n, "LONG1")?;
                    let v = self.long(b);
                    self.push(v)?;
                }
                op::LONG4 => {
                    let n = self.u32le("LONG4")? as i32;
                    if n < 0 {
                        return self.err(format!("LONG4 length {n} is negative"));
                    }
                    let n = self.length(n as u64, "LONG4")?;
                    let b = self.take(n, "LONG4")?;
                    let v = self.long(b);
                    self.push(v)?;
                }
                op::INT | op::LONG => {
                    let what = ops::name(code).unwrap();
                    let text = self.line(what)?;
                    let v = self.decimal_int(text, what)?;
                    self.push(v)?;
                }
                op::BINFLOAT => {
                    let b = self.take(const { ops::arg_bytes(op::BINFLOAT) }, "BINFLOAT")?;
                    self.push(Value::Float(f64::from_be_bytes(b.try_into().unwrap())))?;
                }
                op::FLOAT => {
                    let text = self.line("FLOAT")?;
                    let s = std::str::from_utf8(text).unwrap_or("").trim();
                    match s.parse::<f64>() {
                        Ok(f) => self.push(Value::Float(f))?,
                        Err(_) => {
                            return self.err(format!("FLOAT: expected a number, found {s:?}"))
                        }
                    }
                }
                op::NONE => {
                    self.bare_value()?;
                    self.push(Value::None)?
                }
                op::NEWTRUE | op::NEWFALSE => {
                    self.bare_value()?;
                    self.push(Value::Bool(code == op::NEWTRUE))?
                }
                op::MEMOIZE => {
                    if was_memoize {
                        return self.err("MEMOIZE twice in a row on one object; not a snapshot");
                    }
                    let v = self.top("MEMOIZE")?;
                    let index = match self.memo_next.as_mut() {
                        Some(n) => {
                            *n += 1;
                            *n - 1
                        }
                        None => self.heap.memo_base + self.heap.memo.len() as u64,
                    };
                    let v = self.flat_memoized(index, v);
                    self.memo_put(index, v)?;
                    self.prev_memoize = true;
                }
                op::BINPUT | op::LONG_BINPUT | op::PUT => {
                    let index = match code {
                        op::BINPUT => self.u8("BINPUT")? as u64,
                        op::LONG_BINPUT => self.u32le("LONG_BINPUT")? as u64,
                        _ => self.text_index("PUT")?,
                    };
                    let v = self.top("PUT")?;
                    let v = self.flat_memoized(index, v);
                    self.memo_put(index, v)?;
                }
                op::BINGET | op::LONG_BINGET => {
                    // Frames lists are long runs of memo references: decode the whole run here.
                    let mut code = code;
                    // Tight loop first: references to converted or scalar entries (in the memo
                    // or, in a chunk, in the cache of outside entries), each copied as one
                    // 16-byte block; anything else continues in the general loop below.
                    let buf = self.buf;
                    let limit = self.end.min(self.next_skip).min(buf.len());
                    let room = self.limits.max_stack.saturating_sub(self.stack.len());
                    let base = self.heap.memo_base;
                    let mut p = self.pos - 1;
                    let mut pushed = 0usize;
                    while pushed < room && p + 2 <= limit {
                        let (index, next) = match buf[p] {
                            op::BINGET => (buf[p + 1] as u64, p + 2),
                            op::LONG_BINGET if p + 5 <= limit => {
                                let b: [u8; 4] = buf[p + 1..p + 5].try_into().unwrap_or([0; 4]);
                                (u32::from_le_bytes(b) as u64, p + 5)
                            }
                            _ => break,
                        };
                        let rel = index.wrapping_sub(base) as usize;
                        let v = match self.heap.memo.get(rel..rel.wrapping_add(1)) {
                            Some(slot) if !matches!(slot[0], Value::Obj(_)) => slot,
                            _ => match self.ext_cache.get((index as usize) & (EXT_CACHE - 1)) {
                                Some(e) if e.0 == index => std::slice::from_ref(&e.1),
                                _ => break,
                            },
                        };
                        self.stack.extend_from_slice(v);
                        p = next;
                        pushed += 1;
                    }
                    if pushed > 0 {
                        self.op_at = p;
                        self.pos = p;
                        match buf.get(p) {
                            Some(&c @ (op::BINGET | op::LONG_BINGET)) if p < limit => {
                                self.pos = p + 1;
                                code = c;
                            }
                            _ => continue,
                        }
                    }
                    loop {
                        let index = if code == op::BINGET {
                            self.u8("BINGET")? as u64
                        } else {
                            self.u32le("LONG_BINGET")? as u64
                        };
                        let rel = index.wrapping_sub(self.heap.memo_base) as usize;
                        // Fast path: a converted or scalar entry, copied as one 16-byte block
                        // (a field-wise copy of the 15-byte payload stalls store forwarding).
                        if let Some(slot) = self.heap.memo.get(rel..rel.wrapping_add(1)) {
                            if !matches!(slot[0], Value::Obj(_))
                                && self.stack.len() < self.limits.max_stack
                            {
                                self.stack.extend_from_slice(slot);
                                match self.buf.get(self.pos) {
                                    Some(&c @ (op::BINGET | op::LONG_BINGET)) => {
                                        self.op_at = self.pos;
                                        self.pos += 1;
                                        code = c;
                                        continue;
                                    }
                                    _ => break,
                                }
                            }
                        }
                        // Entries from outside the decoded range (shared frame dicts): a
                        // direct-mapped cache in front of the sparse memo; a hit is copied
                        // whole, as above.
                        let slot = (index as usize) & (EXT_CACHE - 1);
                        if self.defs.is_some() && self.stack.len() < self.limits.max_stack {
                            if let Some(e) = self.ext_cache.get(slot..slot + 1) {
                                if e[0].0 == index {
                                    self.stack.extend_from_slice(std::slice::from_ref(&e[0].1));
                                    match self.buf.get(self.pos) {
                                        Some(&c @ (op::BINGET | op::LONG_BINGET)) => {
                                            self.op_at = self.pos;
                                            self.pos += 1;
                                            code = c;
                                            continue;
                                        }
                                        _ => break,
                                    }
                                }
                            }
                        }
                        let v = match self.heap.memo.get(rel) {
                            Some(v) if !matches!(v, Value::Obj(_)) => *v,
                            _ if self.defs.is_none() => self.memo_get(hooks, index)?,
                            _ => match self.ext_cache.get(slot) {
                                Some(&(i, v)) if i == index => v,
                                _ => {
                                    let v = self.memo_get(hooks, index)?;
                                    let v = self.heap.resolve(v);
                                    if !matches!(v, Value::Obj(_)) {
                                        if self.ext_cache.is_empty() {
                                            self.ext_cache =
                                                vec![(u64::MAX, Value::None); EXT_CACHE];
                                        }
                                        self.ext_cache[slot] = (index, v);
                                    }
                                    v
                                }
                            },
                        };
                        self.push(v)?;
                        match self.buf.get(self.pos) {
                            Some(&c @ (op::BINGET | op::LONG_BINGET)) => {
                                self.op_at = self.pos;
                                self.pos += 1;
                                code = c;
                            }
                            _ => break,
                        }
                    }
                }
                op::GET => {
                    let index = self.text_index("GET")?;
                    let v = self.memo_get(hooks, index)?;
                    self.push(v)?;
                }
                c => return self.err(ops::refusal(c)),
            }
        }
    }
}

/// Decodes protocol 0 `raw-unicode-escape` text (`\uXXXX`, `\UXXXXXXXX`, bytes as Latin-1).
fn unescape_raw_unicode(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\' && i + 1 < raw.len() && (raw[i + 1] == b'u' || raw[i + 1] == b'U') {
            let n = if raw[i + 1] == b'u' { 4 } else { 8 };
            if let Some(hex) = raw.get(i + 2..i + 2 + n) {
                if let Some(c) = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                {
                    out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                    i += 2 + n;
                    continue;
                }
            }
        }
        out.push(raw[i] as char);
        i += 1;
    }
    out
}
