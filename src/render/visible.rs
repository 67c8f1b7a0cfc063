//! Snapshot strings made safe to show: the one rule every text report, CSV, folded line,
//! Markdown cell, SVG and XML follows for text that came from a file (frame names, file names,
//! annotations, metadata, file paths given on the command line).
//!
//! A string holding a character that a terminal, a CI log or an XML parser would act on rather
//! than show is written with that character escaped, the way [`crate::error::quoted_path`]
//! escapes a path (`char::escape_debug`'s spelling, `\u{..}` where it has none: `\n`, `\r`, `\t`, `\0`, `\u{1b}`,
//! `\u{202e}`), and its backslashes doubled so the escaped form reads back one way. Strings
//! without such a character (all real ones) are returned as they are, without allocating.

use std::borrow::Cow;

/// Whether `c` is shown escaped: C0 controls (ESC, CR, BS, BEL, NUL, newline, tab...), DEL, C1
/// controls (U+0080–U+009F), the bidirectional marks, embeddings, overrides and isolates
/// ("Trojan Source": U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), the line and
/// paragraph separators U+2028 and U+2029 (line breaks to some terminals and editors), the
/// invisible U+200B, U+2060 and U+FEFF, the interlinear annotation marks U+FFF9–U+FFFB, and the
/// noncharacters U+FFFE and U+FFFF (not allowed in XML 1.0).
pub fn needs_escape(c: char) -> bool {
    matches!(
        c,
        '\0'..='\x1f'
            | '\x7f'..='\u{9f}'
            | '\u{061c}'
            | '\u{200b}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{fffe}'
            | '\u{ffff}'
    )
}

/// `s` as it is safe to show: unchanged (borrowed) when no character of it [`needs_escape`];
/// otherwise each such character escaped (`\u{1b}`, `\r`, `\n`...) and each backslash
/// doubled. Escaping twice changes nothing more (the escaped form holds none of them).
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if needs_escape(c) => {
                let e = c.escape_debug();
                if e.len() > 1 {
                    out.extend(e);
                } else {
                    out.extend(c.escape_unicode());
                }
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`visible`] for text whose line breaks are memlens's own (a paragraph, a cell of several
/// lines): every line escaped on its own, the `\n` between them kept.
pub fn visible_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && needs_escape(c)) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.split('\n').map(visible).collect::<Vec<_>>().join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_strings_are_borrowed_unchanged() {
        for s in [
            "main",
            "/a/b.py:3:f",
            "<module>",
            "naïve 数据 🚀",
            "C:\\x\\y.py",
            "a|b`c",
        ] {
            assert!(matches!(visible(s), Cow::Borrowed(v) if v == s), "{s}");
        }
    }

    #[test]
    fn controls_bidi_and_separators_are_escaped() {
        assert_eq!(visible("a\x1b[2K\r\n\tb"), "a\\u{1b}[2K\\r\\n\\tb");
        assert_eq!(
            visible("\0\x07\x08\x7f\u{85}"),
            "\\0\\u{7}\\u{8}\\u{7f}\\u{85}"
        );
        assert_eq!(
            visible("x\u{202e}y\u{2066}z\u{2028}\u{feff}\u{ffff}"),
            "x\\u{202e}y\\u{2066}z\\u{2028}\\u{feff}\\u{ffff}"
        );
        // Backslashes are doubled once something is escaped: `\u{1b}` typed in a name reads
        // apart from an escaped ESC.
        assert_eq!(visible("\\u{1b}\x1b"), "\\\\u{1b}\\u{1b}");
        let once = visible("p\\q\x1b").into_owned();
        assert_eq!(visible(&once), once.as_str());
    }

    #[test]
    fn lines_keep_their_breaks() {
        assert_eq!(visible_lines("a\nb"), "a\nb");
        assert_eq!(visible_lines("a\x1b\nb\r"), "a\\u{1b}\nb\\r");
    }
}
