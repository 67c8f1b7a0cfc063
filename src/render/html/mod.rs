//! `memlens report`: the page as one self-contained HTML file. The template, its style and
//! its script are compiled in (`include_str!`); the report goes in as JSON inside a
//! `<script type="application/json">` element, every `<` written `\u003c` so no text of the
//! snapshot can close it. Nothing is fetched: no script, style, font or image comes from
//! anywhere but this file.

use crate::analyze::page::PageReport;
use serde::Serialize;
use std::io::{Result, Write};

const TEMPLATE: &str = include_str!("report.html");
const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

/// The report with the name of its file, as the page reads it.
#[derive(Serialize)]
pub struct Embedded<'a> {
    /// The snapshot file, as given.
    pub file: &'a str,
    /// The report.
    #[serde(flatten)]
    pub report: &'a PageReport,
}

/// The static page's policy: nothing may be requested at all.
const CSP_STATIC: &str =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:";
/// The served page's policy: requests only to the server that served it.
const CSP_SERVED: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'";

/// What a page served by `memlens serve` knows of its server: the files it serves and which
/// one this page is. The token is not written here: the page reads it from its own URL.
#[derive(Serialize)]
pub struct Served<'a> {
    /// Every file served, as given, in the order of the command line.
    pub files: &'a [String],
    /// The index in `files` of the file this page shows.
    pub file: usize,
}

/// Writes the page of `report`, `title` naming the snapshot: the static, self-contained page.
pub fn write(out: &mut dyn Write, title: &str, report: &PageReport) -> Result<()> {
    write_page(out, title, report, None)
}

/// Writes the page `memlens serve` serves for `report`: the same page, which asks its server
/// for each window it zooms to (`served`), under a policy that lets it reach that server only.
pub fn write_served(
    out: &mut dyn Write,
    title: &str,
    report: &PageReport,
    served: &Served,
) -> Result<()> {
    write_page(out, title, report, Some(served))
}

fn write_page(
    out: &mut dyn Write,
    title: &str,
    report: &PageReport,
    served: Option<&Served>,
) -> Result<()> {
    let data = serde_json::to_string(&Embedded {
        file: title,
        report,
    })?;
    let serve = serde_json::to_string(&served)?;
    let csp = if served.is_some() {
        CSP_SERVED
    } else {
        CSP_STATIC
    };
    let mut rest = TEMPLATE;
    for (marker, what) in [
        ("{{CSP}}", Part::Raw(csp)),
        ("{{TITLE}}", Part::Text(title)),
        ("{{STYLE}}", Part::Raw(STYLE)),
        ("{{DATA}}", Part::Json(&data)),
        ("{{SERVE}}", Part::Json(&serve)),
        ("{{SCRIPT}}", Part::Raw(SCRIPT)),
    ] {
        let (before, after) = rest
            .split_once(marker)
            .expect("the template holds every marker once, in order");
        out.write_all(before.as_bytes())?;
        match what {
            Part::Raw(s) => out.write_all(s.as_bytes())?,
            Part::Text(s) => write_escaped(out, s)?,
            Part::Json(s) => write_json(out, s)?,
        }
        rest = after;
    }
    out.write_all(rest.as_bytes())
}

enum Part<'a> {
    Raw(&'a str),
    Text(&'a str),
    Json(&'a str),
}

/// Text in an HTML element: `&`, `<`, `>` and quotes escaped.
fn write_escaped(out: &mut dyn Write, s: &str) -> Result<()> {
    let mut last = 0;
    for (i, c) in s.char_indices() {
        let rep = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '"' => "&quot;",
            '\'' => "&#39;",
            _ => continue,
        };
        out.write_all(&s.as_bytes()[last..i])?;
        out.write_all(rep.as_bytes())?;
        last = i + c.len_utf8();
    }
    out.write_all(&s.as_bytes()[last..])
}

/// JSON inside a script element: `<` as `\u003c` (JSON strings accept it; outside strings
/// JSON has no `<`), so `</script>` in a file name or frame cannot end the element.
fn write_json(out: &mut dyn Write, s: &str) -> Result<()> {
    let mut last = 0;
    for (i, b) in s.bytes().enumerate() {
        if b == b'<' {
            out.write_all(&s.as_bytes()[last..i])?;
            out.write_all(b"\\u003c")?;
            last = i + 1;
        }
    }
    out.write_all(&s.as_bytes()[last..])
}

#[cfg(test)]
mod tests {
    #[test]
    fn script_text_cannot_close_the_element() {
        let mut v = Vec::new();
        super::write_json(&mut v, r#"{"a":"</script><b>"}"#).unwrap();
        let s = String::from_utf8(v).unwrap();
        assert_eq!(s, r#"{"a":"\u003c/script>\u003cb>"}"#);
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["a"], "</script><b>");
        let mut t = Vec::new();
        super::write_escaped(&mut t, "a<b>&\"c'").unwrap();
        assert_eq!(String::from_utf8(t).unwrap(), "a&lt;b&gt;&amp;&quot;c&#39;");
    }
}
