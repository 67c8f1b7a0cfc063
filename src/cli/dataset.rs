//! `memlens batch --format parquet -o DIR`: each file's tables (`compose::dataset`)
//! written as Parquet files of a Hive-partitioned dataset,
//! `DIR/table=NAME[/KEY=VALUE...]/part-STEM-HASH.parquet`, each through a temporary file
//! renamed into place (`output::write_file`); the command ends saying the directory, its
//! file count and their total size on standard error (`output::say_written`).
//!
//! A file's parts depend on that file alone and are named by it (its stem and a hash of its
//! path as named), so separate processes given disjoint shards of files write into one
//! dataset without a merge step; every table gets a part for every file (empty when the file
//! has no such rows), so each table's glob matches as soon as one file is written.

use super::args::DeviceArg;
use super::output::{self, Written};
use super::pipeline::Loaded;
use super::{progress, Outcome};
use crate::compose::batch::rank_of;
use crate::compose::dataset::{self, Source, Table};
use crate::error::quoted_path;
use crate::{Error, LoadOptions};
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// How parts are partitioned: the keys, and the pattern whose named groups give values.
pub struct Partitioning {
    keys: Vec<String>,
    pattern: Option<regex_lite::Regex>,
}

/// The value Hive tools read as null.
const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

impl Partitioning {
    /// From `--partition-by` and `--partition-pattern`.
    pub fn new(by: Option<&str>, pattern: Option<&str>) -> Result<Partitioning, Error> {
        let pattern = pattern
            .map(regex_lite::Regex::new)
            .transpose()
            .map_err(|e| Error::Usage(format!("--partition-pattern: {e}")))?;
        let keys: Vec<String> = by
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_string)
            .collect();
        for k in &keys {
            let valid = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(Error::Usage(format!(
                    "--partition-by: {k:?} is not a key name (letters, digits and _)"
                )));
            }
            let named = pattern
                .as_ref()
                .is_some_and(|p| p.capture_names().any(|n| n == Some(k.as_str())));
            if !named && k != "run" && k != "rank" {
                return Err(Error::Usage(format!(
                    "--partition-by: {k:?} is neither run, rank nor a named group of --partition-pattern"
                )));
            }
        }
        Ok(Partitioning { keys, pattern })
    }

    /// `KEY=VALUE` directories of `path`: a named group of the pattern, else the rank of the
    /// file name, else the directory's name; values percent-encoded as Hive does.
    fn dirs(&self, path: &Path) -> Vec<String> {
        let named = path.to_string_lossy();
        let caps = self.pattern.as_ref().and_then(|p| p.captures(&named));
        self.keys
            .iter()
            .map(|k| {
                let from_pattern = caps
                    .as_ref()
                    .and_then(|c| c.name(k))
                    .map(|m| m.as_str().to_string());
                let value = from_pattern.or_else(|| match k.as_str() {
                    "rank" => path
                        .file_name()
                        .and_then(|n| rank_of(&n.to_string_lossy()))
                        .map(|r| r.to_string()),
                    "run" => path
                        .parent()
                        .and_then(|p| p.file_name())
                        .map(|n| n.to_string_lossy().into_owned()),
                    _ => None,
                });
                format!(
                    "{k}={}",
                    value.map_or(NULL_PARTITION.to_string(), |v| escape(&v))
                )
            })
            .collect()
    }
}

/// Percent-encodes what a Hive path value cannot hold (anything but letters, digits, `.`,
/// `_` and `-`).
fn escape(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        NULL_PARTITION.to_string()
    } else {
        out
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of the input's bytes as stored, from the bytes read for decoding (nothing is read
/// twice): a regular file's whole content, a stream's bytes as far as they were read. The
/// pages of a mapped pickle are handed back as they are hashed.
fn sha256(input: &crate::input::Input) -> Option<String> {
    const STEP: usize = 16 << 20;
    let stored = input.stored()?;
    let mut h = Sha256::new();
    for (i, chunk) in stored.chunks(STEP).enumerate() {
        h.update(chunk);
        input.release(i * STEP, chunk.len());
    }
    Some(hex(&h.finalize()))
}

/// Reads and decodes `path` once, through the input layer every command uses (streams as
/// streams), and hashes the bytes that were read.
fn load(
    path: &Path,
    load: &LoadOptions,
    device: DeviceArg,
) -> Result<(Loaded, Option<String>), Error> {
    let input = crate::load::read_keeping(path, load, true)?;
    let snap = crate::load::build(path, &input, load, &mut |_| {})?;
    let sha = sha256(&input);
    drop(input);
    Ok((Loaded::with(path, snap, device)?, sha))
}

/// The part file of `input` in `table`'s directory.
fn part_path(dir: &Path, table: &str, parts: &[String], input: &Path) -> PathBuf {
    let mut p = dir.join(format!("table={table}"));
    for d in parts {
        p.push(d);
    }
    let stem = input
        .file_stem()
        .map(|s| escape(&s.to_string_lossy()))
        .unwrap_or_else(|| "stdin".into());
    let id = hex(&Sha256::digest(input.as_os_str().as_encoded_bytes())[..6]);
    p.join(format!("part-{}-{id}.parquet", shortened(&stem)))
}

/// The most bytes of a part name's stem: `part-` + stem + `-` + 12 hex digits + `.parquet`
/// stays within the 255 bytes a file name may hold (a legal 240-byte input name, or a shorter
/// one that percent-encoding makes three times as long, used to be dropped from the dataset).
/// The hash of the whole path keeps shortened names apart.
const STEM_MAX: usize = 200;

/// `stem` (percent-encoded, so ASCII) cut to [`STEM_MAX`] bytes, never inside a `%XX`.
fn shortened(stem: &str) -> &str {
    if stem.len() <= STEM_MAX {
        return stem;
    }
    let cut = &stem[..STEM_MAX];
    match cut.rfind('%') {
        Some(i) if i + 3 > STEM_MAX => &cut[..i],
        _ => cut,
    }
}

/// Where a dataset's parts go.
enum Sink {
    /// A local directory: each part through a temporary file renamed into place.
    Dir(PathBuf),
    /// A prefix in object storage: each part put in one request (whole or not at all).
    #[cfg(feature = "cloud")]
    Store(crate::input::store::Located),
}

impl Sink {
    /// Writes `bytes` as the part at `rel` (relative to the dataset's root); its size.
    fn part(&self, rel: &Path, bytes: &[u8], force: bool) -> Result<u64, Error> {
        match self {
            Sink::Dir(dir) => {
                let p = dir.join(rel);
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, &e))?;
                }
                output::write_file(&p, force, |w| w.write_all(bytes))
            }
            #[cfg(feature = "cloud")]
            Sink::Store(root) => {
                let at = root.child(&rel.to_string_lossy());
                crate::input::store::put(&at, bytes.to_vec(), force).map_err(|m| {
                    Error::Usage(format!("{}: {m}", quoted_path(Path::new(&at.url()))))
                })?;
                Ok(bytes.len() as u64)
            }
        }
    }
}

/// Writes one file's tables; the error of a file that could not be read is returned after
/// its `files` row (ok false) is written.
fn one(
    path: &Path,
    sink: &Sink,
    dir: &Path,
    load: &LoadOptions,
    device: DeviceArg,
    parts: &Partitioning,
    force: bool,
) -> Result<(Result<usize, Error>, Written), Error> {
    let name = path.display().to_string();
    let (tables, failure): (Vec<Table>, Option<Error>) = match self::load(path, load, device)
        .and_then(|(l, sha)| {
            let src = Source {
                file: &name,
                sha256: sha,
            };
            dataset::tables(&src, &l.snap, l.replays()).map_err(|m| l.failed(m))
        }) {
        Ok(t) => (t, None),
        Err(e) => {
            let src = Source {
                file: &name,
                sha256: None,
            };
            (dataset::failed(&src, &e.to_string()), Some(e))
        }
    };
    let dirs = parts.dirs(path);
    let mut rows = 0;
    let mut written = Written {
        path: dir.to_path_buf(),
        bytes: 0,
        files: Some(0),
    };
    for t in &tables {
        let rel = part_path(Path::new(""), t.name, &dirs, path);
        let bytes = crate::render::parquet::write(t)
            .map_err(|e| Error::Usage(format!("{}: table {}: {e}", quoted_path(path), t.name)))?;
        written.bytes += sink.part(&rel, &bytes, force)?;
        written.files = written.files.map(|n| n + 1);
        rows += t.rows.len();
    }
    let rows = match failure {
        Some(e) => Err(e),
        None => Ok(rows),
    };
    Ok((rows, written))
}

/// The sink of `-o DIR`: a URL's prefix in object storage (`--features cloud`; else refused in
/// one line), or a local directory, made if absent.
fn sink(dir: &Path) -> Result<Sink, Error> {
    #[cfg(feature = "cloud")]
    if crate::input::url::url_scheme(dir).is_some() {
        let url = dir.to_string_lossy();
        return crate::input::store::locate(&url)
            .map(Sink::Store)
            .map_err(|m| Error::Usage(format!("{}: {m}", quoted_path(dir))));
    }
    output::refuse_url(dir)?;
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Usage(format!(
            "{}: is not a directory; --format parquet writes a dataset directory",
            quoted_path(dir)
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, &e))?;
    Ok(Sink::Dir(dir.to_path_buf()))
}

/// Writes the dataset of `files` into `dir` (`-o`: a directory or an object-storage prefix),
/// one file per rayon worker of `pool`.
pub fn run(
    files: &[PathBuf],
    load: &LoadOptions,
    device: DeviceArg,
    pool: &rayon::ThreadPool,
    parts: Partitioning,
    dir: Option<&Path>,
    force: bool,
) -> Result<Outcome, Error> {
    let Some(dir) = dir else {
        return Err(Error::Usage(
            "batch --format parquet: -o DIR is required (the dataset's directory)".into(),
        ));
    };
    let sink = sink(dir)?;
    let bar = progress::files_bar(files.len() as u64);
    type One = Result<(Result<usize, Error>, Written), Error>;
    let results: Vec<One> = pool.install(|| {
        files
            .par_iter()
            .map(|f| {
                let r = one(f, &sink, dir, load, device, &parts, force);
                bar.inc(1);
                r
            })
            .collect()
    });
    bar.finish_and_clear();
    let (mut failed, mut rows) = (0, 0);
    let mut written = Written {
        path: dir.to_path_buf(),
        bytes: 0,
        files: Some(0),
    };
    for r in results {
        let (r, w) = r?;
        written.bytes += w.bytes;
        written.files = written.files.zip(w.files).map(|(a, b)| a + b);
        match r {
            Ok(n) => rows += n,
            Err(e) => {
                eprintln!(
                    "memlens: {}",
                    crate::render::visible::visible(&e.to_string())
                );
                failed += 1;
            }
        }
    }
    println!(
        "{}: {} written ({} rows){}",
        dir.display(),
        if files.len() == 1 {
            "1 file".to_string()
        } else {
            format!("{} files", files.len())
        },
        rows,
        if failed > 0 {
            format!(", {failed} of them unreadable (their files rows say why)")
        } else {
            String::new()
        }
    );
    output::record_written(written);
    Ok(if failed > 0 {
        Outcome::InputErrors
    } else {
        Outcome::Ok
    })
}
