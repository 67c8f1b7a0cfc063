//! Opcode boundaries found without the stack: the protocol 4 `FRAME` chain, a walk that only
//! steps over opcodes, the trace batch boundaries it can see (`APPENDS MARK EMPTY_DICT`) and
//! the memo entries it counts. The split pass 1 ([`super::split`]) starts its regions there.

use crate::pickle::ops::op;

/// Bytes of the opcode at `p` with its argument, or `None` for an opcode the walk does not
/// step over (anything pass 1 does not plan, and the explicit memo stores, whose ids a count
/// cannot predict).
#[inline(always)]
fn width(buf: &[u8], p: usize) -> Option<usize> {
    let arg = |n: usize| -> Option<usize> {
        let b = buf.get(p + 1..p + 1 + n)?;
        let mut v = 0u64;
        for (i, &x) in b.iter().enumerate() {
            v |= (x as u64) << (8 * i);
        }
        usize::try_from(v).ok()?.checked_add(1 + n)
    };
    Some(match *buf.get(p)? {
        op::MARK
        | op::STOP
        | op::POP
        | op::POP_MARK
        | op::EMPTY_DICT
        | op::EMPTY_LIST
        | op::EMPTY_TUPLE
        | op::NONE
        | op::NEWTRUE
        | op::NEWFALSE
        | op::TUPLE1
        | op::TUPLE2
        | op::TUPLE3
        | op::APPEND
        | op::APPENDS
        | op::SETITEM
        | op::SETITEMS
        | op::MEMOIZE => 1,
        op::PROTO | op::BININT1 | op::BINGET => 2,
        op::BININT2 => 3,
        op::BININT | op::LONG_BINGET => 5,
        op::BINFLOAT | op::FRAME => 9,
        op::SHORT_BINUNICODE | op::SHORT_BINBYTES | op::LONG1 => arg(1)?,
        op::BINUNICODE | op::BINBYTES => arg(4)?,
        op::LONG4 => {
            let b: [u8; 4] = buf.get(p + 1..p + 5)?.try_into().ok()?;
            usize::try_from(i32::from_le_bytes(b))
                .ok()?
                .checked_add(5)?
        }
        op::BINUNICODE8 | op::BINBYTES8 => arg(8)?,
        _ => return None,
    })
}

/// The offset of the `FRAME` opcode whose frame holds offset `target` (walking the chain of
/// frames from the protocol 4 header, each frame's length naming where the next starts), or
/// `None` when the file is not framed all the way there (protocol 2, or data written outside
/// a frame).
pub(super) fn frame_holding(buf: &[u8], target: usize) -> Option<usize> {
    if !matches!(buf.get(..2)?, [op::PROTO, 4 | 5]) {
        return None;
    }
    let mut p = 2usize;
    loop {
        if *buf.get(p)? != op::FRAME {
            return None;
        }
        let len: [u8; 8] = buf.get(p + 1..p + 9)?.try_into().ok()?;
        let next = usize::try_from(u64::from_le_bytes(len))
            .ok()?
            .checked_add(p + 9)?;
        if next > target {
            return Some(p);
        }
        p = next;
    }
}

/// From the opcode boundary `from`, the first trace batch boundary at or after `at_least`:
/// the offset of the `EMPTY_DICT` in `APPENDS MARK EMPTY_DICT` (a list's next batch starting
/// with a dict). Walks at most `limit` bytes past `at_least`.
pub(super) fn batch_start(buf: &[u8], from: usize, at_least: usize, limit: usize) -> Option<usize> {
    let give_up = at_least.saturating_add(limit);
    let (mut p, mut prev, mut prev2) = (from, 0u8, 0u8);
    while p < give_up {
        let code = *buf.get(p)?;
        if code == op::EMPTY_DICT && prev == op::MARK && prev2 == op::APPENDS && p >= at_least {
            return Some(p);
        }
        p += width(buf, p)?;
        (prev2, prev) = (prev, code);
    }
    None
}

/// Widths of the opcodes with a fixed width (0: variable, or not stepped over).
const FIXED: [u8; 256] = {
    let mut t = [0u8; 256];
    let ones = [
        op::MARK,
        op::STOP,
        op::POP,
        op::POP_MARK,
        op::EMPTY_DICT,
        op::EMPTY_LIST,
        op::EMPTY_TUPLE,
        op::NONE,
        op::NEWTRUE,
        op::NEWFALSE,
        op::TUPLE1,
        op::TUPLE2,
        op::TUPLE3,
        op::APPEND,
        op::APPENDS,
        op::SETITEM,
        op::SETITEMS,
        op::MEMOIZE,
    ];
    let mut i = 0;
    while i < ones.len() {
        t[ones[i] as usize] = 1;
        i += 1;
    }
    t[op::PROTO as usize] = 2;
    t[op::BININT1 as usize] = 2;
    t[op::BINGET as usize] = 2;
    t[op::BININT2 as usize] = 3;
    t[op::BININT as usize] = 5;
    t[op::LONG_BINGET as usize] = 5;
    t[op::BINFLOAT as usize] = 9;
    t[op::FRAME as usize] = 9;
    t
};

/// The number of `MEMOIZE` opcodes from the opcode boundary `from` to `to`, which the walk
/// must land on; `None` for an opcode it does not step over.
pub(super) fn memo_count(buf: &[u8], from: usize, to: usize) -> Option<u64> {
    let to_in = to.min(buf.len());
    let (mut p, mut n) = (from, 0u64);
    loop {
        // Fixed-width opcodes; memo references (most opcodes of a trace, LONG_BINGET in any
        // file past 256 memo entries) are tested first, so the predicted branch, not a table
        // load, decides where the next opcode is.
        while p < to_in {
            let code = buf[p];
            if code == op::LONG_BINGET {
                p += 5;
                continue;
            }
            if code == op::BINGET {
                p += 2;
                continue;
            }
            if code == op::MEMOIZE {
                n += 1;
                p += 1;
                continue;
            }
            let w = FIXED[code as usize];
            if w == 0 {
                break;
            }
            p += w as usize;
        }
        if p >= to {
            break;
        }
        p += width(buf, p)?;
    }
    (p == to).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_frames_batches_and_memo_entries() {
        // PROTO 4, FRAME(len), then [[{} x 2] in two batches of one dict each:
        // ] MEMOIZE ( } MEMOIZE e ( } MEMOIZE e .
        let body: &[u8] = b"]\x94(}\x94e(}\x94e.";
        let mut buf = vec![op::PROTO, 4, op::FRAME];
        buf.extend_from_slice(&(body.len() as u64).to_le_bytes());
        buf.extend_from_slice(body);
        assert_eq!(frame_holding(&buf, 12), Some(2));
        assert_eq!(frame_holding(&buf, 100), None);
        assert_eq!(frame_holding(b"\x80\x02]q\x00.", 3), None);
        let first = 11;
        assert_eq!(buf[first], op::EMPTY_LIST);
        let sync = batch_start(&buf, first, first, 64).unwrap();
        assert_eq!(&buf[sync - 2..sync + 1], b"e(}");
        assert_eq!(batch_start(&buf, first, sync + 1, 64), None);
        assert_eq!(memo_count(&buf, first, sync), Some(2));
        assert_eq!(memo_count(&buf, first, buf.len()), Some(3));
        // Landing inside an opcode is no count.
        assert_eq!(memo_count(&buf, 2, 3), None);
        // Explicit memo stores are not stepped over.
        assert_eq!(memo_count(b"]q\x00.", 0, 4), None);
        // Every fixed width agrees with the general one.
        for code in 0..=255u8 {
            let mut b = vec![code];
            b.extend_from_slice(&[0; 16]);
            let w = FIXED[code as usize] as usize;
            if w != 0 {
                assert_eq!(width(&b, 0), Some(w), "opcode {code:#x}");
            }
        }
    }
}
