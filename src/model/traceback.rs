//! Frames written as Python traceback text: `fx_original_trace` on compiled-graph frames and
//! the strings of `forward_frames` (`  File "model.py", line 46, in forward` lines, each
//! possibly followed by its source line).

/// One frame read from traceback text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextFrame<'a> {
    /// The path between the quotes after `File`.
    pub filename: &'a str,
    /// The line number; -1 when the text has none.
    pub line: i64,
    /// The function after `in`; empty when the text has none.
    pub name: &'a str,
}

/// The frames of `text` in the order written (a traceback: outermost first). Lines that are
/// not `File "…", line N, in NAME` (source lines, `Traceback …` headers, blank lines) are
/// skipped; a text with no such line has no frames.
pub fn frames(text: &str) -> Vec<TextFrame<'_>> {
    text.lines().filter_map(frame_line).collect()
}

/// The frame of one `File "…", line N, in NAME` line, or `None`.
fn frame_line(line: &str) -> Option<TextFrame<'_>> {
    let rest = line.trim_start().strip_prefix("File \"")?;
    let close = rest.rfind("\", line ").or_else(|| rest.rfind('"'))?;
    let filename = &rest[..close];
    let after = &rest[close + 1..];
    let mut number = -1;
    let mut name = "";
    if let Some(l) = after.strip_prefix(", line ") {
        let digits = l.bytes().take_while(u8::is_ascii_digit).count();
        number = l[..digits].parse().unwrap_or(-1);
        if let Some(at) = l.find(", in ") {
            name = l[at + 5..].trim_end();
        }
    } else if let Some(n) = after.strip_prefix(", in ") {
        name = n.trim_end();
    }
    Some(TextFrame {
        filename,
        line: number,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceback_gives_its_frames_in_order() {
        let text = "Traceback (most recent call last):\n  File \"/w/train.py\", line 12, in <module>\n    loss = model(x)\n  File \"/w/model.py\", line 46, in forward\n    return self.proj(h)\n";
        assert_eq!(
            frames(text),
            vec![
                TextFrame {
                    filename: "/w/train.py",
                    line: 12,
                    name: "<module>"
                },
                TextFrame {
                    filename: "/w/model.py",
                    line: 46,
                    name: "forward"
                },
            ]
        );
    }

    #[test]
    fn odd_lines_are_skipped_and_missing_parts_are_marked() {
        assert!(frames("no frames here\n\n").is_empty());
        assert_eq!(
            frames("File \"a, b.py\", line x, in f"),
            vec![TextFrame {
                filename: "a, b.py",
                line: -1,
                name: "f"
            }]
        );
        assert_eq!(
            frames("  File \"c.py\""),
            vec![TextFrame {
                filename: "c.py",
                line: -1,
                name: ""
            }]
        );
    }
}
