//! What the decode of one file cost, recorded where it happens (the model's builder) for the
//! command line's `--timings`, which names it by file and prints it.
//!
//! Off until [`enable`] is called (the CLI does, for `--timings`; the library reads no
//! environment). Records are kept per thread: a file is decoded on the thread that asked for
//! it (the parallel decoder's workers report to that thread), so files decoded side by side
//! on several threads keep their own figures. [`take`] hands them out and starts again.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

static ENABLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static RECORDED: RefCell<Recorded> = RefCell::new(Recorded::default());
}

/// A phase of the decode that the builder times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The pickle decoded into records: the sequential decoder's one pass with the builder's
    /// hooks, or the parallel decoder's pass 1, its workers and the calling thread's merge;
    /// with input still arriving, the wait for it too.
    Decode,
    /// The records made into the [`crate::model::Snapshot`] (`Builder::finish`: the
    /// top level assembled, validated).
    Model,
}

/// What this thread's decodes recorded since the last [`take`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Time in [`Phase::Decode`] (a decoder that gave up and the one that took over: both).
    pub decode: Duration,
    /// Time in [`Phase::Model`].
    pub model: Duration,
    /// Which decoder ran, in words (`sequential`, `parallel, 4 threads`, a fallback); the
    /// last one said.
    pub decoder: Option<String>,
}

/// Turns recording on for the rest of the process (`--timings`).
pub fn enable() {
    ENABLED.store(true, Relaxed);
}

/// Whether recording is on: the builder reads no clock otherwise.
pub fn enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// Adds `d` to `phase` of this thread's record (when recording is on).
pub fn add(phase: Phase, d: Duration) {
    if !enabled() {
        return;
    }
    RECORDED.with(|r| {
        let mut r = r.borrow_mut();
        match phase {
            Phase::Decode => r.decode += d,
            Phase::Model => r.model += d,
        }
    });
}

/// Runs `f`, adding its wall time to `phase` (when recording is on).
pub fn time<T>(phase: Phase, f: impl FnOnce() -> T) -> T {
    if !enabled() {
        return f();
    }
    let t = Instant::now();
    let out = f();
    add(phase, t.elapsed());
    out
}

/// Says which decoder ran (`words` is called only when recording is on).
pub fn decoder(words: impl FnOnce() -> String) {
    if enabled() {
        RECORDED.with(|r| r.borrow_mut().decoder = Some(words()));
    }
}

/// This thread's record since the last call, which starts a new one.
pub fn take() -> Recorded {
    RECORDED.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_per_thread_once_enabled() {
        // Off: nothing is kept (the flag is process-wide, so only this test turns it on).
        add(Phase::Decode, Duration::from_millis(5));
        decoder(|| "sequential".into());
        assert_eq!(take(), Recorded::default());
        enable();
        add(Phase::Decode, Duration::from_millis(5));
        add(Phase::Decode, Duration::from_millis(2));
        assert_eq!(time(Phase::Model, || 7), 7);
        decoder(|| "parallel, 2 threads".into());
        let other = std::thread::spawn(take).join().unwrap();
        assert_eq!(other, Recorded::default());
        let r = take();
        assert_eq!(r.decode, Duration::from_millis(7));
        assert_eq!(r.decoder.as_deref(), Some("parallel, 2 threads"));
        assert_eq!(take(), Recorded::default());
    }
}
