//! How `memlens session` reads files: never its own protocol stream, never a wait without end.
//!
//! At the start the session takes its protocol stream off descriptor 0 (a duplicate of it is
//! read from then on) and puts an empty pipe there, so that nothing a command does can read the
//! requests that follow (`explain` with no message, `/dev/stdin`, `/dev/fd/0`,
//! `/proc/self/fd/0`). A request naming its standard input or output under any name (a
//! symbolic link too: the device and inode of what a name leads to are compared with the
//! streams'), a FIFO, a device or a socket is refused before it runs; each snapshot is opened
//! once, without blocking (`O_NONBLOCK`), and what was opened is checked (`fstat`) before a
//! byte is read, so a file swapped for a FIFO after that check is refused too.

use crate::error::quoted_path;
use crate::Error;
use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The session's own streams: (device, inode, what it is), set by [`protect_stdio`].
static OWN: OnceLock<Vec<(u64, u64, &'static str)>> = OnceLock::new();

/// The request's files already opened by the client (`"opened": {NAME: PATH}`): a snapshot
/// named NAME is read from PATH (a descriptor of the client's, `/proc/PID/fd/N`), NAME is what
/// the report calls it.
static OPENED: Mutex<Option<HashMap<PathBuf, PathBuf>>> = Mutex::new(None);

/// Moves the protocol stream off descriptor 0 and returns it; descriptor 0 becomes an empty
/// pipe (read: end of file at once).
pub fn protect_stdio() -> std::io::Result<File> {
    use std::os::fd::{AsFd, FromRawFd};
    let proto = File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let mut ends = [0; 2];
    // SAFETY: `ends` holds two descriptors for pipe(2) to fill; each is closed or kept once.
    unsafe {
        if libc::pipe(ends.as_mut_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        libc::close(ends[1]);
        let moved = libc::dup2(ends[0], 0);
        libc::close(ends[0]);
        if moved != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    let mut own = Vec::new();
    let stdout = std::io::stdout();
    let fds = [
        (proto.metadata().ok(), "standard input"),
        // SAFETY: descriptor 0 is open (the pipe just put there); ManuallyDrop keeps it open.
        (
            std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(0) })
                .metadata()
                .ok(),
            "standard input",
        ),
        (
            stdout
                .as_fd()
                .try_clone_to_owned()
                .ok()
                .and_then(|f| File::from(f).metadata().ok()),
            "standard output",
        ),
    ];
    for (meta, what) in fds {
        if let Some(m) = meta {
            own.push((m.dev(), m.ino(), what));
        }
    }
    let _ = OWN.set(own);
    Ok(proto)
}

/// Which of the session's own streams `meta` is, if any.
fn own_stream(meta: &Metadata) -> Option<&'static str> {
    OWN.get()?
        .iter()
        .find(|(dev, ino, _)| *dev == meta.dev() && *ino == meta.ino())
        .map(|(_, _, what)| *what)
}

/// What a file that is not regular is, for a refusal.
fn kind(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

/// The refusal of a request line whose arguments name the session's own streams (`-` or any
/// other name), a FIFO, a device or a socket; names the client opened are not looked at.
pub fn check_argv(argv: &[String]) -> Result<(), String> {
    let opened = OPENED
        .lock()
        .ok()
        .and_then(|m| m.clone())
        .unwrap_or_default();
    for arg in argv {
        let value = match arg.split_once('=') {
            Some((flag, v)) if flag.starts_with("--") => v,
            _ => arg.as_str(),
        };
        if value == "-" {
            return Err("session: standard input is the session's own: name files".into());
        }
        if value.is_empty() || opened.contains_key(Path::new(value)) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(value) else {
            continue;
        };
        if let Some(what) = own_stream(&meta) {
            return Err(format!(
                "session: {}: is the session's own {what}: name files",
                quoted_path(Path::new(value))
            ));
        }
        if let Some(what) = kind(&meta) {
            return Err(format!(
                "session: {}: is {what}, not a regular file: a session reads regular files only",
                quoted_path(Path::new(value))
            ));
        }
    }
    Ok(())
}

/// Sets the current request's already-opened files (`None` after it).
pub fn set_opened(map: Option<HashMap<PathBuf, PathBuf>>) {
    if let Ok(mut m) = OPENED.lock() {
        *m = map;
    }
}

/// A snapshot file opened once for a session.
pub struct Opened {
    /// The open file (read without blocking).
    pub file: File,
    /// What was opened (`fstat`): a regular file.
    pub meta: Metadata,
    /// Where the file is (the opened file's own path where the system says it, else the name
    /// resolved): a session keeps one model per path.
    pub real: PathBuf,
}

/// Opens `path` (or the file the client opened under that name) once, without blocking, and
/// refuses what is not a regular file or is one of the session's own streams.
pub fn open(path: &Path) -> Result<Opened, Error> {
    let target = OPENED
        .lock()
        .ok()
        .and_then(|m| m.as_ref()?.get(path).cloned())
        .unwrap_or_else(|| path.to_path_buf());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&target)
        .map_err(|e| Error::io(path, &e))?;
    let meta = file.metadata().map_err(|e| Error::io(path, &e))?;
    if let Some(what) = own_stream(&meta) {
        return Err(Error::Usage(format!(
            "session: {}: is the session's own {what}: name files",
            quoted_path(path)
        )));
    }
    if meta.is_dir() {
        return Err(Error::Usage(format!(
            "{}: is a directory, expected a snapshot file",
            quoted_path(path)
        )));
    }
    if !meta.is_file() {
        return Err(Error::Usage(format!(
            "session: {}: is {}, not a regular file: a session reads regular files only",
            quoted_path(path),
            kind(&meta).unwrap_or("no regular file")
        )));
    }
    let real = real_path(&file)
        .or_else(|| std::fs::canonicalize(path).ok())
        .unwrap_or_else(|| path.to_path_buf());
    Ok(Opened { file, meta, real })
}

/// The path of the opened file, as the system records it (Linux: `/proc/self/fd/N`).
fn real_path(file: &File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .ok()
        .filter(|p| p.is_absolute())
}
