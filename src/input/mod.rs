//! Opening inputs: read-only, memory-mapped when possible, container sniffed from magic bytes.
//!
//! In: a path (or `-` for standard input). Out: the uncompressed pickle bytes. Raw pickles are
//! mapped, gzip and zstd streams are decompressed, and JSON snapshots (which the browser viewer
//! also accepts) are transcoded into an equivalent pickle so one decoder serves every input.

mod json;
mod mapped;
mod open;
pub mod pattern;
#[cfg(feature = "cloud")]
pub mod store;
mod stream;
pub mod url;

pub use json::json_to_pickle;
use json::transcode;

use crate::alloc_guard::fallible;
use crate::error::Error;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// Input bytes still arriving (a decompressing thread): the parallel decoder's pass 1
/// follows them, so decompression overlaps the decode.
pub trait Arriving: Sync {
    /// Blocks until at least `n` bytes (at most [`Arriving::capacity`]) are there or no more
    /// will come; returns everything there so far.
    fn upto(&self, n: usize) -> &[u8];
    /// Blocks until the input is complete; all of it.
    fn all(&self) -> &[u8];
    /// The most bytes [`Arriving::upto`] returns (the expected size).
    fn capacity(&self) -> usize;
}

/// Where a pickle arriving from a stream or a decompressor ends, as far as [`Extent::feed`]
/// has seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// Not yet: read more.
    More,
    /// Just before this offset (after its last byte); what follows is no part of it.
    At(u64),
    /// The bytes stop being a pickle at this offset, for this reason.
    Refused(u64, String),
}

/// Follows a pickle's bytes chunk by chunk, in constant memory, so that a stream or a
/// decompressor is read no further than the pickle goes. The caller gives it (input knows
/// nothing of opcodes: `load` passes the pickle layer's walk, `pickle::scan::Follow`).
pub trait Extent: Send {
    /// Walks the next chunk of bytes (chunks arrive in order, each once).
    fn feed(&mut self, chunk: &[u8]) -> End;
}

/// Makes a fresh [`Extent`] for one input.
pub type NewExtent = fn() -> Box<dyn Extent>;

/// How an input is read ([`read_opts`]).
#[derive(Clone, Copy, Default)]
pub struct ReadOptions {
    /// A compressed stream that breaks off keeps the bytes decompressed before the break, and
    /// bytes that stop being a pickle are handed to the decoder (which salvages before them)
    /// instead of being refused here.
    pub salvage: bool,
    /// A gzip or zstd file is decompressed by a thread of its own while the caller decodes
    /// ([`Input::arriving`]); not with `salvage`.
    pub overlap: bool,
    /// Keep the bytes as stored (compressed, or JSON) for [`Input::stored`].
    pub keep_stored: bool,
    /// Where a pickle read from a stream or a decompressor ends: reading stops there, and
    /// stops at once (an error naming the byte) where the bytes stop being a pickle. Without
    /// it, streams are read to their end.
    pub extent: Option<NewExtent>,
}

/// How the file was packaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Container {
    /// A plain pickle.
    Pickle,
    /// A gzip stream around a pickle.
    Gzip,
    /// A zstd stream around a pickle.
    Zstd,
    /// A JSON snapshot.
    Json,
}

/// The bytes of one input, ready for the decoder.
pub struct Input {
    data: Data,
    /// How the file was packaged.
    pub container: Container,
    /// Size of the file on disk.
    pub file_len: u64,
    /// With salvage: why decompression stopped early (the bytes before are kept).
    pub cut: Option<String>,
    /// The bytes are a JSON snapshot transcoded into a pickle (errors say `transcoded byte`).
    transcoded: bool,
    /// The bytes as stored, when asked for ([`ReadOptions::keep_stored`]) and not the
    /// decoder's own.
    stored: Option<Arc<open::Raw>>,
}

enum Data {
    Mapped(mapped::Mapped),
    Owned(Vec<u8>),
    /// Being decompressed by another thread ([`read_streaming`]).
    Arriving(std::sync::Arc<stream::Stream>),
}

impl Drop for Input {
    fn drop(&mut self) {
        if let Data::Arriving(s) = &self.data {
            s.cancel();
        }
    }
}

impl Input {
    /// Drops the pages of `start..start+len` from this process's memory when the input is a
    /// file mapping (reading them again maps them back from the page cache); else nothing.
    pub fn release(&self, start: usize, len: usize) {
        if let Data::Mapped(m) = &self.data {
            const PAGE: usize = 4096;
            let lo = start.div_ceil(PAGE) * PAGE;
            let hi = (start.saturating_add(len).min(m.len())) / PAGE * PAGE;
            if hi > lo {
                m.dont_need(lo, hi - lo);
            }
        }
    }

    /// When the input is a mapped file that is now shorter than when it was mapped (rewritten
    /// during the run), what to say of it instead of a decode error.
    pub fn shrank(&self) -> Option<String> {
        match &self.data {
            Data::Mapped(m) => m.shrank(),
            _ => None,
        }
    }

    /// The uncompressed pickle bytes (for input still arriving: once it is all there).
    pub fn bytes(&self) -> &[u8] {
        match &self.data {
            Data::Mapped(m) => m,
            Data::Owned(v) => v,
            Data::Arriving(s) => s.all(),
        }
    }

    /// The input still being decompressed, if it is ([`read_streaming`]).
    pub fn arriving(&self) -> Option<&dyn Arriving> {
        match &self.data {
            Data::Arriving(s) => Some(&**s),
            _ => None,
        }
    }

    /// The uncompressed size, or the expected one while it is still arriving (for progress).
    pub fn len_hint(&self) -> usize {
        match &self.data {
            Data::Arriving(s) => s.capacity(),
            _ => self.bytes().len(),
        }
    }

    /// Where decoder byte `offset` lies, in the terms of the file: `byte N` of a plain
    /// pickle, `decompressed byte N` of a gzip or zstd stream, `transcoded byte N` of a JSON
    /// snapshot (the pickle it was turned into).
    pub fn location(&self, offset: u64) -> String {
        match self.container {
            _ if self.transcoded => format!("transcoded byte {offset}"),
            Container::Pickle => format!("byte {offset}"),
            _ => format!("decompressed byte {offset}"),
        }
    }

    /// The bytes as stored (compressed, JSON, or the pickle itself) when the input was read
    /// with [`ReadOptions::keep_stored`]: a regular file's whole content; a stream's bytes as
    /// far as they were read (a raw pickle's up to its `STOP`).
    pub fn stored(&self) -> Option<&[u8]> {
        match &self.stored {
            Some(raw) => Some((**raw).as_ref()),
            None if self.container == Container::Pickle => Some(self.bytes()),
            None => None,
        }
    }

    /// Waits for a decompression still going on; the error that ended it early, if any.
    pub fn finish(&self) -> Result<(), Error> {
        match &self.data {
            Data::Arriving(s) => s.finish(),
            _ => Ok(()),
        }
    }
}

/// The zstd frame magic (RFC 8878 §3.1.1), little-endian.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// True for the magic of a skippable zstd frame (0x184D2A50..=0x184D2A5F, little-endian):
/// `pzstd` and seekable-format writers start their files with one.
fn zstd_skippable(head: &[u8]) -> bool {
    head.len() >= 4 && head[0] & 0xf0 == 0x50 && head[1..4] == [0x2a, 0x4d, 0x18]
}

/// The UTF-8 byte order mark some editors and Windows tools put before JSON.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// Sniffs the container from the first bytes.
pub fn sniff(head: &[u8]) -> Container {
    if head.starts_with(&[0x1f, 0x8b]) {
        return Container::Gzip;
    }
    if head.starts_with(&ZSTD_MAGIC) || zstd_skippable(head) {
        return Container::Zstd;
    }
    if looks_like_json(head) {
        return Container::Json;
    }
    Container::Pickle
}

fn looks_like_json(head: &[u8]) -> bool {
    let head = head.strip_prefix(BOM).unwrap_or(head);
    matches!(
        head.iter().find(|b| !b.is_ascii_whitespace()),
        Some(b'{') | Some(b'[')
    )
}

/// What a file that starts with another tool's magic bytes is, and what to do, so that it is
/// not blamed on a pickle opcode (a zip's `PK` reads as `PERSID`).
fn foreign_container(head: &[u8]) -> Option<String> {
    let (what, fix) = if head.starts_with(b"\xfd7zXZ\x00") {
        (
            "an xz stream",
            "decompress it first (xz -d), or recompress with gzip or zstd",
        )
    } else if head.starts_with(b"BZh") && head.get(3).is_some_and(|b| (b'1'..=b'9').contains(b)) {
        (
            "a bzip2 stream",
            "decompress it first (bunzip2), or recompress with gzip or zstd",
        )
    } else if head.starts_with(&[0x04, 0x22, 0x4d, 0x18]) {
        (
            "an lz4 frame",
            "decompress it first (lz4 -d), or recompress with gzip or zstd",
        )
    } else if head.starts_with(b"PK\x03\x04") {
        (
            "a zip archive (what torch.save writes)",
            "a memory snapshot is written by torch.cuda.memory._dump_snapshot()",
        )
    } else {
        return None;
    };
    Some(format!(
        "{what}, not a snapshot memlens reads (pickle, gzip, zstd or JSON): {fix}"
    ))
}

/// True when `head` can begin a pickled snapshot: `PROTO` 2-5, or a protocol 0/1 file's
/// first opcode for the dict or list at its top (`(`, `}`, `]`, `d`, `l`).
fn looks_like_pickle(head: &[u8]) -> bool {
    match head {
        [0x80, p, ..] => (2..=5).contains(p),
        [0x80] => true,
        [b'(' | b'}' | b']' | b'd' | b'l', ..] => true,
        _ => false,
    }
}

fn describe_byte(head: &[u8]) -> String {
    match head.first() {
        Some(b) if b.is_ascii_graphic() => format!("0x{b:02x} ({:?})", *b as char),
        Some(b) => format!("0x{b:02x}"),
        None => "nothing".into(),
    }
}

/// Checks the first bytes of a stream read into memory: a container memlens reads, or an
/// error now, before the rest is read.
pub(crate) fn plausible_start(path: &Path, head: &[u8]) -> Result<(), Error> {
    if sniff(head) != Container::Pickle || looks_like_pickle(head) {
        return Ok(());
    }
    Err(Error::at_byte(
        path,
        0,
        format!(
            "expected a snapshot (a pickle, gzip, zstd or JSON), found {}: not a snapshot",
            describe_byte(head)
        ),
    ))
}

/// What a gzip or zstd stream holds, from its first decompressed bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Payload {
    Pickle,
    Json,
}

/// Decompresses the first bytes of `compressed` with a reader of its own and says what they
/// hold, so a bomb of zeros or a compressed binary is refused before the rest is inflated.
fn payload(
    path: &Path,
    open: stream::Opener,
    what: &str,
    compressed: &[u8],
) -> Result<Payload, Error> {
    let mut head = [0u8; 64];
    let mut n = 0;
    let broken = |e: std::io::Error| Error::Input {
        path: path.to_path_buf(),
        location: "decompressed byte 0".into(),
        message: format!("{what} stream is broken: {e}"),
        truncated: e.kind() == std::io::ErrorKind::UnexpectedEof,
    };
    let mut r = open(compressed).map_err(broken)?;
    while n < head.len() {
        match r.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(broken(e)),
        }
    }
    let head = &head[..n];
    if looks_like_json(head) {
        return Ok(Payload::Json);
    }
    if looks_like_pickle(head) {
        return Ok(Payload::Pickle);
    }
    let found = match sniff(head) {
        Container::Gzip => "another gzip stream (decompress it once more first)".into(),
        Container::Zstd => "another zstd stream (decompress it once more first)".into(),
        _ if head.is_empty() => "no bytes at all".into(),
        _ => describe_byte(head),
    };
    Err(Error::Input {
        path: path.to_path_buf(),
        location: "decompressed byte 0".into(),
        message: format!(
            "expected a pickle (0x80 and a protocol 2-5) or JSON inside the {what} stream, found {found}: not a snapshot"
        ),
        truncated: false,
    })
}

fn gzip_reader(b: &[u8]) -> std::io::Result<Box<dyn Read + '_>> {
    Ok(Box::new(flate2::read::MultiGzDecoder::new(b)))
}

/// A zstd reader for every stream the format allows: concatenated and skippable frames, and
/// windows up to 2 GiB (`zstd --long=31`; the decoder allocates only what a frame asks for).
fn zstd_reader(b: &[u8]) -> std::io::Result<Box<dyn Read + '_>> {
    let mut d = zstd::stream::read::Decoder::with_buffer(b)?;
    d.window_log_max(31)?;
    Ok(Box::new(d))
}

/// The decompressed size of a zstd stream when every frame records it: the frames (zstd and
/// skippable) are walked by their headers, nothing is decompressed.
fn zstd_size(mut b: &[u8]) -> Option<u64> {
    let mut total = 0u64;
    while !b.is_empty() {
        let content = zstd::zstd_safe::get_frame_content_size(b).ok()??;
        let len = zstd::zstd_safe::find_frame_compressed_size(b).ok()?;
        total = total.checked_add(content)?;
        b = b.get(len..).filter(|_| len > 0)?;
    }
    Some(total)
}

/// Reads `path` (opened read-only) into pickle bytes.
pub fn read(path: &Path) -> Result<Input, Error> {
    read_with(path, false)
}

/// Like [`read`], except that a gzip or zstd file is decompressed by a thread of its own
/// while the caller decodes what is already there ([`Input::arriving`]); an error of that
/// decompression comes from [`Input::finish`].
pub fn read_streaming(path: &Path) -> Result<Input, Error> {
    read_opts(
        path,
        &ReadOptions {
            overlap: true,
            ..ReadOptions::default()
        },
    )
}

/// Like [`read`]; with `salvage`, a compressed stream that breaks off keeps the bytes
/// decompressed before the break.
pub fn read_with(path: &Path, salvage: bool) -> Result<Input, Error> {
    read_opts(
        path,
        &ReadOptions {
            salvage,
            ..ReadOptions::default()
        },
    )
}

/// Reads `path` (opened read-only) into pickle bytes as `opts` say.
pub fn read_opts(path: &Path, opts: &ReadOptions) -> Result<Input, Error> {
    from_raw(path, open::open(path, opts)?, opts)
}

/// Like [`read_opts`], from `file`, a regular file of `len` bytes the caller opened and
/// checked (`path` names it in errors): nothing is opened again by path.
pub fn read_opened(
    path: &Path,
    file: &std::fs::File,
    len: u64,
    opts: &ReadOptions,
) -> Result<Input, Error> {
    from_raw(path, open::regular(path, file, len)?, opts)
}

fn from_raw(path: &Path, raw: open::Raw, opts: &ReadOptions) -> Result<Input, Error> {
    let bytes = raw.as_ref();
    let file_len = bytes.len() as u64;
    if bytes.is_empty() {
        return Err(Error::at_byte(
            path,
            0,
            "file is empty (0 bytes): the process probably died while dumping the snapshot",
        ));
    }
    let container = sniff(&bytes[..bytes.len().min(64)]);
    let input = |data, transcoded, cut, stored| Input {
        data,
        container,
        file_len,
        cut,
        transcoded,
        stored,
    };
    let (open, what, hint): (stream::Opener, &str, u64) = match container {
        Container::Pickle => {
            if let Some(other) = foreign_container(bytes) {
                return Err(Error::at_byte(path, 0, other));
            }
            return Ok(input(raw.into(), false, None, None));
        }
        Container::Json => {
            let pickle = transcode(path, bytes)?;
            let stored = opts.keep_stored.then(|| Arc::new(raw));
            return Ok(input(Data::Owned(pickle), true, None, stored));
        }
        Container::Gzip => (gzip_reader, "gzip", gzip_size_hint(bytes)),
        // No size in the frames (a compressed pipe): reserve generously, since only the pages
        // written are ever mapped, and a stream that outgrows its reservation costs a copy
        // (and the parallel plan).
        Container::Zstd => (
            zstd_reader,
            "zstd",
            zstd_size(bytes).unwrap_or(file_len.saturating_mul(64)),
        ),
    };
    let kind = payload(path, open, what, bytes)?;
    // One byte more than the hint: the reader then sees the end without growing.
    let reserve = hint
        .min(file_len.saturating_mul(MAX_RATIO))
        .saturating_add(1);
    let reserve = usize::try_from(reserve).unwrap_or(usize::MAX / 2);
    let raw = Shared(Arc::new(raw));
    let stored = opts.keep_stored.then(|| Arc::clone(&raw.0));
    let extent = match kind {
        Payload::Pickle => opts.extent.map(|new| new()),
        Payload::Json => None,
    };
    let (raw, extent) = if opts.overlap && !opts.salvage && kind == Payload::Pickle {
        match stream::Stream::start(raw, open, reserve, path.to_path_buf(), what, extent) {
            Ok(s) => return Ok(input(Data::Arriving(s), false, None, stored)),
            // The reservation was refused: decompress here, into memory that grows as it
            // fills.
            Err(back) => back,
        }
    } else {
        (raw, extent)
    };
    let bytes = raw.as_ref();
    let reader = open(bytes).map_err(|e| Error::at_byte(path, 0, format!("{what} stream: {e}")))?;
    let mut cut = None;
    let out = match decompress(path, reader, what, reserve, extent, opts.salvage) {
        Ok(v) => v,
        Err((partial, e)) if opts.salvage && !partial.is_empty() && kind == Payload::Pickle => {
            cut = Some(e.to_string());
            partial
        }
        Err((_, e)) => return Err(e),
    };
    match kind {
        Payload::Pickle => Ok(input(Data::Owned(out), false, cut, stored)),
        Payload::Json => Ok(input(
            Data::Owned(transcode(path, &out)?),
            true,
            None,
            stored,
        )),
    }
}

/// The raw bytes shared between the decompressing thread and [`Input::stored`].
struct Shared(Arc<open::Raw>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

impl From<open::Raw> for Data {
    fn from(raw: open::Raw) -> Data {
        match raw {
            open::Raw::Mapped(m) => Data::Mapped(m),
            open::Raw::Owned(v) => Data::Owned(v),
        }
    }
}

/// The decompressed size of a gzip stream, as far as its trailer tells: ISIZE is the size of
/// the last member modulo 2^32, so the smallest such size that deflate could have produced
/// this stream from (it never expands data by 1%) (exact for the usual single member under
/// 4 GiB; only a capacity hint either way).
fn gzip_size_hint(bytes: &[u8]) -> u64 {
    let n = bytes.len() as u64;
    let Some(tail) = bytes.len().checked_sub(4).map(|at| &bytes[at..]) else {
        return n;
    };
    let isize = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as u64;
    let least = n.saturating_sub(n / 100 + 64);
    let wraps = least.saturating_sub(isize).div_ceil(1 << 32);
    isize + (wraps << 32)
}

/// At most this many times the compressed size is reserved up front from a size hint
/// (deflate's ceiling is about 1032:1; a trailer that claims more is not believed).
const MAX_RATIO: u64 = 1032;

/// Decompresses everything into a buffer of `reserve` bytes (asked for fallibly: a hint the
/// system refuses only means the buffer grows as it fills); on failure, the bytes
/// decompressed so far and the error. With an `extent`, stops where the pickle ends and, as
/// soon as the bytes stop being a pickle, refuses them (with `salvage`: keeps them up to and
/// with the byte that is no pickle, for the decoder to salvage before it).
fn decompress(
    path: &Path,
    mut r: impl Read,
    what: &str,
    reserve: usize,
    mut extent: Option<Box<dyn Extent>>,
    salvage: bool,
) -> Result<Vec<u8>, (Vec<u8>, Error)> {
    let mut out = Vec::new();
    let _ = fallible(|| out.try_reserve_exact(reserve));
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let err = Error::Input {
                    path: path.to_path_buf(),
                    location: format!("decompressed byte {}", out.len()),
                    message: format!("{what} stream is broken: {e}"),
                    truncated: e.kind() == std::io::ErrorKind::UnexpectedEof,
                };
                return Err((out, err));
            }
        };
        out.extend_from_slice(&buf[..n]);
        let Some(x) = extent.as_mut() else {
            continue;
        };
        match x.feed(&buf[..n]) {
            End::More => {}
            End::At(end) => {
                out.truncate(end as usize);
                return Ok(out);
            }
            End::Refused(at, message) => {
                out.truncate(at as usize + 1);
                if salvage {
                    return Ok(out);
                }
                let err = Error::Input {
                    path: path.to_path_buf(),
                    location: format!("decompressed byte {at}"),
                    message,
                    truncated: false,
                };
                return Err((out, err));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_trailer_gives_the_decompressed_size() {
        use std::io::Write;
        let data = vec![7u8; 300_000];
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&data).unwrap();
        let gz = enc.finish().unwrap();
        assert!(gz.len() < 10_000);
        assert_eq!(gzip_size_hint(&gz), 300_000);
        // ISIZE wraps at 4 GiB: the smallest size at least the compressed length is taken.
        let mut fake = vec![0u8; 100];
        fake[96..].copy_from_slice(&5u32.to_le_bytes());
        assert_eq!(gzip_size_hint(&fake), 5 + (1 << 32));
        // Incompressible data comes out a little smaller than its stream.
        let mut stored = vec![0u8; 1000];
        stored[996..].copy_from_slice(&995u32.to_le_bytes());
        assert_eq!(gzip_size_hint(&stored), 995);
        assert_eq!(gzip_size_hint(&[1, 2]), 2);
    }

    #[test]
    fn sniffs_magic_bytes() {
        assert_eq!(sniff(&[0x1f, 0x8b, 8]), Container::Gzip);
        assert_eq!(sniff(&[0x28, 0xb5, 0x2f, 0xfd]), Container::Zstd);
        assert_eq!(sniff(b"  {\"segments\": []}"), Container::Json);
        assert_eq!(sniff(&[0x80, 4, 0x95]), Container::Pickle);
        assert_eq!(sniff(b"]q\x00."), Container::Pickle);
    }
}
