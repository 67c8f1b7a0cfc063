//! The output surfaces of a decoded snapshot, each written to memory the way its command
//! writes it, with what must hold of what was written:
//!
//! - `report`: the page (`compose::page` + `render::html`), under a title that tries to close
//!   its script element: the page has the template's `<script` / `</script` and no more, and
//!   the same count for every input;
//! - `export --format perfetto`: the trace-event file parses as JSON;
//! - `slice`: the window as a pickle (`analyze::export::slice`), which memlens reads back;
//! - `batch --format parquet`: every table of `compose::dataset` (and the tables of a
//!   file that failed) as a Parquet file, `PAR1` at both ends;
//! - `check --format md` (and `junit`): five budgets, all broken or unmeasured where they can
//!   be, with a baseline; every Markdown line is a heading, a table row with its table's
//!   column count, a note or empty, whatever the sites' and files' names hold.
//!
//! Shared by the `outputs` fuzz target and `tests/it/fuzz_outputs.rs`, which runs it over the
//! samples in `cargo test` so that it keeps compiling against the library.

use memlens::analyze::diff::{self, DiffOptions};
use memlens::analyze::export::perfetto::{self, PerfettoOptions};
use memlens::analyze::export::slice;
use memlens::analyze::profile::{self, ProfileOptions};
use memlens::compose::check::{self, Budget, BudgetKind, Limit};
use memlens::compose::dataset::{self, Source};
use memlens::compose::page::{self, PageOptions};
use memlens::model::{build, BuildOptions, Snapshot};
use memlens::render;
use memlens::replay::{DeviceReplay, MomentSpec, WindowSpec};
use std::sync::OnceLock;

/// A file name as hostile as a path can be: it ends the page's script and title elements, holds
/// Markdown table and code-span syntax and a carriage return.
pub const TITLE: &str = "a</script><script>alert(1)</script></title>|`x`\r\n<b>&\"'.pickle";

/// What [`exercise`] wrote: the surfaces an input reached (an analysis may refuse a snapshot,
/// which is not a failure; `tests/it/fuzz_outputs.rs` checks that the samples reach them all).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// The page was written.
    pub page: bool,
    /// The Perfetto trace was written.
    pub perfetto: bool,
    /// Slices written and read back (of two windows).
    pub slices: usize,
    /// Parquet tables written (those of a failed file included).
    pub tables: usize,
    /// The check report was written as Markdown and JUnit.
    pub check: bool,
}

/// Runs every surface on `snap` and its `replays`; panics when a property fails.
pub fn exercise(snap: &Snapshot, replays: &[DeviceReplay]) -> Written {
    Written {
        page: page_html(snap, replays),
        perfetto: perfetto_json(snap, replays),
        slices: slice_round_trip(snap, replays),
        tables: parquet_tables(snap, replays),
        check: check_markdown(snap, replays),
    }
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// The page's script elements: as many as the template has, whatever the data holds.
static SCRIPTS: OnceLock<(usize, usize)> = OnceLock::new();

fn page_html(snap: &Snapshot, replays: &[DeviceReplay]) -> bool {
    let Ok(report) = page::run(snap, replays, &PageOptions::default()) else {
        return false;
    };
    let mut out = Vec::new();
    render::html::write(&mut out, TITLE, &report).expect("the page writes to memory");
    let html = std::str::from_utf8(&out).expect("the page is UTF-8");
    let lower = html.to_ascii_lowercase();
    let scripts = (count(&lower, "<script"), count(&lower, "</script"));
    assert_eq!(
        scripts.0, scripts.1,
        "unbalanced script elements in the page"
    );
    let first = *SCRIPTS.get_or_init(|| scripts);
    assert_eq!(
        scripts, first,
        "the data opened or closed a script element of the page"
    );
    assert_eq!(
        count(&lower, "</title"),
        1,
        "the title closed the page's title element"
    );
    true
}

fn perfetto_json(snap: &Snapshot, replays: &[DeviceReplay]) -> bool {
    let Ok(export) = perfetto::run(snap, replays, &PerfettoOptions::default()) else {
        return false;
    };
    let mut out = Vec::new();
    render::perfetto::write(&mut out, &export).expect("the trace writes to memory");
    if let Err(e) = serde_json::from_slice::<serde_json::Value>(&out) {
        panic!("the Perfetto trace is not JSON: {e}");
    }
    true
}

fn slice_round_trip(snap: &Snapshot, replays: &[DeviceReplay]) -> usize {
    let mut written = 0;
    let windows = [
        WindowSpec::default(),
        WindowSpec {
            to: Some(MomentSpec::Peak),
            ..WindowSpec::default()
        },
    ];
    for window in &windows {
        let Ok(plan) = slice::plan(snap, replays, window) else {
            continue;
        };
        let out = slice::write(snap, &plan, Vec::new()).expect("the slice writes to memory");
        let opts = BuildOptions {
            threads: 1,
            ..Default::default()
        };
        if let Err(e) = build(&out, opts) {
            panic!("memlens cannot read the slice it wrote ({window:?}): {e}");
        }
        written += 1;
    }
    written
}

fn parquet_file(t: &dataset::Table) {
    let bytes = render::parquet::write(t).expect("a table writes as Parquet");
    assert!(
        bytes.len() >= 8 && bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"),
        "table {}: not a Parquet file",
        t.name
    );
}

fn parquet_tables(snap: &Snapshot, replays: &[DeviceReplay]) -> usize {
    let src = Source {
        file: TITLE,
        sha256: Some("0".repeat(64)),
    };
    let mut tables = dataset::tables(&src, snap, replays).unwrap_or_default();
    tables.extend(dataset::failed(&src, "byte 7: \u{0}\r\n|error|"));
    tables.iter().for_each(parquet_file);
    tables.len()
}

fn check_markdown(snap: &Snapshot, replays: &[DeviceReplay]) -> bool {
    let popts = ProfileOptions::default();
    let Ok(p) = profile::profile(snap, replays, &popts) else {
        return false;
    };
    let leaked = check::leaked(snap, replays, &popts);
    let d = diff::run(&p, &p, popts.key, false, &DiffOptions::default());
    let budget = |kind, limit| Budget {
        kind,
        limit,
        label: "x|`y`\r\nz".to_string(),
    };
    let budgets = [
        budget(BudgetKind::MaxPeak, Limit::Bytes(1)),
        budget(BudgetKind::MaxReserved, Limit::Bytes(0)),
        budget(BudgetKind::MaxFrag, Limit::Ratio(0.0)),
        budget(BudgetKind::MaxLeaked, Limit::Bytes(0)),
        budget(BudgetKind::Baseline, Limit::Growth(0.0, 0)),
    ];
    let file = check::evaluate(
        TITLE,
        &p,
        &leaked,
        Some(check::Baseline {
            profile: &p,
            diff: &d,
        }),
        &budgets,
        10,
    );
    let n_budgets = file.budgets.len();
    let report = check::report("peak", None, Some(TITLE.into()), vec![file], false);
    let mut out = Vec::new();
    render::check::markdown(&mut out, &report).expect("the Markdown writes to memory");
    let md = String::from_utf8(out).expect("the Markdown is UTF-8");
    markdown_lines(&md, n_budgets);
    let mut xml = Vec::new();
    render::check::junit(&mut xml, &report).expect("the JUnit XML writes to memory");
    std::str::from_utf8(&xml).expect("the JUnit XML is UTF-8");
    true
}

/// `|` not escaped by a backslash.
fn pipes(line: &str) -> usize {
    let b = line.as_bytes();
    (0..b.len())
        .filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\'))
        .count()
}

/// Every line (as CommonMark ends lines: `\n`, `\r\n` or `\r`) is a heading, a row of the
/// budget table (4 columns) or of a sites table (3), the "Top sites behind" line, a note or
/// empty; one budget row per budget.
fn markdown_lines(md: &str, n_budgets: usize) {
    let mut rows = 0;
    for line in md.split(['\n', '\r']) {
        let ok = if line.is_empty() || line.starts_with("## ") || line.starts_with("### ") {
            true
        } else if line.starts_with("Top sites behind **") || line.starts_with("> note: ") {
            !line.contains('|') || line.starts_with("> note: ")
        } else if line.starts_with('|') {
            let p = pipes(line);
            if p == 5
                && ["| ✅ |", "| ❌ |", "| ⚠️ |"]
                    .iter()
                    .any(|i| line.starts_with(i))
            {
                rows += 1;
            }
            p == 5 || p == 4
        } else {
            false
        };
        assert!(
            ok,
            "a Markdown line that is no heading, row or note: {line:?}\n{md}"
        );
    }
    assert_eq!(rows, n_budgets, "one budget row per budget:\n{md}");
}
