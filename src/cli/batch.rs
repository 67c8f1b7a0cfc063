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
use crate::analyze::profile::{self, Profile, ProfileOptions, SiteTotal};
use crate::compose::batch::{self, BatchReport, FileRow};
use crate::compose::cross_rank::names::Topology;
use crate::compose::cross_rank::{self, RankFacts};
use crate::compose::dataset_read;
use crate::compose::oom;
use crate::input::pattern;
use crate::{Error, LoadOptions};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Arguments of `memlens batch`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Snapshot files, directories (their snapshot files, not recursive) or glob patterns
    /// (`runs/*/rank*.pickle`, `runs/**/rank*.pickle` at any depth, quoted so the shell leaves
    /// them); with object storage, URLs and URL globs (`s3://bucket/job/**/rank*.pickle`);
    /// `-` reads standard input.
    #[arg(required = true)]
    paths: Vec<String>,
    /// Worker threads, one file each (default: the number of cores; never more than the cores
    /// or the files). With more than one, each file is decoded by the sequential decoder: the
    /// parallelism is across files.
    #[arg(long, short = 'j')]
    jobs: Option<usize>,
    /// Print the files the paths name, one per line (directories and globs expanded, object
    /// storage globs listed from the store), and read none: what a fleet tool shards.
    #[arg(long)]
    list: bool,
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
    /// A JSON file giving the job's parallel layout, `{"tp": 8, "pp": 4, "dp": 32}` with an
    /// optional `"order"` (the first dimension varying fastest; Megatron's `tp-cp-ep-dp-pp` by
    /// default): the cross-rank answer groups ranks by these coordinates (without it, by the
    /// `tp1_pp0`-style coordinates the paths name, if any).
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// The PATHS are datasets `batch --format parquet` wrote (directories or, with object
    /// storage, URLs): their `files`, `sites`, `ooms` and `steps` tables are read back and
    /// reported as `batch` reports the snapshots they came from (files by name).
    #[arg(long)]
    from_dataset: bool,
    #[command(flatten)]
    device: DeviceArg,
    #[command(flatten)]
    out: OutputArgs<BatchFormat>,
}

/// Reads and checks `--topology FILE`.
fn read_topology(path: &Path) -> Result<Topology, Error> {
    let name = crate::error::quoted_path(path);
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Usage(format!("--topology {name}: {e}")))?;
    Topology::parse(&text).map_err(|m| Error::Usage(format!("--topology {name}: {m}")))
}

/// The first rank beyond `t`'s ranks, said as a usage error (the topology is not this job's).
fn check_topology(t: &Topology, path: &Path, facts: &[RankFacts]) -> Result<(), Error> {
    match facts.iter().find(|f| t.coords(f.rank).is_none()) {
        None => Ok(()),
        Some(f) => Err(Error::Usage(format!(
            "--topology {}: rank {} ({}) is beyond its {} ranks ({})",
            crate::error::quoted_path(path),
            f.rank,
            f.file,
            t.world_size(),
            t.axes
                .iter()
                .filter(|a| a.1 > 1)
                .map(|(a, s)| format!("{a} {s}"))
                .collect::<Vec<_>>()
                .join(" × ")
        ))),
    }
}

/// File extensions a directory is searched for.
const SNAPSHOT_EXTENSIONS: &[&str] = &["pickle", "pkl", "pck", "json", "gz", "zst", "zstd"];

fn is_snapshot_name(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| SNAPSHOT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Expands a glob pattern of local paths (`*` and `?` within a component, `**` across
/// components: [`pattern::matches`]), sorted.
fn glob(pat: &str) -> Vec<PathBuf> {
    if pat.split('/').any(|c| c == "**") {
        return deep_glob(pat);
    }
    let mut current: Vec<PathBuf> = vec![if pat.starts_with('/') {
        PathBuf::from("/")
    } else {
        PathBuf::from(".")
    }];
    let parts: Vec<&str> = pat.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        for dir in &current {
            if !pattern::is_pattern(part) {
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
                .filter(|e| pattern::matches(part, &e.file_name().to_string_lossy()))
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

/// A pattern with `**`: every file below its literal directory whose path matches, sorted
/// (symbolic links to directories are not followed, so a loop cannot recur).
fn deep_glob(pat: &str) -> Vec<PathBuf> {
    let base = pattern::literal_prefix(pat);
    let mut found = Vec::new();
    let mut dirs = vec![PathBuf::from(if base.is_empty() { "." } else { base })];
    while let Some(dir) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.filter_map(|e| e.ok()) {
            let path = e.path();
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                dirs.push(path);
                continue;
            }
            let named = path.strip_prefix("./").unwrap_or(&path);
            if pattern::matches(pat, &named.to_string_lossy()) {
                found.push(named.to_path_buf());
            }
        }
    }
    found.sort();
    found
}

/// The objects a URL glob names, listed from the store (`--features cloud`); without
/// object storage the pattern is kept and fails as the URL it is.
fn url_glob(url: &str) -> Result<Vec<PathBuf>, Error> {
    #[cfg(feature = "cloud")]
    {
        crate::input::store::glob(url)
            .map(|v| v.into_iter().map(PathBuf::from).collect())
            .map_err(|m| {
                Error::Usage(format!(
                    "{}: {m}",
                    crate::error::quoted_path(Path::new(url))
                ))
            })
    }
    #[cfg(not(feature = "cloud"))]
    Ok(vec![PathBuf::from(url)])
}

/// The files named by `paths`, in order; a path that names nothing is kept (it fails later).
fn expand(paths: &[String]) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    for p in paths {
        let path = Path::new(p);
        if crate::input::url::url_scheme(path).is_some() {
            if pattern::is_pattern(p) {
                let v = url_glob(p)?;
                if v.is_empty() {
                    files.push(path.to_path_buf());
                }
                files.extend(v);
            } else {
                files.push(path.to_path_buf());
            }
        } else if path.is_dir() {
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
        } else if !path.exists() && pattern::is_pattern(p) {
            let v = glob(p);
            if v.is_empty() {
                files.push(path.to_path_buf());
            }
            files.extend(v);
        } else {
            files.push(path.to_path_buf());
        }
    }
    Ok(files)
}

/// Reads and measures one file: its row, its profile and, when its name carries a rank, what
/// the cross-rank answer needs of it.
fn one(
    path: &Path,
    load: &LoadOptions,
    device: DeviceArg,
    opts: &ProfileOptions,
) -> Result<(FileRow, Profile, Option<RankFacts>), Error> {
    let l = Loaded::quiet(path, load, device)?;
    let name = l.title();
    let p = profile::profile(&l.snap, l.replays(), opts)
        .map_err(|m| Error::Usage(format!("{name}: {m}")))?;
    let o = oom::run(&l.snap, l.replays(), &OomOptions::default())
        .map_err(|m| Error::Usage(format!("{name}: {m}")))?;
    let row = FileRow::new(&name, &p, &o);
    let facts = batch::rank_facts(&row, &p, &o, &l.snap, l.replays());
    Ok((row, p, facts))
}

/// The worker threads of `-j`: as asked (default: the cores), at most one per file and at most
/// one per core, since each worker decodes a file on one core (`-j 100000` on one file used to
/// start 100,000 threads). Capped silently: the output is the same with any number.
fn worker_threads(asked: Option<usize>, files: usize, cores: usize) -> usize {
    asked.unwrap_or(cores).min(cores).min(files).max(1)
}

/// The batch's report from its rows, each one's sites at the peak (`None`: failed) and the
/// facts of its ranked files: the imbalance and the cross-rank answer.
fn assemble(
    rows: Vec<FileRow>,
    sites: &[Option<BTreeMap<String, SiteTotal>>],
    facts: &[RankFacts],
    args: &Args,
    topology: Option<&Topology>,
) -> Result<BatchReport, Error> {
    let pairs: Vec<(&FileRow, &BTreeMap<String, SiteTotal>)> = rows
        .iter()
        .zip(sites)
        .filter_map(|(r, s)| s.as_ref().map(|s| (r, s)))
        .collect();
    let imbalance = batch::imbalance(&pairs, args.sites);
    let ranked = rows.iter().filter(|r| r.rank.is_some()).count();
    if let (Some(t), Some(p)) = (topology, &args.topology) {
        check_topology(t, p, facts)?;
    }
    let cross_rank = (ranked >= 2).then(|| cross_rank::cross_rank(facts, args.sites, topology));
    let failed = rows.iter().filter(|r| !r.ok).count();
    Ok(BatchReport {
        schema_version: crate::analyze::SCHEMA_VERSION,
        files: rows,
        failed,
        imbalance,
        cross_rank,
    })
}

/// The tables a dataset's report reads.
const READ_BACK: &[&str] = &["files", "sites", "ooms", "steps"];

/// A dataset part's bytes, whole (a local file, or an object with object storage).
fn part_bytes(path: &Path) -> Result<Vec<u8>, Error> {
    let name = crate::error::quoted_path(path);
    #[cfg(feature = "cloud")]
    if crate::input::url::url_scheme(path).is_some() {
        let loc = crate::input::store::locate(&path.to_string_lossy())
            .map_err(|m| Error::Usage(format!("{name}: {m}")))?;
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut crate::input::store::reader(loc), &mut v)
            .map_err(|e| Error::Usage(format!("{name}: {e}")))?;
        return Ok(v);
    }
    std::fs::read(path).map_err(|e| Error::Usage(format!("{name}: {e}")))
}

/// The report of the datasets `args.paths` name, read back.
fn from_dataset(
    args: &Args,
    topology: Option<&Topology>,
    pool: &rayon::ThreadPool,
) -> Result<BatchReport, Error> {
    let mut tables = dataset_read::Tables::default();
    for root in &args.paths {
        let root = root.trim_end_matches('/');
        for (i, table) in READ_BACK.iter().enumerate() {
            let pattern = format!("{root}/table={table}/**/*.parquet");
            let parts: Vec<PathBuf> = if crate::input::url::url_scheme(Path::new(root)).is_some() {
                url_glob(&pattern)?
            } else {
                if i == 0 && !Path::new(root).is_dir() {
                    return Err(Error::Usage(format!(
                        "{}: not a directory (--from-dataset reads what batch --format parquet -o DIR wrote)",
                        crate::error::quoted_path(Path::new(root))
                    )));
                }
                deep_glob(&pattern)
            };
            if i == 0 && parts.is_empty() {
                return Err(Error::Usage(format!(
                    "{}: not a memlens dataset (no table=files/ parts)",
                    crate::error::quoted_path(Path::new(root))
                )));
            }
            let read: Vec<Result<Vec<dataset_read::DataRow>, Error>> = pool.install(|| {
                parts
                    .par_iter()
                    .map(|p| {
                        let b = part_bytes(p)?;
                        dataset_read::parse_part(bytes::Bytes::from(b)).map_err(|m| {
                            Error::Usage(format!("{}: {m}", crate::error::quoted_path(p)))
                        })
                    })
                    .collect()
            });
            let rows = match *table {
                "files" => &mut tables.files,
                "sites" => &mut tables.sites,
                "ooms" => &mut tables.ooms,
                _ => &mut tables.steps,
            };
            for r in read {
                rows.extend(r?);
            }
        }
    }
    let read = dataset_read::read_back(&tables)
        .map_err(|m| Error::Usage(format!("{}: {m}", args.paths.join(" "))))?;
    let mut rows = Vec::new();
    let mut sites = Vec::new();
    let mut facts = Vec::new();
    for f in read {
        rows.push(f.row);
        sites.push(f.sites);
        facts.extend(f.facts);
    }
    assemble(rows, &sites, &facts, args, topology)
}

/// Runs the command.
pub fn run(args: Args, g: &GlobalOptions) -> Result<Outcome, Error> {
    if args.from_dataset {
        if args.out.format == BatchFormat::Parquet || args.list {
            return Err(Error::Usage(
                "--from-dataset reports a dataset: it goes with the table, json, jsonl and csv formats".into(),
            ));
        }
        let topology = args.topology.as_deref().map(read_topology).transpose()?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(worker_threads(
                args.jobs,
                usize::MAX,
                crate::model::default_threads(),
            ))
            .build()
            .map_err(|e| Error::Usage(format!("--jobs: {e}")))?;
        let report = from_dataset(&args, topology.as_ref(), &pool)?;
        output::report(&args.out, &report, "", None)?;
        return Ok(if report.failed > 0 {
            Outcome::InputErrors
        } else {
            Outcome::Ok
        });
    }
    super::args::stdin_once(args.paths.iter().map(Path::new))?;
    let files = expand(&args.paths)?;
    if files.is_empty() {
        return Err(Error::Usage(format!(
            "batch: no snapshot files in {}",
            args.paths.join(" ")
        )));
    }
    if args.list {
        // A pattern kept because it matched nothing (it would be a failed row when read).
        if let Some(none) = files.iter().find(|f| {
            pattern::is_pattern(&f.to_string_lossy())
                && args.paths.iter().any(|p| Path::new(p) == f.as_path())
                && !f.exists()
        }) {
            return Err(Error::Usage(format!(
                "{}: matches no file",
                crate::error::quoted_path(none)
            )));
        }
        let mut out = String::new();
        for f in &files {
            out.push_str(&f.to_string_lossy());
            out.push('\n');
        }
        output::emit(None, false, |w| w.write_all(out.as_bytes()))?;
        return Ok(Outcome::Ok);
    }
    let topology = args.topology.as_deref().map(read_topology).transpose()?;
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
        if args.topology.is_some() {
            return Err(Error::Usage(
                "--topology goes with the table, json and jsonl formats (the dataset keeps each file's rank; `fleet report` groups them)".into(),
            ));
        }
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
    type One = Result<(FileRow, Profile, Option<RankFacts>), (String, Error)>;
    let results: Vec<One> = pool.install(|| {
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
    let mut facts = Vec::new();
    for r in results {
        match r {
            Ok((row, p, f)) => {
                rows.push(row);
                profiles.push(Some(p));
                facts.extend(f);
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
    let sites: Vec<Option<BTreeMap<String, SiteTotal>>> =
        profiles.into_iter().map(|p| p.map(|p| p.sites)).collect();
    let report = assemble(rows, &sites, &facts, &args, topology.as_ref())?;
    output::report(&args.out, &report, "", None)?;
    Ok(if report.failed > 0 {
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
}
