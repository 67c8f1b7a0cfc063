//! `memlens batch --format parquet`: the dataset read back by DuckDB (from Python) gives the
//! numbers `batch --format json`, `timeline` and `oom` give; shards written by separate
//! processes make one dataset; parts are never replaced without `--force`; an unreadable
//! file is a `files` row saying why, and exit 2.

use crate::common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs DuckDB queries over the dataset in `dir`; returns the JSON the script prints.
fn duckdb(dir: &Path, script: &str) -> Value {
    let prelude = r#"
import duckdb, json, sys
D = sys.argv[1]
con = duckdb.connect()
def q(sql):
    for t in ("files", "sites", "timeline", "ooms", "leaks"):
        sql = sql.replace("{%s}" % t, "read_parquet('%s/table=%s/**/*.parquet', hive_partitioning=true, union_by_name=true)" % (D, t))
    return con.sql(sql).fetchall()
"#;
    let o = Command::new(python3())
        .arg("-c")
        .arg(format!("{prelude}\n{script}"))
        .arg(dir)
        .output()
        .expect("run python3");
    assert!(
        o.status.success(),
        "duckdb script failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&o.stdout));
    })
}

const PER_FILE: &str = r#"
rows = q("""select file, max(rank), bool_and(ok), max(peak_bytes), max(reserved_bytes), max(fragmentation),
                   sum(ooms), count(*), min(sha256), max(top_site_bytes)
            from {files} group by file order by file""")
sites = dict(q("select file || ' ' || device, sum(bytes) from {sites} group by all"))
peaks = dict(q("select file || ' ' || device, peak_bytes from {files} where device is not null"))
tl = dict(q("select file || ' ' || device, max(live_requested_bytes) from {timeline} group by all"))
ooms = dict(q("select file, count(*) from {ooms} group by file"))
leaks = dict(q("select file, count(*) from {leaks} group by file"))
print(json.dumps({"files": rows, "sites": sites, "peaks": peaks, "timeline": tl, "ooms": ooms, "leaks": leaks}))
"#;

fn sha256_hex(p: &Path) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(std::fs::read(p).unwrap());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn parquet_dataset_gives_batch_json_numbers() {
    if !require_python_modules(&["duckdb"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let mut files: Vec<String> = samples()
        .iter()
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    files.extend(captured().iter().map(|p| p.to_str().unwrap().to_string()));
    for r in 0..4 {
        files.push(
            sample(&format!("ranks/rank{r}.pickle"))
                .to_str()
                .unwrap()
                .into(),
        );
    }
    let mut args: Vec<String> = vec!["batch".into(), "--format".into(), "parquet".into()];
    args.extend(["-o".into(), dir.to_str().unwrap().into()]);
    args.extend(files.iter().cloned());
    let o = memlens(&args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut jargs: Vec<String> = vec!["batch".into(), "--format".into(), "json".into()];
    jargs.extend(files.iter().cloned());
    let batch: Value = serde_json::from_slice(&memlens(&jargs).stdout).unwrap();

    let got = duckdb(&dir, PER_FILE);
    let rows = got["files"].as_array().unwrap();
    assert_eq!(rows.len(), files.len());
    for r in batch["files"].as_array().unwrap() {
        let file = r["file"].as_str().unwrap();
        let row = rows
            .iter()
            .find(|x| x[0] == file)
            .unwrap_or_else(|| panic!("{file} in the dataset"));
        assert_eq!(row[1], r["rank"], "{file}: rank");
        assert_eq!(row[2], true, "{file}: ok");
        assert_eq!(row[3], r["peak_bytes"], "{file}: peak");
        assert_eq!(row[4], r["reserved_bytes"], "{file}: reserved");
        let frag = row[5].as_f64().unwrap();
        assert!(
            (frag - r["fragmentation"].as_f64().unwrap()).abs() < 1e-12,
            "{file}: fragmentation"
        );
        assert_eq!(
            row[6].as_u64().unwrap(),
            r["ooms"].as_u64().unwrap(),
            "{file}: ooms"
        );
        assert_eq!(
            row[7].as_u64().unwrap(),
            r["devices"].as_u64().unwrap().max(1),
            "{file}: one row per device"
        );
        assert_eq!(row[8], sha256_hex(Path::new(file)), "{file}: sha256");
        if r["devices"] == 1 {
            assert_eq!(row[9], r["top_site_bytes"], "{file}: top site");
        }
        assert_eq!(
            got["ooms"][file].as_u64().unwrap_or(0),
            r["ooms"].as_u64().unwrap(),
            "{file}: ooms table"
        );
        // Each device's sites add up to its live bytes at the peak; the timeline's maximum
        // is timeline's peak.
        let timeline: Value =
            serde_json::from_slice(&memlens(["timeline", file, "--format", "json"]).stdout)
                .unwrap();
        for d in timeline["devices"].as_array().unwrap() {
            let key = format!("{file} {}", d["device"]);
            assert_eq!(got["timeline"][&key], d["peak_bytes"], "{key}: timeline");
            assert_eq!(got["sites"][&key], got["peaks"][&key], "{key}: sites");
        }
        let leaks: Value =
            serde_json::from_slice(&memlens(["leaks", file, "--format", "json"]).stdout).unwrap();
        assert_eq!(
            got["leaks"][file].as_u64().unwrap_or(0),
            leaks["findings"].as_array().unwrap().len() as u64,
            "{file}: leaks"
        );
    }
}

#[test]
fn shards_from_separate_processes_make_one_dataset() {
    if !require_python_modules(&["duckdb"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let d = dir.to_str().unwrap();
    let ranks: Vec<String> = (0..4)
        .map(|r| {
            sample(&format!("ranks/rank{r}.pickle"))
                .to_str()
                .unwrap()
                .to_string()
        })
        .collect();
    // Two processes at once, two ranks each, partitioned by rank.
    let bin = env!("CARGO_BIN_EXE_memlens");
    let spawn = |fs: &[String]| {
        Command::new(bin)
            .args([
                "batch",
                "--format",
                "parquet",
                "-o",
                d,
                "--partition-by",
                "rank",
            ])
            .args(fs)
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spawn(&ranks[..2]), spawn(&ranks[2..]));
    assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
    assert!(dir.join("table=files/rank=2").is_dir());
    let got = duckdb(
        &dir,
        r#"print(json.dumps(q("select rank, peak_bytes from {files} order by rank")))"#,
    );
    // samples/truth/ranks.json: rank 2 keeps an extra 1 GiB.
    assert_eq!(
        got,
        serde_json::json!([
            [0, 620847108],
            [1, 620847108],
            [2, 1694588932],
            [3, 620847108]
        ])
    );
    // A part is never replaced without --force.
    let o = memlens([
        "batch",
        "--format",
        "parquet",
        "-o",
        d,
        "--partition-by",
        "rank",
        &ranks[0],
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already exists"));
    let o = memlens([
        "batch",
        "--format",
        "parquet",
        "-o",
        d,
        "--partition-by",
        "rank",
        "-f",
        &ranks[0],
    ]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn an_unreadable_file_is_a_row_and_exit_2() {
    if !require_python_modules(&["duckdb"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    let bad = root().join("Cargo.toml");
    let o = memlens([
        "batch",
        "--format",
        "parquet",
        "-o",
        dir.to_str().unwrap(),
        "--partition-by",
        "job",
        "--partition-pattern",
        r"samples/(?P<job>[a-z_]+)",
        bad.to_str().unwrap(),
        sample("train_small.pickle").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    // The file's one line, then what was written (both files' parts: the failed one's rows
    // say why).
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[0].contains("Cargo.toml"), "{err}");
    assert!(
        lines[1].starts_with(&format!("memlens: wrote {} (", dir.display())),
        "{err}"
    );
    let got = duckdb(
        &dir,
        r#"print(json.dumps(q("select regexp_extract(file, '[^/]+$'), ok, error is not null, job from {files} order by 1")))"#,
    );
    // The pattern's group names the sample's job; the other file has no value for it: the
    // Hive null partition, which DuckDB reads as null.
    assert_eq!(
        got,
        serde_json::json!([
            ["Cargo.toml", false, true, null],
            ["train_small.pickle", true, false, "train_small"]
        ])
    );
    // Usage errors: parquet needs -o DIR; partition keys need parquet and a known name.
    for (args, want) in [
        (
            vec!["batch", "--format", "parquet", "samples/ranks"],
            "-o DIR",
        ),
        (
            vec!["batch", "--partition-by", "rank", "samples/ranks"],
            "--format parquet",
        ),
        (
            vec![
                "batch",
                "--format",
                "parquet",
                "-o",
                "/tmp/x",
                "--partition-by",
                "host",
                "samples/ranks",
            ],
            "neither run, rank",
        ),
    ] {
        let o = memlens_in_root(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(want),
            "{args:?}"
        );
    }
}

/// `batch` and `batch --from-dataset` on the same files: (JSON, JSON lines, text) of each,
/// with every site listed (`-n 1000`).
fn both_ways(files: &Path, dataset: &Path, extra: &[&str]) -> [(String, String); 3] {
    let w = memlens(
        [
            "batch".as_ref(),
            files.as_os_str(),
            "--format".as_ref(),
            "parquet".as_ref(),
            "-o".as_ref(),
            dataset.as_os_str(),
        ]
        .into_iter()
        .map(|s: &std::ffi::OsStr| s.to_owned()),
    );
    assert!(
        w.status.code() == Some(0) || w.status.code() == Some(2),
        "{}",
        String::from_utf8_lossy(&w.stderr)
    );
    ["json", "jsonl", "table"].map(|fmt| {
        let run = |what: &Path, from: bool| {
            let mut args: Vec<std::ffi::OsString> = vec![
                "batch".into(),
                what.into(),
                "-n".into(),
                "1000".into(),
                "--format".into(),
                fmt.into(),
            ];
            if from {
                args.push("--from-dataset".into());
            }
            args.extend(extra.iter().map(|s| s.into()));
            let o = memlens(args);
            assert!(
                o.status.code() == Some(0) || o.status.code() == Some(2),
                "{}",
                String::from_utf8_lossy(&o.stderr)
            );
            (o.status.code(), String::from_utf8(o.stdout).unwrap())
        };
        let (a, b) = (run(files, false), run(dataset, true));
        assert_eq!(a.0, b.0, "exit codes");
        (a.1, b.1)
    })
}

/// A dataset read back (`batch --from-dataset`) is reported as `batch` reports the files it
/// came from, byte for byte in JSON, JSON lines and text: every real snapshot posed as one
/// job's ranks (their sites at the peak, including memory from before the trace; OOMs;
/// settings; trace steps), the samples with the rank set, files without a rank and one that is
/// not a snapshot, and a pipeline job dumped at two steps with its coordinates in the paths.
#[test]
fn a_dataset_reads_back_as_the_files_it_came_from() {
    let Some(real) = require_shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // Every real snapshot as a rank.
    let ranks = tmp.path().join("real");
    std::fs::create_dir(&ranks).unwrap();
    for (r, f) in real.iter().enumerate() {
        let ext = f.extension().unwrap().to_string_lossy();
        std::os::unix::fs::symlink(f, ranks.join(format!("rank{r}.{ext}"))).unwrap();
    }
    // The samples, a rank set among them, and garbage.
    let samples = tmp.path().join("samples");
    std::fs::create_dir(&samples).unwrap();
    for f in common::samples() {
        std::os::unix::fs::symlink(&f, samples.join(f.file_name().unwrap())).unwrap();
    }
    std::fs::write(samples.join("rank9.pickle"), b"not a pickle").unwrap();
    // A pipeline job at two steps: tp 2 x pp 2 x dp 2, stage 0 bigger.
    let job = tmp.path().join("job");
    for step in [10, 20] {
        let dir = job.join(format!("iteration_{step}"));
        std::fs::create_dir_all(&dir).unwrap();
        for r in 0..8u32 {
            let (tp, dp, pp) = (r % 2, (r / 2) % 2, r / 4);
            let src = if pp == 0 && step == 20 {
                "rank2"
            } else {
                "rank0"
            };
            std::os::unix::fs::symlink(
                root().join(format!("samples/ranks/{src}.pickle")),
                dir.join(format!("rank{r}_tp{tp}_dp{dp}_pp{pp}.pickle")),
            )
            .unwrap();
        }
    }
    let mut checked = Vec::new();
    for (name, files) in [("real", &ranks), ("samples", &samples), ("job", &job)] {
        let pattern = if name == "job" {
            job.join("**/rank*.pickle")
        } else {
            files.to_path_buf()
        };
        let dataset = tmp.path().join(format!("{name}-dataset"));
        let [json, jsonl, text] = both_ways(&pattern, &dataset, &[]);
        assert_eq!(json.0, json.1, "{name}: JSON");
        assert_eq!(jsonl.0, jsonl.1, "{name}: JSON lines");
        assert_eq!(text.0, text.1, "{name}: text");
        let v: Value = serde_json::from_str(&json.0).unwrap();
        checked.push((name, v));
    }
    // Each set holds what it is here for.
    let x = &checked[0].1["cross_rank"];
    assert_eq!(x["ranks"], real.len());
    assert!(!x["outliers"].as_array().unwrap().is_empty());
    assert!(x["sites_with_outliers"].as_u64().unwrap() > 10);
    assert!(x["first_oom"]["rank"].is_u64());
    assert!(!x["settings_differ"].as_array().unwrap().is_empty());
    let sites: Vec<&str> = x["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["site"].as_str().unwrap())
        .collect();
    assert!(
        sites
            .iter()
            .any(|s| s.starts_with("<before trace, no stack>")),
        "{sites:?}"
    );
    assert_eq!(x["steps"]["source"], "trace");
    assert!(x["steps"]["ranks"].as_array().unwrap().len() >= 4);
    let s = &checked[1].1;
    assert!(s["failed"].as_u64().unwrap() >= 1);
    assert!(s["files"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["rank"].is_null()));
    let j = &checked[2].1["cross_rank"];
    assert_eq!(j["at_step"], 20);
    assert_eq!(j["steps"]["source"], "path");
    assert_eq!(j["parallel"]["source"], "names");
    // The same dataset given twice: its files would count twice; one line, exit 2.
    let twice = tmp.path().join("samples-dataset");
    let o = memlens([
        "batch".as_ref(),
        "--from-dataset".as_ref(),
        twice.as_os_str(),
        twice.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("has two rows for device") && err.lines().count() == 1,
        "{err}"
    );
    // Not a dataset: one line, exit 2.
    let o = memlens([
        "batch".as_ref(),
        "--from-dataset".as_ref(),
        samples.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not a memlens dataset (no table=files/ parts)") && err.lines().count() == 1,
        "{err}"
    );
}
