//! Sites that only moved: the same file and function on both sides at another line (a commit
//! that edited lines above them). `diff` pairs a site only in the base with one only in the
//! candidate when their keys match but for line numbers (file and function, and those of the
//! callers a `--frame-depth` key holds), in line order, so a shifted file shows no change
//! where nothing changed.

use std::collections::BTreeMap;

/// `(file, line, function)` of a site key `file:LINE:function` (the function may hold `::`);
/// `None` when the key has no line.
pub fn parts(key: &str) -> Option<(&str, i64, &str)> {
    let b = key.as_bytes();
    let mut i = 0;
    while let Some(p) = key[i..].find(':').map(|p| p + i) {
        let digits = b[p + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        let end = p + 1 + digits;
        if digits > 0 && b.get(end) == Some(&b':') {
            let line = key[p + 1..end].parse().ok()?;
            return Some((&key[..p], line, &key[end + 1..]));
        }
        i = p + 1;
    }
    None
}

/// A key without its line numbers, and those lines in order: the frames of a key
/// (`site < caller < ...`) split at ` < `, each at its line. `None` when no frame has a line.
pub fn shape(key: &str) -> Option<(String, Vec<i64>)> {
    let mut out = String::new();
    let mut lines = Vec::new();
    for (i, frame) in key.split(" < ").enumerate() {
        if i > 0 {
            out.push_str(" < ");
        }
        match parts(frame) {
            Some((file, line, name)) => {
                out.push_str(file);
                out.push_str("::");
                out.push_str(name);
                lines.push(line);
            }
            None => out.push_str(frame),
        }
    }
    (!lines.is_empty()).then_some((out, lines))
}

/// Pairs of (base key, candidate key) of sites present on one side only whose keys match but
/// for line numbers ([`shape`]): within one shape, the k-th in line order of the base with
/// the k-th of the candidate.
pub fn pairs<'a>(
    only_base: impl IntoIterator<Item = &'a str>,
    only_cand: impl IntoIterator<Item = &'a str>,
) -> Vec<(&'a str, &'a str)> {
    type Group<'a> = (Vec<(Vec<i64>, &'a str)>, Vec<(Vec<i64>, &'a str)>);
    let mut groups: BTreeMap<String, Group<'a>> = BTreeMap::new();
    for k in only_base {
        if let Some((sh, lines)) = shape(k) {
            groups.entry(sh).or_default().0.push((lines, k));
        }
    }
    for k in only_cand {
        if let Some((sh, lines)) = shape(k) {
            groups.entry(sh).or_default().1.push((lines, k));
        }
    }
    let mut out = Vec::new();
    for (_, (mut b, mut c)) in groups {
        b.sort();
        c.sort();
        out.extend(b.iter().zip(&c).map(|(x, y)| (x.1, y.1)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_at_the_line_and_functions_keep_their_colons() {
        assert_eq!(
            parts("proj/model.py:84:forward"),
            Some(("proj/model.py", 84, "forward"))
        );
        assert_eq!(
            parts("??:0:c10::cuda::malloc"),
            Some(("??", 0, "c10::cuda::malloc"))
        );
        assert_eq!(parts("C:/u/m.py:7:f"), Some(("C:/u/m.py", 7, "f")));
        assert_eq!(parts("<no frames>"), None);
    }

    /// GIVEN sites on one side only WHEN paired THEN same file and function pair in line
    /// order, and a function with no counterpart stays unpaired.
    #[test]
    fn moved_lines_pair_in_order() {
        let p = pairs(
            ["m.py:10:f", "m.py:20:f", "m.py:5:g", "n.py:1:f"],
            ["m.py:13:f", "m.py:23:f", "m.py:30:h"],
        );
        assert_eq!(
            p,
            vec![("m.py:10:f", "m.py:13:f"), ("m.py:20:f", "m.py:23:f")]
        );
    }
}
