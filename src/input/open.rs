//! Getting the raw bytes of an input: a regular file is mapped read-only; anything else (`-`,
//! a pipe, a FIFO, `<(…)`, a character device) is read as a stream into memory, after its
//! first bytes have shown it may be a snapshot, so `/dev/zero` or a binary on a pipe is
//! refused at once instead of being read to the end.

use super::{End, Extent, ReadOptions};
use crate::alloc_guard::fallible;
use crate::error::{quoted_path, Error};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// The raw (possibly compressed) bytes of an input.
pub enum Raw {
    /// A regular file, mapped read-only (and guarded: [`super::mapped`]).
    Mapped(super::mapped::Mapped),
    /// A stream read into memory, or a file that could not be mapped.
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for Raw {
    fn as_ref(&self) -> &[u8] {
        match self {
            Raw::Mapped(m) => m,
            Raw::Owned(v) => v,
        }
    }
}

/// How long an input may stay silent before memlens says what it is waiting for.
const PATIENCE: Duration = Duration::from_secs(2);

/// Opens `path` read-only (`-` is standard input) and returns its raw bytes; a stream
/// holding a raw pickle is read as far as `opts.extent` lets it go.
pub fn open(path: &Path, opts: &ReadOptions) -> Result<Raw, Error> {
    if path.as_os_str() == "-" {
        return read_stream(path, std::io::stdin().lock(), "standard input", opts).map(Raw::Owned);
    }
    #[cfg(feature = "cloud")]
    if super::url::url_scheme(path).is_some() {
        let url = path.to_str().unwrap_or_default();
        let loc = super::store::locate(url)
            .map_err(|m| Error::Usage(format!("{}: {m}", quoted_path(path))))?;
        return read_stream(path, super::store::reader(loc), "the object", opts).map(Raw::Owned);
    }
    // The metadata of what the path leads to, without opening it (opening a FIFO blocks
    // until a writer comes).
    let meta = std::fs::metadata(path).map_err(|e| match super::url::url_scheme(path) {
        Some(scheme) if e.kind() == std::io::ErrorKind::NotFound => Error::Usage(format!(
            "{}: {}",
            quoted_path(path),
            super::url::read_instead(scheme)
        )),
        _ => Error::io(path, &e),
    })?;
    if meta.is_dir() {
        return Err(Error::Usage(format!(
            "{}: is a directory, expected a snapshot file",
            quoted_path(path)
        )));
    }
    let file = if meta.file_type().is_fifo() {
        let _note = Waiting::start(path, "a writer to open this FIFO");
        File::open(path)
    } else {
        File::open(path)
    }
    .map_err(|e| Error::io(path, &e))?;
    if !meta.is_file() {
        let what = if meta.file_type().is_fifo() {
            "this pipe"
        } else {
            "this device"
        };
        return read_stream(path, file, what, opts).map(Raw::Owned);
    }
    regular(path, &file, meta.len())
}

/// The raw bytes of `file`, a regular file of `len` bytes already opened (by a caller that
/// checked what it opened: `memlens session` opens each file once); `path` names it in errors.
pub fn regular(path: &Path, file: &File, len: u64) -> Result<Raw, Error> {
    if len == 0 {
        return Ok(Raw::Owned(Vec::new()));
    }
    // A file truncated while mapped faults on read: `mapped` turns that into one line, exit 2.
    match super::mapped::Mapped::map(path, file) {
        Ok(m) => Ok(Raw::Mapped(m)),
        Err(map_error) => {
            // Sized from the file, so asked for only where a refusal can be answered.
            let size = usize::try_from(len).unwrap_or(usize::MAX);
            let mut v = Vec::new();
            if fallible(|| v.try_reserve_exact(size)).is_err() {
                return Err(Error::Io {
                    path: path.to_path_buf(),
                    message: format!(
                        "cannot map the file ({map_error}) nor hold its {len} bytes in memory"
                    ),
                });
            }
            (&*file)
                .read_to_end(&mut v)
                .map_err(|e| Error::io(path, &e))?;
            Ok(Raw::Owned(v))
        }
    }
}

/// Reads a stream to its end, or, for a raw pickle with `opts.extent`, to the pickle's end
/// (`STOP`; what follows is not read) and no further than the first byte that is no pickle
/// (refused there, naming it; with `opts.salvage` kept for the decoder). Its first bytes must
/// look like a snapshot container ([`super::plausible_start`]); memory grows as the bytes
/// arrive, and running out of it is an error naming how far the stream got. Says so on stderr
/// when nothing arrives for a while.
fn read_stream(
    path: &Path,
    mut r: impl Read,
    what: &str,
    opts: &ReadOptions,
) -> Result<Vec<u8>, Error> {
    const STEP: usize = 1 << 20;
    let mut out: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 256 << 10];
    let mut note = Some(Waiting::start(path, &format!("input on {what}")));
    let mut checked = false;
    // Decided once the first bytes are there: a raw pickle is followed, opcode by opcode.
    let mut extent: Option<Box<dyn Extent>> = None;
    let mut fed = 0;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(path, &e)),
        };
        note = None;
        if out.capacity() - out.len() < n {
            let more = out.capacity().max(STEP);
            if fallible(|| out.try_reserve(more)).is_err() {
                return Err(Error::Input {
                    path: path.to_path_buf(),
                    location: format!("byte {}", out.len()),
                    message: "out of memory while reading the stream: it is larger than this process may hold".into(),
                    truncated: false,
                });
            }
        }
        out.extend_from_slice(&buf[..n]);
        if !checked && out.len() >= 64 {
            super::plausible_start(path, &out)?;
            checked = true;
            extent = follows(&out, opts);
        }
        if let Some(x) = extent.as_mut() {
            let end = x.feed(&out[fed..]);
            fed = out.len();
            if let Some(end) = ended(path, end, opts)? {
                out.truncate(end);
                return Ok(out);
            }
        }
    }
    drop(note);
    if !checked && !out.is_empty() {
        super::plausible_start(path, &out)?;
        // A short stream: still cut at its pickle's end, and refused at a byte that is none.
        if let Some(mut x) = follows(&out, opts) {
            let end = x.feed(&out);
            if let Some(end) = ended(path, end, opts)? {
                out.truncate(end);
            }
        }
    }
    Ok(out)
}

/// The walk that follows a stream starting with `head`, when it holds a raw pickle and the
/// caller gave one.
fn follows(head: &[u8], opts: &ReadOptions) -> Option<Box<dyn Extent>> {
    let raw = super::sniff(&head[..head.len().min(64)]) == super::Container::Pickle
        && super::foreign_container(head).is_none();
    opts.extent.filter(|_| raw).map(|new| new())
}

/// Where a followed stream ends: `None` while it goes on; the length to keep; or the error of
/// a byte that is no pickle (with salvage, kept up to and with that byte).
fn ended(path: &Path, end: End, opts: &ReadOptions) -> Result<Option<usize>, Error> {
    match end {
        End::More => Ok(None),
        End::At(end) => Ok(Some(end as usize)),
        End::Refused(at, _) if opts.salvage => Ok(Some(at as usize + 1)),
        End::Refused(at, message) => Err(Error::at_byte(path, at, message)),
    }
}

/// Prints one line on stderr if it is still alive after [`PATIENCE`]: what the input is
/// waiting for, so a FIFO without a writer or an idle pipe does not hang without a word.
struct Waiting(#[allow(dead_code)] mpsc::Sender<()>);

impl Waiting {
    fn start(path: &Path, what: &str) -> Waiting {
        let (tx, rx) = mpsc::channel::<()>();
        let line = format!(
            "memlens: {}: waiting for {what} (nothing for {} s; Ctrl-C to stop)",
            quoted_path(path),
            PATIENCE.as_secs()
        );
        std::thread::spawn(move || {
            if rx.recv_timeout(PATIENCE) == Err(mpsc::RecvTimeoutError::Timeout) {
                eprintln!("{line}");
            }
        });
        Waiting(tx)
    }
}
