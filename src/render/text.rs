//! What every text renderer shares: tables that fit the width the output has, prose wrapped
//! to it, and call-site paths shortened the same way in every report.
//!
//! The command line decides the [`Style`] (the terminal's width when standard output is one,
//! `--width N`, or no limit for pipes and files; the snapshot's root for its paths); the
//! renderers only follow it. JSON never goes through here: its paths stay as recorded.

pub use super::layout::Table;
use super::visible::{visible, visible_lines};
use super::wrap::{cut_point, pieces};
use crate::analyze::profile::normalize_path;
use comfy_table::{Cell, CellAlignment};
use std::io::{Result, Write};

/// How a text report is laid out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Style {
    /// Columns tables and prose fit in; `None` for no limit (output to a pipe or a file).
    pub width: Option<usize>,
    /// The common directory of the snapshot's user files, stripped from the paths of sites
    /// (as `diff`, `check` and `batch` strip it); `None` when there is none.
    pub root: Option<String>,
}

/// The narrowest width tables and prose are fitted to; a terminal narrower than this still
/// gets lines of this width rather than a column per character.
pub const MIN_WIDTH: usize = 40;

impl Style {
    /// A style with no width limit and no root: text as wide as its content, paths as
    /// recorded (what tests and other callers get unless they ask for more).
    pub fn plain() -> Style {
        Style::default()
    }

    /// The width to fit, if any (never below [`MIN_WIDTH`]).
    pub fn columns(&self) -> Option<usize> {
        self.width.map(|w| w.max(MIN_WIDTH))
    }

    /// An empty table in the reports' look, fitted to the width when there is one and when it
    /// is written, without splitting a run of code (see [`super::layout`]); without a width it
    /// is as wide as its content.
    pub fn table(&self) -> Table {
        Table::new(self.columns())
    }

    /// A table of a few records with many fields (pools, devices): one row per record when
    /// that fits the width; otherwise turned on its side, one column per record under the
    /// record's name (`header[0]` names the first column) and one row per field, in as many
    /// tables as the records need to fit. `numeric[i]` right-aligns field `i`.
    pub fn records(&self, header: &[&str], numeric: &[bool], rows: &[Vec<String>]) -> Vec<Table> {
        let mut t = self.table().sideways_first();
        t.set_header(header.to_vec());
        for r in rows {
            t.add_row(r.iter().enumerate().map(|(i, s)| {
                if numeric.get(i).copied().unwrap_or(false) {
                    right(s)
                } else {
                    cell(s)
                }
            }));
        }
        vec![t]
    }

    /// Runs `write` with `out`, every line it writes wider than the width (but a table's)
    /// wrapped as [`Style::wrap`] wraps prose, under the line's own indent and two more
    /// columns: the lines renderers write whole (a heading that names a path, a column of
    /// sites) fit too. Without a width, `write` writes to `out` directly.
    pub fn fitted(
        &self,
        out: &mut dyn Write,
        write: impl FnOnce(&mut dyn Write) -> Result<()>,
    ) -> Result<()> {
        let Some(w) = self.columns() else {
            return write(out);
        };
        let mut buf = Vec::new();
        write(&mut buf)?;
        let text = String::from_utf8_lossy(&buf);
        for line in text.split_inclusive('\n') {
            let (body, end) = match line.strip_suffix('\n') {
                Some(b) => (b, "\n"),
                None => (line, ""),
            };
            let table = body.starts_with(['┌', '│', '╞', '├', '└']);
            if width(body) <= w || table {
                write!(out, "{line}")?;
                continue;
            }
            let text = body.trim_start_matches(' ');
            let lead = &body[..body.len() - text.len()];
            let lines = self.wrap(lead, &format!("{lead}  "), text);
            write!(out, "{}{end}", lines.join("\n"))?;
        }
        Ok(())
    }

    /// Writes `text` as one paragraph: `first` before its first line, `rest` before every
    /// other, words wrapped at the width (a word longer than a whole line, a path, is cut where the line ends).
    pub fn para(&self, out: &mut dyn Write, first: &str, rest: &str, text: &str) -> Result<()> {
        for line in self.wrap(first, rest, text) {
            writeln!(out, "{line}")?;
        }
        Ok(())
    }

    /// The lines [`Style::para`] writes; without a width, the text as it is.
    pub fn wrap(&self, first: &str, rest: &str, text: &str) -> Vec<String> {
        // Snapshot strings in the text are shown escaped; its own line breaks stay.
        let text = &*visible_lines(text);
        if self.columns().is_none() {
            return text
                .split('\n')
                .enumerate()
                .map(|(i, l)| format!("{}{l}", if i == 0 { first } else { rest }))
                .collect();
        }
        let mut lines = Vec::new();
        // Lines of the text itself (an explicit break) stay breaks.
        for (i, source) in text.split('\n').enumerate() {
            let mut line = String::from(if i == 0 { first } else { rest });
            let mut empty = true;
            let w = self.columns().unwrap_or(usize::MAX);
            for word in source.split(' ').filter(|w| !w.is_empty()) {
                let fits = if empty {
                    // A long lead (`  name = `) is left alone on its line when the word
                    // would not fit after it but fits below.
                    width(&line) + width(word) <= w
                        || width(rest) >= width(&line)
                        || width(rest) + width(word) > w
                } else {
                    width(&line) + 1 + width(word) <= w
                };
                if !fits {
                    line.truncate(line.trim_end().len());
                    lines.push(std::mem::replace(&mut line, rest.to_string()));
                    empty = true;
                }
                if !empty {
                    line.push(' ');
                }
                place(&mut lines, &mut line, empty, rest, word, w);
                empty = false;
            }
            lines.push(line);
        }
        lines
    }

    /// `text` with every word that is a call site or a path shortened as [`Style::site`]
    /// shortens it (a note or a fix that names a site).
    pub fn sites_in(&self, text: &str) -> String {
        let text = text
            .split(' ')
            .map(|w| {
                let core = w.trim_start_matches(['(', '`', '\'', '"']);
                if core.contains('/') || core.contains('\\') {
                    format!("{}{}", &w[..w.len() - core.len()], self.site_raw(core))
                } else {
                    w.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        visible_lines(&text).into_owned()
    }

    /// A call-site label (`path:line:function`, `path:function`, a path, or a stack frame of
    /// one) with its path shortened as `diff` shortens it: what follows the last
    /// `site-packages/` or `dist-packages/`, the path below the snapshot's root, or what
    /// follows `lib/pythonX.Y/`. Labels without a path (`<no frames>`, C++ frames) stay.
    pub fn site(&self, label: &str) -> String {
        clip_lines(&visible(&self.site_raw(label))).into_owned()
    }

    /// [`Style::site`] before escaping (the path is found in the label as recorded).
    fn site_raw(&self, label: &str) -> String {
        let (path, tail) = split_label(label);
        if path.is_empty() || !(path.contains('/') || path.contains('\\')) {
            return label.to_string();
        }
        let short = normalize_path(path, self.root.as_deref());
        if short.is_empty() {
            return label.to_string();
        }
        format!("{short}{tail}")
    }
}

/// The path of a label and what follows it (`:line:function`, `:function`, or nothing). The
/// path ends at the first `:LINE:` (a C++ function name may hold `::`), else at the first `:`
/// after its last path separator, else it is the whole label.
fn split_label(label: &str) -> (&str, &str) {
    let bytes = label.as_bytes();
    let mut i = 0;
    while let Some(off) = label[i..].find(':') {
        let at = i + off;
        let mut j = at + 1;
        if j < bytes.len() && bytes[j] == b'-' {
            j += 1;
        }
        let digits = j;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            j += 1;
        }
        if j > digits && j < bytes.len() && bytes[j] == b':' && at > 0 {
            return label.split_at(at);
        }
        i = at + 1;
    }
    let after_sep = label.rfind(['/', '\\']).map_or(0, |s| s + 1);
    match label[after_sep..].find(':') {
        Some(c) => label.split_at(after_sep + c),
        None => (label, ""),
    }
}

/// Appends `word` to `line` (which holds only its lead when `bare`), as much as fits `w`
/// columns, and the rest on lines that start with `rest` (pushed to `lines`): a word too long
/// for the room breaks after the punctuation between its runs of code
/// ([`super::wrap::pieces`]); a piece too long for a line after `rest` gets a line with a
/// shorter indent when that is enough, and only one longer than the whole width is cut (after
/// a `/` when one is near).
fn place(lines: &mut Vec<String>, line: &mut String, bare: bool, rest: &str, word: &str, w: usize) {
    let mut bare = bare;
    for piece in pieces(word) {
        if width(line) + width(piece) > w && !bare {
            line.truncate(line.trim_end().len());
            lines.push(std::mem::replace(line, rest.to_string()));
        }
        let mut piece = piece;
        if width(line) + width(piece) > w && width(piece) <= w {
            // A shorter indent keeps it whole (a lead that is not indent stays alone above).
            if !line.trim().is_empty() {
                lines.push(line.trim_end().to_string());
            }
            let indent = width(rest).min(w - width(piece));
            *line = if rest.trim().is_empty() {
                " ".repeat(indent)
            } else {
                String::new()
            };
        }
        while width(line) + width(piece) > w && w > width(line) + 8 {
            let cut = cut_point(piece, w - width(line));
            line.push_str(&piece[..cut]);
            lines.push(std::mem::replace(line, rest.to_string()));
            piece = &piece[cut..];
        }
        line.push_str(piece);
        bare = false;
    }
}

/// Columns a string takes (one per character: reports hold no double-width text but paths).
pub fn width(s: &str) -> usize {
    s.chars().count()
}

/// A left-aligned cell of text that may hold snapshot strings, shown [`visible_lines`] (its own
/// line breaks kept; every other control escaped).
pub fn cell(s: &str) -> Cell {
    Cell::new(clip_lines(&visible_lines(s)))
}

/// The longest line, in characters, a table cell shows of a snapshot's string (a site label,
/// a metadata value); JSON keeps it whole.
pub const CELL_LINE_MAX: usize = 4096;

/// `s` with every line longer than [`CELL_LINE_MAX`] characters cut there, ending in how much
/// was left out. A table lays out a long line in time quadratic in its length (comfy-table
/// splits a line wider than its u16 column limit word by word, measuring the whole line at
/// each word: 8.6 s per MiB of `top --by metadata`, issue 53); no cell line reaches it.
pub fn clip_lines(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= CELL_LINE_MAX {
        return std::borrow::Cow::Borrowed(s);
    }
    let clip = |line: &str| match line.char_indices().nth(CELL_LINE_MAX) {
        None => line.to_string(),
        Some((at, _)) => {
            let more = line[at..].chars().count();
            format!(
                "{}… ({more} more characters; --format json has all)",
                &line[..at]
            )
        }
    };
    std::borrow::Cow::Owned(s.split('\n').map(clip).collect::<Vec<_>>().join("\n"))
}

/// A right-aligned cell (numbers).
pub fn right(s: impl ToString) -> Cell {
    Cell::new(s).set_alignment(CellAlignment::Right)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn narrow(w: usize) -> Style {
        Style {
            width: Some(w),
            root: None,
        }
    }

    #[test]
    fn prose_wraps_at_words_with_a_hanging_indent() {
        let s = narrow(40);
        let lines = s.wrap(
            "  - ",
            "    ",
            "Reserved but unallocated: 5.36 GiB, 2.7× the 2.00 GiB request, yet none fits.",
        );
        assert_eq!(
            lines,
            vec![
                "  - Reserved but unallocated: 5.36 GiB,",
                "    2.7× the 2.00 GiB request, yet none",
                "    fits.",
            ]
        );
        assert!(lines.iter().all(|l| width(l) <= 40));
        // No width: the text as written.
        assert_eq!(Style::plain().wrap("- ", "", "a  b c"), vec!["- a  b c"]);
        // A word longer than a line is cut where the line ends, after a `/` when near.
        let long = "x".repeat(50);
        assert_eq!(
            s.wrap("", "  ", &format!("a {long} b")),
            vec![
                "a".to_string(),
                format!("  {}", "x".repeat(38)),
                format!("  {} b", "x".repeat(12))
            ]
        );
        let path = "/work/shared/samples/real/Wedsonlin__assignment2-systems__results.pickle";
        let lines = s.wrap("", "", path);
        assert_eq!(lines.concat(), path);
        assert!(lines.iter().all(|l| width(l) <= 40), "{lines:?}");
        assert_eq!(lines[0], "/work/shared/samples/real/");
        // A long lead stays alone when the word fits only below it.
        assert_eq!(
            s.wrap("  graph_capture_record_stream_reuse = ", "    ", "false"),
            vec!["  graph_capture_record_stream_reuse =", "    false"]
        );
        // Explicit breaks stay.
        assert_eq!(s.wrap("> ", "  ", "a\nb"), vec!["> a", "  b"]);
        // The width never goes below MIN_WIDTH.
        assert_eq!(narrow(5).columns(), Some(MIN_WIDTH));
    }

    #[test]
    fn tables_fit_the_width() {
        let mut t = narrow(50).table();
        t.set_header(vec!["#", "bytes", "site"]);
        t.add_row(vec![
            "1",
            "20.28 GiB",
            "/usr/local/lib/python3.10/dist-packages/vllm/worker/cache_engine.py:83:_allocate_kv_cache",
        ]);
        let text = t.to_string();
        assert!(text.lines().all(|l| width(l) <= 50), "{text}");
        assert!(text.contains("20.28 GiB"));
        let mut wide = Style::plain().table();
        wide.set_header(vec!["site"]);
        wide.add_row(vec!["a".repeat(150)]);
        assert!(wide.to_string().lines().any(|l| width(l) > 150));
    }

    #[test]
    fn site_paths_shorten_like_diff() {
        let s = Style {
            width: None,
            root: Some("/home/u/proj/".into()),
        };
        assert_eq!(
            s.site("/usr/local/lib/python3.10/dist-packages/vllm/worker/cache_engine.py:83:_allocate_kv_cache"),
            "vllm/worker/cache_engine.py:83:_allocate_kv_cache"
        );
        assert_eq!(
            s.site("/home/u/proj/model.py:60:forward"),
            "model.py:60:forward"
        );
        assert_eq!(s.site("/home/u/proj/model.py:forward"), "model.py:forward");
        assert_eq!(s.site("/home/u/proj/model.py"), "model.py");
        assert_eq!(
            s.site("/usr/lib/python3.11/threading.py:-1:run"),
            "threading.py:-1:run"
        );
        assert_eq!(s.site("<no frames>"), "<no frames>");
        assert_eq!(s.site("??:0:c10::cuda::malloc"), "??:0:c10::cuda::malloc");
        assert_eq!(
            s.site("/opt/lib/libtorch_cuda.so:0:c10::cuda::malloc(int)"),
            "/opt/lib/libtorch_cuda.so:0:c10::cuda::malloc(int)"
        );
        assert_eq!(s.site("train.py:4:main"), "train.py:4:main");
        assert_eq!(s.site("C:\\work\\site-packages\\x\\y.py:3:f"), "x/y.py:3:f");
        assert_eq!(
            s.sites_in("made at /home/u/proj/model.py:48:forward stay (see /home/u/proj/a.py)"),
            "made at model.py:48:forward stay (see a.py)"
        );
        assert_eq!(
            s.sites_in("and/or site-packages/ `x`"),
            "and/or site-packages/ `x`"
        );
        // Without a root only package and standard-library prefixes go.
        assert_eq!(
            Style::plain().site("/home/u/proj/model.py:60:forward"),
            "/home/u/proj/model.py:60:forward"
        );
    }
}
