//! A pickle writer of plain values: protocol 4, data opcodes only.
//!
//! In: a sequence of calls (a string, an integer, open a dict, memoize the top, ...). Out: the
//! bytes of a pickle that Python's `pickle.load` (with an unpickler that refuses every class),
//! PyTorch's MemoryViz.js and this crate's decoder all read. Nothing that names code is ever
//! written: the opcodes are PROTO, STOP, MARK, NONE, NEWTRUE, NEWFALSE, BININT1, BININT2,
//! BININT, LONG1, BINFLOAT, SHORT_BINUNICODE, BINUNICODE, EMPTY_LIST, EMPTY_DICT, APPENDS,
//! SETITEMS, TUPLE2, MEMOIZE, BINGET and LONG_BINGET (MemoryViz.js's unpickler knows each of
//! them). Containers are filled in batches of at most [`BATCH`] items between a MARK and an
//! APPENDS/SETITEMS, as CPython's pickler writes them; the caller writes the items and calls
//! [`Writer::end_batch`]. No FRAME opcodes (they are optional hints).

use super::ops::op;
use std::io::{Result, Write};

/// Items per MARK … APPENDS/SETITEMS batch (CPython's `_BATCHSIZE`).
pub const BATCH: usize = 1000;

/// The index of a memoized value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoId(pub u32);

/// Writes a protocol-4 pickle to `W`.
pub struct Writer<W: Write> {
    out: W,
    memo: u32,
}

impl<W: Write> Writer<W> {
    /// Starts a pickle (`PROTO 4`).
    pub fn new(mut out: W) -> Result<Writer<W>> {
        out.write_all(&[op::PROTO, 4])?;
        Ok(Writer { out, memo: 0 })
    }

    /// Ends the pickle (`STOP`) and returns the output.
    pub fn finish(mut self) -> Result<W> {
        self.out.write_all(&[op::STOP])?;
        Ok(self.out)
    }

    /// `None`.
    pub fn none(&mut self) -> Result<()> {
        self.out.write_all(&[op::NONE])
    }

    /// `True` or `False`.
    pub fn bool(&mut self, b: bool) -> Result<()> {
        self.out
            .write_all(&[if b { op::NEWTRUE } else { op::NEWFALSE }])
    }

    /// An integer, in the shortest form CPython uses: BININT1, BININT2, BININT, else LONG1 with
    /// the fewest little-endian two's-complement bytes (2^64 − 1 takes 9).
    pub fn int(&mut self, v: i128) -> Result<()> {
        if (0..=0xff).contains(&v) {
            self.out.write_all(&[op::BININT1, v as u8])
        } else if (0..=0xffff).contains(&v) {
            self.out.write_all(&[op::BININT2])?;
            self.out.write_all(&(v as u16).to_le_bytes())
        } else if (i32::MIN as i128..=i32::MAX as i128).contains(&v) {
            self.out.write_all(&[op::BININT])?;
            self.out.write_all(&(v as i32).to_le_bytes())
        } else {
            let bytes = v.to_le_bytes();
            // Drop high bytes while the next one down carries the sign.
            let mut n = bytes.len();
            while n > 1 {
                let (top, below) = (bytes[n - 1], bytes[n - 2]);
                if (top == 0 && below & 0x80 == 0) || (top == 0xff && below & 0x80 != 0) {
                    n -= 1;
                } else {
                    break;
                }
            }
            self.out.write_all(&[op::LONG1, n as u8])?;
            self.out.write_all(&bytes[..n])
        }
    }

    /// A float (BINFLOAT, big-endian).
    pub fn float(&mut self, v: f64) -> Result<()> {
        self.out.write_all(&[op::BINFLOAT])?;
        self.out.write_all(&v.to_be_bytes())
    }

    /// A string (SHORT_BINUNICODE below 256 bytes, else BINUNICODE).
    pub fn str(&mut self, s: &str) -> Result<()> {
        let b = s.as_bytes();
        if b.len() < 256 {
            self.out.write_all(&[op::SHORT_BINUNICODE, b.len() as u8])?;
        } else {
            let n = u32::try_from(b.len()).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "string of 4 GiB or more")
            })?;
            self.out.write_all(&[op::BINUNICODE])?;
            self.out.write_all(&n.to_le_bytes())?;
        }
        self.out.write_all(b)
    }

    /// An empty list, to fill with batches.
    pub fn empty_list(&mut self) -> Result<()> {
        self.out.write_all(&[op::EMPTY_LIST])
    }

    /// An empty dict, to fill with batches.
    pub fn empty_dict(&mut self) -> Result<()> {
        self.out.write_all(&[op::EMPTY_DICT])
    }

    /// Opens a batch of items (MARK).
    pub fn mark(&mut self) -> Result<()> {
        self.out.write_all(&[op::MARK])
    }

    /// Closes a batch: appends the items since the MARK to the list below it (APPENDS), or
    /// sets the key/value pairs since the MARK in the dict below it (SETITEMS).
    pub fn end_batch(&mut self, dict: bool) -> Result<()> {
        self.out
            .write_all(&[if dict { op::SETITEMS } else { op::APPENDS }])
    }

    /// The two values on top as a tuple (TUPLE2).
    pub fn tuple2(&mut self) -> Result<()> {
        self.out.write_all(&[op::TUPLE2])
    }

    /// Memoizes the value on top (MEMOIZE); [`Writer::get`] pushes it again.
    pub fn memoize(&mut self) -> Result<MemoId> {
        self.out.write_all(&[op::MEMOIZE])?;
        self.memo += 1;
        Ok(MemoId(self.memo - 1))
    }

    /// Pushes a memoized value (BINGET below 256, else LONG_BINGET).
    pub fn get(&mut self, id: MemoId) -> Result<()> {
        if id.0 < 256 {
            self.out.write_all(&[op::BINGET, id.0 as u8])
        } else {
            self.out.write_all(&[op::LONG_BINGET])?;
            self.out.write_all(&id.0.to_le_bytes())
        }
    }

    /// A list whose items `item` writes, in batches of [`BATCH`].
    pub fn list<T>(
        &mut self,
        items: impl IntoIterator<Item = T>,
        mut item: impl FnMut(&mut Self, T) -> Result<()>,
    ) -> Result<()> {
        self.empty_list()?;
        let mut open = 0;
        for x in items {
            if open == 0 {
                self.mark()?;
            }
            item(self, x)?;
            open += 1;
            if open == BATCH {
                self.end_batch(false)?;
                open = 0;
            }
        }
        if open > 0 {
            self.end_batch(false)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pickle::{decode, Limits, NoHooks, Value};

    fn bytes(f: impl FnOnce(&mut Writer<Vec<u8>>) -> Result<()>) -> Vec<u8> {
        let mut w = Writer::new(Vec::new()).unwrap();
        f(&mut w).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn integers_take_the_shortest_form() {
        // GIVEN values at each boundary, THEN the opcode and argument bytes CPython writes.
        for (v, want) in [
            (0i128, vec![op::BININT1, 0]),
            (255, vec![op::BININT1, 255]),
            (256, vec![op::BININT2, 0, 1]),
            (65535, vec![op::BININT2, 255, 255]),
            (65536, vec![op::BININT, 0, 0, 1, 0]),
            (-1, vec![op::BININT, 255, 255, 255, 255]),
            (1 << 31, vec![op::LONG1, 5, 0, 0, 0, 128, 0]),
            (-(1 << 31) - 1, vec![op::LONG1, 5, 255, 255, 255, 127, 255]),
            (u64::MAX as i128, {
                let mut v = vec![op::LONG1, 9];
                v.extend([255; 8]);
                v.push(0);
                v
            }),
        ] {
            let b = bytes(|w| w.int(v));
            assert_eq!(&b[2..b.len() - 1], &want[..], "{v}");
        }
    }

    #[test]
    fn the_decoder_reads_what_is_written() {
        // GIVEN a dict holding a 2500-item list (three batches), a tuple with a 9-byte
        // integer, a float, None and a 300-byte key (BINUNICODE).
        let b = bytes(|w| {
            w.empty_dict()?;
            w.mark()?;
            w.str("k")?;
            w.list(0..2500i128, |w, i| w.int(i))?;
            w.str("t")?;
            w.int(1)?;
            w.int(u64::MAX as i128)?;
            w.tuple2()?;
            w.str("f")?;
            w.float(0.5)?;
            w.str("n")?;
            w.none()?;
            w.str(&"x".repeat(300))?;
            w.bool(true)?;
            w.end_batch(true)?;
            Ok(())
        });
        // THEN this crate's decoder reads every value back.
        let (heap, top) = decode(&b, &mut NoHooks, Limits::for_input(b.len())).unwrap();
        let items = heap.dict(top).expect("a dict");
        assert_eq!(items.len(), 5);
        let list = heap.sequence(items[0].1).expect("a list");
        assert_eq!(list.len(), 2500);
        assert_eq!(list[2499], Value::Int(2499));
        let t = heap.sequence(items[1].1).expect("a tuple");
        assert_eq!(t, vec![Value::Int(1), Value::UInt(u64::MAX)]);
        assert_eq!(items[2].1, Value::Float(0.5));
        assert_eq!(items[3].1, Value::None);
        assert_eq!(heap.text(items[4].0).unwrap().len(), 300);
        assert_eq!(items[4].1, Value::Bool(true));
    }

    #[test]
    fn memoized_values_are_shared() {
        // GIVEN a string memoized once and fetched twice into a list.
        let b = bytes(|w| {
            w.empty_list()?;
            w.mark()?;
            w.str("shared")?;
            let id = w.memoize()?;
            w.get(id)?;
            w.end_batch(false)
        });
        // THEN the list holds the same string twice.
        let (heap, top) = decode(&b, &mut NoHooks, Limits::for_input(b.len())).unwrap();
        let v = heap.sequence(top).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(heap.text(v[0]), heap.text(v[1]));
        assert_eq!(heap.text(v[1]).unwrap(), "shared");
    }
}
