//! Where reports go: standard output, or a file written to a temporary name and renamed,
//! never replacing an existing file without `--force`; and how wide text may be there (the
//! terminal's width on a terminal, no limit on a pipe or in a file, or `--width`). Each file
//! written is kept in [`take_written`]'s list, for the one `memlens: wrote PATH (SIZE)` line
//! the command ends with on standard error ([`say_written`]).

use super::args::OutputArgs;
use super::report::Formats;
use crate::render::text::Style;
use crate::Error;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// The width of the terminal on standard output: the kernel's window size, else `COLUMNS`,
/// else 80; `None` when standard output is not a terminal.
pub fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    // SAFETY: TIOCGWINSZ fills a `winsize` the call owns; a failure leaves it zeroed.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 {
        return Some(ws.ws_col as usize);
    }
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok());
    Some(columns.filter(|&c: &usize| c > 0).unwrap_or(80))
}

/// The width text output fits: `--width` (0 = no limit), else the terminal's width when the
/// report goes to a terminal, else none (a pipe or `-o FILE` keeps every line whole).
pub fn text_width(width: Option<usize>, to_file: bool) -> Option<usize> {
    match width {
        Some(0) => None,
        Some(w) => Some(w),
        None if to_file => None,
        None => terminal_width(),
    }
}

thread_local! {
    /// What reports written to standard output go to instead, while [`captured`] runs.
    static CAPTURE: std::cell::RefCell<Option<Vec<u8>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with every report it would write to standard output kept instead (on this
/// thread, where commands write their report): its result and those bytes.
pub fn captured<T>(f: impl FnOnce() -> T) -> (T, Vec<u8>) {
    CAPTURE.with(|c| *c.borrow_mut() = Some(Vec::new()));
    let r = f();
    let bytes = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (r, bytes)
}

/// A file a command wrote: its path as given and its size; `files` counts the files of a
/// directory written (a dataset), `None` for one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The path as the command line gave it.
    pub path: PathBuf,
    /// Bytes written (all the directory's files, for a directory).
    pub bytes: u64,
    /// How many files, for a directory.
    pub files: Option<usize>,
}

impl Written {
    /// The line that says it: `memlens: wrote report.html (2.31 MiB)`, or
    /// `memlens: wrote out (12 files, 1.50 MiB)` for a directory.
    pub fn line(&self) -> String {
        let size = crate::units::iec(self.bytes);
        let what = match self.files {
            Some(n) => format!("{}, {size}", crate::units::plural(n as u64, "file")),
            None => size,
        };
        format!(
            "memlens: wrote {} ({what})",
            crate::error::quoted_path(&self.path)
        )
    }
}

thread_local! {
    /// The files written on this thread since [`take_written`] last ran.
    static WRITTEN: std::cell::RefCell<Vec<Written>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Notes that a command wrote `w` (said by [`say_written`] once the command ends).
pub fn record_written(w: Written) {
    WRITTEN.with(|l| l.borrow_mut().push(w));
}

/// The files written on this thread since the last call, oldest first; the list is emptied.
pub fn take_written() -> Vec<Written> {
    WRITTEN.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

/// Prints one line on standard error for each file the command wrote (after each rename
/// succeeded), so standard output keeps only the report.
pub fn say_written() {
    for w in take_written() {
        eprintln!("{}", w.line());
    }
}

/// Writes what `write` produces to `path` (or stdout when `None`); a file written is
/// recorded for [`say_written`].
pub fn emit(
    path: Option<&Path>,
    force: bool,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Error> {
    super::timings::output(|| emit_untimed(path, force, write))
}

/// [`emit`], without `--timings`' clock.
fn emit_untimed(
    path: Option<&Path>,
    force: bool,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Error> {
    match path {
        None if CAPTURE.with(|c| c.borrow().is_some()) => {
            let mut buf = Vec::new();
            let r = write(&mut buf).map_err(|e| Error::io(Path::new("<stdout>"), &e));
            CAPTURE.with(|c| {
                if let Some(v) = c.borrow_mut().as_mut() {
                    v.extend_from_slice(&buf);
                }
            });
            r
        }
        None => {
            let stdout = std::io::stdout();
            let mut lock = std::io::BufWriter::new(stdout.lock());
            write(&mut lock)
                .and_then(|_| lock.flush())
                .map_err(|e| Error::io(Path::new("<stdout>"), &e))
        }
        Some(p) => {
            let bytes = atomic_write(p, force, write)?;
            record_written(Written {
                path: p.to_path_buf(),
                bytes,
                files: None,
            });
            Ok(())
        }
    }
}

/// Writes what `write` produces to `path` through a temporary file renamed into place, as
/// [`emit`] does, without recording it: the bytes written. For the files of a directory
/// that the command reports as one ([`Written::files`]).
pub fn write_file(
    path: &Path,
    force: bool,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<u64, Error> {
    super::timings::output(|| atomic_write(path, force, write))
}

/// Writes the file; returns its size once renamed into place.
fn atomic_write(
    path: &Path,
    force: bool,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<u64, Error> {
    let mut write = Some(write);
    atomic_write_with(path, force, &mut |w| match write.take() {
        Some(f) => f(w),
        None => Ok(()),
    })
}

/// [`atomic_write`]'s work, not generic: its code is generated once, not once per caller.
fn atomic_write_with(
    path: &Path,
    force: bool,
    write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> Result<u64, Error> {
    refuse_url(path)?;
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
                crate::error::quoted_path(path)
            )));
        }
    }
    if path.exists() && !force {
        return Err(Error::Usage(format!(
            "{}: already exists; pass --force to replace it",
            crate::error::quoted_path(path)
        )));
    }
    let dir: PathBuf = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Created with mode 0666 less the umask, as any program's new file (`>` in a shell,
    // `cp`): the temporary file's own 0600 would otherwise be the report's mode.
    let mut tmp = tempfile::Builder::new()
        .prefix(".memlens-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(&dir)
        .map_err(|e| Error::io(&dir, &e))?;
    {
        let mut w = std::io::BufWriter::new(tmp.as_file_mut());
        write(&mut w)
            .and_then(|_| w.flush())
            .map_err(|e| Error::io(path, &e))?;
    }
    let bytes = tmp
        .as_file()
        .metadata()
        .map_err(|e| Error::io(path, &e))?
        .len();
    let persisted = if force {
        tmp.persist(path).map(|_| ())
    } else {
        tmp.persist_noclobber(path).map(|_| ())
    };
    persisted.map_err(|e| Error::io(path, &e.error))?;
    Ok(bytes)
}

/// Writes `report` in the format `args` ask for, where they ask (see [`emit`]); `title`
/// names the input for the formats that print one, `root` is the directory text strips from
/// the paths of sites (the snapshot's; `None` for reports of several files or none).
pub fn report<R, F>(
    args: &OutputArgs<F>,
    report: &R,
    title: &str,
    root: Option<String>,
) -> Result<(), Error>
where
    F: Formats<R> + clap::ValueEnum + Default + Send + Sync + 'static,
{
    let style = Style {
        width: text_width(args.width, args.output.is_some()),
        root,
    };
    emit(args.output.as_deref(), args.force, |out| {
        args.format.write(report, out, title, &style)
    })
}

/// A usage error when `path` is an object-storage URL (`-o s3://…`), which this build does not
/// write: without it the URL would become a local directory named `s3:`.
pub fn refuse_url(path: &Path) -> Result<(), Error> {
    match crate::input::url::url_scheme(path) {
        Some(scheme) => Err(Error::Usage(format!(
            "{}: {}",
            crate::error::quoted_path(path),
            crate::input::url::write_instead(scheme)
        ))),
        None => Ok(()),
    }
}
