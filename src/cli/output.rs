//! Where reports go: standard output, or a file written to a temporary name and renamed,
//! never replacing an existing file without `--force`.

use super::args::OutputArgs;
use super::report::Formats;
use memlens::Error;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes what `write` produces to `path` (or stdout when `None`).
pub fn emit(
    path: Option<&Path>,
    force: bool,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Error> {
    match path {
        None => {
            let stdout = std::io::stdout();
            let mut lock = std::io::BufWriter::new(stdout.lock());
            write(&mut lock)
                .and_then(|_| lock.flush())
                .map_err(|e| Error::io(Path::new("<stdout>"), &e))
        }
        Some(p) => atomic_write(p, force, write),
    }
}

fn atomic_write(
    path: &Path,
    force: bool,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Error> {
    // What the path leads to (through a symlink): only a regular file is ever replaced, so
    // `-o /dev/full --force` cannot turn a device node into a file.
    if let Ok(meta) = std::fs::metadata(path) {
        if !meta.is_file() {
            let what = if meta.is_dir() {
                "a directory"
            } else {
                "not a regular file (a device, FIFO or socket)"
            };
            return Err(Error::Usage(format!(
                "{}: is {what}; -o writes a report to a regular file only (use a new file name, or standard output without -o)",
                memlens::error::quoted_path(path)
            )));
        }
    }
    if path.exists() && !force {
        return Err(Error::Usage(format!(
            "{}: already exists; pass --force to replace it",
            memlens::error::quoted_path(path)
        )));
    }
    let dir: PathBuf = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".memlens-")
        .tempfile_in(&dir)
        .map_err(|e| Error::io(&dir, &e))?;
    {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        write(&mut w)
            .and_then(|_| w.flush())
            .map_err(|e| Error::io(path, &e))?;
    }
    let persisted = if force {
        tmp.persist(path).map(|_| ())
    } else {
        tmp.persist_noclobber(path).map(|_| ())
    };
    persisted.map_err(|e| Error::io(path, &e.error))
}

/// Writes `report` in the format `args` ask for, where they ask (see [`emit`]); `title`
/// names the input for the formats that print one.
pub fn report<R, F>(args: &OutputArgs<F>, report: &R, title: &str) -> Result<(), Error>
where
    F: Formats<R> + clap::ValueEnum + Default + Send + Sync + 'static,
{
    emit(args.output.as_deref(), args.force, |out| {
        args.format.write(report, out, title)
    })
}
