//! Opening inputs: read-only, memory-mapped when possible, container sniffed from magic bytes.
//!
//! In: a path (or `-` for standard input). Out: the uncompressed pickle bytes. Raw pickles are
//! mapped, gzip and zstd streams are decompressed, and JSON snapshots (which the browser viewer
//! also accepts) are transcoded into an equivalent pickle so one decoder serves every input.

mod stream;

use crate::error::Error;
use crate::model::{self, Arriving, BuildError, BuildOptions, Snapshot};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// How the file was packaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
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
}

enum Data {
    Mapped(memmap2::Mmap),
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
                // SAFETY: the map is private and read-only, so DONTNEED discards no data: the
                // pages are read back from the file on the next access.
                let _ = unsafe {
                    m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, lo, hi - lo)
                };
            }
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

    /// Waits for a decompression still going on; the error that ended it early, if any.
    pub fn finish(&self) -> Result<(), Error> {
        match &self.data {
            Data::Arriving(s) => s.finish(),
            _ => Ok(()),
        }
    }
}

/// Sniffs the container from the first bytes.
pub fn sniff(head: &[u8]) -> Container {
    if head.starts_with(&[0x1f, 0x8b]) {
        return Container::Gzip;
    }
    if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Container::Zstd;
    }
    match head.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') | Some(b'[') => Container::Json,
        _ => Container::Pickle,
    }
}

/// Reads `path` (opened read-only) into pickle bytes.
pub fn read(path: &Path) -> Result<Input, Error> {
    read_with(path, false)
}

/// Like [`read`], except that a gzip or zstd file is decompressed by a thread of its own
/// while the caller decodes what is already there ([`Input::arriving`]); an error of that
/// decompression comes from [`Input::finish`].
pub fn read_streaming(path: &Path) -> Result<Input, Error> {
    let whole = || read_with(path, false);
    if path.as_os_str() == "-" {
        return whole();
    }
    let Ok(file) = File::open(path) else {
        return whole();
    };
    if !file.metadata().is_ok_and(|m| m.is_file() && m.len() > 0) {
        return whole();
    }
    // SAFETY: as in `read_with`: a read-only private map of a file written once.
    let Ok(map) = (unsafe { memmap2::Mmap::map(&file) }) else {
        return whole();
    };
    let file_len = map.len() as u64;
    let container = sniff(&map[..map.len().min(64)]);
    let (hint, what) = match container {
        Container::Gzip => (gzip_size_hint(&map), "gzip"),
        Container::Zstd => match zstd::zstd_safe::get_frame_content_size(&map) {
            Ok(Some(n)) => (n, "zstd"),
            // No size in the frame (a compressed pipe): reserve generously, since only the
            // pages written are ever mapped, and a stream that outgrows its reservation
            // costs a copy and the parallel plan.
            _ => (file_len.saturating_mul(64), "zstd"),
        },
        _ => return whole(),
    };
    let reserve = hint
        .min(file_len.saturating_mul(MAX_RATIO))
        .saturating_add(1);
    let Ok(reserve) = usize::try_from(reserve) else {
        return whole();
    };
    fn gzip(b: &[u8]) -> std::io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(b)))
    }
    fn zstd(b: &[u8]) -> std::io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(zstd::stream::read::Decoder::with_buffer(b)?))
    }
    let open: stream::Opener = if container == Container::Gzip {
        gzip
    } else {
        zstd
    };
    match stream::Stream::start(map, open, reserve, path.to_path_buf(), what) {
        Some(s) => Ok(Input {
            data: Data::Arriving(s),
            container,
            file_len,
            cut: None,
        }),
        None => whole(),
    }
}

/// Like [`read`]; with `salvage`, a compressed stream that breaks off keeps the bytes
/// decompressed before the break.
pub fn read_with(path: &Path, salvage: bool) -> Result<Input, Error> {
    let raw = if path.as_os_str() == "-" {
        let mut v = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut v)
            .map_err(|e| Error::io(path, &e))?;
        Data::Owned(v)
    } else {
        let file = File::open(path).map_err(|e| Error::io(path, &e))?;
        let meta = file.metadata().map_err(|e| Error::io(path, &e))?;
        if meta.is_dir() {
            return Err(Error::Usage(format!(
                "{}: is a directory, expected a snapshot file",
                path.display()
            )));
        }
        if meta.len() == 0 {
            Data::Owned(Vec::new())
        } else {
            // SAFETY: the map is read-only and private to this process. If another process
            // truncates the file while it is mapped, reads can fault; snapshots are written
            // once and then read, which is the accepted trade-off for zero-copy decoding.
            match unsafe { memmap2::Mmap::map(&file) } {
                Ok(m) => Data::Mapped(m),
                Err(_) => {
                    let mut v = Vec::with_capacity(meta.len() as usize);
                    (&file)
                        .read_to_end(&mut v)
                        .map_err(|e| Error::io(path, &e))?;
                    Data::Owned(v)
                }
            }
        }
    };
    let bytes: &[u8] = match &raw {
        Data::Mapped(m) => m,
        Data::Owned(v) => v,
        Data::Arriving(s) => s.all(),
    };
    let file_len = bytes.len() as u64;
    if bytes.is_empty() {
        return Err(Error::at_byte(
            path,
            0,
            "file is empty (0 bytes): the process probably died while dumping the snapshot",
        ));
    }
    let container = sniff(&bytes[..bytes.len().min(64)]);
    let mut cut = None;
    let mut keep = |r: Result<Vec<u8>, (Vec<u8>, Error)>| -> Result<Vec<u8>, Error> {
        match r {
            Ok(v) => Ok(v),
            Err((partial, e)) if salvage && !partial.is_empty() => {
                cut = Some(e.to_string());
                Ok(partial)
            }
            Err((_, e)) => Err(e),
        }
    };
    let data = match container {
        Container::Pickle => raw,
        Container::Gzip => Data::Owned(keep(decompress(
            path,
            flate2::read::MultiGzDecoder::new(bytes),
            "gzip",
            file_len,
            gzip_size_hint(bytes),
        ))?),
        Container::Zstd => {
            let dec = zstd::stream::read::Decoder::with_buffer(bytes)
                .map_err(|e| Error::at_byte(path, 0, format!("zstd stream: {e}")))?;
            let hint = match zstd::zstd_safe::get_frame_content_size(bytes) {
                Ok(Some(n)) => n,
                _ => file_len.saturating_mul(4),
            };
            Data::Owned(keep(decompress(path, dec, "zstd", file_len, hint))?)
        }
        Container::Json => Data::Owned(json_to_pickle(bytes).map_err(|e| Error::Input {
            path: path.to_path_buf(),
            location: format!("line {} column {}", e.line(), e.column()),
            message: format!("invalid JSON snapshot: {e}"),
            truncated: e.is_eof(),
        })?),
    };
    Ok(Input {
        data,
        container,
        file_len,
        cut,
    })
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

/// Decompresses everything; on failure, the bytes decompressed so far and the error.
/// `size_hint` sizes the output buffer (growing it copies, and doubles peak memory).
fn decompress(
    path: &Path,
    mut r: impl Read,
    what: &str,
    compressed_len: u64,
    size_hint: u64,
) -> Result<Vec<u8>, (Vec<u8>, Error)> {
    // One byte more than the hint: read_to_end then sees the end without growing.
    let reserve = size_hint
        .min(compressed_len.saturating_mul(MAX_RATIO))
        .saturating_add(1);
    // A reservation the system refuses (a trailer that lies) is not an abort: the buffer
    // then grows as it fills.
    let mut out = Vec::new();
    let _ = out.try_reserve_exact(usize::try_from(reserve).unwrap_or(usize::MAX / 2));
    match r.read_to_end(&mut out) {
        Ok(_) => Ok(out),
        Err(e) => {
            let err = Error::Input {
                path: path.to_path_buf(),
                location: format!("decompressed byte {}", out.len()),
                message: format!("{what} stream is broken: {e}"),
                truncated: e.kind() == std::io::ErrorKind::UnexpectedEof,
            };
            Err((out, err))
        }
    }
}

/// Reads and builds the snapshot at `path`; `progress` gets the decoded byte offset now and then.
pub fn load(path: &Path, progress: &mut dyn FnMut(u64)) -> Result<Snapshot, Error> {
    let input = read_streaming(path)?;
    build_input(path, &input, progress)
}

/// Builds the snapshot from already-read input bytes.
pub fn build_input(
    path: &Path,
    input: &Input,
    progress: &mut dyn FnMut(u64),
) -> Result<Snapshot, Error> {
    build_input_with(path, input, progress, false)
}

/// Like [`build_input`]; with `salvage`, keeps what was complete before a truncation or
/// corruption (see [`crate::model::BuildOptions::salvage`]).
pub fn build_input_with(
    path: &Path,
    input: &Input,
    progress: &mut dyn FnMut(u64),
    salvage: bool,
) -> Result<Snapshot, Error> {
    let located = |location: String| location;
    let release = |start: usize, len: usize| input.release(start, len);
    let options = BuildOptions {
        progress: Some(progress),
        release: Some(&release),
        salvage,
        ..Default::default()
    };
    let built = match input.arriving() {
        Some(src) if !salvage => model::build_arriving(src, options),
        _ => model::build(input.bytes(), options),
    };
    // A broken compressed stream is the error of record, whatever the decoder made of it.
    input.finish()?;
    let mut snap = built.map_err(|e| match e {
        BuildError::Decode(d) => Error::Input {
            path: path.to_path_buf(),
            location: located(match input.container {
                Container::Pickle => format!("byte {}", d.offset),
                Container::Json => format!("transcoded byte {}", d.offset),
                _ => format!("decompressed byte {}", d.offset),
            }),
            message: d.message,
            truncated: d.truncated,
        },
        BuildError::Shape { path: key, message } => Error::Input {
            path: path.to_path_buf(),
            location: format!("key {key}"),
            message,
            truncated: false,
        },
    })?;
    if let Some(why) = &input.cut {
        snap.warnings.insert(
            0,
            crate::model::Warning {
                code: "salvaged",
                device: None,
                message: format!(
                    "the compressed stream breaks off ({why}); kept what decompressed before it"
                ),
            },
        );
    }
    Ok(snap)
}

/// Transcodes a JSON document into a protocol-4 pickle of the same value (no memo).
pub fn json_to_pickle(json: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(json.len());
    out.extend_from_slice(&[0x80, 4]);
    let mut de = serde_json::Deserializer::from_slice(json);
    PickleOut(&mut out).deserialize(&mut de)?;
    de.end()?;
    out.push(b'.');
    Ok(out)
}

struct PickleOut<'w>(&'w mut Vec<u8>);

const BATCH: usize = 1000;

impl PickleOut<'_> {
    fn int(&mut self, v: i128) {
        if let Ok(i) = i32::try_from(v) {
            self.0.push(b'J');
            self.0.extend_from_slice(&i.to_le_bytes());
        } else {
            let bytes = v.to_le_bytes();
            let n = if i64::try_from(v).is_ok() { 8 } else { 9 };
            self.0.push(0x8a);
            self.0.push(n as u8);
            self.0.extend_from_slice(&bytes[..n]);
        }
    }
}

impl<'de> DeserializeSeed<'de> for PickleOut<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PickleOut<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.push(if v { 0x88 } else { 0x89 });
        Ok(())
    }
    fn visit_i64<E>(mut self, v: i64) -> Result<(), E> {
        self.int(v as i128);
        Ok(())
    }
    fn visit_u64<E>(mut self, v: u64) -> Result<(), E> {
        self.int(v as i128);
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.0.push(b'G');
        self.0.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.push(b'X');
        self.0.extend_from_slice(&(v.len() as u32).to_le_bytes());
        self.0.extend_from_slice(v.as_bytes());
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.push(b'N');
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.extend_from_slice(b"](");
        let mut n = 0;
        while seq.next_element_seed(PickleOut(&mut *self.0))?.is_some() {
            n += 1;
            if n % BATCH == 0 {
                self.0.extend_from_slice(b"e(");
            }
        }
        self.0.push(b'e');
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.extend_from_slice(b"}(");
        let mut n = 0;
        while map.next_key_seed(PickleOut(&mut *self.0))?.is_some() {
            map.next_value_seed(PickleOut(&mut *self.0))?;
            n += 1;
            if n % BATCH == 0 {
                self.0.extend_from_slice(b"u(");
            }
        }
        self.0.push(b'u');
        Ok(())
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

    #[test]
    fn json_transcodes_to_an_equal_pickle() {
        let p = json_to_pickle(
            br#"{"a": [1, -2, 3000000000, 18446744073709551615, true, null, 1.5, "x"]}"#,
        )
        .unwrap();
        let (heap, top) = crate::pickle::decode(
            &p,
            &mut crate::pickle::NoHooks,
            crate::pickle::Limits::for_input(p.len()),
        )
        .unwrap();
        let a = heap.get(top, "a").unwrap();
        let items: Vec<_> = heap.list(a).unwrap().iter().collect();
        use crate::pickle::Value::*;
        assert_eq!(items[0], Int(1));
        assert_eq!(items[1], Int(-2));
        assert_eq!(items[2], Int(3_000_000_000));
        assert_eq!(items[3], UInt(u64::MAX));
        assert_eq!(items[4], Bool(true));
        assert_eq!(items[5], None);
        assert_eq!(items[6], Float(1.5));
        assert_eq!(heap.text(items[7]).unwrap(), "x");
    }
}
