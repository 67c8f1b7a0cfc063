//! `memlens report`: the page as one self-contained HTML file. The template, its style and
//! its script are compiled in (`include_str!`); the report goes in as JSON inside a
//! `<script type="application/json">` element, every `<` written `\u003c` so no text of the
//! snapshot can close it. Nothing is fetched: no script, style, font or image comes from
//! anywhere but this file.
//!
//! Each page's script is assembled at build time (`concat!` of `include_str!`) from the
//! modules of `js/`, each with one job, in the fixed order `REPORT_MODULES` and
//! `RUNS_MODULES` list: `prelude.js` opens the one function the page runs in, the modules
//! both pages share follow (`errors.js`, `dom.js`, `format.js`, `axis.js`: one way of
//! building elements and tables, formatting bytes and drawing axes), then the page's own
//! (`report_*`, the sections of the one-file page; `runs_*`, the page of several runs), and
//! the page's main module closes the function. No bundler, nothing at run time.

use crate::compose::page::PageReport;
use crate::compose::runs::RunsPage;
use serde::Serialize;
use std::io::{Result, Write};

const TEMPLATE: &str = include_str!("report.html");
const STYLE: &str = include_str!("report.css");
use std::collections::BTreeMap;

/// Declares a page's script, the modules of `js/` joined in the order named, and (for the
/// tests) the list of those names.
macro_rules! page_script {
    ($(#[$doc:meta])* $script:ident, $modules:ident, [$($module:literal),+ $(,)?]) => {
        $(#[$doc])*
        const $script: &str = concat!($(include_str!(concat!("js/", $module))),+);
        #[cfg(test)]
        const $modules: &[&str] = &[$($module),+];
    };
}

page_script!(
    /// The one-file page's script (`memlens report FILE`, `memlens serve`).
    SCRIPT,
    REPORT_MODULES,
    [
        "prelude.js",
        "report_page.js",
        // shared with the runs page
        "errors.js",
        "dom.js",
        "format.js",
        "axis.js",
        // the one-file page's own
        "tooltip.js",
        "report_data.js",
        "frames.js",
        "header.js",
        "advice.js",
        "notes.js",
        "judgement.js",
        "oom.js",
        "timeline.js",
        "timeline_paint.js",
        "timeline_hover.js",
        "zoom.js",
        "pin.js",
        "serve.js",
        "state.js",
        "frag.js",
        "top.js",
        "lines.js",
        "flame.js",
        "leaks.js",
        "pools.js",
        "categories.js",
        "summary.js",
        "report_hooks.js",
        "report_main.js",
    ]
);

page_script!(
    /// The page of several runs' script (`memlens report A B ...`, `memlens serve`'s `/runs`).
    RUNS_SCRIPT,
    RUNS_MODULES,
    [
        "prelude.js",
        "runs_page.js",
        // shared with the one-file page
        "errors.js",
        "dom.js",
        "format.js",
        "axis.js",
        // the runs page's own
        "runs_data.js",
        "runs_header.js",
        "runs_timeline.js",
        "runs_moment.js",
        "runs_run.js",
        "runs_diff.js",
        "runs_main.js",
    ]
);

/// The data of the HTML page of `memlens report`: the file name, the summary, OOM, leak and
/// category reports, then per device the timeline (stacked bands) and, at each moment (peak,
/// OOMs, end, `--at`), the allocator state, fragmentation, top sites and flamegraphs, with
/// frames and stacks written once.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Embedded<'a> {
    /// The snapshot file, as given.
    pub file: &'a str,
    /// Each site and context label of the report (`site`, `context` keys) that the text
    /// reports show otherwise, as they show it: the snapshot's root
    /// (`site_root`), `site-packages/` and `lib/pythonX.Y/` stripped from its path. The page
    /// shows these; labels absent here are shown as they are.
    pub shown_sites: BTreeMap<String, String>,
    /// The report.
    #[serde(flatten)]
    pub report: &'a PageReport,
}

impl<'a> Embedded<'a> {
    /// The page's data for `report` of the snapshot `file`.
    pub fn new(file: &'a str, report: &'a PageReport) -> Result<Embedded<'a>> {
        let style = crate::render::text::Style {
            width: None,
            root: report.site_root.clone(),
        };
        let mut shown = BTreeMap::new();
        collect_labels(&serde_json::to_value(report)?, &style, &mut shown);
        Ok(Embedded {
            file,
            shown_sites: shown,
            report,
        })
    }
}

/// Every string under a `site` or `context` key of `v` whose text label differs.
fn collect_labels(
    v: &serde_json::Value,
    style: &crate::render::text::Style,
    out: &mut BTreeMap<String, String>,
) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("site" | "context", serde_json::Value::String(label)) => {
                        if !out.contains_key(label) {
                            let short = style.site(label);
                            if &short != label {
                                out.insert(label.clone(), short);
                            }
                        }
                    }
                    _ => collect_labels(x, style, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_labels(x, style, out)),
        _ => {}
    }
}

/// The page's policy: its one script and its one style element run by their SHA-256 (no
/// `'unsafe-inline'`: a script or a handler that a slip in escaping let into the page would
/// not run); style attributes are not allowed either (the script sets styles through the
/// CSSOM, `element.style`). The static page may request nothing at all; the served page
/// (`served`) only the server that served it.
pub fn csp(served: bool) -> String {
    csp_for(SCRIPT, served)
}

/// The policy of a page whose script is `script` (the one-file page's or the runs page's).
fn csp_for(script: &str, served: bool) -> String {
    format!(
        "default-src 'none'; script-src '{}'; style-src '{}'; img-src data:{}",
        inline_hash("<script>", "{{SCRIPT}}", script),
        inline_hash("<style>", "{{STYLE}}", STYLE),
        if served { "; connect-src 'self'" } else { "" }
    )
}

/// `sha256-BASE64` of the text of the template's element opened by `open` (the first one),
/// with `marker` standing for `body`: what the browser hashes to match the policy.
fn inline_hash(open: &str, marker: &str, body: &str) -> String {
    use sha2::{Digest, Sha256};
    let start = TEMPLATE.find(open).expect("the template holds the element") + open.len();
    let text = &TEMPLATE[start..];
    let text = &text[..text.find("</").expect("the element is closed")];
    let (before, after) = text
        .split_once(marker)
        .expect("the element holds its marker");
    let mut h = Sha256::new();
    h.update(before.as_bytes());
    h.update(body.as_bytes());
    h.update(after.as_bytes());
    format!("sha256-{}", base64(&h.finalize()))
}

/// Standard base64 with padding (RFC 4648 §4), as CSP hashes are written.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// What a page served by `memlens serve` knows of its server: the files it serves and which
/// one this page is. The token is not written here: the page reads it from its own URL.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    let data = serde_json::to_string(&Embedded::new(title, report)?)?;
    let serve = serde_json::to_string(&served)?;
    fill(out, title, &data, &serve, SCRIPT)
}

/// The page of several runs ([`RunsPage`]): the one-file page's template and style with the
/// runs page's script, as self-contained. `served`: the page `memlens serve` serves, which
/// links each run to its own page there.
pub fn write_runs(
    out: &mut dyn Write,
    title: &str,
    report: &RunsPage,
    served: Option<&Served>,
) -> Result<()> {
    let data = serde_json::to_string(report)?;
    let serve = serde_json::to_string(&served)?;
    fill(out, title, &data, &serve, RUNS_SCRIPT)
}

/// The policy of the runs page (see [`csp`]).
pub fn runs_csp(served: bool) -> String {
    csp_for(RUNS_SCRIPT, served)
}

/// The template with its markers filled: `data` and `serve` are JSON, `script` the page's.
fn fill(out: &mut dyn Write, title: &str, data: &str, serve: &str, script: &str) -> Result<()> {
    let csp = csp_for(script, serve != "null");
    let mut rest = TEMPLATE;
    for (marker, what) in [
        ("{{CSP}}", Part::Raw(&csp)),
        ("{{TITLE}}", Part::Text(title)),
        ("{{STYLE}}", Part::Raw(STYLE)),
        ("{{DATA}}", Part::Json(data)),
        ("{{SERVE}}", Part::Json(serve)),
        ("{{SCRIPT}}", Part::Raw(script)),
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
    use super::{REPORT_MODULES, RUNS_MODULES, RUNS_SCRIPT, SCRIPT};
    use std::collections::{BTreeMap, BTreeSet};

    /// The functions a script defines at the top of the page's function (two spaces in), with
    /// how many times each.
    fn top_level_functions(script: &str) -> BTreeMap<&str, usize> {
        let mut out = BTreeMap::new();
        for line in script.lines() {
            if let Some(rest) = line.strip_prefix("  function ") {
                let name = &rest[..rest.find('(').expect("a function's parameters")];
                *out.entry(name).or_insert(0) += 1;
            }
        }
        out
    }

    /// Each page's script is its modules of `js/` joined in order; every file there is a module
    /// of a page; the modules both pages join (errors, DOM, formats, axes) define each of their
    /// helpers once in each page's script, so no copy of a helper is left in a page's own
    /// modules; and no page defines a function twice (a later one would silently win).
    #[test]
    fn each_page_joins_its_modules_and_defines_each_shared_helper_once() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/render/html/js");
        let files: BTreeSet<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        let named: BTreeSet<String> = REPORT_MODULES
            .iter()
            .chain(RUNS_MODULES)
            .map(|m| m.to_string())
            .collect();
        assert_eq!(
            files, named,
            "the files of js/ and the modules the pages join"
        );
        let text = |m: &str| std::fs::read_to_string(dir.join(m)).unwrap();
        for (page, script, modules) in [
            ("report", SCRIPT, REPORT_MODULES),
            ("runs", RUNS_SCRIPT, RUNS_MODULES),
        ] {
            let set: BTreeSet<_> = modules.iter().collect();
            assert_eq!(set.len(), modules.len(), "{page}: a module joined twice");
            assert_eq!(script, modules.iter().map(|m| text(m)).collect::<String>());
            assert_eq!(modules.first(), Some(&"prelude.js"), "{page}");
            assert!(
                script.ends_with("\n})();\n"),
                "{page}: the main module closes"
            );
            assert_eq!(script.matches("\"use strict\";").count(), 1, "{page}");
            assert!(!script.to_ascii_lowercase().contains("</script"), "{page}");
            for (name, n) in top_level_functions(script) {
                assert_eq!(n, 1, "{page} defines {name} {n} times");
            }
        }
        let shared: Vec<&str> = REPORT_MODULES
            .iter()
            .filter(|m| RUNS_MODULES.contains(m))
            .copied()
            .collect();
        assert_eq!(
            shared,
            ["prelude.js", "errors.js", "dom.js", "format.js", "axis.js"]
        );
        let helpers: BTreeSet<String> = shared
            .iter()
            .flat_map(|m| {
                top_level_functions(&text(m))
                    .into_keys()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect();
        // What both pages had a copy of before they shared one, and the shared axes.
        for h in [
            "recordError",
            "guard",
            "el",
            "append",
            "fill",
            "section",
            "heading",
            "table",
            "fmtBytes",
            "fmtAxis",
            "fmtSigned",
            "fmtInt",
            "fmtMs",
            "fmtPct",
            "rich",
            "bytesCell",
            "signedCell",
            "setupCanvas",
            "niceStep",
            "byteTicks",
            "byteGrid",
            "byteLabels",
            "countTicks",
            "countAxis",
        ] {
            assert!(helpers.contains(h), "{h} is shared");
        }
        for h in &helpers {
            let def = format!("function {h}(");
            for (page, script) in [("report", SCRIPT), ("runs", RUNS_SCRIPT)] {
                assert_eq!(script.matches(&def).count(), 1, "{def} in the {page} page");
            }
        }
        // The runs page draws no axis text of its own: its axes are the shared module's.
        assert!(!RUNS_SCRIPT.contains("function axisText("));
        for call in ["byteLabels(", "countAxis("] {
            assert!(
                SCRIPT.matches(call).count() >= 2,
                "{call} in the report page"
            );
            assert!(
                RUNS_SCRIPT.matches(call).count() >= 2,
                "{call} in the runs page"
            );
        }
    }

    #[test]
    fn base64_as_rfc_4648_spells_it() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64(i.as_bytes()), o);
        }
    }

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
