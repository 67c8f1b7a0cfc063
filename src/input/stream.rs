//! A decompressed input that is still arriving: a thread decompresses into one buffer while
//! the parallel decoder's pass 1 follows it, so decompression overlaps the decode.
//!
//! The buffer is reserved once, from the stream's size hint, and never moves: readers get
//! slices of the prefix already written (published with release/acquire on a counter), the
//! writer only touches bytes past it. A stream longer than the hint goes on into a second,
//! complete buffer; [`Stream::upto`] then stops at the reservation and only [`Stream::all`]
//! sees everything.

use super::{Arriving, End, Extent};
use crate::error::Error;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// Opens a decompressing reader over the compressed bytes.
pub type Opener = fn(&[u8]) -> std::io::Result<Box<dyn Read + '_>>;

/// Bytes the writer decompresses between two publications.
const STEP: usize = 4 << 20;

/// A buffer being filled by a decompressing thread.
pub struct Stream {
    /// Start of the zeroed reservation of `cap` bytes, owned here.
    ptr: *mut u8,
    cap: usize,
    /// Bytes written and published.
    avail: AtomicUsize,
    state: Mutex<State>,
    cv: Condvar,
    /// Set when nobody needs the rest: the writer stops.
    cancel: AtomicBool,
    /// The whole input when it outgrew the reservation.
    whole: OnceLock<Vec<u8>>,
}

#[derive(Default)]
struct State {
    done: bool,
    error: Option<Error>,
    /// Bytes past the reservation (then `whole` is set from the reservation and these).
    overflow: Option<Vec<u8>>,
}

// SAFETY: the buffer behind `ptr` is written only past `avail` by the single writer and read
// only below it (after an acquire load), so shared access from several threads is sound.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated in `start` with this layout (which was valid then).
        unsafe {
            dealloc(
                self.ptr,
                Layout::array::<u8>(self.cap).expect("checked in start"),
            )
        };
    }
}

impl Stream {
    /// Starts decompressing `source` (opened as a reader by `open`) on its own thread into a
    /// reservation of `reserve` bytes; `what` names the format in errors about `path`. With an
    /// `extent`, decompression stops where the pickle ends, and where it stops being one (an
    /// error naming the decompressed byte). The source and the extent back when the
    /// reservation cannot be had.
    #[allow(clippy::type_complexity)]
    pub fn start<S: AsRef<[u8]> + Send + 'static>(
        source: S,
        open: Opener,
        reserve: usize,
        path: PathBuf,
        what: &'static str,
        extent: Option<Box<dyn Extent>>,
    ) -> Result<Arc<Stream>, (S, Option<Box<dyn Extent>>)> {
        let cap = reserve.max(1);
        let Ok(layout) = Layout::array::<u8>(cap) else {
            return Err((source, extent));
        };
        // SAFETY: the layout is not zero-sized; zeroed pages are mapped only when written.
        // A refusal is answered by the caller (it decompresses into a growing buffer).
        let ptr = crate::alloc_guard::fallible(|| unsafe { alloc_zeroed(layout) });
        if ptr.is_null() {
            return Err((source, extent));
        }
        let stream = Arc::new(Stream {
            ptr,
            cap,
            avail: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            cancel: AtomicBool::new(false),
            whole: OnceLock::new(),
        });
        let writer = Arc::clone(&stream);
        std::thread::spawn(move || match open(source.as_ref()) {
            Ok(r) => writer.fill(r, path, what, extent),
            Err(e) => writer.end(
                Some(Error::Input {
                    path,
                    location: "byte 0".into(),
                    message: format!("{what} stream: {e}"),
                    truncated: false,
                }),
                None,
            ),
        });
        Ok(stream)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writer: decompresses until the end, an error, cancellation, or where `extent`
    /// says the pickle ends or stops being one.
    fn fill(
        &self,
        mut r: impl Read,
        path: PathBuf,
        what: &'static str,
        mut extent: Option<Box<dyn Extent>>,
    ) {
        let mut at = 0usize;
        let broken = |at: usize, e: std::io::Error| Error::Input {
            path: path.clone(),
            location: format!("decompressed byte {at}"),
            message: format!("{what} stream is broken: {e}"),
            truncated: e.kind() == std::io::ErrorKind::UnexpectedEof,
        };
        let refused = |at: u64, message: String| Error::Input {
            path: path.clone(),
            location: format!("decompressed byte {at}"),
            message,
            truncated: false,
        };
        // How far `extent` lets the `n` bytes from `at` go: all (`None`), or `Some` length to
        // keep and the error, if any.
        let mut follow = |chunk: &[u8], at: usize| -> Option<(usize, Option<Error>)> {
            match extent.as_mut()?.feed(chunk) {
                End::More => None,
                End::At(end) => Some((end as usize - at, None)),
                End::Refused(bad, m) => Some((bad as usize + 1 - at, Some(refused(bad, m)))),
            }
        };
        let (error, overflow) = loop {
            if self.cancel.load(Ordering::Relaxed) {
                break (None, None);
            }
            if at == self.cap {
                // Longer than the hint: the rest goes into a buffer of its own.
                let mut rest = Vec::new();
                let mut buf = vec![0u8; 256 << 10];
                break loop {
                    if self.cancel.load(Ordering::Relaxed) {
                        break (None, None);
                    }
                    let k = match r.read(&mut buf) {
                        Ok(0) => break (None, (!rest.is_empty()).then_some(rest)),
                        Ok(k) => k,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) => break (Some(broken(at + rest.len(), e)), None),
                    };
                    match follow(&buf[..k], at + rest.len()) {
                        None => rest.extend_from_slice(&buf[..k]),
                        Some((keep, e)) => {
                            rest.extend_from_slice(&buf[..keep]);
                            break (e, Some(rest));
                        }
                    }
                };
            }
            let n = STEP.min(self.cap - at);
            // SAFETY: `at..at + n` lies inside the reservation and past `avail`, which no
            // reader looks at; this thread is the only writer.
            let dst = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), n) };
            match r.read(dst) {
                Ok(0) => break (None, None),
                Ok(k) => {
                    let stop = follow(&dst[..k], at);
                    at += stop.as_ref().map_or(k, |s| s.0);
                    self.avail.store(at, Ordering::Release);
                    // Through the lock, so a reader between its check and its wait is woken.
                    drop(self.lock());
                    self.cv.notify_all();
                    if let Some((_, e)) = stop {
                        break (e, None);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break (Some(broken(at, e)), None),
            }
        };
        self.end(error, overflow);
    }

    /// Marks the stream complete and wakes every reader.
    fn end(&self, error: Option<Error>, overflow: Option<Vec<u8>>) {
        let mut st = self.lock();
        st.done = true;
        st.error = error;
        st.overflow = overflow;
        drop(st);
        self.cv.notify_all();
    }

    /// The published prefix.
    fn prefix(&self, len: usize) -> &[u8] {
        // SAFETY: the first `len <= avail` bytes were written before `avail` was published
        // (acquire-loaded by the caller) and are never written again.
        unsafe { std::slice::from_raw_parts(self.ptr, len) }
    }

    /// Blocks until the writer has finished; the state it left.
    fn wait_done(&self) -> std::sync::MutexGuard<'_, State> {
        let mut st = self.lock();
        while !st.done {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st
    }

    /// Waits for the end of the stream; the decompression error, if any.
    pub fn finish(&self) -> Result<(), Error> {
        match &self.wait_done().error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Tells the writer to stop (nobody will read the rest).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

impl Arriving for Stream {
    fn upto(&self, n: usize) -> &[u8] {
        let want = n.min(self.cap);
        let a = self.avail.load(Ordering::Acquire);
        if a >= want {
            return self.prefix(a);
        }
        let mut st = self.lock();
        loop {
            let a = self.avail.load(Ordering::Acquire);
            if a >= want || st.done {
                return self.prefix(a);
            }
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn all(&self) -> &[u8] {
        let mut st = self.wait_done();
        let a = self.avail.load(Ordering::Acquire);
        if let Some(rest) = st.overflow.take() {
            // Under the lock: a second caller waits, then finds `whole` set.
            let mut whole = Vec::with_capacity(a + rest.len());
            whole.extend_from_slice(self.prefix(a));
            whole.extend_from_slice(&rest);
            let _ = self.whole.set(whole);
        }
        drop(st);
        self.whole
            .get()
            .map_or_else(|| self.prefix(a), |w| w.as_slice())
    }

    fn capacity(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A reader that hands out at most 7 bytes a call, so every byte arrives late.
    struct Slow<'a>(&'a [u8]);

    impl Read for Slow<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = out.len().min(7).min(self.0.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn slow(b: &[u8]) -> std::io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(Slow(b)))
    }

    fn gzip(b: &[u8]) -> std::io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(b)))
    }

    fn zstd(b: &[u8]) -> std::io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(zstd::stream::read::Decoder::with_buffer(b)?))
    }

    fn data() -> Vec<u8> {
        (0..20_000u32)
            .flat_map(|i| (i * 7919 % 251).to_le_bytes())
            .collect()
    }

    fn start(source: Vec<u8>, open: Opener, reserve: usize) -> Arc<Stream> {
        Stream::start(source, open, reserve, PathBuf::from("x.gz"), "gzip", None)
            .ok()
            .unwrap()
    }

    #[test]
    fn readers_get_prefixes_then_everything() {
        let want = data();
        let s = start(want.clone(), slow, want.len() + 1);
        let first = s.upto(1000);
        assert!(first.len() >= 1000 && first.len() <= want.len());
        assert_eq!(first, &want[..first.len()]);
        // More than the input: everything, once the writer is done.
        assert_eq!(s.upto(usize::MAX), &want[..]);
        assert_eq!(s.all(), &want[..]);
        assert!(s.finish().is_ok());
        assert_eq!(s.capacity(), want.len() + 1);
    }

    #[test]
    fn a_stream_longer_than_its_reservation_is_whole_only_through_all() {
        let want = data();
        let s = start(want.clone(), slow, 100);
        // `upto` never goes past the reservation; `all` has everything, twice the same.
        assert_eq!(s.upto(usize::MAX), &want[..100]);
        assert_eq!(s.all(), &want[..]);
        assert_eq!(s.all(), &want[..]);
        assert_eq!(s.upto(50).len(), 100);
        assert!(s.finish().is_ok());
    }

    #[test]
    fn a_broken_gzip_stream_reports_where_it_broke() {
        let want = data();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&want).unwrap();
        let mut gz = enc.finish().unwrap();
        gz.truncate(gz.len() / 2);
        let s = start(gz, gzip, want.len() + 1);
        let got = s.all().to_vec();
        assert!(!got.is_empty() && got.len() < want.len());
        assert_eq!(got, &want[..got.len()]);
        match s.finish() {
            Err(Error::Input {
                location,
                message,
                truncated,
                ..
            }) => {
                assert!(message.starts_with("gzip stream is broken"), "{message}");
                // The location is where the decompressed bytes ended.
                assert_eq!(location, format!("decompressed byte {}", got.len()));
                assert!(truncated);
            }
            other => panic!("expected a broken stream, got {other:?}"),
        }
    }

    fn refuses(_: &[u8]) -> std::io::Result<Box<dyn Read + '_>> {
        Err(std::io::Error::other("unknown frame descriptor"))
    }

    fn error_of(s: &Stream) -> (String, String) {
        match s.finish() {
            Err(Error::Input {
                location, message, ..
            }) => (location, message),
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    #[test]
    fn a_reader_that_cannot_open_or_read_is_an_error() {
        let s = Stream::start(
            b"x".to_vec(),
            refuses,
            10,
            PathBuf::from("x.zst"),
            "zstd",
            None,
        )
        .ok()
        .unwrap();
        assert!(s.all().is_empty());
        let (location, message) = error_of(&s);
        assert_eq!(location, "byte 0");
        assert_eq!(message, "zstd stream: unknown frame descriptor");
        let s = Stream::start(
            b"not zstd".to_vec(),
            zstd,
            10,
            PathBuf::from("x.zst"),
            "zstd",
            None,
        )
        .ok()
        .unwrap();
        assert!(s.all().is_empty());
        let (location, message) = error_of(&s);
        assert_eq!(location, "decompressed byte 0");
        assert!(message.starts_with("zstd stream is broken"), "{message}");
    }

    #[test]
    fn cancelling_stops_the_writer() {
        let want = data();
        let s = start(want.clone(), slow, want.len() + 1);
        s.cancel();
        let got = s.all();
        assert_eq!(got, &want[..got.len()]);
        assert!(s.finish().is_ok());
    }
}
