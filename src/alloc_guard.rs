//! Running out of memory as one line and exit code 2, never an abort with a backtrace.
//!
//! Rust's default answer to a refused allocation is an abort. The binary installs
//! [`Guarded`] as its global allocator: an allocation the system refuses prints
//! `memlens: FILE: out of memory: ...` and ends the process with exit code 2, naming the
//! input being read ([`reading`]). Code that can do without a reservation (a size hint, the
//! parallel decoder's tables, pass 1's stack) asks for it inside [`fallible`], where a refusal
//! returns to the caller as usual (`try_reserve`, a null pointer) and the caller falls back.
//!
//! The refusal path allocates nothing: the message is written with `write(2)` from static and
//! stack data, and the process leaves with `_exit`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// The system allocator, with a refused allocation turned into one line and exit code 2
/// (outside [`fallible`]). Install it in a binary with `#[global_allocator]`.
pub struct Guarded;

thread_local! {
    /// Depth of [`fallible`] scopes on this thread.
    static FALLIBLE: Cell<u32> = const { Cell::new(0) };
}

/// The input most recently opened ([`reading`]), quoted for one line; leaked on purpose, so
/// the refusal path may read it from any thread at any time.
static CONTEXT: AtomicPtr<String> = AtomicPtr::new(std::ptr::null_mut());
/// Inputs being read now.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Names `path` in the out-of-memory line until the returned guard is dropped.
pub fn reading(path: &Path) -> Reading {
    let text = Box::into_raw(Box::new(crate::error::quoted_path(path)));
    // The previous text is left allocated: another thread may be printing it.
    CONTEXT.store(text, Ordering::Release);
    ACTIVE.fetch_add(1, Ordering::Relaxed);
    Reading(())
}

/// While alive, an out-of-memory line names the input given to [`reading`].
pub struct Reading(());

impl Drop for Reading {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs `f` with refused allocations returned to it (`try_reserve` errors, null pointers)
/// rather than ending the process: for reservations the caller can do without.
pub fn fallible<R>(f: impl FnOnce() -> R) -> R {
    struct Depth;
    impl Drop for Depth {
        fn drop(&mut self) {
            let _ = FALLIBLE.try_with(|d| d.set(d.get() - 1));
        }
    }
    let _ = FALLIBLE.try_with(|d| d.set(d.get() + 1));
    let _depth = Depth;
    f()
}

fn refused(size: usize) {
    if FALLIBLE.try_with(|d| d.get() > 0).unwrap_or(false) {
        return;
    }
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = size;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let context = CONTEXT.load(Ordering::Acquire);
    let write = |b: &[u8]| {
        // SAFETY: writes initialized bytes to standard error; the result is ignored (there is
        // nowhere else to report).
        unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
    };
    write(b"memlens: ");
    if !context.is_null() {
        // SAFETY: CONTEXT only ever holds leaked, never-freed strings.
        write(unsafe { &*context }.as_bytes());
        write(b": ");
    }
    write(b"out of memory: the system refused ");
    write(&digits[at..]);
    write(b" bytes");
    if ACTIVE.load(Ordering::Relaxed) > 1 {
        write(b" (while reading several files; this one was opened last)");
    }
    write(b"; the input needs more memory than this process may use (ulimit -v, cgroup limit)\n");
    // SAFETY: ends the process at once, without running destructors or atexit handlers, which
    // might allocate.
    unsafe { libc::_exit(2) }
}

/// Allocations from this size on ask for transparent huge pages.
const HUGE_FROM: usize = 8 << 20;
/// The base page size the advice is aligned to (4 KiB; a larger one only aligns less).
const PAGE: usize = 4096;

/// Asks the kernel to back a large allocation with transparent huge pages where 2 MiB-aligned
/// ranges lie inside it (`MADV_HUGEPAGE`; in the kernels' default mode, `madvise`, they are
/// given only when asked). The decoder fills its tables (the memo, the trace events) front to
/// back, and with 4 KiB pages each page costs a fault: 25,000 for a 178 MB file of PyTorch's
/// layout, 9,700 with huge pages, 8% of its wall time (docs/performance.md). Advice only:
/// refused or unsupported, nothing changes.
fn huge_pages(p: *mut u8, size: usize) {
    if size < HUGE_FROM || p.is_null() {
        return;
    }
    // The whole pages the allocation touches: for one the system allocator mapped on its own
    // (its header lies in the first page), its whole mapping, so that the mapping stays one
    // region the allocator can grow in place (`mremap` refuses a range split by advice).
    let start = (p as usize) & !(PAGE - 1);
    let end = (p as usize + size).next_multiple_of(PAGE);
    // SAFETY: the pages hold this allocation (and at most its neighbours' bytes in the first
    // and last page); MADV_HUGEPAGE only changes how pages are backed, never their contents.
    unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
}

// SAFETY: every call goes to the system allocator unchanged; only a null result is acted on.
unsafe impl GlobalAlloc for Guarded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if p.is_null() {
            refused(layout.size());
        }
        huge_pages(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if p.is_null() {
            refused(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            refused(new_size);
        }
        huge_pages(p, new_size);
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}
