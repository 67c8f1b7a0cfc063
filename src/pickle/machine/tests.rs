//! Every opcode and decoder error, through [`decode`] without hooks.

use super::*;
use crate::pickle::{decode, NoHooks};

fn run(bytes: &[u8]) -> Result<String, DecodeError> {
    let (heap, top) = decode(bytes, &mut NoHooks, Limits::for_input(bytes.len()))?;
    Ok(show(&heap, top))
}

fn err(bytes: &[u8]) -> DecodeError {
    run(bytes).expect_err("expected an error")
}

/// A Python-like rendering of a value, for assertions.
fn show(heap: &Heap, v: Value) -> String {
    match heap.resolve(v) {
        Value::None => "None".into(),
        Value::Bool(b) => if b { "True" } else { "False" }.into(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Huge(neg) => if neg { "-huge" } else { "huge" }.into(),
        Value::Float(f) => format!("{f:?}"),
        s @ (Value::Str { .. } | Value::Owned(_)) => format!("{:?}", heap.text(s).unwrap()),
        Value::Bytes { off, len } => {
            format!(
                "b{:?}",
                &heap.buf[off as usize..(off + len as u64) as usize]
            )
        }
        Value::Ext { kind, id } => format!("ext{kind}:{id}"),
        Value::Obj(id) => match heap.data(id) {
            ObjData::List(l) => {
                let items: Vec<_> = l.iter().map(|x| show(heap, x)).collect();
                format!("[{}]", items.join(", "))
            }
            ObjData::Tuple(t) => {
                let items: Vec<_> = t.iter().map(|x| show(heap, *x)).collect();
                let comma = if items.len() == 1 { "," } else { "" };
                format!("({}{comma})", items.join(", "))
            }
            ObjData::Dict(d) => {
                let items: Vec<_> = d
                    .iter()
                    .map(|(k, v)| format!("{}: {}", show(heap, *k), show(heap, *v)))
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
            ObjData::Replaced(r) => show(heap, *r),
            ObjData::Free => "<freed>".into(),
        },
    }
}

fn p4(body: &[u8]) -> Vec<u8> {
    let mut v = vec![0x80, 4];
    v.extend_from_slice(body);
    v.push(b'.');
    v
}

#[test]
fn scalars() {
    assert_eq!(run(&p4(b"N")).unwrap(), "None");
    assert_eq!(run(&p4(&[0x88])).unwrap(), "True");
    assert_eq!(run(&p4(&[0x89])).unwrap(), "False");
    assert_eq!(run(&p4(b"K\xff")).unwrap(), "255");
    assert_eq!(run(&p4(b"M\xff\xff")).unwrap(), "65535");
    assert_eq!(run(&p4(b"J\xfe\xff\xff\xff")).unwrap(), "-2");
    assert_eq!(run(&p4(b"G\x3f\xf8\0\0\0\0\0\0")).unwrap(), "1.5");
    assert_eq!(run(b"I42\n.").unwrap(), "42");
    assert_eq!(run(b"I01\n.").unwrap(), "True");
    assert_eq!(run(b"I00\n.").unwrap(), "False");
    assert_eq!(run(b"L123456789012345678901234567890L\n.").unwrap(), "huge");
    assert_eq!(run(b"L-5L\n.").unwrap(), "-5");
    assert_eq!(run(b"F2.25\n.").unwrap(), "2.25");
}

#[test]
fn long_integers_of_every_width() {
    // CUDA address, 6 bytes.
    assert_eq!(
        run(&p4(b"\x8a\x06\x00\x00\x00\x00\x20\x7f")).unwrap(),
        (0x7f2000000000u64).to_string()
    );
    // 2^64-1 needs 9 bytes in two's complement (line numbers of the Python path).
    assert_eq!(
        run(&p4(b"\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00")).unwrap(),
        u64::MAX.to_string()
    );
    // XPU address >= 2^63.
    assert_eq!(
        run(&p4(b"\x8a\x09\x00\x00\x00\x00\x00\xff\xff\xff\x00")).unwrap(),
        "18446742974197923840"
    );
    // -1 from the C++ pickler, 8 bytes.
    assert_eq!(
        run(&p4(b"\x8a\x08\xff\xff\xff\xff\xff\xff\xff\xff")).unwrap(),
        "-1"
    );
    assert_eq!(
        run(&p4(b"\x8a\x08\0\0\0\0\0\0\0\x80")).unwrap(),
        i64::MIN.to_string()
    );
    assert_eq!(run(&p4(b"\x8a\x00")).unwrap(), "0");
    assert_eq!(run(&p4(b"\x8a\x0a\0\0\0\0\0\0\0\0\0\x01")).unwrap(), "huge");
    assert_eq!(
        run(&p4(b"\x8a\x0a\0\0\0\0\0\0\0\0\0\x80")).unwrap(),
        "-huge"
    );
    assert_eq!(run(&p4(b"\x8b\x02\0\0\0\x01\x01")).unwrap(), "257");
}

#[test]
fn strings_and_bytes() {
    assert_eq!(run(&p4(b"\x8c\x03abc")).unwrap(), "\"abc\"");
    assert_eq!(run(&p4(b"X\x02\0\0\0hi")).unwrap(), "\"hi\"");
    assert_eq!(run(&p4(b"\x8d\x01\0\0\0\0\0\0\0z")).unwrap(), "\"z\"");
    assert_eq!(run(b"V\\u00e9t\\U0001f600\n.").unwrap(), "\"ét😀\"");
    assert_eq!(run(&p4(b"C\x02\x01\x02")).unwrap(), "b[1, 2]");
    assert_eq!(run(&p4(b"B\x01\0\0\0\x07")).unwrap(), "b[7]");
    assert_eq!(run(&p4(b"\x8e\x01\0\0\0\0\0\0\0\x09")).unwrap(), "b[9]");
    // A lone surrogate written with surrogatepass decodes leniently.
    assert_eq!(
        run(&p4(b"\x8c\x04a\xed\xa0\x80")).unwrap(),
        "\"a\u{fffd}\u{fffd}\u{fffd}\""
    );
}

#[test]
fn containers() {
    assert_eq!(run(&p4(b"]")).unwrap(), "[]");
    assert_eq!(run(&p4(b"}")).unwrap(), "{}");
    assert_eq!(run(&p4(b")")).unwrap(), "()");
    assert_eq!(run(&p4(b"]K\x01a")).unwrap(), "[1]");
    assert_eq!(run(&p4(b"](K\x01K\x02e")).unwrap(), "[1, 2]");
    assert_eq!(run(&p4(b"}\x8c\x01aK\x01s")).unwrap(), "{\"a\": 1}");
    assert_eq!(
        run(&p4(b"}(\x8c\x01aK\x01\x8c\x01bK\x02u")).unwrap(),
        "{\"a\": 1, \"b\": 2}"
    );
    assert_eq!(run(&p4(b"(K\x01K\x02l")).unwrap(), "[1, 2]");
    assert_eq!(run(&p4(b"(\x8c\x01aK\x01d")).unwrap(), "{\"a\": 1}");
    assert_eq!(run(&p4(b"(K\x01K\x02t")).unwrap(), "(1, 2)");
    assert_eq!(run(&p4(b"K\x01\x85")).unwrap(), "(1,)");
    assert_eq!(run(&p4(b"K\x01K\x02\x86")).unwrap(), "(1, 2)");
    assert_eq!(run(&p4(b"K\x01K\x02K\x03\x87")).unwrap(), "(1, 2, 3)");
    assert_eq!(run(&p4(b"(K\x01K\x02\x31N")).unwrap(), "None");
    assert_eq!(run(&p4(b"K\x01\x30N")).unwrap(), "None");
    // DUP then APPEND: a list holding itself is legal pickle; it decodes without looping.
    let bytes = p4(b"]\x32a");
    let (heap, top) = decode(&bytes, &mut NoHooks, Limits::for_input(bytes.len())).unwrap();
    let Value::Obj(id) = top else { panic!() };
    assert_eq!(heap.list(top).unwrap().get(0), Value::Obj(id));
}

#[test]
fn memo_shares_objects() {
    // A dict memoized once and referenced twice: one object, seen through both references.
    let body = b"](}\x94\x8c\x01aK\x01sh\x00e";
    assert_eq!(run(&p4(body)).unwrap(), "[{\"a\": 1}, {\"a\": 1}]");
    // Explicit ids of protocols 2-3 (BINPUT/LONG_BINPUT, BINGET/LONG_BINGET, PUT/GET).
    assert_eq!(run(b"\x80\x02](K\x07q\x05h\x05e.").unwrap(), "[7, 7]");
    assert_eq!(
        run(b"\x80\x02](K\x07r\x00\x01\x00\x00j\x00\x01\x00\x00e.").unwrap(),
        "[7, 7]"
    );
    // Protocol 0 text forms.
    assert_eq!(
        run(b"(lp0\nI3\na(lp1\nI4\naag1\na.").unwrap(),
        "[3, [4], [4]]"
    );
}

#[test]
fn frame_and_proto_are_skipped() {
    let mut v = vec![0x80, 5, 0x95];
    v.extend_from_slice(&3u64.to_le_bytes());
    v.extend_from_slice(b"K\x05.");
    assert_eq!(run(&v).unwrap(), "5");
}

#[test]
fn refuses_every_code_opcode() {
    for (bytes, name) in [
        (&b"cos\nsystem\n."[..], "GLOBAL"),
        (b"\x80\x04\x8c\x02os\x8c\x06system\x93.", "STACK_GLOBAL"),
        (b"N)R.", "REDUCE"),
        (b"}}b.", "BUILD"),
        (b"(ios\nsystem\n.", "INST"),
        (b"(No.", "OBJ"),
        (b"N)\x81.", "NEWOBJ"),
        (b"N)}\x92.", "NEWOBJ_EX"),
        (b"\x82\x01.", "EXT1"),
        (b"\x83\x01\x00.", "EXT2"),
        (b"\x84\x01\0\0\0.", "EXT4"),
        (b"Pabc\n.", "PERSID"),
        (b"NQ.", "BINPERSID"),
    ] {
        let e = err(bytes);
        assert!(e.message.contains(name), "{name}: {}", e.message);
        assert!(
            e.message.contains("never runs code"),
            "{name}: {}",
            e.message
        );
        assert!(!e.truncated);
    }
}

#[test]
fn malformed_inputs_name_the_offset() {
    let e = err(b"");
    assert_eq!(e.offset, 0);
    assert!(e.message.contains("empty"));
    let e = err(b"\x80\x04K");
    assert!(e.truncated);
    assert!(e.message.contains("BININT1"));
    let e = err(b"\x80\x04K\x01");
    assert!(e.truncated && e.message.contains("STOP"));
    let e = err(b"\x80\x06N.");
    assert!(e.message.contains("protocol 6"));
    let e = err(b"\x80\x04h\x05.");
    assert_eq!(e.offset, 2);
    assert!(e.message.contains("memo reference 5"));
    let e = err(b"\x80\x04K\x01e.");
    assert!(e.message.contains("without a matching MARK"));
    let e = err(b"\x80\x04K\x01K\x02a.");
    assert!(e.message.contains("needs a list"), "{}", e.message);
    let e = err(b"\x80\x04]K\x01s.");
    assert!(
        e.message
            .contains("SETITEM needs a dict, a key and a value"),
        "{}",
        e.message
    );
    let e = err(b"\x80\x04}(K\x01u.");
    assert!(e.message.contains("odd count"));
    let e = err(b"\x80\x04N\x94\x94.");
    assert!(e.message.contains("twice"));
    let e = err(b"\x80\x04\xff.");
    assert!(e.message.contains("0xff is not a pickle opcode"));
    let e = err(b"\x80\x04S'x'\n.");
    assert!(e.message.contains("STRING"));
    let e = err(b".");
    assert!(e.message.contains("stack is empty"));
}

#[test]
fn huge_lengths_are_refused_without_allocating() {
    let mut v = vec![0x80, 4, 0x8d];
    v.extend_from_slice(&(1u64 << 60).to_le_bytes());
    v.extend_from_slice(b"abc.");
    let e = err(&v);
    assert!(e.message.contains("exceeds"), "{}", e.message);
    let mut v = vec![0x80, 4, 0x8b];
    v.extend_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let e = err(&v);
    assert!(e.message.contains("exceeds"), "{}", e.message);
    let mut v = vec![0x80, 4, 0x95];
    v.extend_from_slice(&(1u64 << 40).to_le_bytes());
    v.extend_from_slice(b"N.");
    let e = err(&v);
    assert!(e.truncated && e.message.contains("FRAME"), "{}", e.message);
    // A length a little past the end is a truncation, not an attack.
    let e = err(b"\x80\x04X\x10\0\0\0abc");
    assert!(e.truncated);
}

#[test]
fn nesting_and_stack_are_bounded() {
    let mut v = vec![0x80, 4];
    v.extend(std::iter::repeat(b"](").take(5000).flatten());
    let e = err(&v);
    assert!(e.message.contains("nested deeper"), "{}", e.message);
    let mut v = vec![0x80, 4];
    // Small ints (values with content: the density bound on `None`s does not refuse them).
    for _ in 0..1_000_000 {
        v.extend_from_slice(b"K\x01");
    }
    let e = err(&v);
    assert!(
        e.message.contains("pending on the pickle stack"),
        "{}",
        e.message
    );
}

#[test]
fn lists_without_marks_nest() {
    // [[1]] via APPEND only.
    assert_eq!(run(&p4(b"]]K\x01aa")).unwrap(), "[[1]]");
}
