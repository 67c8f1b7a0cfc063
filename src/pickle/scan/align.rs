//! Opcode boundaries found without the stack: the protocol 4 `FRAME` chain, a walk that only
//! steps over opcodes, the trace batch boundaries it can see (`APPENDS MARK EMPTY_DICT`) and
//! the memo entries it counts. The split pass 1 ([`super::split`]) starts its regions there.

use crate::pickle::ops::{self, op, Arg};

/// What the bytes at an opcode boundary are, as far as a walk without the stack can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Too few bytes to say how long the opcode is.
    Short,
    /// The opcode with its argument takes this many bytes (possibly more than are there).
    Width(u64),
    /// The opcode's argument is text up to a newline (protocol 0/1).
    Line,
    /// `STOP`: the pickle ends after this byte.
    Stop,
    /// No opcode the decoder reads ([`refusal`] says why).
    Refused,
}

/// Longest argument a length field may announce: the decoder refuses more (1 TiB).
const MAX_LENGTH: u64 = 1 << 40;

/// What the opcode at the start of `buf` is and how many bytes it takes, for every opcode of
/// the data-only subset the decoder reads (`machine/dispatch.rs`); everything else, and a
/// length past [`MAX_LENGTH`] or a negative `LONG4` length, is [`Step::Refused`].
#[inline(always)]
pub fn step(buf: &[u8]) -> Step {
    let arg = |n: usize| -> Step {
        let Some(b) = buf.get(1..1 + n) else {
            return Step::Short;
        };
        let mut v = 0u64;
        for (i, &x) in b.iter().enumerate() {
            v |= (x as u64) << (8 * i);
        }
        if v > MAX_LENGTH {
            return Step::Refused;
        }
        Step::Width(v + 1 + n as u64)
    };
    let Some(&code) = buf.first() else {
        return Step::Short;
    };
    if code == op::STOP {
        return Step::Stop;
    }
    let fixed = FIXED[code as usize];
    if fixed != 0 {
        return Step::Width(fixed as u64);
    }
    match ops::get(code) {
        Some(o) if o.read => match o.arg {
            Arg::Fixed(n) => Step::Width(1 + n as u64),
            Arg::Counted(k) => arg(k as usize),
            Arg::Counted4Signed => match buf.get(1..5) {
                None => Step::Short,
                Some(b) => match i32::from_le_bytes(b.try_into().expect("4 bytes")) {
                    n if n < 0 => Step::Refused,
                    n => Step::Width(n as u64 + 5),
                },
            },
            Arg::Line => Step::Line,
            Arg::TwoLines => Step::Refused,
        },
        _ => Step::Refused,
    }
}

/// Why [`step`] refused the opcode at the start of `buf`, in the decoder's words.
pub fn refusal(buf: &[u8]) -> String {
    let code = buf.first().copied().unwrap_or(0);
    // Only a length field of 4 or 8 bytes can announce too much.
    let n = match ops::get(code).map(|o| o.arg) {
        Some(Arg::Counted(k)) if k > 1 => k as usize,
        Some(Arg::Counted4Signed) => 4,
        _ => return ops::refusal(code),
    };
    let b = buf.get(1..1 + n).unwrap_or(&[]);
    let len = b
        .iter()
        .enumerate()
        .fold(0u64, |v, (i, &x)| v | (x as u64) << (8 * i));
    let name = ops::name(code).unwrap_or("?");
    if code == op::LONG4 {
        return format!("LONG4 length {} is negative", len as u32 as i32);
    }
    format!("{name} length {len} is past 2^40 bytes, more than any snapshot holds; not a snapshot")
}

/// Follows a pickle's opcodes as its bytes arrive, chunk by chunk, in constant memory: says
/// where it ends (just after `STOP`) or where it stops being a pickle, so that a stream or a
/// decompressor is read no further. It walks without the stack, so an opcode it steps over
/// can still be refused by the decoder; one it refuses, the decoder refuses too.
#[derive(Debug, Default)]
pub struct Follow {
    /// Bytes seen so far (the offset of the next byte fed).
    at: u64,
    /// Argument bytes still to step over.
    skip: u64,
    /// Inside a text argument, looking for its newline.
    line: bool,
    /// The first bytes of an opcode split across chunks (an opcode's header is at most 9).
    head: [u8; 9],
    held: usize,
}

/// Where [`Follow::feed`] got to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Followed {
    /// No end yet: feed more.
    More,
    /// The pickle ends at this offset (just after its `STOP`); the bytes after are no part
    /// of it.
    End(u64),
    /// The bytes stop being a pickle at this offset, for this reason (the decoder's words).
    Refused(u64, String),
}

impl Follow {
    /// A walk from the first byte of a pickle.
    pub fn new() -> Follow {
        Follow::default()
    }

    /// Walks the next `chunk` of the input.
    pub fn feed(&mut self, mut chunk: &[u8]) -> Followed {
        loop {
            if self.skip > 0 {
                let n = self.skip.min(chunk.len() as u64);
                self.skip -= n;
                self.at += n;
                chunk = &chunk[n as usize..];
                if self.skip > 0 {
                    return Followed::More;
                }
            }
            if self.line {
                match chunk.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        self.line = false;
                        self.at += i as u64 + 1;
                        chunk = &chunk[i + 1..];
                    }
                    None => {
                        self.at += chunk.len() as u64;
                        return Followed::More;
                    }
                }
            }
            if chunk.is_empty() {
                return Followed::More;
            }
            // An opcode boundary at `at - held`: its first bytes, held over or in this chunk.
            let take = (self.head.len() - self.held).min(chunk.len());
            let mut head = self.head;
            head[self.held..self.held + take].copy_from_slice(&chunk[..take]);
            let have = &head[..self.held + take];
            let start = self.at - self.held as u64;
            match step(have) {
                Step::Short => {
                    self.head = head;
                    self.held += take;
                    self.at += take as u64;
                    return Followed::More;
                }
                Step::Stop => return Followed::End(start + 1),
                Step::Refused => return Followed::Refused(start, refusal(have)),
                Step::Line => {
                    // Only length-prefixed opcodes are ever held over, so nothing is held:
                    // the text starts after this byte.
                    debug_assert_eq!(self.held, 0);
                    self.at += 1;
                    chunk = &chunk[1..];
                    self.line = true;
                }
                Step::Width(w) => {
                    // Bytes of this chunk that belong to the opcode (the held ones are counted).
                    let in_chunk = w - self.held as u64;
                    self.skip = in_chunk;
                }
            }
            self.held = 0;
        }
    }
}

/// Bytes of the opcode at `p` with its argument, or `None` for an opcode the walk does not
/// step over (anything pass 1 does not plan, and the explicit memo stores, whose ids a count
/// cannot predict).
#[inline(always)]
fn width(buf: &[u8], p: usize) -> Option<usize> {
    let code = *buf.get(p)?;
    let stepped = FIXED[code as usize] != 0
        || matches!(
            ops::get(code).map(|o| o.arg),
            Some(Arg::Counted(_) | Arg::Counted4Signed)
        );
    match step(buf.get(p..)?) {
        Step::Width(w) if stepped => usize::try_from(w).ok(),
        Step::Stop if stepped => Some(1),
        _ => None,
    }
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

/// Widths of the fixed-width opcodes the walk steps over (0: variable, or not stepped over:
/// explicit memo stores and protocol 0/1 opcodes), from [`ops::OPS`].
const FIXED: [u8; 256] = ops::widths(&[
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
    op::PROTO,
    op::BININT1,
    op::BINGET,
    op::BININT2,
    op::BININT,
    op::LONG_BINGET,
    op::BINFLOAT,
    op::FRAME,
]);

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
                p += const { ops::width(op::LONG_BINGET) };
                continue;
            }
            if code == op::BINGET {
                p += const { ops::width(op::BINGET) };
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

    /// Feeds `buf` to a fresh walk in chunks of `size`; where it ended.
    fn follow(buf: &[u8], size: usize) -> Followed {
        let mut f = Follow::new();
        for c in buf.chunks(size.max(1)) {
            match f.feed(c) {
                Followed::More => {}
                end => return end,
            }
        }
        Followed::More
    }

    #[test]
    fn the_walk_that_follows_a_stream_ends_where_the_decoder_does() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut seen = 0;
        for dir in [root.join("samples"), root.join("../shared/samples/real")] {
            let Some(entries) = crate::test_ci::read_dir_or_skip(&dir) else {
                continue;
            };
            for path in entries.flatten().map(|e| e.path()) {
                let Ok(input) = crate::input::read(&path) else {
                    continue;
                };
                let buf = input.bytes();
                let name = path.display().to_string();
                let ok = crate::pickle::decode(
                    buf,
                    &mut crate::pickle::NoHooks,
                    crate::pickle::Limits::for_input(buf.len()),
                )
                .is_ok();
                if !ok || buf.last() != Some(&op::STOP) {
                    continue;
                }
                // Every opcode boundary is found: the walk ends on the last byte, in any
                // chunking, and ignores what follows.
                for size in [1, 2, 7, 9, 4096, usize::MAX] {
                    assert_eq!(follow(buf, size), Followed::End(buf.len() as u64), "{name}");
                }
                let mut more = buf.to_vec();
                more.extend_from_slice(b"\x00\xffjunk");
                assert_eq!(follow(&more, 5), Followed::End(buf.len() as u64), "{name}");
                seen += 1;
            }
        }
        assert!(seen >= 10, "only {seen} samples");
    }

    #[test]
    fn the_walk_refuses_what_the_decoder_refuses_where_it_does() {
        // A valid start, then a byte that is no opcode: the decoder's own words and offset.
        let mut buf = b"\x80\x04\x95\x60\x00\x00\x00\x00\x00\x00\x00}\x94(".to_vec();
        buf.extend_from_slice(&[0u8; 100]);
        let e = crate::pickle::decode(
            &buf,
            &mut crate::pickle::NoHooks,
            crate::pickle::Limits::for_input(buf.len()),
        )
        .err()
        .unwrap();
        for size in [1, 3, 1000] {
            assert_eq!(
                follow(&buf, size),
                Followed::Refused(e.offset, e.message.clone())
            );
        }
        assert_eq!(e.offset, 14);
        // Code is refused as the decoder refuses it; protocol 0 text opcodes are stepped over
        // across chunks; a length past 2^40 is refused.
        let code = b"(I1\nI22\ncos\nsystem\n";
        assert_eq!(
            follow(code, 2),
            Followed::Refused(8, crate::pickle::ops::refusal(op::GLOBAL))
        );
        let mut huge = vec![op::BINBYTES8];
        huge.extend_from_slice(&(1u64 << 41).to_le_bytes());
        match follow(&huge, 1) {
            Followed::Refused(0, m) => assert!(m.contains("past 2^40"), "{m}"),
            other => panic!("{other:?}"),
        }
        // A length that is there is stepped over, whatever its bytes.
        let mut bytes = vec![op::SHORT_BINBYTES, 3, b'.', 0, 0xff, op::STOP];
        bytes.push(0);
        assert_eq!(follow(&bytes, 1), Followed::End(6));
        let neg = [op::LONG4, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(
            follow(&neg, 2),
            Followed::Refused(0, "LONG4 length -1 is negative".into())
        );
    }
}
