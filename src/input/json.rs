//! JSON snapshots (which the browser viewer also accepts) transcoded into an equivalent pickle,
//! so one decoder serves every input.
//!
//! In: the bytes of a JSON document. Out: a protocol-4 pickle of the same value (no memo):
//! objects become dicts, arrays lists, numbers `int`/`float`, `null` `None`. Lone UTF-16
//! surrogate escapes, which Python's and JavaScript's JSON writers emit for names that were not
//! UTF-8, are read as U+FFFD.

use crate::error::Error;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::path::Path;

/// A JSON snapshot transcoded into pickle bytes, or the parser's error with its line.
pub(super) fn transcode(path: &Path, json: &[u8]) -> Result<Vec<u8>, Error> {
    let json = json.strip_prefix(super::BOM).unwrap_or(json);
    let out = match json_to_pickle(json) {
        // Python's json writes a lone surrogate (a file name that was not UTF-8) as `\udcXX`
        // and reads it back; so does JavaScript. serde_json refuses it: such escapes become
        // U+FFFD, and the rest of the document is read as it is.
        Err(e) if e.to_string().contains("surrogate") => {
            json_to_pickle(&replace_lone_surrogates(json))
        }
        other => other,
    };
    out.map_err(|e| Error::Input {
        path: path.to_path_buf(),
        location: format!("line {} column {}", e.line(), e.column()),
        message: format!("invalid JSON snapshot: {e}"),
        truncated: e.is_eof(),
    })
}

/// `json` with every `\uD800`-`\uDFFF` escape that is not half of a pair replaced by
/// `\uFFFD` (string contents only; everything else is copied as it is).
fn replace_lone_surrogates(json: &[u8]) -> Vec<u8> {
    let hex = |at: usize| -> Option<u16> {
        let digits = std::str::from_utf8(json.get(at..at + 4)?).ok()?;
        u16::from_str_radix(digits, 16).ok()
    };
    let escape_at = |at: usize| -> Option<u16> {
        (json.get(at) == Some(&b'\\') && json.get(at + 1) == Some(&b'u'))
            .then(|| hex(at + 2))
            .flatten()
    };
    let mut out = Vec::with_capacity(json.len());
    let (mut i, mut in_string) = (0, false);
    while i < json.len() {
        let b = json[i];
        if !in_string {
            in_string = b == b'"';
            out.push(b);
            i += 1;
            continue;
        }
        match b {
            b'"' => in_string = false,
            b'\\' => match escape_at(i) {
                Some(0xd800..=0xdbff)
                    if escape_at(i + 6).is_some_and(|lo| (0xdc00..=0xdfff).contains(&lo)) =>
                {
                    out.extend_from_slice(&json[i..i + 12]);
                    i += 12;
                    continue;
                }
                Some(0xd800..=0xdfff) => {
                    out.extend_from_slice(b"\\ufffd");
                    i += 6;
                    continue;
                }
                _ => {
                    // Any other escape: its two first bytes go as they are.
                    out.extend_from_slice(&json[i..(i + 2).min(json.len())]);
                    i += 2;
                    continue;
                }
            },
            _ => {}
        }
        out.push(b);
        i += 1;
    }
    out
}

/// Transcodes a JSON document into a protocol-4 pickle of the same value (no memo).
pub fn json_to_pickle(json: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(json.len());
    out.extend_from_slice(&[0x80, 4]);
    let mut de = serde_json::Deserializer::from_slice(json);
    PickleOut(&mut out).deserialize(&mut de)?;
    de.end()?;
    out.push(b'.');
    Ok(out)
}

struct PickleOut<'w>(&'w mut Vec<u8>);

const BATCH: usize = 1000;

impl PickleOut<'_> {
    fn int(&mut self, v: i128) {
        if let Ok(i) = i32::try_from(v) {
            self.0.push(b'J');
            self.0.extend_from_slice(&i.to_le_bytes());
        } else {
            let bytes = v.to_le_bytes();
            let n = if i64::try_from(v).is_ok() { 8 } else { 9 };
            self.0.push(0x8a);
            self.0.push(n as u8);
            self.0.extend_from_slice(&bytes[..n]);
        }
    }
}

impl<'de> DeserializeSeed<'de> for PickleOut<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PickleOut<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.push(if v { 0x88 } else { 0x89 });
        Ok(())
    }
    fn visit_i64<E>(mut self, v: i64) -> Result<(), E> {
        self.int(v as i128);
        Ok(())
    }
    fn visit_u64<E>(mut self, v: u64) -> Result<(), E> {
        self.int(v as i128);
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.0.push(b'G');
        self.0.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.push(b'X');
        self.0.extend_from_slice(&(v.len() as u32).to_le_bytes());
        self.0.extend_from_slice(v.as_bytes());
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.push(b'N');
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.extend_from_slice(b"](");
        let mut n = 0;
        while seq.next_element_seed(PickleOut(&mut *self.0))?.is_some() {
            n += 1;
            if n % BATCH == 0 {
                self.0.extend_from_slice(b"e(");
            }
        }
        self.0.push(b'e');
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.extend_from_slice(b"}(");
        let mut n = 0;
        while map.next_key_seed(PickleOut(&mut *self.0))?.is_some() {
            map.next_value_seed(PickleOut(&mut *self.0))?;
            n += 1;
            if n % BATCH == 0 {
                self.0.extend_from_slice(b"u(");
            }
        }
        self.0.push(b'u');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_transcodes_to_an_equal_pickle() {
        let p = json_to_pickle(
            br#"{"a": [1, -2, 3000000000, 18446744073709551615, true, null, 1.5, "x"]}"#,
        )
        .unwrap();
        let (heap, top) = crate::pickle::decode(
            &p,
            &mut crate::pickle::NoHooks,
            crate::pickle::Limits::for_input(p.len()),
        )
        .unwrap();
        let a = heap.get(top, "a").unwrap();
        let items: Vec<_> = heap.list(a).unwrap().iter().collect();
        use crate::pickle::Value::*;
        assert_eq!(items[0], Int(1));
        assert_eq!(items[1], Int(-2));
        assert_eq!(items[2], Int(3_000_000_000));
        assert_eq!(items[3], UInt(u64::MAX));
        assert_eq!(items[4], Bool(true));
        assert_eq!(items[5], None);
        assert_eq!(items[6], Float(1.5));
        assert_eq!(heap.text(items[7]).unwrap(), "x");
    }

    #[test]
    fn lone_surrogates_become_the_replacement_character() {
        // A lone low or high surrogate in a string is replaced; a pair is kept.
        let json = br#"{"f": "a\udc80b", "g": "\ud83d\ude00", "h": "\ud800"}"#;
        assert_eq!(
            replace_lone_surrogates(json),
            br#"{"f": "a\ufffdb", "g": "\ud83d\ude00", "h": "\ufffd"}"#.to_vec()
        );
        // Other escapes and text outside strings are copied as they are.
        let json = br#"["\"\udc80", "\\udc80", 1]"#;
        assert_eq!(
            replace_lone_surrogates(json),
            br#"["\"\ufffd", "\\udc80", 1]"#.to_vec()
        );
        // The transcoder refuses the original and accepts the replacement.
        let bad = br#"{"f": "a\udc80b"}"#;
        assert!(json_to_pickle(bad)
            .unwrap_err()
            .to_string()
            .contains("surrogate"));
        assert!(json_to_pickle(&replace_lone_surrogates(bad)).is_ok());
        let p = transcode(Path::new("x.json"), bad).unwrap();
        let (heap, top) = crate::pickle::decode(
            &p,
            &mut crate::pickle::NoHooks,
            crate::pickle::Limits::for_input(p.len()),
        )
        .unwrap();
        let f = heap.get(top, "f").unwrap();
        assert_eq!(heap.text(f).unwrap(), "a\u{fffd}b");
    }
}
