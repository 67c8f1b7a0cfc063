//! Line breaking that keeps code whole: where a line of a report may break, for prose and for
//! table cells alike.
//!
//! What users copy out of a report (an identifier, a call such as
//! `zero_grad(set_to_none=True)`, a setting such as
//! `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, a path with its line and function) is
//! a run of [`code`] characters, and a line never breaks inside one. A line breaks at a space;
//! a word too long for the room breaks after the punctuation between its runs (`,` `;` `×`
//! `→`...); only a run longer than the whole room is cut, after a path separator when one is
//! near (nothing else could keep the line within the width).

/// Whether `c` belongs to the runs a line never breaks inside: letters and digits of any
/// script and the punctuation of identifiers, calls, settings, paths and numbers
/// (`_ . : = / \ - ( ) [ ] ' " < > @ # $ % & * + ~ ! ? { } | ^`). What is left (spaces, `,`
/// `;`, a backtick, symbols such as `×` `→` `—`) separates runs.
pub fn code(c: char) -> bool {
    c.is_alphanumeric() || "_.:=/\\-()[]'\"<>@#$%&*+~!?{}|^".contains(c)
}

/// How far a line may go to keep within its room, from the gentlest to the last resort.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Breaks {
    /// At spaces, but never between a number and its unit (`3.61 GiB` stays on one line).
    Sizes,
    /// At spaces.
    Spaces,
    /// At spaces, and inside a word after the punctuation between its runs.
    Punctuation,
    /// As [`Breaks::Punctuation`], and a run longer than the whole room is cut.
    Cut,
}

/// Units a number keeps on its line under [`Breaks::Sizes`].
const UNITS: &[&str] = &[
    "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "KB", "MB", "GB",
];

/// Columns a string takes (one per character).
fn cols(s: &str) -> usize {
    s.chars().count()
}

/// The units `line` is laid out in under `breaks`, each with whether a space precedes it: its
/// words (sizes glued to their unit under [`Breaks::Sizes`]), or under [`Breaks::Punctuation`]
/// and [`Breaks::Cut`] the pieces of its words (see [`pieces`]).
fn units(line: &str, breaks: Breaks) -> Vec<(bool, String)> {
    let mut out: Vec<(bool, String)> = Vec::new();
    let words: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let glued = breaks == Breaks::Sizes
            && w.ends_with(|c: char| c.is_ascii_digit())
            && words.get(i + 1).is_some_and(|u| UNITS.contains(u));
        if glued {
            out.push((true, format!("{w} {}", words[i + 1])));
            i += 2;
            continue;
        }
        if breaks >= Breaks::Punctuation {
            for (k, p) in pieces(w).into_iter().enumerate() {
                out.push((k == 0, p.to_string()));
            }
        } else {
            out.push((true, w.to_string()));
        }
        i += 1;
    }
    out
}

/// The pieces of `word` a line may break between: after each character that is not [`code`]
/// and is followed by one that is (`a,b` → `a,` `b`; `B×H×S` → `B×` `H×` `S`).
pub fn pieces(word: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev: Option<char> = None;
    for (i, c) in word.char_indices() {
        if prev.is_some_and(|p| !code(p)) && code(c) && i > start {
            out.push(&word[start..i]);
            start = i;
        }
        prev = Some(c);
    }
    out.push(&word[start..]);
    out
}

/// The widest unit of `line` under `breaks` (with its leading spaces, which every line of it
/// keeps): the narrowest room it can be laid out in whole.
pub fn narrowest(line: &str, breaks: Breaks) -> usize {
    let lead = cols(line) - cols(line.trim_start_matches(' '));
    lead + units(line, breaks)
        .iter()
        .map(|(_, u)| cols(u))
        .max()
        .unwrap_or(0)
}

/// `line` laid out in lines of at most `room` columns, breaking only where `breaks` allows
/// (its leading spaces start every line; a unit longer than the room is cut only under
/// [`Breaks::Cut`], and otherwise overflows its line).
pub fn fill(line: &str, room: usize, breaks: Breaks) -> Vec<String> {
    let body = line.trim_start_matches(' ');
    let mut lead = &line[..line.len() - body.len()];
    if cols(lead) + narrowest(body, breaks) > room && breaks == Breaks::Cut {
        lead = "";
    }
    let mut lines = Vec::new();
    let mut cur = lead.to_string();
    let mut empty = true;
    for (spaced, unit) in units(body, breaks) {
        let sep = usize::from(spaced && !empty);
        if !empty && cols(&cur) + sep + cols(&unit) > room {
            lines.push(std::mem::replace(&mut cur, lead.to_string()));
        } else if sep == 1 {
            cur.push(' ');
        }
        let mut unit = unit.as_str();
        while breaks == Breaks::Cut && cols(&cur) + cols(unit) > room && room > cols(&cur) {
            let cut = cut_point(unit, room - cols(&cur));
            cur.push_str(&unit[..cut]);
            lines.push(std::mem::replace(&mut cur, lead.to_string()));
            unit = &unit[cut..];
        }
        cur.push_str(unit);
        empty = false;
    }
    lines.push(cur);
    lines
}

/// Where to cut `word` to keep at most `room` characters: after the last path separator in
/// the second half of them, else at `room` (on a character boundary).
pub fn cut_point(word: &str, room: usize) -> usize {
    let end = word
        .char_indices()
        .nth(room.max(1))
        .map_or(word.len(), |(i, _)| i);
    match word[..end].rfind(['/', '\\']) {
        Some(i) if i + 1 > end / 2 => i + 1,
        _ => end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_settings_stay_whole() {
        // The two splits of issue 52 at 100 columns: a fix cell 37 columns wide.
        let fix =
            "call optimizer.zero_grad(set_to_none=True) before the forward pass (not after it)";
        let lines = fill(fix, 37, Breaks::Spaces);
        assert_eq!(
            lines,
            vec![
                "call",
                "optimizer.zero_grad(set_to_none=True)",
                "before the forward pass (not after",
                "it)"
            ]
        );
        let set = "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True";
        assert_eq!(
            fill(set, 37, Breaks::Spaces),
            vec!["set", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]
        );
        // The narrowest room that keeps each whole is its longest run.
        assert_eq!(narrowest(fix, Breaks::Spaces), 37);
        assert_eq!(narrowest(set, Breaks::Punctuation), 48);
        // Only the last resort cuts a run, and only one longer than the room.
        let cut = fill(set, 30, Breaks::Cut);
        assert_eq!(cut.concat().replace(' ', ""), set.replace(' ', ""));
        assert!(cut.iter().all(|l| cols(l) <= 30), "{cut:?}");
    }

    #[test]
    fn breaks_fall_between_runs() {
        assert_eq!(pieces("a,b"), vec!["a,", "b"]);
        assert_eq!(pieces("B×H×S×S"), vec!["B×", "H×", "S×", "S"]);
        assert_eq!(
            pieces("(torch.autocast(\"cuda\","),
            vec!["(torch.autocast(\"cuda\","]
        );
        assert_eq!(pieces("x.py:3:f"), vec!["x.py:3:f"]);
        assert_eq!(pieces("`zero_grad`"), vec!["`", "zero_grad`"]);
        let label = "garbage_collection_threshold:0.6, max_split_size_mb:128";
        assert_eq!(
            fill(label, 33, Breaks::Punctuation),
            vec!["garbage_collection_threshold:0.6,", "max_split_size_mb:128"]
        );
        // A word wider than the room breaks after its punctuation, not inside a run.
        assert_eq!(
            fill("a.b,c.d;e_f", 5, Breaks::Punctuation),
            vec!["a.b,", "c.d;", "e_f"]
        );
        // Sizes keep their unit first; plain spaces do not.
        assert_eq!(fill("3.61 GiB", 6, Breaks::Sizes), vec!["3.61 GiB"]);
        assert_eq!(fill("3.61 GiB", 6, Breaks::Spaces), vec!["3.61", "GiB"]);
        assert_eq!(narrowest("saves 896.00 MiB", Breaks::Sizes), 10);
        // Leading spaces start every line.
        assert_eq!(
            fill("  via a.py:1:f b.py:2:g", 14, Breaks::Spaces),
            vec!["  via a.py:1:f", "  b.py:2:g"]
        );
        // A path cut as the last resort is cut after a separator.
        let path = "/work/shared/samples/real/x.pickle";
        assert_eq!(
            fill(path, 30, Breaks::Cut),
            vec!["/work/shared/samples/real/", "x.pickle"]
        );
    }
}
