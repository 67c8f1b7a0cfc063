//! The schemas of `docs/schemas/`, derived from the report types with `schemars`.
//!
//! Each command's schema is `schemars`' JSON Schema (draft 2020-12, the serialize contract: a
//! field skipped when empty is not required) of the type its `--format json` serializes, with
//! the `$id` and `title` of the command added to the root and the rustdoc of the descriptions
//! made plain (lines joined, intra-doc links written as code). Field doc comments are the
//! descriptions, so the documentation of a field lives in one place: beside the field.
//!
//! `memlens summary` and `memlens batch` write envelopes that exist only in the binary (one
//! file's summary with its name, or a list of them; a batch document, or its JSON lines): the
//! types below describe them, and the outputs' validation keeps them honest.

use memlens::analyze;
use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::Value;

/// One FILE: its summary, with the file as given first.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct FileSummary {
    /// The snapshot file, as given on the command line.
    file: String,
    #[serde(flatten)]
    report: analyze::summary::SummaryReport,
}

/// Several FILEs: each file's summary, in the order given.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ManyFiles {
    /// Always 1 ([`memlens::analyze::SCHEMA_VERSION`]; bumped only on a breaking change).
    #[schemars(extend("const" = 1))]
    schema_version: u32,
    /// One summary per file, in the order given.
    files: Vec<FileSummary>,
}

/// `memlens summary --format json`: with one FILE, one file summary (`file` + the report);
/// with several, `{"schema_version": 1, "files": [file summary, ...]}`.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, clippy::large_enum_variant)] // described, never built
enum SummaryJson {
    /// One FILE.
    One(FileSummary),
    /// Several FILEs.
    Many(ManyFiles),
}

/// `memlens batch --format json` (one document) and each line of `--format jsonl` (a
/// `kind: "file"` row per file, then at most one `kind: "imbalance"` line and one
/// `kind: "cross_rank"` line).
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, clippy::large_enum_variant)] // described, never built
enum BatchJson {
    /// The whole batch (`--format json`).
    Document(memlens::compose::batch::BatchReport),
    /// A file's line (`--format jsonl`).
    File(memlens::compose::batch::FileRow),
    /// The imbalance line (`--format jsonl`).
    Imbalance(memlens::compose::batch::Imbalance),
    /// The cross-rank line of `--format jsonl`.
    CrossRank(memlens::compose::cross_rank::CrossRankLine),
}

/// The schema of `T` as a JSON value, with the command's `$id` and `title`.
fn derive<T: JsonSchema>(name: &str) -> Value {
    let generator = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    plain_descriptions(&mut schema);
    let m = schema.as_object_mut().expect("a root schema is an object");
    m.insert(
        "$id".into(),
        Value::from(format!("https://memlens.dev/schemas/{name}.schema.json")),
    );
    m.insert(
        "title".into(),
        Value::from(format!("memlens {name} --format json")),
    );
    schema
}

/// Every command's schema, by the file name of `docs/schemas/<name>.schema.json`.
pub fn all() -> Vec<(&'static str, Value)> {
    use analyze::*;
    vec![
        ("summary", derive::<SummaryJson>("summary")),
        ("top", derive::<top::TopReport>("top")),
        ("lines", derive::<lines::LinesReport>("lines")),
        ("timeline", derive::<timeline::TimelineReport>("timeline")),
        ("frag", derive::<frag::FragReport>("frag")),
        ("oom", derive::<memlens::compose::oom::OomReport>("oom")),
        ("explain", derive::<explain::ExplainReport>("explain")),
        ("leaks", derive::<leaks::LeaksReport>("leaks")),
        (
            "categories",
            derive::<categories::CategoriesReport>("categories"),
        ),
        ("fit", derive::<fit::FitReport>("fit")),
        ("diff", derive::<diff::DiffReport>("diff")),
        (
            "diff_lines",
            derive::<diff::lines::LinesDiffReport>("diff_lines"),
        ),
        (
            "check",
            derive::<memlens::compose::check::CheckReport>("check"),
        ),
        ("batch", derive::<BatchJson>("batch")),
        (
            "report",
            derive::<memlens::render::html::Embedded<'static>>("report"),
        ),
        (
            "report_runs",
            derive::<memlens::compose::runs::RunsPage>("report_runs"),
        ),
        ("slice", derive::<export::slice::SliceReport>("slice")),
        ("whatif", derive::<whatif::WhatifReport>("whatif")),
    ]
}

/// The file's text: pretty JSON and a newline; the root's keys in reading order (`$schema`,
/// `$id`, `title`, `description`, the root's own keywords, then `$defs`), every other object's
/// sorted.
pub fn text(schema: &Value) -> String {
    struct Root<'a>(&'a serde_json::Map<String, Value>);
    impl serde::Serialize for Root<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            const FIRST: [&str; 4] = ["$schema", "$id", "title", "description"];
            let rank = |k: &str| match FIRST.iter().position(|f| *f == k) {
                Some(i) => i,
                None if k == "$defs" => FIRST.len() + 1,
                None => FIRST.len(),
            };
            let mut keys: Vec<&String> = self.0.keys().collect();
            keys.sort_by_key(|k| rank(k));
            let mut m = s.serialize_map(Some(keys.len()))?;
            for k in keys {
                m.serialize_entry(k, &self.0[k])?;
            }
            m.end()
        }
    }
    let root = schema.as_object().expect("a root schema is an object");
    let mut s = serde_json::to_string_pretty(&Root(root)).expect("a schema serializes");
    s.push('\n');
    s
}

/// Rustdoc to plain text in every `description`: the lines of a paragraph joined with spaces,
/// an intra-doc link (`` [`a::B`] ``, `` [`x`](y) ``) written as its code (`` `B` ``, `` `x` ``).
fn plain_descriptions(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match x {
                    Value::String(s) if k == "description" => *s = plain(s),
                    _ => plain_descriptions(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(plain_descriptions),
        _ => {}
    }
}

fn plain(doc: &str) -> String {
    let joined = doc
        .split("\n\n")
        .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut out = String::with_capacity(joined.len());
    let mut rest = joined.as_str();
    while let Some(at) = rest.find("[`") {
        let Some(end) = rest[at + 2..].find("`]") else {
            break;
        };
        let code = &rest[at + 2..at + 2 + end];
        out.push_str(&rest[..at]);
        let mut after = &rest[at + 2 + end + 2..];
        if let Some(link) = after.strip_prefix('(') {
            // `[`x`](target)`: the code as written.
            after = link.find(')').map_or(after, |c| &link[c + 1..]);
            out.push('`');
            out.push_str(code);
            out.push('`');
        } else {
            // `[`path::Name`]`: the name.
            let name = code.rsplit("::").next().unwrap_or(code);
            out.push('`');
            out.push_str(name);
            out.push('`');
        }
        rest = after;
    }
    out.push_str(rest);
    out
}
