//! Golden outputs of the commands tests/it/golden.rs left without one (issue 38): `fit` (text
//! and JSON), `report --format json` (the JSON the HTML page embeds), `export` (the Perfetto
//! trace), `slice` (what it prints, and the snapshot it writes read back by `summary`, with
//! the digest of its bytes) and `batch --format parquet` (each Parquet file's rows and the
//! tables' schemas: the bytes are binary). One golden file per sample and output under
//! `tests/golden/`; `MEMLENS_BLESS=1` rewrites them (see tests/common/golden.rs).

use crate::common;
use common::*;
use std::path::Path;
use std::process::Command;

/// The samples' names (`samples/NAME`), sorted, as the golden files are named.
fn names() -> Vec<String> {
    let v: Vec<String> = samples()
        .iter()
        .map(|s| s.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(!v.is_empty(), "no samples in samples/");
    v
}

/// `memlens ARGS` in the repository root (relative paths in the output), which must exit
/// with one of `exits`; its standard output.
fn run_in_root(args: &[&str], exits: &[i32]) -> Vec<u8> {
    let o = memlens_in_root(args);
    assert!(
        o.status.code().is_some_and(|c| exits.contains(&c)),
        "memlens {args:?}: {:?} {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// `memlens COMMAND samples/NAME` for every sample, against `tests/golden/NAME.SUFFIX`.
fn each_sample(command: &[&str], suffix: &str, exits: &[i32]) {
    for name in names() {
        let rel = format!("samples/{name}");
        let mut args = command.to_vec();
        args.push(&rel);
        golden(&format!("{name}.{suffix}"), &run_in_root(&args, exits));
    }
}

/// `fit`: the parts of the moment and the fixes, cheapest first.
#[test]
fn fit_text() {
    each_sample(&["fit", "--width", "0"], "fit.txt", &[0]);
}

#[test]
fn fit_json() {
    each_sample(&["fit", "--format", "json"], "fit.json", &[0]);
}

/// `report --format json`: the data of the HTML page (tests/it/report.rs checks the page
/// embeds exactly this), with fewer bands and site rows than the defaults to keep the golden
/// files small; every section of the page is there.
#[test]
fn report_json() {
    each_sample(
        &[
            "report", "--format", "json", "--bands", "20", "--sites", "10",
        ],
        "report.json",
        &[0],
    );
}

/// `export`: the Perfetto trace (counters of at most 100 samples, the 5 largest spans).
#[test]
fn export_perfetto() {
    each_sample(
        &["export", "--points", "100", "--largest", "5"],
        "export.perfetto.json",
        &[0],
    );
}

/// The hex SHA-256 of `bytes`.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `slice --to peak`: its JSON (the output path spelled `OUT.pickle`), and the slice itself:
/// the digest of its bytes, then `summary` of it.
#[test]
fn slice_to_peak() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("OUT.pickle");
    let out_s = out.to_str().unwrap();
    for name in names() {
        let rel = format!("samples/{name}");
        let args = [
            "slice", "--to", "peak", "--format", "json", "-f", "-o", out_s, &rel,
        ];
        let stdout = String::from_utf8(run_in_root(&args, &[0])).unwrap();
        golden(
            &format!("{name}.slice.json"),
            stdout.replace(out_s, "OUT.pickle").as_bytes(),
        );
        let bytes = std::fs::read(&out).unwrap();
        let summary = Command::new(env!("CARGO_BIN_EXE_memlens"))
            .current_dir(dir.path())
            .args(["summary", "OUT.pickle"])
            .output()
            .unwrap();
        assert!(
            summary.status.success(),
            "{name}: summary of the slice: {}",
            String::from_utf8_lossy(&summary.stderr)
        );
        let mut text = format!("sha256 {}\n", sha256_hex(&bytes)).into_bytes();
        text.extend(summary.stdout);
        golden(&format!("{name}.slice_summary.txt"), &text);
    }
}

/// Every Parquet file under `dir`, relative to it, sorted.
fn parquet_files(dir: &Path, at: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(at).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            parquet_files(dir, &p, out);
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p.strip_prefix(dir).unwrap().to_path_buf());
        }
    }
    out.sort();
}

/// `batch --format parquet` over every sample: each table's schema (once: every part of a
/// table has it), then each file with its row count.
#[test]
fn batch_parquet_rows_and_schemas() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let rels: Vec<String> = names().iter().map(|n| format!("samples/{n}")).collect();
    let mut args = vec!["batch", "--format", "parquet", "-o", ds.to_str().unwrap()];
    args.extend(rels.iter().map(String::as_str));
    run_in_root(&args, &[0]);
    let mut files = Vec::new();
    parquet_files(&ds, &ds, &mut files);
    assert!(!files.is_empty(), "no Parquet file written");
    let mut schemas = std::collections::BTreeMap::new();
    let mut rows = String::new();
    for rel in &files {
        let table = rel.iter().next().unwrap().to_string_lossy().into_owned();
        let r = SerializedFileReader::new(std::fs::File::open(ds.join(rel)).unwrap()).unwrap();
        let meta = r.metadata().file_metadata();
        let mut schema = Vec::new();
        parquet::schema::printer::print_schema(&mut schema, meta.schema());
        let schema = String::from_utf8(schema).unwrap();
        let first = schemas
            .entry(table.clone())
            .or_insert_with(|| schema.clone());
        assert_eq!(
            *first,
            schema,
            "{}: another schema than its table's",
            rel.display()
        );
        rows.push_str(&format!("{} {}\n", rel.display(), meta.num_rows()));
    }
    let mut text = String::new();
    for (table, schema) in &schemas {
        text.push_str(&format!("# {table}\n{schema}\n"));
    }
    text.push_str("# rows\n");
    text.push_str(&rows);
    golden("batch_parquet.txt", text.as_bytes());
}
