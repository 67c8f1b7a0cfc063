//! Markdown text and code spans for GitHub-flavoured Markdown (pull-request comments), shared
//! by the Markdown renderings of `check` and `diff`.

use super::visible::visible;

/// Text for a Markdown table cell, a heading or a quote (GitHub-flavoured Markdown): controls
/// and line breaks escaped ([`visible`]), and every character Markdown would act on escaped
/// with a backslash (`|` would end the cell; `` ` ``, `*`, `_`, `~`, `[`, `]` start inline
/// markup; `<`, `>` and `&` HTML or entities; `\` an escape), so the text shows as written
/// and cannot close the cell, start a row or carry HTML.
pub fn md_text(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in visible(s).chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '~' | '[' | ']' | '<' | '>' | '&' | '|'
        ) {
            o.push('\\');
        }
        o.push(c);
    }
    o
}

/// A Markdown code span of `s` inside a table cell: controls and line breaks escaped
/// ([`visible`]), fenced by one backtick more than the longest run of backticks inside (so no
/// backtick in the text closes it; padded with spaces when the text starts or ends with one),
/// and `|` written `\|` (GitHub splits table rows at a bare `|` even inside a code span, and
/// drops the backslash there). Inside a code span `<`, `&` and `*` are shown as they are.
pub fn md_code(s: &str) -> String {
    let text = visible(s).replace('|', "\\|");
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}
