//! Pickle opcodes: their bytes, names and arguments ([`OPS`], the one table every walker
//! takes argument lengths from). What each opcode does is in [`super::machine`].

/// Opcode byte values (CPython `Lib/pickle.py`), protocols 0 to 5.
#[allow(missing_docs)]
pub mod op {
    pub const MARK: u8 = b'(';
    pub const STOP: u8 = b'.';
    pub const POP: u8 = b'0';
    pub const POP_MARK: u8 = b'1';
    pub const DUP: u8 = b'2';
    pub const FLOAT: u8 = b'F';
    pub const INT: u8 = b'I';
    pub const BININT: u8 = b'J';
    pub const BININT1: u8 = b'K';
    pub const LONG: u8 = b'L';
    pub const BININT2: u8 = b'M';
    pub const NONE: u8 = b'N';
    pub const PERSID: u8 = b'P';
    pub const BINPERSID: u8 = b'Q';
    pub const REDUCE: u8 = b'R';
    pub const STRING: u8 = b'S';
    pub const BINSTRING: u8 = b'T';
    pub const SHORT_BINSTRING: u8 = b'U';
    pub const UNICODE: u8 = b'V';
    pub const BINUNICODE: u8 = b'X';
    pub const APPEND: u8 = b'a';
    pub const BUILD: u8 = b'b';
    pub const GLOBAL: u8 = b'c';
    pub const DICT: u8 = b'd';
    pub const EMPTY_DICT: u8 = b'}';
    pub const APPENDS: u8 = b'e';
    pub const GET: u8 = b'g';
    pub const BINGET: u8 = b'h';
    pub const INST: u8 = b'i';
    pub const LONG_BINGET: u8 = b'j';
    pub const LIST: u8 = b'l';
    pub const EMPTY_LIST: u8 = b']';
    pub const OBJ: u8 = b'o';
    pub const PUT: u8 = b'p';
    pub const BINPUT: u8 = b'q';
    pub const LONG_BINPUT: u8 = b'r';
    pub const SETITEM: u8 = b's';
    pub const TUPLE: u8 = b't';
    pub const EMPTY_TUPLE: u8 = b')';
    pub const SETITEMS: u8 = b'u';
    pub const BINFLOAT: u8 = b'G';
    pub const PROTO: u8 = 0x80;
    pub const NEWOBJ: u8 = 0x81;
    pub const EXT1: u8 = 0x82;
    pub const EXT2: u8 = 0x83;
    pub const EXT4: u8 = 0x84;
    pub const TUPLE1: u8 = 0x85;
    pub const TUPLE2: u8 = 0x86;
    pub const TUPLE3: u8 = 0x87;
    pub const NEWTRUE: u8 = 0x88;
    pub const NEWFALSE: u8 = 0x89;
    pub const LONG1: u8 = 0x8a;
    pub const LONG4: u8 = 0x8b;
    pub const BINBYTES: u8 = b'B';
    pub const SHORT_BINBYTES: u8 = b'C';
    pub const SHORT_BINUNICODE: u8 = 0x8c;
    pub const BINUNICODE8: u8 = 0x8d;
    pub const BINBYTES8: u8 = 0x8e;
    pub const EMPTY_SET: u8 = 0x8f;
    pub const ADDITEMS: u8 = 0x90;
    pub const FROZENSET: u8 = 0x91;
    pub const NEWOBJ_EX: u8 = 0x92;
    pub const STACK_GLOBAL: u8 = 0x93;
    pub const MEMOIZE: u8 = 0x94;
    pub const FRAME: u8 = 0x95;
    pub const BYTEARRAY8: u8 = 0x96;
    pub const NEXT_BUFFER: u8 = 0x97;
    pub const READONLY_BUFFER: u8 = 0x98;
}

/// How an opcode's argument is laid out after its byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// Exactly this many bytes (0: none).
    Fixed(u8),
    /// A little-endian unsigned length of this many bytes (1, 4 or 8), then that many bytes.
    Counted(u8),
    /// `LONG4`: a little-endian *signed* 4-byte length (negative is refused), then the bytes.
    Counted4Signed,
    /// Text up to and including a newline (protocols 0 and 1).
    Line,
    /// Two newline-terminated lines (`GLOBAL`, `INST`: a module and a name).
    TwoLines,
}

/// One opcode: its byte, `pickletools`' name, its argument, and whether memlens reads it (the
/// data-only subset of `snapshot-format.md §7`; every other opcode is refused).
#[derive(Clone, Copy, Debug)]
pub struct Op {
    /// The byte.
    pub code: u8,
    /// CPython's name for it.
    pub name: &'static str,
    /// What follows the byte.
    pub arg: Arg,
    /// The decoder executes it (`machine/dispatch.rs`); false for code opcodes and the data
    /// opcodes snapshots never use.
    pub read: bool,
}

const fn o(code: u8, name: &'static str, arg: Arg, read: bool) -> Op {
    Op {
        code,
        name,
        arg,
        read,
    }
}

/// Every opcode of protocols 0 to 5: the one table every walker takes argument lengths from
/// (`machine/dispatch.rs`, `machine/flat.rs`, `scan/walk.rs`, `scan/skim.rs`,
/// `scan/align.rs`).
pub const OPS: [Op; 68] = {
    use op::*;
    use Arg::*;
    [
        o(MARK, "MARK", Fixed(0), true),
        o(STOP, "STOP", Fixed(0), true),
        o(POP, "POP", Fixed(0), true),
        o(POP_MARK, "POP_MARK", Fixed(0), true),
        o(DUP, "DUP", Fixed(0), true),
        o(FLOAT, "FLOAT", Line, true),
        o(INT, "INT", Line, true),
        o(BININT, "BININT", Fixed(4), true),
        o(BININT1, "BININT1", Fixed(1), true),
        o(LONG, "LONG", Line, true),
        o(BININT2, "BININT2", Fixed(2), true),
        o(NONE, "NONE", Fixed(0), true),
        o(PERSID, "PERSID", Line, false),
        o(BINPERSID, "BINPERSID", Fixed(0), false),
        o(REDUCE, "REDUCE", Fixed(0), false),
        o(STRING, "STRING", Line, false),
        o(BINSTRING, "BINSTRING", Counted(4), false),
        o(SHORT_BINSTRING, "SHORT_BINSTRING", Counted(1), false),
        o(UNICODE, "UNICODE", Line, true),
        o(BINUNICODE, "BINUNICODE", Counted(4), true),
        o(APPEND, "APPEND", Fixed(0), true),
        o(BUILD, "BUILD", Fixed(0), false),
        o(GLOBAL, "GLOBAL", TwoLines, false),
        o(DICT, "DICT", Fixed(0), true),
        o(EMPTY_DICT, "EMPTY_DICT", Fixed(0), true),
        o(APPENDS, "APPENDS", Fixed(0), true),
        o(GET, "GET", Line, true),
        o(BINGET, "BINGET", Fixed(1), true),
        o(INST, "INST", TwoLines, false),
        o(LONG_BINGET, "LONG_BINGET", Fixed(4), true),
        o(LIST, "LIST", Fixed(0), true),
        o(EMPTY_LIST, "EMPTY_LIST", Fixed(0), true),
        o(OBJ, "OBJ", Fixed(0), false),
        o(PUT, "PUT", Line, true),
        o(BINPUT, "BINPUT", Fixed(1), true),
        o(LONG_BINPUT, "LONG_BINPUT", Fixed(4), true),
        o(SETITEM, "SETITEM", Fixed(0), true),
        o(TUPLE, "TUPLE", Fixed(0), true),
        o(EMPTY_TUPLE, "EMPTY_TUPLE", Fixed(0), true),
        o(SETITEMS, "SETITEMS", Fixed(0), true),
        o(BINFLOAT, "BINFLOAT", Fixed(8), true),
        o(PROTO, "PROTO", Fixed(1), true),
        o(NEWOBJ, "NEWOBJ", Fixed(0), false),
        o(EXT1, "EXT1", Fixed(1), false),
        o(EXT2, "EXT2", Fixed(2), false),
        o(EXT4, "EXT4", Fixed(4), false),
        o(TUPLE1, "TUPLE1", Fixed(0), true),
        o(TUPLE2, "TUPLE2", Fixed(0), true),
        o(TUPLE3, "TUPLE3", Fixed(0), true),
        o(NEWTRUE, "NEWTRUE", Fixed(0), true),
        o(NEWFALSE, "NEWFALSE", Fixed(0), true),
        o(LONG1, "LONG1", Counted(1), true),
        o(LONG4, "LONG4", Counted4Signed, true),
        o(BINBYTES, "BINBYTES", Counted(4), true),
        o(SHORT_BINBYTES, "SHORT_BINBYTES", Counted(1), true),
        o(SHORT_BINUNICODE, "SHORT_BINUNICODE", Counted(1), true),
        o(BINUNICODE8, "BINUNICODE8", Counted(8), true),
        o(BINBYTES8, "BINBYTES8", Counted(8), true),
        o(EMPTY_SET, "EMPTY_SET", Fixed(0), false),
        o(ADDITEMS, "ADDITEMS", Fixed(0), false),
        o(FROZENSET, "FROZENSET", Fixed(0), false),
        o(NEWOBJ_EX, "NEWOBJ_EX", Fixed(0), false),
        o(STACK_GLOBAL, "STACK_GLOBAL", Fixed(0), false),
        o(MEMOIZE, "MEMOIZE", Fixed(0), true),
        o(FRAME, "FRAME", Fixed(8), true),
        o(BYTEARRAY8, "BYTEARRAY8", Counted(8), false),
        o(NEXT_BUFFER, "NEXT_BUFFER", Fixed(0), false),
        o(READONLY_BUFFER, "READONLY_BUFFER", Fixed(0), false),
    ]
};

/// [`OPS`] by byte: the index of each opcode's entry + 1 (0: no opcode).
const INDEX: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < OPS.len() {
        assert!(t[OPS[i].code as usize] == 0, "an opcode twice in OPS");
        t[OPS[i].code as usize] = i as u8 + 1;
        i += 1;
    }
    t
};

/// The table's entry for `byte`, or `None` for a byte that is no opcode.
#[inline(always)]
pub const fn get(byte: u8) -> Option<&'static Op> {
    match INDEX[byte as usize] {
        0 => None,
        i => Some(&OPS[i as usize - 1]),
    }
}

/// The argument of opcode `code` (which must be one: a compile-time error otherwise, where
/// it is evaluated in a constant).
pub const fn arg(code: u8) -> Arg {
    match get(code) {
        Some(op) => op.arg,
        None => panic!("no such opcode"),
    }
}

/// Bytes of opcode `code`'s fixed argument (`BININT2`: 2); `code` must have one.
pub const fn arg_bytes(code: u8) -> usize {
    match arg(code) {
        Arg::Fixed(n) => n as usize,
        _ => panic!("not a fixed-width opcode"),
    }
}

/// Whole width of fixed-width opcode `code`, its byte included (`LONG_BINGET`: 5); use it
/// in a `const { }` block so that it costs nothing.
pub const fn width(code: u8) -> usize {
    1 + arg_bytes(code)
}

/// Bytes of opcode `code`'s length field (`BINUNICODE`: 4); `code` must have one.
pub const fn len_bytes(code: u8) -> usize {
    match arg(code) {
        Arg::Counted(n) => n as usize,
        Arg::Counted4Signed => 4,
        _ => panic!("not a length-prefixed opcode"),
    }
}

/// A walker's width table: for each of `codes` (fixed-width opcodes), its whole width, the
/// byte included; 0 for every other byte. Built at compile time (`const`), so a walker's loop
/// reads one byte of a table, the lengths coming from [`OPS`].
pub const fn widths(codes: &[u8]) -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < codes.len() {
        t[codes[i] as usize] = 1 + arg_bytes(codes[i]) as u8;
        i += 1;
    }
    t
}

/// The length field of opcode `code`: its width in bytes, and whether it is signed (`LONG4`);
/// `None` for an opcode without one.
#[inline(always)]
pub fn len_field(code: u8) -> Option<(usize, bool)> {
    match get(code)?.arg {
        Arg::Counted(k) => Some((k as usize, false)),
        Arg::Counted4Signed => Some((4, true)),
        _ => None,
    }
}

/// The length a length field of `field` bytes holds (little-endian); `None` for a negative
/// one when `signed`.
#[inline(always)]
pub fn read_len(field: &[u8], signed: bool) -> Option<u64> {
    let v = match *field {
        [a] => a as u64,
        [a, b, c, d] => u32::from_le_bytes([a, b, c, d]) as u64,
        [a, b, c, d, e, f, g, h] => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
        _ => return None,
    };
    (!signed || v < 1 << 31).then_some(v)
}

/// The opcode at `p` with a length-prefixed argument ([`Arg::Counted`], or `LONG4`'s length
/// read as signed): the bytes before the data (the opcode and its length field) and the
/// length; `None` for any other opcode, a field past the end, or a negative `LONG4` length.
#[inline(always)]
pub fn counted(buf: &[u8], p: usize) -> Option<(usize, u64)> {
    let (k, signed) = len_field(*buf.get(p)?)?;
    let len = read_len(buf.get(p + 1..p + 1 + k)?, signed)?;
    Some((1 + k, len))
}

/// Whole widths (the byte included) of the fixed-width opcodes the decoder reads, from
/// [`OPS`]: `w::LONG_BINGET` is 5. Walkers step by these, never by a literal.
#[allow(missing_docs)]
pub mod w {
    use super::{op, width};
    pub const MARK: usize = width(op::MARK);
    pub const STOP: usize = width(op::STOP);
    pub const POP: usize = width(op::POP);
    pub const POP_MARK: usize = width(op::POP_MARK);
    pub const DUP: usize = width(op::DUP);
    pub const BININT: usize = width(op::BININT);
    pub const BININT1: usize = width(op::BININT1);
    pub const BININT2: usize = width(op::BININT2);
    pub const NONE: usize = width(op::NONE);
    pub const APPEND: usize = width(op::APPEND);
    pub const DICT: usize = width(op::DICT);
    pub const EMPTY_DICT: usize = width(op::EMPTY_DICT);
    pub const APPENDS: usize = width(op::APPENDS);
    pub const BINGET: usize = width(op::BINGET);
    pub const LONG_BINGET: usize = width(op::LONG_BINGET);
    pub const LIST: usize = width(op::LIST);
    pub const EMPTY_LIST: usize = width(op::EMPTY_LIST);
    pub const BINPUT: usize = width(op::BINPUT);
    pub const LONG_BINPUT: usize = width(op::LONG_BINPUT);
    pub const SETITEM: usize = width(op::SETITEM);
    pub const TUPLE: usize = width(op::TUPLE);
    pub const EMPTY_TUPLE: usize = width(op::EMPTY_TUPLE);
    pub const SETITEMS: usize = width(op::SETITEMS);
    pub const BINFLOAT: usize = width(op::BINFLOAT);
    pub const PROTO: usize = width(op::PROTO);
    pub const TUPLE1: usize = width(op::TUPLE1);
    pub const TUPLE2: usize = width(op::TUPLE2);
    pub const TUPLE3: usize = width(op::TUPLE3);
    pub const NEWTRUE: usize = width(op::NEWTRUE);
    pub const NEWFALSE: usize = width(op::NEWFALSE);
    pub const MEMOIZE: usize = width(op::MEMOIZE);
    pub const FRAME: usize = width(op::FRAME);
}

/// Header widths (the byte and the length field) of the length-prefixed opcodes the decoder
/// reads, from [`OPS`]: `head::BINUNICODE` is 5; the data follows.
#[allow(missing_docs)]
pub mod head {
    use super::{len_bytes, op};
    pub const SHORT_BINUNICODE: usize = 1 + len_bytes(op::SHORT_BINUNICODE);
    pub const BINUNICODE: usize = 1 + len_bytes(op::BINUNICODE);
    pub const BINUNICODE8: usize = 1 + len_bytes(op::BINUNICODE8);
    pub const SHORT_BINBYTES: usize = 1 + len_bytes(op::SHORT_BINBYTES);
    pub const BINBYTES: usize = 1 + len_bytes(op::BINBYTES);
    pub const BINBYTES8: usize = 1 + len_bytes(op::BINBYTES8);
    pub const LONG1: usize = 1 + len_bytes(op::LONG1);
    pub const LONG4: usize = 1 + len_bytes(op::LONG4);
}

/// The name CPython's `pickletools` gives an opcode byte, or `None` for a byte that is no opcode.
pub fn name(byte: u8) -> Option<&'static str> {
    get(byte).map(|op| op.name)
}

/// True for the opcodes that name, import or call Python code; memlens refuses them all.
pub fn names_code(byte: u8) -> bool {
    use op::*;
    matches!(
        byte,
        GLOBAL
            | STACK_GLOBAL
            | REDUCE
            | BUILD
            | INST
            | OBJ
            | NEWOBJ
            | NEWOBJ_EX
            | EXT1
            | EXT2
            | EXT4
            | PERSID
            | BINPERSID
    )
}

/// Why the decoder refuses `byte` as an opcode (it names code, snapshots never use it, or it is
/// no opcode at all); the walk that follows a stream ([`super::scan::Follow`]) says the same.
pub fn refusal(byte: u8) -> String {
    if names_code(byte) {
        return format!(
            "opcode {} (0x{byte:02x}) names or calls Python code; memlens never runs code from a file, and real snapshots never contain it",
            name(byte).unwrap_or("?")
        );
    }
    match name(byte) {
        Some(n) => format!(
            "opcode {n} (0x{byte:02x}) is not used by memory snapshots; is this a snapshot?"
        ),
        None => format!("byte 0x{byte:02x} is not a pickle opcode; is this a snapshot?"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_every_opcode_once_with_its_argument() {
        assert_eq!(OPS.len(), 68);
        assert_eq!(name(op::BINUNICODE8), Some("BINUNICODE8"));
        assert_eq!(name(b'z'), None);
        assert_eq!(w::LONG_BINGET, 5);
        assert_eq!(w::FRAME, 9);
        assert_eq!(w::BINFLOAT, 9);
        assert_eq!(len_bytes(op::SHORT_BINUNICODE), 1);
        assert_eq!(len_bytes(op::LONG4), 4);
        assert_eq!(
            counted(&[op::BINUNICODE, 3, 0, 0, 0, b'a'], 0),
            Some((5, 3))
        );
        assert_eq!(counted(&[op::LONG4, 0, 0, 0, 0x80], 0), None);
        assert_eq!(counted(&[op::BINGET, 1], 0), None);
        // Everything the decoder reads is data; everything that names code is refused.
        for o in OPS {
            assert!(!(o.read && names_code(o.code)), "{}", o.name);
        }
        assert_eq!(OPS.iter().filter(|o| o.read).count(), 46);
    }
}
