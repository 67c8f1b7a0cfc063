//! `memlens batch PATH...`: many snapshots in parallel (rayon, `--jobs N`), one row each, and
//! the imbalance of a rank set.
//!
//! `--device N` holds every file to device N; a file without it is a failed row like an
//! unreadable one (one line on stderr, the other rows reported, exit 2).

use super::args::{DeviceArg, OutputArgs};
use super::pipeline::{GlobalOptions, Loaded};
use super::report::BatchFormat;
use super::{output, progress, Outcome};
use crate::analyze::oom::OomOptions;
use crate::analyze::profile::{self, Profile, ProfileOptions};
use crate::compose::batch::{self, BatchReport, FileRow};
use crate::compose::oom;
use crate::{Error, LoadOptions};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// Arguments of `memlens batch`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot files, directories (their snapshot files, not recursive) or glob patterns
    /// (`runs/*/rank*.pickle`, quoted so the shell leaves them); `-` reads standard input.
    #[arg(required = true)]
    paths: Vec<String>,
    /// Worker threads, one file each (default: the number of cores; never more than the cores
    /// or the files). With more than one, each file is decoded by the sequential decoder: the
    /// parallelism is across files.
    #[arg(long, short = 'j')]
    jobs: Option<usize>,
    /// Sites listed that explain the outlier rank.
    #[arg(short = 'n', long, default_value_t = 5)]
    sites: usize,
    /// Drop line numbers from sites.
    #[arg(long)]
    ignore_lines: bool,
    /// With `--format parquet`: Hive partition keys of the dataset, comma-separated
    /// (`run,rank`): `rank` from the file name (as the rank column), `run` from the file's
    /// directory name, any key from a named group of `--partition-pattern`.
    #[arg(long, value_name = "KEYS")]
    partition_by: Option<String>,
    /// With `--format parquet`: a regular expression matched against each path as named;
    /// its named groups give partition values (`runs/(?P<run>[^/]+)/rank(?P<rank>\d+)`).
    #[arg(long, value_name = "REGEX")]
    partition_pattern: Option<String>,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs<BatchFormat>,
}

/// File extensions a directory is searched for.
const SNAPSHOT_EXTENSIONS: &[&str] = &["pickle", "pkl", "pck", "json", "gz", "zst", "zstd"];

fn is_snapshot_name(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| SNAPSHOT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// `*` and `?` wildcard match of one path component.
fn wildcard(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            wildcard(&pattern[1..], name) || (!name.is_empty() && wildcard(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => wildcard(&pattern[1..], &name[1..]),
        (Some(a), Some(b)) if a == b => wildcard(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// Expands a glob pattern component by component (`*` and `?`; `**` is not special).
fn glob(pattern: &str) -> Vec<PathBuf> {
    let mut current: Vec<PathBuf> = vec![if pattern.starts_with('/') {
        PathBuf::from("/")
    } else {
        PathBuf::from(".")
    }];
    let parts: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        for dir in &current {
            if !part.contains(['*', '?']) {
                let p = dir.join(part);
                if p.exists() {
                    next.push(p);
                }
                continue;
            }
            let Ok(rd) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut found: Vec<PathBuf> = rd
                .filter_map(|e| e.ok())
                .filter(|e| wildcard(part.as_bytes(), e.file_name().as_encoded_bytes()))
                .map(|e| e.path())
                .filter(|p| last || p.is_dir())
                .collect();
            found.sort();
            next.extend(found);
        }
        current = next;
    }
    current
        .into_iter()
        .map(|p| p.strip_prefix("./").map(Path::to_path_buf).unwrap_or(p))
        .collect()
}

/// The files named by `paths`, in order; a path that names nothing is kept (it fails later).
fn expand(paths: &[String]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for p in paths {
        let path = Path::new(p);
        if path.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(path)
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .map(|e| e.path())
                        .filter(|f| f.is_file() && is_snapshot_name(f))
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            files.extend(v);
        } else if !path.exists() && p.contains(['*', '?']) {
            let v = glob(p);
            if v.is_empty() {
                files.push(path.to_path_buf());
            }
            files.extend(v);
        } else {
            files.push(path.to_path_buf());
        }
    }
    files
}

/// Reads and measures one file.
fn one(
    path: &Path,
    load: &LoadOptions,
    device: DeviceArg,
    opts: &ProfileOptions,
) -> Result<(FileRow, Profile), Error> {
    let l = Loaded::quiet(path, load, device)?;
    let name = l.title();
    let p = profile::profile(&l.snap, l.replays(), opts)
        .map_err(|m| Error::Usage(format!("{name}: {m}")))?;
    let o = oom::run(&l.snap, l.replays(), &OomOptions::default())
        .map_err(|m| Error::Usage(format!("{name}: {m}")))?;
    Ok((FileRow::new(&name, &p, &o), p))
}

/// The worker threads of `-j`: as asked (default: the cores), at most one per file and at most
/// one per core, since each worker decodes a file on one core (`-j 100000` on one file used to
/// start 100,000 threads). Capped silently: the output is the same with any number.
fn worker_threads(asked: Option<usize>, files: usize, cores: usize) -> usize {
    asked.unwrap_or(cores).min(cores).min(files).max(1)
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    super::args::stdin_once(args.paths.iter().map(Path::new))?;
    let files = expand(&args.paths);
    if files.is_empty() {
        return Err(Error::Usage(format!(
            "batch: no snapshot files in {}",
            args.paths.join(" ")
        )));
    }
    let jobs = worker_threads(args.jobs, files.len(), crate::model::default_threads());
    let mut load = g.load;
    if jobs > 1 {
        // One decoder thread per file: workers already use every core.
        load.threads = 1;
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|e| Error::Usage(format!("--jobs {jobs}: {e}")))?;
    if args.out.format == BatchFormat::Parquet {
        return super::dataset::run(
            &files,
            &load,
            args.device,
            &pool,
            super::dataset::Partitioning::new(
                args.partition_by.as_deref(),
                args.partition_pattern.as_deref(),
            )?,
            args.out.output.as_deref(),
            args.out.force,
        );
    }
    if args.partition_by.is_some() || args.partition_pattern.is_some() {
        return Err(Error::Usage(
            "--partition-by and --partition-pattern go with --format parquet".into(),
        ));
    }
    let opts = ProfileOptions {
        ignore_lines: args.ignore_lines,
        ..ProfileOptions::default()
    };
    let bar = progress::files_bar(files.len() as u64);
    let results: Vec<Result<(FileRow, Profile), (String, Error)>> = pool.install(|| {
        files
            .par_iter()
            .map(|f| {
                let r = one(f, &load, args.device, &opts).map_err(|e| (f.display().to_string(), e));
                bar.inc(1);
                r
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut rows = Vec::new();
    let mut profiles = Vec::new();
    for r in results {
        match r {
            Ok((row, p)) => {
                rows.push(row);
                profiles.push(Some(p));
            }
            Err((file, e)) => {
                eprintln!(
                    "memlens: {}",
                    crate::render::visible::visible(&e.to_string())
                );
                rows.push(FileRow::failed(&file, e.to_string()));
                profiles.push(None);
            }
        }
    }
    let pairs: Vec<(&FileRow, &Profile)> = rows
        .iter()
        .zip(&profiles)
        .filter_map(|(r, p)| p.as_ref().map(|p| (r, p)))
        .collect();
    let imbalance = batch::imbalance(&pairs, args.sites);
    let failed = rows.iter().filter(|r| !r.ok).count();
    let report = BatchReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        files: rows,
        failed,
        imbalance,
    };
    output::report(&args.out, &report, "", None)?;
    Ok(if failed > 0 {
        Outcome::InputErrors
    } else {
        Outcome::Ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_capped_at_the_files_and_the_cores() {
        assert_eq!(worker_threads(Some(100_000), 1, 16), 1);
        assert_eq!(worker_threads(Some(100_000), 40, 16), 16);
        assert_eq!(worker_threads(Some(3), 40, 16), 3);
        assert_eq!(worker_threads(None, 5, 16), 5);
        assert_eq!(worker_threads(Some(0), 5, 16), 1);
        assert_eq!(worker_threads(None, 0, 0), 1);
    }

    #[test]
    fn wildcards() {
        assert!(wildcard(b"rank*.pickle", b"rank12.pickle"));
        assert!(wildcard(b"r?nk0.*", b"rank0.pkl"));
        assert!(!wildcard(b"rank*.pickle", b"rank1.pkl"));
        assert!(wildcard(b"*", b""));
    }
}
