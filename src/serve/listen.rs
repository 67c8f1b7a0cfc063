//! The server's connections, held by one thread ([`run`]) that never blocks on a client: it
//! accepts, reads every request head without blocking (`poll(2)` over all of them), answers
//! what it refuses itself (a malformed or oversized head, a wrong `Host`, no token: nothing
//! but a few hundred bytes that fit a socket's buffer) and hands each admitted request to the
//! workers ([`super::worker`]), through a bounded queue.
//!
//! Each client is bounded: its head within [`http::MAX_HEAD`] bytes and [`HEAD_TIMEOUT`]
//! (idle or slow alike), no body ever read (every answer closes its connection; after a
//! refusal at most [`DRAIN`] bytes or [`LINGER`] more are read and dropped, so the answer is
//! not lost to a reset), and at most `cap` connections open at once, none holding a thread
//! before it is admitted. A connection over the cap makes room by closing the one that has
//! waited longest for its head (a refused one first); when none is left to close, the new
//! one is closed at once. A failed accept (out of descriptors, say) closes the oldest
//! waiting connection, sleeps [`ACCEPT_RETRY`] and tries again: never the end of the server.

use super::http::{self, Progress, RequestHead};
use super::request::{admit, Refusal, Route};
use super::routes::Answer;
use super::Token;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// How long a connection may take from its accept to the end of its request head, sending
/// nothing or sending slowly; then it is closed (with a 408 when it sent part of a head).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a refused connection is read (and what it sends dropped) before it is closed,
/// once its answer is written: a close with unread bytes would reset the connection and the
/// client could lose the answer.
pub const LINGER: Duration = Duration::from_secs(1);

/// Most bytes read and dropped from a refused connection before it is closed.
pub const DRAIN: usize = 64 * 1024;

/// How long the accepting thread sleeps after an accept that failed (out of descriptors,
/// say) before it tries again.
pub const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// How often the thread looks at the stop flag and the connections' deadlines.
pub const POLL: Duration = Duration::from_millis(100);

/// An admitted request, for a worker: its connection, its route, and whether it was `HEAD`.
pub struct Job<'a> {
    /// The connection, still open, with nothing written yet.
    pub stream: TcpStream,
    /// What the request asks for.
    pub route: Route,
    /// True for `HEAD`: the answer without its body.
    pub head_only: bool,
    /// Counts the connection as open until the job is done (dropped).
    pub slot: Slot<'a>,
}

/// One connection counted in the server's open connections while a worker holds it; the
/// count goes down when it is dropped.
pub struct Slot<'a>(&'a AtomicUsize);

impl<'a> Slot<'a> {
    fn take(count: &'a AtomicUsize) -> Slot<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Slot(count)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the accepting thread works with: the listening socket (non-blocking), what `admit`
/// checks, the cap on open connections, and the workers' queue.
pub struct Listener<'a> {
    /// The listening socket, non-blocking.
    pub listener: &'a TcpListener,
    /// The address bound (the `Host` check's).
    pub addr: SocketAddr,
    /// The token every request must present.
    pub token: &'a Token,
    /// Number of files served.
    pub files: usize,
    /// Most connections open at once, counting those the workers hold.
    pub cap: usize,
    /// The workers' queue; full, an admitted request is answered 503.
    pub jobs: SyncSender<Job<'a>>,
    /// Connections the workers hold (queued or being answered).
    pub in_flight: &'a AtomicUsize,
}

/// One connection the accepting thread holds.
struct Conn {
    stream: TcpStream,
    /// The head's bytes so far (at most [`http::MAX_HEAD`] + 1).
    buf: Vec<u8>,
    accepted: Instant,
    phase: Phase,
}

enum Phase {
    /// Waiting for the request head.
    Reading,
    /// Answered and shut for writing: what comes is read and dropped until the client
    /// closes, `left` bytes came, or `until` passed.
    Draining { until: Instant, left: usize },
}

/// Accepts and reads connections until `stop` is raised; then returns, closing the
/// connections it holds (those handed to the workers are theirs to finish).
pub fn run(l: Listener, stop: &AtomicBool) {
    let mut conns: Vec<Conn> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        conns.retain_mut(|c| !expired(c, now));
        let mut fds = Vec::with_capacity(conns.len() + 1);
        fds.push(pollfd(l.listener.as_raw_fd()));
        fds.extend(conns.iter().map(|c| pollfd(c.stream.as_raw_fd())));
        let timeout = POLL.as_millis() as libc::c_int;
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structures.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if n < 0 {
            if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                std::thread::sleep(ACCEPT_RETRY);
            }
            continue;
        }
        let held = std::mem::take(&mut conns);
        for (c, fd) in held.into_iter().zip(&fds[1..]) {
            let next = if fd.revents != 0 {
                l.service(c)
            } else {
                Some(c)
            };
            conns.extend(next);
        }
        if fds[0].revents != 0 {
            l.accept_batch(&mut conns);
        }
    }
}

fn pollfd(fd: std::os::fd::RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// True when `c` is past its deadline (and is to be closed): a head not complete within
/// [`HEAD_TIMEOUT`] (a 408 first when part of it came), a drain past its end.
fn expired(c: &mut Conn, now: Instant) -> bool {
    match c.phase {
        Phase::Reading if now.duration_since(c.accepted) >= HEAD_TIMEOUT => {
            if !c.buf.is_empty() {
                let a = Answer::error(408, "the request head did not come in time");
                let _ = c.stream.write(&http::response(&a, false));
            }
            true
        }
        Phase::Reading => false,
        Phase::Draining { until, .. } => now >= until,
    }
}

impl<'a> Listener<'a> {
    /// Accepts up to a quarter of the cap of the connections waiting (so that one that
    /// arrived before them is read before it could be closed to make room for them).
    fn accept_batch(&self, conns: &mut Vec<Conn>) {
        for _ in 0..(self.cap / 4).max(1) {
            match self.listener.accept() {
                Ok((stream, _)) => self.open(stream, conns),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                        evict(conns);
                    }
                    std::thread::sleep(ACCEPT_RETRY);
                    return;
                }
            }
        }
    }

    /// Holds a new connection (making room under the cap, else closing it at once) and reads
    /// what it sent already.
    fn open(&self, stream: TcpStream, conns: &mut Vec<Conn>) {
        if conns.len() + self.in_flight.load(Ordering::SeqCst) >= self.cap && !evict(conns) {
            return;
        }
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let _ = stream.set_nodelay(true);
        let c = Conn {
            stream,
            buf: Vec::new(),
            accepted: Instant::now(),
            phase: Phase::Reading,
        };
        conns.extend(self.service(c));
    }

    /// Reads what `c` sent; the connection if it is still held.
    fn service(&self, c: Conn) -> Option<Conn> {
        match c.phase {
            Phase::Reading => self.read_head(c),
            Phase::Draining { .. } => drain(c),
        }
    }

    fn read_head(&self, mut c: Conn) -> Option<Conn> {
        let mut chunk = [0u8; 4096];
        loop {
            let room = (http::MAX_HEAD + 1).saturating_sub(c.buf.len());
            if room == 0 {
                break;
            }
            match c.stream.read(&mut chunk[..room.min(4096)]) {
                Ok(0) => return None,
                Ok(n) => {
                    c.buf.extend_from_slice(&chunk[..n]);
                    // A head ends with a line: look again only when a line ended (or when
                    // the request line is past its bound).
                    if !chunk[..n].contains(&b'\n') && c.buf.len() <= http::MAX_REQUEST_LINE {
                        continue;
                    }
                    if let Progress::Complete(head) = http::parse(&c.buf) {
                        return self.handle(c, head);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(c),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        match http::parse(&c.buf) {
            Progress::Complete(head) => self.handle(c, head),
            Progress::Incomplete => None,
        }
    }

    /// A complete head: to the workers when admitted, else its refusal.
    fn handle(&self, c: Conn, head: Result<RequestHead, Refusal>) -> Option<Conn> {
        let (refusal, head_only) = match head {
            Err(r) => (r, false),
            Ok(h) => match admit(&h.head(), self.addr, self.token, self.files) {
                Ok(route) => return self.hand_over(c, route, h.head_only()),
                Err(r) => (r, h.head_only()),
            },
        };
        refuse(c, &refusal, head_only)
    }

    fn hand_over(&self, c: Conn, route: Route, head_only: bool) -> Option<Conn> {
        let job = Job {
            stream: c.stream,
            route,
            head_only,
            slot: Slot::take(self.in_flight),
        };
        match self.jobs.try_send(job) {
            Ok(()) => None,
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                let c = Conn {
                    stream: job.stream,
                    buf: Vec::new(),
                    accepted: c.accepted,
                    phase: Phase::Reading,
                };
                let busy = Refusal::new(503, "the server is busy: try again");
                refuse(c, &busy, head_only)
            }
        }
    }
}

/// Writes `r`'s answer (it fits the socket's buffer, or the connection is closed), shuts the
/// connection for writing and drains it.
fn refuse(mut c: Conn, r: &Refusal, head_only: bool) -> Option<Conn> {
    let mut a = Answer::error(r.status, &r.message);
    a.allow = r.status == 405;
    let bytes = http::response(&a, head_only);
    match c.stream.write(&bytes) {
        Ok(n) if n == bytes.len() => {}
        _ => return None,
    }
    let _ = c.stream.shutdown(Shutdown::Write);
    c.buf = Vec::new();
    c.phase = Phase::Draining {
        until: Instant::now() + LINGER,
        left: DRAIN,
    };
    drain(c)
}

/// Reads and drops what `c` sent; the connection while it may send more.
fn drain(mut c: Conn) -> Option<Conn> {
    let Phase::Draining { left, .. } = &mut c.phase else {
        return Some(c);
    };
    let mut chunk = [0u8; 4096];
    while *left > 0 {
        let want = (*left).min(chunk.len());
        match c.stream.read(&mut chunk[..want]) {
            Ok(0) => return None,
            Ok(n) => *left -= n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(c),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    None
}

/// Closes one held connection to make room: a refused one if any, else the one that has
/// waited longest for its head. False when none is held.
fn evict(conns: &mut Vec<Conn>) -> bool {
    let pick = conns
        .iter()
        .position(|c| matches!(c.phase, Phase::Draining { .. }))
        .or_else(|| (0..conns.len()).min_by_key(|&i| conns[i].accepted));
    match pick {
        Some(i) => {
            conns.swap_remove(i);
            true
        }
        None => false,
    }
}
