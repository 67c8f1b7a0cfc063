//! The workers: each takes an admitted request from the queue ([`run`]), makes its answer
//! (`routes::answer`; a panic there is a 500 and the worker goes on) and writes it within
//! bounded time ([`WRITE_TIMEOUT`] per write, [`WRITE_DEADLINE`] in all), then closes the
//! connection. Only token holders reach a worker.

use super::http;
use super::listen::Job;
use super::routes::{self, Answer, State};
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::Receiver;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest a write of an answer may wait for the client to read.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest an answer may take to write in all; then its connection is closed.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(60);

/// Answers the jobs of `jobs` until its sender is gone.
pub fn run(jobs: &Mutex<Receiver<Job>>, state: &State) {
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        match job {
            Ok(job) => answer(job, state),
            Err(_) => return,
        }
    }
}

fn answer(job: Job, state: &State) {
    let Job {
        mut stream,
        route,
        head_only,
        slot: _slot,
    } = job;
    let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        routes::answer(state, &route)
    }))
    .unwrap_or_else(|_| Answer::error(500, "internal error"));
    if send(&mut stream, &answer, head_only).is_ok() {
        let _ = stream.shutdown(Shutdown::Write);
    }
}

fn send(stream: &mut TcpStream, answer: &Answer, head_only: bool) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let deadline = Instant::now() + WRITE_DEADLINE;
    let head = http::response_head(answer);
    let body: &[u8] = if head_only { &[] } else { &answer.body };
    for part in [&head[..], body] {
        for chunk in part.chunks(64 * 1024) {
            if Instant::now() > deadline {
                return Err(io::ErrorKind::TimedOut.into());
            }
            stream.write_all(chunk)?;
        }
    }
    stream.flush()
}
