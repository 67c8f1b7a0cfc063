//! The JSON outputs against their published schemas in `docs/schemas/`.
//!
//! The schemas are derived from the report types (`schemas/derive.rs`, `schemars`):
//! `schema_files_are_derived_from_the_report_types` fails when a file differs from its
//! derivation, and `MEMLENS_BLESS=1` rewrites them.
//!
//! Every command's `--format json` output (and `batch --format jsonl` lines) on every sample is
//! validated by a small validator for the subset of JSON Schema (draft 2020-12) the schemas use:
//! `type` (a name or a list), `enum`, `const`, `minimum`, `required`, `properties`,
//! `additionalProperties` (boolean or schema), `propertyNames`, `items`, `prefixItems`,
//! `minItems`, `maxItems`, `oneOf`, `anyOf` and `$ref` to `#/$defs/...` (`format` is an
//! annotation). A keyword outside that subset fails the test, so a schema cannot silently
//! rely on something this validator ignores. `integer` is strict: a JSON number written with a
//! fraction or an exponent (`1.0`, `1e3`) is not an integer, because sizes are integer bytes.

use crate::common;
mod derive;
use common::*;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::OnceLock;

/// The command of every derived schema (`derive::all`), in its order.
fn schema_names() -> Vec<&'static str> {
    derived().iter().map(|(n, _)| *n).collect()
}

/// `*_bytes` fields that are signed by design (a difference, a margin).
const SIGNED_BYTES: &[&str] = &[
    "delta_bytes",
    "over_bytes",
    "headroom_bytes",
    "peak_reserved_change_bytes",
    "end_reserved_change_bytes",
    "stranded_change_bytes",
];

/// Keywords that carry no constraint.
const ANNOTATIONS: &[&str] = &["$schema", "$id", "title", "description", "$defs", "format"];

/// Keywords the validator checks.
const CHECKED: &[&str] = &[
    "type",
    "enum",
    "const",
    "minimum",
    "required",
    "properties",
    "additionalProperties",
    "propertyNames",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "oneOf",
    "anyOf",
    "$ref",
];

/// The schema file of a command.
fn schema_path(name: &str) -> std::path::PathBuf {
    root()
        .join("docs/schemas")
        .join(format!("{name}.schema.json"))
}

/// The derived schemas (see [`derive`]), computed once.
fn derived() -> &'static [(&'static str, Value)] {
    static ALL: OnceLock<Vec<(&'static str, Value)>> = OnceLock::new();
    ALL.get_or_init(derive::all)
}

/// The commands the MCP server (`python/memlens/mcp_server.py`) offers as tools: their
/// schemas ship in the Python package too (`python/memlens/schemas/`), as its tools' output
/// schemas.
const MCP_TOOLS: &[&str] = &[
    "summary",
    "top",
    "oom",
    "explain",
    "fit",
    "whatif",
    "diff",
    "check",
    "leaks",
    "categories",
];

/// `docs/schemas/` (and, for the MCP tools, `python/memlens/schemas/`) holds the derived
/// schemas, byte for byte; `MEMLENS_BLESS=1` rewrites them.
#[test]
fn schema_files_are_derived_from_the_report_types() {
    let mut stale = Vec::new();
    for (name, schema) in derived() {
        let want = derive::text(schema);
        let mut paths = vec![schema_path(name)];
        if MCP_TOOLS.contains(name) {
            paths.push(
                root()
                    .join("python/memlens/schemas")
                    .join(format!("{name}.schema.json")),
            );
        }
        for path in paths {
            if bless() {
                std::fs::write(&path, &want).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            } else if std::fs::read_to_string(&path).ok().as_deref() != Some(want.as_str()) {
                stale.push(rel(&path));
            }
        }
    }
    for name in MCP_TOOLS {
        assert!(
            derived().iter().any(|(n, _)| n == name),
            "{name}: an MCP tool without a schema"
        );
    }
    // No schema file that no command derives.
    for e in std::fs::read_dir(root().join("docs/schemas")).unwrap() {
        let p = e.unwrap().path();
        let file = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(n) = file.strip_suffix(".schema.json") {
            assert!(
                schema_names().contains(&n),
                "{file}: no command derives it; delete it"
            );
        }
    }
    assert!(
        stale.is_empty(),
        "stale schemas (a report type changed): {}\nregenerate them with \
         `MEMLENS_BLESS=1 cargo test --release --test it schema_files` and review the diff",
        stale.join(", ")
    );
}

/// Validation state: the schema document (for `$ref`), the errors, and the fields that no
/// `properties` entry describes.
struct Validator<'a> {
    root: &'a Value,
    errors: Vec<String>,
    undocumented: Vec<String>,
}

impl<'a> Validator<'a> {
    fn new(root: &'a Value) -> Self {
        Validator {
            root,
            errors: Vec::new(),
            undocumented: Vec::new(),
        }
    }

    fn resolve(&self, r: &str) -> &'a Value {
        let pointer = r
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("only local $ref are supported: {r}"));
        assert!(
            pointer.starts_with("/$defs/"),
            "only #/$defs/... $ref are supported: {r}"
        );
        self.root
            .pointer(pointer)
            .unwrap_or_else(|| panic!("dangling $ref {r}"))
    }

    /// True when `inst` matches `schema`; errors (with their JSON pointer) are collected.
    fn check(&mut self, schema: &'a Value, inst: &Value, at: &str) -> bool {
        let before = self.errors.len();
        let s = match schema {
            Value::Bool(true) => return true,
            Value::Bool(false) => {
                self.errors.push(format!("{at}: not allowed here"));
                return false;
            }
            Value::Object(s) => s,
            other => panic!("not a schema: {other}"),
        };
        for k in s.keys() {
            assert!(
                ANNOTATIONS.contains(&k.as_str()) || CHECKED.contains(&k.as_str()),
                "schema keyword `{k}` is outside the validated subset"
            );
        }
        if let Some(Value::String(r)) = s.get("$ref") {
            let target = self.resolve(r);
            self.check(target, inst, at);
        }
        if let Some(t) = s.get("type") {
            let names: Vec<&str> = match t {
                Value::String(n) => vec![n.as_str()],
                Value::Array(v) => v.iter().map(|n| n.as_str().expect("type name")).collect(),
                other => panic!("bad type {other}"),
            };
            if !names.iter().any(|n| has_type(inst, n)) {
                self.errors.push(format!(
                    "{at}: expected {}, found {}",
                    names.join(" or "),
                    type_name(inst)
                ));
                return false;
            }
        }
        if let Some(Value::Array(vals)) = s.get("enum") {
            if !vals.iter().any(|v| v == inst) {
                self.errors.push(format!(
                    "{at}: {inst} is not one of {}",
                    Value::from(vals.clone())
                ));
            }
        }
        if let Some(c) = s.get("const") {
            if c != inst {
                self.errors.push(format!("{at}: {inst} is not {c}"));
            }
        }
        if let (Some(min), Value::Number(n)) = (s.get("minimum"), inst) {
            let min = min.as_f64().expect("numeric minimum");
            let below = match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(_), _, _) => min > 0.0 && n.as_f64().unwrap() < min,
                (None, Some(i), _) => (i as f64) < min,
                (None, None, Some(f)) => f < min,
                _ => false,
            };
            if below {
                self.errors
                    .push(format!("{at}: {n} is below the minimum {min}"));
            }
        }
        if let Value::Object(obj) = inst {
            self.check_object(s, obj, at);
        }
        if let Value::Array(arr) = inst {
            self.check_array(s, arr, at);
        }
        if let Some(Value::Array(alts)) = s.get("oneOf") {
            let mut matched = 0;
            let mut why = Vec::new();
            for (i, alt) in alts.iter().enumerate() {
                let mut sub = Validator::new(self.root);
                if sub.check(alt, inst, at) {
                    matched += 1;
                    self.undocumented.extend(sub.undocumented);
                } else {
                    why.push(format!("[{i}] {}", sub.errors.join("; ")));
                }
            }
            if matched != 1 {
                self.errors.push(format!(
                    "{at}: matches {matched} of the {} oneOf alternatives (exactly 1 wanted): {}",
                    alts.len(),
                    why.join(" | ")
                ));
            }
        }
        if let Some(Value::Array(alts)) = s.get("anyOf") {
            let mut why = Vec::new();
            let mut matched = false;
            for (i, alt) in alts.iter().enumerate() {
                let mut sub = Validator::new(self.root);
                if sub.check(alt, inst, at) {
                    // The first alternative that matches documents the fields.
                    self.undocumented.extend(sub.undocumented);
                    matched = true;
                    break;
                }
                why.push(format!("[{i}] {}", sub.errors.join("; ")));
            }
            if !matched {
                self.errors.push(format!(
                    "{at}: matches none of the {} anyOf alternatives: {}",
                    alts.len(),
                    why.join(" | ")
                ));
            }
        }
        self.errors.len() == before
    }

    /// `prefixItems` (a tuple's places), `items` (the rest, or every item without
    /// `prefixItems`), `minItems` and `maxItems`.
    fn check_array(&mut self, s: &'a Map<String, Value>, arr: &[Value], at: &str) {
        let prefix = match s.get("prefixItems") {
            Some(Value::Array(p)) => p.as_slice(),
            _ => &[],
        };
        for (i, x) in arr.iter().enumerate() {
            let here = format!("{at}/{i}");
            match prefix.get(i) {
                Some(p) => {
                    self.check(p, x, &here);
                }
                None => {
                    if let Some(items) = s.get("items") {
                        self.check(items, x, &here);
                    }
                }
            }
        }
        let len = arr.len() as u64;
        if let Some(min) = s.get("minItems").and_then(Value::as_u64) {
            if len < min {
                self.errors
                    .push(format!("{at}: {len} items, fewer than {min}"));
            }
        }
        if let Some(max) = s.get("maxItems").and_then(Value::as_u64) {
            if len > max {
                self.errors
                    .push(format!("{at}: {len} items, more than {max}"));
            }
        }
    }

    fn check_object(&mut self, s: &'a Map<String, Value>, obj: &Map<String, Value>, at: &str) {
        if let Some(Value::Array(req)) = s.get("required") {
            for r in req {
                let r = r.as_str().expect("required names are strings");
                if !obj.contains_key(r) {
                    self.errors
                        .push(format!("{at}: required field `{r}` is missing"));
                }
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        let additional = s.get("additionalProperties");
        let names = s.get("propertyNames");
        for (k, v) in obj {
            let here = format!("{at}/{k}");
            if let Some(n) = names {
                self.check(n, &Value::String(k.clone()), &format!("{here} (name)"));
            }
            match props.and_then(|p| p.get(k)) {
                Some(ps) => {
                    self.check(ps, v, &here);
                }
                None => match additional {
                    Some(a @ Value::Object(_)) | Some(a @ Value::Bool(false)) => {
                        self.check(a, v, &here);
                    }
                    // `true`: allowed (fields are only ever added), but noted.
                    _ if props.is_some() => self.undocumented.push(here),
                    // No `properties` here: described by a `$ref` or `oneOf` beside it.
                    _ => {}
                },
            }
        }
    }
}

fn has_type(v: &Value, name: &str) -> bool {
    match name {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        other => panic!("unknown type name {other}"),
    }
}

fn type_name(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Number(n) if n.is_i64() || n.is_u64() => format!("integer {n}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

/// Problems with `*_bytes` fields anywhere in `v`: each must be an integer (or null), or a
/// column of integers (`report`'s timeline samples: one size per sample), non-negative unless
/// it is a signed difference ([`SIGNED_BYTES`]).
fn bytes_fields(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let here = format!("{at}/{k}");
                if k.ends_with("_bytes") {
                    let signed = SIGNED_BYTES.contains(&k.as_str());
                    let size = |y: &Value| match y {
                        Value::Number(n) if n.is_u64() => true,
                        Value::Number(n) if n.is_i64() => signed,
                        _ => false,
                    };
                    match x {
                        Value::Null => {}
                        Value::Array(col) => {
                            if let Some((i, y)) = col.iter().enumerate().find(|(_, y)| !size(y)) {
                                out.push(format!("{here}/{i}: {y} is not a non-negative integer"));
                            }
                        }
                        y if !size(y) => {
                            out.push(format!("{here}: {y} is not a non-negative integer"));
                        }
                        _ => {}
                    }
                }
                bytes_fields(x, &here, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                bytes_fields(x, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// One documented output: which schema, which command line, what came out.
struct Run {
    schema: &'static str,
    args: Vec<String>,
    docs: Vec<Value>,
}

impl Run {
    fn label(&self) -> String {
        format!("memlens {}", self.args.join(" "))
    }
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}

/// Runs `memlens ARGS` in the repository root and parses its JSON (`jsonl`: one per line).
fn run(schema: &'static str, args: Vec<String>, codes: &[i32], jsonl: bool) -> Run {
    let o = memlens_in_root(&args);
    let code = o.status.code().unwrap_or(-1);
    assert!(
        codes.contains(&code),
        "memlens {} exited {code}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout).expect("UTF-8 output");
    let parse = |t: &str| -> Value {
        serde_json::from_str(t)
            .unwrap_or_else(|e| panic!("memlens {}: not JSON ({e}): {t}", args.join(" ")))
    };
    let docs = if jsonl {
        text.lines().filter(|l| !l.is_empty()).map(parse).collect()
    } else {
        vec![parse(&text)]
    };
    assert!(!docs.is_empty(), "memlens {}: no output", args.join(" "));
    Run { schema, args, docs }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The command lines run on one sample.
fn per_sample(file: &str) -> Vec<(&'static str, Vec<&str>, &'static [i32])> {
    const OK: &[i32] = &[0];
    const OK_OR_1: &[i32] = &[0, 1];
    vec![
        ("summary", vec!["summary", file], OK),
        ("top", vec!["top", file], OK),
        (
            "top",
            vec![
                "top",
                file,
                "--by",
                "stack",
                "-n",
                "2",
                "--full-stacks",
                "--cost",
                "lifetime",
            ],
            OK,
        ),
        (
            "top",
            vec![
                "top",
                file,
                "--by",
                "function",
                "-n",
                "1",
                "--cost",
                "never-freed",
                "--at",
                "end",
            ],
            OK,
        ),
        ("lines", vec!["lines", file], OK),
        ("lines", vec!["lines", file, "--cost", "lifetime"], OK),
        ("timeline", vec!["timeline", file], OK),
        ("timeline", vec!["timeline", file, "--points", "8"], OK),
        ("frag", vec!["frag", file], OK),
        ("whatif", vec!["whatif", file, "--suggest"], OK),
        ("whatif", vec!["whatif", file, "--capacity", "200MiB"], OK),
        (
            "frag",
            vec!["frag", file, "--at", "peak", "--worst", "1"],
            OK,
        ),
        ("oom", vec!["oom", file], OK),
        ("oom", vec!["oom", file, "--capacity", "200MiB"], OK),
        ("leaks", vec!["leaks", file], OK_OR_1),
        ("categories", vec!["categories", file], OK),
        ("fit", vec!["fit", file], OK),
        ("fit", vec!["fit", file, "--capacity", "200MiB"], OK),
        ("diff", vec!["diff", "samples/diff_base.pickle", file], OK),
        (
            "diff_lines",
            vec!["diff", "samples/diff_base.pickle", file, "--by", "line"],
            OK,
        ),
        (
            "diff_lines",
            vec![
                "diff",
                file,
                "samples/diff_cand.pickle",
                "--by",
                "line",
                "--all",
                "--cost",
                "allocated",
                "--fail-on-growth",
                "1%",
            ],
            OK_OR_1,
        ),
        (
            "diff",
            vec![
                "diff",
                file,
                "samples/diff_cand.pickle",
                "--all",
                "--by",
                "stack",
                "--ignore-lines",
                "--fail-on-growth",
                "1%",
                "--min-abs",
                "1MiB",
            ],
            OK_OR_1,
        ),
        (
            "check",
            vec![
                "check",
                file,
                "--max-peak",
                "100MiB",
                "--max-reserved",
                "1GiB",
                "--max-frag",
                "30%",
                "--max-leaked",
                "1MiB",
            ],
            OK_OR_1,
        ),
        (
            "check",
            vec![
                "check",
                file,
                "--gpu",
                "h100",
                "--max-peak",
                "50%",
                "--baseline",
                "samples/diff_base.pickle",
            ],
            OK_OR_1,
        ),
        ("report", vec!["report", file], OK),
        (
            "report",
            vec![
                "report",
                file,
                "--at",
                "0",
                "--bands",
                "3",
                "-n",
                "2",
                "--capacity",
                "200MiB",
            ],
            OK,
        ),
    ]
}

/// Every output, produced once (in parallel) and shared by the tests below.
fn runs() -> &'static [Run] {
    static RUNS: OnceLock<Vec<Run>> = OnceLock::new();
    RUNS.get_or_init(|| {
        let files: Vec<String> = samples().iter().map(|p| rel(p)).collect();
        assert!(files.len() >= 10, "samples missing: {files:?}");
        let mut jobs: Vec<(&'static str, Vec<String>, &'static [i32], bool)> = Vec::new();
        for f in &files {
            for (schema, args, codes) in per_sample(f) {
                let mut a = strings(&args);
                a.extend(strings(&["--format", "json"]));
                jobs.push((schema, a, codes, false));
            }
        }
        // Several files at once.
        let mut multi = strings(&["summary", "--format", "json"]);
        multi.extend(files.iter().cloned());
        jobs.push(("summary", multi, &[0], false));
        let mut multi = strings(&["check", "--format", "json", "--max-peak", "1GiB"]);
        multi.extend(files.iter().cloned());
        jobs.push(("check", multi, &[0, 1], false));
        // The page of several runs: every sample against the generated base, and a rank set.
        for f in &files {
            jobs.push((
                "report_runs",
                strings(&["report", "--format", "json", "samples/diff_base.pickle", f]),
                &[0],
                false,
            ));
        }
        let mut ranks = strings(&["report", "--format", "json"]);
        ranks.extend((0..4).map(|r| format!("samples/ranks/rank{r}.pickle")));
        jobs.push(("report_runs", ranks, &[0], false));
        // Batch: a rank set, every sample, and a file that is not a snapshot.
        for (fmt, jsonl) in [("json", false), ("jsonl", true)] {
            jobs.push((
                "batch",
                strings(&["batch", "--format", fmt, "samples/ranks"]),
                &[0],
                jsonl,
            ));
            let mut all = strings(&["batch", "--format", fmt, "-j", "2"]);
            all.extend(files.iter().cloned());
            jobs.push(("batch", all, &[0], jsonl));
            jobs.push((
                "batch",
                strings(&["batch", "--format", fmt, "samples/ranks", "Cargo.toml"]),
                &[2],
                jsonl,
            ));
        }
        // Slice: what it wrote, for every sample (the slices go to a directory of their own).
        let slices = std::env::temp_dir().join(format!("memlens-schemas-{}", std::process::id()));
        std::fs::create_dir_all(&slices).unwrap();
        for (i, f) in files.iter().enumerate() {
            let out = slices
                .join(format!("{i}.pickle"))
                .to_string_lossy()
                .into_owned();
            jobs.push((
                "slice",
                strings(&["slice", f, "--format", "json", "-f", "-o", &out]),
                &[0],
                false,
            ));
        }
        // Explain: every message of the corpus, and one with a capacity given.
        let mut msgs: Vec<String> = std::fs::read_dir(root().join("tests/data/oom_messages"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "txt"))
            .map(|p| rel(&p))
            .collect();
        msgs.sort();
        assert!(!msgs.is_empty(), "no OOM messages");
        for m in &msgs {
            jobs.push((
                "explain",
                strings(&["explain", "--format", "json", "--message-file", m]),
                &[0],
                false,
            ));
        }
        jobs.push((
            "explain",
            strings(&[
                "explain",
                "--format",
                "json",
                "--gpu",
                "h100",
                "--message-file",
            ])
            .into_iter()
            .chain([msgs[0].clone()])
            .collect(),
            &[0],
            false,
        ));

        // A command with a schema but no runs above (a new one): `NAME FILE --format json`
        // on every sample, exit 0 or 1.
        for name in schema_names() {
            if jobs.iter().all(|j| j.0 != name) {
                for f in &files {
                    jobs.push((
                        name,
                        strings(&[name, f, "--format", "json"]),
                        &[0, 1],
                        false,
                    ));
                }
            }
        }

        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(4)
            .min(16);
        let chunk = jobs.len().div_ceil(threads);
        let mut out: Vec<Run> = Vec::with_capacity(jobs.len());
        std::thread::scope(|sc| {
            let handles: Vec<_> = jobs
                .chunks(chunk)
                .map(|part| {
                    sc.spawn(move || {
                        part.iter()
                            .map(|(schema, args, codes, jsonl)| {
                                run(schema, args.clone(), codes, *jsonl)
                            })
                            .collect::<Vec<Run>>()
                    })
                })
                .collect();
            for h in handles {
                out.extend(h.join().expect("a run failed"));
            }
        });
        out
    })
}

/// Validates `doc` against the named schema: (errors, undocumented fields).
fn validate(schema: &Value, doc: &Value) -> (Vec<String>, Vec<String>) {
    let mut v = Validator::new(schema);
    v.check(schema, doc, "");
    (v.errors, v.undocumented)
}

fn schemas() -> Vec<(&'static str, Value)> {
    derived().to_vec()
}

fn schema_of<'a>(all: &'a [(&'static str, Value)], name: &str) -> &'a Value {
    &all.iter()
        .find(|(n, _)| *n == name)
        .expect("known schema")
        .1
}

#[test]
fn every_output_matches_its_schema() {
    let all = schemas();
    let mut failures = Vec::new();
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for r in runs() {
        let schema = schema_of(&all, r.schema);
        for (i, doc) in r.docs.iter().enumerate() {
            *seen.entry(r.schema).or_default() += 1;
            let (errors, _) = validate(schema, doc);
            for e in errors {
                failures.push(format!("{} [doc {i}]: {e}", r.label()));
            }
            if doc["schema_version"] != 1 {
                failures.push(format!(
                    "{} [doc {i}]: schema_version is {}, not 1",
                    r.label(),
                    doc["schema_version"]
                ));
            }
            let mut bad = Vec::new();
            bytes_fields(doc, "", &mut bad);
            for e in bad {
                failures.push(format!("{} [doc {i}]: {e}", r.label()));
            }
        }
    }
    for name in schema_names() {
        assert!(
            seen.get(name).copied().unwrap_or(0) > 0,
            "no output was checked against {name}.schema.json"
        );
    }
    assert!(
        failures.is_empty(),
        "{} schema violations:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A field the code emits but no schema describes is allowed by `additionalProperties`, but
/// the documentation must keep up: add it to `docs/schemas/` (fields are only ever added).
#[test]
fn every_emitted_field_is_documented() {
    let all = schemas();
    let mut missing = std::collections::BTreeSet::new();
    for r in runs() {
        let schema = schema_of(&all, r.schema);
        for doc in &r.docs {
            let (_, undocumented) = validate(schema, doc);
            for u in undocumented {
                // Array indices vary; report the field path once.
                let generic: Vec<&str> = u
                    .split('/')
                    .map(|p| if p.parse::<usize>().is_ok() { "*" } else { p })
                    .collect();
                missing.insert(format!("{}.schema.json: {}", r.schema, generic.join("/")));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "fields emitted but not described in docs/schemas:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Each schema is well formed for the contract: draft 2020-12, an `$id`, a title, a
/// description on every property, a type (or a reference) on every value, `required` names
/// that exist, and objects open to added fields.
#[test]
fn schemas_are_complete() {
    for (name, s) in schemas() {
        assert_eq!(
            s["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name}"
        );
        assert_eq!(
            s["$id"],
            format!("https://memlens.dev/schemas/{name}.schema.json"),
            "{name}"
        );
        assert!(s["title"].is_string(), "{name}: title");
        assert!(s["description"].is_string(), "{name}: description");
        let mut problems = Vec::new();
        lint(&s, &format!("{name}.schema.json#"), &mut problems);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}

fn lint(s: &Value, at: &str, problems: &mut Vec<String>) {
    let Some(m) = s.as_object() else { return };
    let typed = ["type", "$ref", "oneOf", "anyOf", "const"]
        .iter()
        .any(|k| m.contains_key(*k));
    let is_subschema_of_map = m.len() == 1 && m.contains_key("enum");
    if !typed && !is_subschema_of_map {
        problems.push(format!("{at}: no type"));
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        // Open to added fields: no `additionalProperties: false` (absent means any field).
        if m.get("additionalProperties") == Some(&Value::Bool(false)) {
            problems.push(format!("{at}: additionalProperties must not be false"));
        }
        for (k, p) in props {
            if !p.get("description").is_some_and(Value::is_string) {
                problems.push(format!("{at}/properties/{k}: no description"));
            }
            if k.ends_with("_bytes") {
                // A column of sizes (`"type": "array"`) is checked on its items.
                let p = if p.get("type") == Some(&Value::from("array")) {
                    p.get("items").unwrap_or(&Value::Null)
                } else {
                    p
                };
                let t = p.get("type");
                let integer = t == Some(&Value::from("integer"))
                    || t == Some(&serde_json::json!(["integer", "null"]));
                if !integer {
                    problems.push(format!("{at}/properties/{k}: a size must be an integer"));
                }
                if !SIGNED_BYTES.contains(&k.as_str()) && p.get("minimum") != Some(&0.into()) {
                    problems.push(format!("{at}/properties/{k}: a size needs minimum 0"));
                }
            }
            lint(p, &format!("{at}/properties/{k}"), problems);
        }
        if let Some(req) = m.get("required").and_then(Value::as_array) {
            for r in req {
                if !props.contains_key(r.as_str().unwrap_or_default()) {
                    problems.push(format!("{at}: required `{r}` is not a property"));
                }
            }
        }
    }
    for key in ["items", "additionalProperties", "propertyNames"] {
        if let Some(sub @ Value::Object(_)) = m.get(key) {
            lint(sub, &format!("{at}/{key}"), problems);
        }
    }
    for key in ["oneOf", "anyOf", "prefixItems"] {
        if let Some(Value::Array(alts)) = m.get(key) {
            for (i, a) in alts.iter().enumerate() {
                lint(a, &format!("{at}/{key}/{i}"), problems);
            }
        }
    }
    if let Some(Value::Object(defs)) = m.get("$defs") {
        for (k, d) in defs {
            lint(d, &format!("{at}/$defs/{k}"), problems);
        }
    }
}

/// The validator is not vacuous: a missing required field, a changed type, a value outside
/// an enum or a `const`, a negative size and an ambiguous `oneOf` are all caught.
#[test]
fn broken_outputs_are_rejected() {
    let all = schemas();
    let first = |schema: &str, needle: &str| -> Value {
        runs()
            .iter()
            .filter(|r| r.schema == schema)
            .flat_map(|r| r.docs.iter())
            .find(|d| d.pointer(needle).is_some())
            .unwrap_or_else(|| panic!("no {schema} output has {needle}"))
            .clone()
    };
    type Mutation = fn(&mut Value);
    let cases: &[(&str, &str, Mutation)] = &[
        ("summary", "/devices/0/reserved_bytes", |d| {
            d["devices"][0]
                .as_object_mut()
                .unwrap()
                .remove("reserved_bytes");
        }),
        ("summary", "/devices/0/reserved_bytes", |d| {
            d["devices"][0]["reserved_bytes"] = Value::from("180355072");
        }),
        ("summary", "/layout", |d| {
            d["layout"] = Value::from("sideways")
        }),
        ("summary", "/files/0/file", |d| {
            d["files"][0].as_object_mut().unwrap().remove("layout");
        }),
        ("top", "/devices/0/sites/0/bytes", |d| {
            d["devices"][0]["sites"][0]["bytes"] = serde_json::json!(1.5);
        }),
        ("top", "/schema_version", |d| {
            d.as_object_mut().unwrap().remove("schema_version");
        }),
        ("frag", "/schema_version", |d| {
            d["schema_version"] = Value::from(2)
        }),
        ("fit", "/devices/0/fixes/0/id", |d| {
            d["devices"][0]["fixes"][0]["id"] = Value::from("buy_a_bigger_gpu");
        }),
        ("timeline", "/devices/0/points/0", |d| {
            d["devices"][0]["points"][0]["reserved_bytes"] = Value::from(-1);
        }),
        ("frag", "/devices/0/total", |d| {
            d["devices"][0]["total"] = Value::Null;
        }),
        ("oom", "/ooms/0/verdict", |d| {
            d["ooms"][0]["verdict"] = Value::from("bad_luck");
        }),
        ("explain", "/ooms/0/requested_bytes", |d| {
            d["ooms"][0]["requested_bytes"] = serde_json::json!(1e3);
        }),
        ("leaks", "/devices/0/steps", |d| {
            d["devices"][0]["steps"] = Value::from("none");
        }),
        ("categories", "/devices/0/categories/0/confidence", |d| {
            d["devices"][0]["categories"][0]["confidence"] = Value::from("certain");
        }),
        ("diff", "/peak/delta_bytes", |d| {
            d["peak"].as_object_mut().unwrap().remove("delta_bytes");
        }),
        ("check", "/files/0/budgets/0", |d| {
            d["files"][0]["budgets"][0]["passed"] = Value::from("yes");
        }),
        ("check", "/files/0/budgets/0/status", |d| {
            d["files"][0]["budgets"][0]["status"] = Value::from("skipped");
        }),
        ("batch", "/imbalance/ranks", |d| {
            d["imbalance"]["ranks"][0]["peak_bytes"] = Value::Null;
        }),
        ("batch", "/kind", |d| d["kind"] = Value::from("row")),
        ("report", "/frames/0/kind", |d| {
            d["frames"][0]["kind"] = Value::from("python");
        }),
        (
            "report",
            "/devices/0/moments/0/state/segments/0/blocks/0",
            |d| {
                d["devices"][0]["moments"][0]["state"]["segments"][0]["blocks"][0][1] =
                    Value::from("4096");
            },
        ),
        ("report", "/devices/0/timeline/samples/live_bytes/0", |d| {
            d["devices"][0]["timeline"]["samples"]["live_bytes"][0] = Value::from(-1);
        }),
        ("report", "/devices/0/moments/0/top/row_stacks", |d| {
            d["devices"][0]["moments"][0]["top"]
                .as_object_mut()
                .unwrap()
                .remove("row_stacks");
        }),
        ("report", "/summary/devices/0/trace", |d| {
            d["summary"]["devices"][0]["trace"] = Value::Null;
        }),
    ];
    for (schema, needle, mutate) in cases {
        let mut doc = first(schema, needle);
        let (errors, _) = validate(schema_of(&all, schema), &doc);
        assert!(
            errors.is_empty(),
            "{schema}: unmutated output fails: {errors:?}"
        );
        mutate(&mut doc);
        let (errors, _) = validate(schema_of(&all, schema), &doc);
        let mut bytes = Vec::new();
        bytes_fields(&doc, "", &mut bytes);
        assert!(
            !errors.is_empty() || !bytes.is_empty(),
            "{schema}: mutation at {needle} was not caught"
        );
    }
    // A negative size is caught by the walk even where no schema looks.
    let mut bad = Vec::new();
    bytes_fields(
        &serde_json::json!({
            "x": [{"extra_bytes": -5}],
            "delta_bytes": -5,
            "live_bytes": [0, 7, -1],
            "free_bytes": [1.5]
        }),
        "",
        &mut bad,
    );
    bad.sort();
    assert_eq!(
        bad,
        vec![
            "/free_bytes/0: 1.5 is not a non-negative integer",
            "/live_bytes/2: -1 is not a non-negative integer",
            "/x/0/extra_bytes: -5 is not a non-negative integer",
        ]
    );
}
