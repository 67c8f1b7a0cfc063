//! The text of a source line as a key (`diff --by line`): a line known by its file, its
//! function and what it says survives lines inserted or deleted above it.
//!
//! The snapshot records no source, only `(file, line, function)`; the text is read from a
//! source tree on disk, which is one revision. Before a side's lines are keyed by what that
//! source says at their numbers, every one of them is checked: the line must be code (not
//! blank, not a comment) and lie, by Python's indentation, in the function the frame recorded
//! ([`holds`]). One that does not shows the source is not the revision that side ran, and
//! the whole file is then matched by line numbers on that side instead ([`super::moved`]).

/// The columns of a line's indentation (a tab counts 4).
fn indent(s: &str) -> usize {
    s.chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}

/// The name a `def` (or `async def`) or `class` statement opens, if `stmt` is one.
fn opened(stmt: &str) -> Option<&str> {
    let s = stmt.strip_prefix("async ").map_or(stmt, str::trim_start);
    let rest = s
        .strip_prefix("def ")
        .or_else(|| s.strip_prefix("class "))?;
    let rest = rest.trim_start();
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Whether a line is no statement: blank, or a comment.
fn blank(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// The function (or class body) line `line` (1-based) of `source` lies in, by indentation: the
/// nearest `def`/`class` above it indented less, `<module>` when there is none; `None` when the
/// line is past the end, blank or a comment.
pub fn enclosing<'a>(source: &[&'a str], line: i64) -> Option<&'a str> {
    let i = usize::try_from(line).ok()?.checked_sub(1)?;
    let own = *source.get(i)?;
    if blank(own) {
        return None;
    }
    let mut limit = indent(own);
    for t in source[..i].iter().rev() {
        if blank(t) {
            continue;
        }
        let ind = indent(t);
        if ind < limit {
            limit = ind;
            if let Some(name) = opened(t.trim()) {
                return Some(name);
            }
        }
    }
    Some("<module>")
}

/// Whether line `line` of `source` is code of `function` as recorded: the function the
/// indentation gives (a recorded qualified name `Model.forward` matches `forward`); a lambda or
/// comprehension (`<lambda>`, `<listcomp>`, ...) anywhere in code.
pub fn holds(source: &[&str], line: i64, function: &str) -> bool {
    match enclosing(source, line) {
        None => false,
        Some(_) if function.starts_with('<') && function != "<module>" => true,
        Some(name) => {
            name == function
                || function
                    .strip_suffix(name)
                    .is_some_and(|q| q.ends_with('.'))
        }
    }
}

/// Characters of a line's text kept in the report.
const TEXT_CHARS: usize = 160;

/// A line's text as a key: trimmed, tabs as four spaces, cut after 160 characters.
pub fn text_of(source: &[&str], line: i64) -> String {
    let raw = usize::try_from(line)
        .ok()
        .and_then(|l| l.checked_sub(1))
        .and_then(|i| source.get(i))
        .map_or("", |s| s.trim());
    let t = raw.replace('\t', "    ");
    match t.char_indices().nth(TEXT_CHARS) {
        Some((at, _)) => format!("{}…", &t[..at]),
        None => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "import torch\n\nclass Block:\n    def forward(self, x):\n        # a comment\n        h = x @ x\n\n        return h\n\n    @staticmethod\n    async def load(p):\n        return p\n\ndef main():\n    b = Block()\n    f = lambda: (\n  1)\n\nmain()\n";

    /// GIVEN Python source WHEN a line's function is found by indentation THEN methods, module
    /// code, blank lines, comments and lines past the end are told apart.
    #[test]
    fn functions_by_indentation() {
        let s: Vec<&str> = SRC.lines().collect();
        assert_eq!(enclosing(&s, 6), Some("forward"));
        assert_eq!(enclosing(&s, 8), Some("forward"));
        assert_eq!(enclosing(&s, 12), Some("load"));
        assert_eq!(enclosing(&s, 15), Some("main"));
        assert_eq!(enclosing(&s, 19), Some("<module>"));
        assert_eq!(enclosing(&s, 4), Some("Block"));
        assert_eq!(enclosing(&s, 5), None, "a comment");
        assert_eq!(enclosing(&s, 7), None, "blank");
        assert_eq!(enclosing(&s, 40), None, "past the end");
        assert_eq!(enclosing(&s, 0), None);
        assert!(holds(&s, 6, "forward"));
        assert!(holds(&s, 6, "Block.forward"));
        assert!(!holds(&s, 6, "main"));
        assert!(!holds(&s, 6, "xforward"));
        assert!(holds(&s, 16, "<lambda>"));
        assert!(holds(&s, 19, "<module>"));
        assert!(!holds(&s, 15, "<module>"));
        assert_eq!(text_of(&s, 6), "h = x @ x");
        assert_eq!(text_of(&s, 99), "");
    }
}
