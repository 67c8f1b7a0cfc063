//! The floor of any decoder: a walk over a pickle that only steps over its opcodes and their
//! arguments ([`super::step`]), making no value, no stack and no model. What it costs per
//! byte is the least a pass over the file can cost; the bench (`MEMLENS_FLOOR=1`,
//! `scripts/bench`) sets the decoder beside it.

use super::align::{refusal, step, Step};

/// What the walk found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Floor {
    /// Opcodes stepped over, `STOP` included (what `pickletools.genops` yields).
    pub opcodes: u64,
    /// Byte offset of the `STOP` opcode (the pickle is one byte longer).
    pub stop: u64,
}

/// Steps over every opcode of `buf` from its first byte to `STOP`. An error says where the
/// walk could go no further: the bytes end inside an opcode or before `STOP`, or an opcode
/// the decoder does not read (in its words).
pub fn walk(buf: &[u8]) -> Result<Floor, String> {
    let mut p = 0usize;
    let mut opcodes = 0u64;
    loop {
        let rest = &buf[p..];
        match step(rest) {
            Step::Width(w) => {
                let w = usize::try_from(w).unwrap_or(usize::MAX);
                if w > rest.len() {
                    return Err(format!("byte {p}: the file ends inside an opcode"));
                }
                p += w;
            }
            Step::Line => match rest.iter().skip(1).position(|&b| b == b'\n') {
                Some(i) => p += i + 2,
                None => return Err(format!("byte {p}: the file ends inside a text argument")),
            },
            Step::Stop => {
                return Ok(Floor {
                    opcodes: opcodes + 1,
                    stop: p as u64,
                })
            }
            Step::Short => return Err(format!("byte {p}: the file ends before STOP")),
            Step::Refused => return Err(format!("byte {p}: {}", refusal(rest))),
        }
        opcodes += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // `pickle.dumps({'a': [1, 2, 'xyz'], 'b': None}, protocol=...)`; the counts and STOP
    // offsets are `pickletools.genops`'s: `len(list(genops(b)))` and the last offset.
    const P4: &[u8] = b"\x80\x04\x95\x1c\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94]\x94(K\x01K\x02\x8c\x03xyz\x94e\x8c\x01b\x94Nu.";
    const P0: &[u8] = b"(dp0\nVa\np1\n(lp2\nI1\naI2\naVxyz\np3\nasVb\np4\nNs.";

    #[test]
    fn counts_opcodes_as_pickletools_does() {
        assert_eq!(
            walk(P4),
            Ok(Floor {
                opcodes: 20,
                stop: 38
            })
        );
        assert_eq!(
            walk(P0),
            Ok(Floor {
                opcodes: 21,
                stop: 42
            })
        );
        // Bytes after STOP are no part of the pickle.
        let mut more = P4.to_vec();
        more.extend_from_slice(b"junk");
        assert_eq!(walk(&more).map(|f| f.stop), Ok(38));
    }

    #[test]
    fn says_where_it_stops() {
        assert!(walk(&P4[..16])
            .unwrap_err()
            .contains("ends inside an opcode"));
        assert!(walk(&P4[..38]).unwrap_err().contains("ends before STOP"));
        assert!(walk(&P0[..6]).unwrap_err().contains("text argument"));
        assert!(walk(b"\x80\x04c__main__\nX\n.")
            .unwrap_err()
            .starts_with("byte 2: "));
    }
}
