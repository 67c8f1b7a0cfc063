//! Output formats: every `--format` value of every command, and how it writes its report.
//! The one place `--format` is dispatched: a command hands its report and its
//! [`super::args::OutputArgs`] to [`super::output::report`], which calls [`Formats::write`].
//!
//! A new output format for every report: a variant of [`Format`], a trait for that output kind
//! beside [`Text`], implemented below for each report (wrapping a `render::` function). A
//! format of one command: a variant of that command's enum and an arm of its `Formats` impl.
//! Nothing here computes: each arm calls a renderer.

use crate::analyze::categories::CategoriesReport;
use crate::analyze::diff::lines::LinesDiffReport;
use crate::analyze::diff::DiffReport;
use crate::analyze::explain::ExplainReport;
use crate::analyze::export::perfetto::PerfettoExport;
use crate::analyze::export::slice::SliceReport;
use crate::analyze::fit::FitReport;
use crate::analyze::flame::FlameReport;
use crate::analyze::frag::FragReport;
use crate::analyze::leaks::LeaksReport;
use crate::analyze::lines::LinesReport;
use crate::analyze::summary::SummaryReport;
use crate::analyze::timeline::TimelineReport;
use crate::analyze::top::TopReport;
use crate::analyze::whatif::WhatifReport;
use crate::compose::batch::BatchReport;
use crate::compose::check::CheckReport;
use crate::compose::oom::OomReport;
use crate::compose::page::PageReport;
use crate::compose::runs::RunsPage;
use crate::render;
use crate::render::text::Style;
use serde::{Serialize, Serializer};
use std::io::{Result, Write};

/// How the `--format` values of a command write its report `R`; `title` names the input
/// (the file, as given) for the formats that print one, and `style` is how text for people
/// is laid out (width, shortened paths; machine formats ignore it).
pub trait Formats<R>: Copy {
    /// Writes `report` in this format.
    fn write(self, report: &R, out: &mut dyn Write, title: &str, style: &Style) -> Result<()>;
}

/// A report as tables and lines for people, headed by `title`, laid out by `style`.
pub trait Text {
    /// Writes the text.
    fn text(&self, out: &mut dyn Write, title: &str, style: &Style) -> Result<()>;
}

/// `--format text|json`: the formats of most reports.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Tables for people.
    #[default]
    Text,
    /// JSON for machines (has `schema_version`).
    Json,
}

impl<R: Text + Serialize> Formats<R> for Format {
    fn write(self, report: &R, out: &mut dyn Write, title: &str, style: &Style) -> Result<()> {
        match self {
            Format::Text => style.fitted(out, |o| report.text(o, title, style)),
            Format::Json => render::json::write(out, report),
        }
    }
}

/// `text` of the reports that render under the input's name.
macro_rules! titled_text {
    ($($report:ty => $render:path),* $(,)?) => {$(
        impl Text for $report {
            fn text(&self, out: &mut dyn Write, title: &str, style: &Style) -> Result<()> {
                $render(out, title, self, style)
            }
        }
    )*};
}

titled_text! {
    TopReport => render::top::text,
    LinesReport => render::lines::text,
    FragReport => render::frag::text,
    OomReport => render::oom::text,
    CategoriesReport => render::categories::text,
    FitReport => render::fit::text,
    WhatifReport => render::whatif::text,
}

impl Text for ExplainReport {
    fn text(&self, out: &mut dyn Write, _title: &str, style: &Style) -> Result<()> {
        render::explain::text(out, self, style)
    }
}

/// The summaries of `memlens summary FILE...`, in the order given: one file's JSON is its
/// report with a `file` field, several files' (`many`, even when some could not be read) one
/// document with a `files` list.
pub struct Summaries {
    /// More than one file was given.
    pub many: bool,
    /// Each file read, as given, and its summary.
    pub files: Vec<(String, SummaryReport)>,
}

#[derive(Serialize)]
struct FileSummary<'a> {
    file: &'a str,
    #[serde(flatten)]
    report: &'a SummaryReport,
}

#[derive(Serialize)]
struct ManyFiles<'a> {
    schema_version: u32,
    files: Vec<FileSummary<'a>>,
}

impl Serialize for Summaries {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        fn each((file, report): &(String, SummaryReport)) -> FileSummary<'_> {
            FileSummary { file, report }
        }
        match self.files.as_slice() {
            [one] if !self.many => each(one).serialize(s),
            many => ManyFiles {
                schema_version: crate::analyze::SCHEMA_VERSION,
                files: many.iter().map(each).collect(),
            }
            .serialize(s),
        }
    }
}

impl Text for Summaries {
    fn text(&self, out: &mut dyn Write, _title: &str, style: &Style) -> Result<()> {
        for (i, (file, r)) in self.files.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            render::summary::text(out, file, r, style)?;
        }
        Ok(())
    }
}

/// A diff with what its text names: both files and the site rows shown.
pub struct DiffView {
    /// The comparison.
    pub report: DiffReport,
    /// The base file, as given.
    pub base: String,
    /// The candidate file, as given.
    pub cand: String,
    /// Site rows shown in text (`-n`).
    pub limit: usize,
}

impl Serialize for DiffView {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.report.serialize(s)
    }
}

impl Text for DiffView {
    fn text(&self, out: &mut dyn Write, _title: &str, style: &Style) -> Result<()> {
        render::diff::text(out, &self.base, &self.cand, &self.report, self.limit, style)
    }
}

/// `diff --format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DiffFormat {
    /// Tables for people.
    #[default]
    Text,
    /// JSON for machines (has `schema_version`).
    Json,
    /// Markdown for a pull-request comment.
    Md,
}

impl Formats<DiffView> for DiffFormat {
    fn write(self, v: &DiffView, out: &mut dyn Write, title: &str, style: &Style) -> Result<()> {
        match self {
            DiffFormat::Text => style.fitted(out, |o| v.text(o, title, style)),
            DiffFormat::Json => render::json::write(out, &v.report),
            DiffFormat::Md => render::diff_md::markdown(out, &v.base, &v.cand, &v.report, v.limit),
        }
    }
}

/// A line-by-line diff (`diff --by line`) with what its text names: both files and the rows
/// shown.
pub struct LinesDiffView {
    /// The comparison.
    pub report: LinesDiffReport,
    /// The base file, as given.
    pub base: String,
    /// The candidate file, as given.
    pub cand: String,
    /// Line rows shown in text (`-n`).
    pub limit: usize,
}

impl Serialize for LinesDiffView {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.report.serialize(s)
    }
}

impl Formats<LinesDiffView> for DiffFormat {
    fn write(
        self,
        v: &LinesDiffView,
        out: &mut dyn Write,
        _title: &str,
        style: &Style,
    ) -> Result<()> {
        match self {
            DiffFormat::Json => render::json::write(out, &v.report),
            // `--format md` is refused with `--by line` before anything is read.
            DiffFormat::Text | DiffFormat::Md => style.fitted(out, |o| {
                render::diff_lines::text(o, &v.base, &v.cand, &v.report, v.limit, style)
            }),
        }
    }
}

/// A leaks report with what its text shows: every step, or a summary of them.
pub struct LeaksView {
    /// The report.
    pub report: LeaksReport,
    /// List every step (`--steps`), not only their summary.
    pub all_steps: bool,
}

impl Serialize for LeaksView {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.report.serialize(s)
    }
}

impl Text for LeaksView {
    fn text(&self, out: &mut dyn Write, title: &str, style: &Style) -> Result<()> {
        render::leaks::text(out, title, &self.report, self.all_steps, style)
    }
}

/// `timeline --format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimelineFormat {
    /// One line per point and device: event index, time_us, live requested, allocated and
    /// reserved bytes.
    #[default]
    Csv,
    /// JSON with schema_version.
    Json,
    /// An SVG plot: the peak marked, ProfilerStep phases shaded.
    Svg,
}

impl Formats<TimelineReport> for TimelineFormat {
    fn write(self, r: &TimelineReport, out: &mut dyn Write, title: &str, _: &Style) -> Result<()> {
        match self {
            TimelineFormat::Csv => render::timeline::csv(out, r),
            TimelineFormat::Json => render::json::write(out, r),
            TimelineFormat::Svg => render::timeline::svg(out, title, r),
        }
    }
}

/// `flame --format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlameFormat {
    /// A flamegraph drawn in-process.
    #[default]
    Svg,
    /// Folded stack lines (`a;b;c BYTES`), for other flamegraph tools.
    Folded,
    /// A speedscope JSON profile.
    Speedscope,
}

impl Formats<FlameReport> for FlameFormat {
    fn write(self, r: &FlameReport, out: &mut dyn Write, title: &str, _: &Style) -> Result<()> {
        match self {
            FlameFormat::Svg => render::flame::svg(out, title, r),
            FlameFormat::Folded => render::flame::folded(out, r),
            FlameFormat::Speedscope => render::flame::speedscope(out, title, r),
        }
    }
}

/// `check --format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CheckFormat {
    /// Lines for people.
    #[default]
    Text,
    /// Markdown for a pull-request comment.
    Md,
    /// JUnit XML for CI systems.
    Junit,
    /// JSON with schema_version.
    Json,
}

impl Formats<CheckReport> for CheckFormat {
    fn write(
        self,
        r: &CheckReport,
        out: &mut dyn Write,
        _title: &str,
        style: &Style,
    ) -> Result<()> {
        match self {
            CheckFormat::Text => style.fitted(out, |o| render::check::text(o, r, style)),
            CheckFormat::Md => render::check::markdown(out, r),
            CheckFormat::Junit => render::check::junit(out, r),
            CheckFormat::Json => render::json::write(out, r),
        }
    }
}

/// `batch --format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BatchFormat {
    /// A table for people.
    #[default]
    Table,
    /// CSV, one line per file, sizes in bytes.
    Csv,
    /// JSON lines: one object per file, then one `{"kind":"imbalance",...}` line.
    Jsonl,
    /// One JSON document.
    Json,
    /// A Hive-partitioned Parquet dataset in the directory `-o DIR` (tables files, sites,
    /// timeline, ooms, leaks; see docs/scale.md).
    Parquet,
}

impl Formats<BatchReport> for BatchFormat {
    fn write(
        self,
        r: &BatchReport,
        out: &mut dyn Write,
        _title: &str,
        style: &Style,
    ) -> Result<()> {
        match self {
            BatchFormat::Table => style.fitted(out, |o| render::batch::table(o, r, style)),
            BatchFormat::Csv => render::batch::csv(out, r),
            BatchFormat::Jsonl => render::batch::jsonl(out, r),
            BatchFormat::Json => render::json::write(out, r),
            // `batch` writes the dataset itself (a directory of files, not one report).
            BatchFormat::Parquet => Err(std::io::Error::other(
                "parquet is a dataset directory, written by batch itself",
            )),
        }
    }
}

/// `report --format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReportFormat {
    /// One self-contained HTML page (scripts and styles inlined; nothing is fetched).
    #[default]
    Html,
    /// The page's data as JSON (schema_version, the file name, every section).
    Json,
}

impl Formats<PageReport> for ReportFormat {
    fn write(self, r: &PageReport, out: &mut dyn Write, title: &str, _: &Style) -> Result<()> {
        match self {
            ReportFormat::Html => render::html::write(out, title, r),
            ReportFormat::Json => render::json::write(out, &render::html::Embedded::new(title, r)?),
        }
    }
}

impl Formats<RunsPage> for ReportFormat {
    fn write(self, r: &RunsPage, out: &mut dyn Write, title: &str, _: &Style) -> Result<()> {
        match self {
            ReportFormat::Html => render::html::write_runs(out, title, r, None),
            ReportFormat::Json => render::json::write(out, r),
        }
    }
}

/// `export --format`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExportFormat {
    /// Chrome trace-event JSON for Perfetto UI and chrome://tracing (time in µs from time_us).
    #[default]
    Perfetto,
}

impl Formats<PerfettoExport> for ExportFormat {
    fn write(self, r: &PerfettoExport, out: &mut dyn Write, _: &str, _: &Style) -> Result<()> {
        match self {
            ExportFormat::Perfetto => render::perfetto::write(out, r),
        }
    }
}

impl Text for SliceReport {
    fn text(&self, out: &mut dyn Write, _title: &str, style: &Style) -> Result<()> {
        render::slice::text(out, self, style)
    }
}
