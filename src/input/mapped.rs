//! A regular file mapped read-only, guarded against the file shrinking under the map.
//!
//! A snapshot is often read while a job may write it again: PyTorch's `_dump_snapshot` opens
//! its file with truncation, so a periodic dump to one name empties the file memlens has
//! mapped. A read of a mapped page past the file's new end then faults (`SIGBUS`), which would
//! kill memlens with "Bus error". While a [`Mapped`] lives, its address range and a message
//! naming its file are registered here, and a `SIGBUS` handler (installed with the first map)
//! that finds the faulting address in a registered range writes that one line to standard
//! error and exits with status 2, as for any bad input. A fault outside every registered range
//! gets the default action. The handler does only what a signal handler may: it reads atomics,
//! calls `write(2)` and `_exit(2)`.
//!
//! A file that grows while mapped is read as it was when opened (the map's length is fixed);
//! one that is unlinked stays readable (the map holds it).

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

/// Maps registered at once; a map beyond them is made unguarded (and says nothing).
const SLOTS: usize = 1024;

static IN_USE: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
static STARTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LENS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static MESSAGES: [AtomicPtr<u8>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
static MESSAGE_LENS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];

static INSTALL: Once = Once::new();

/// A file's bytes, mapped read-only and registered with the `SIGBUS` handler.
pub struct Mapped {
    map: memmap2::Mmap,
    slot: Option<Slot>,
    /// The file, to tell later whether it shrank (`None` when it could not be kept).
    file: Option<File>,
}

/// What a file that shrank while it was mapped says (after its path).
fn shrank_words(len: usize) -> String {
    format!("the file shrank while it was being read (it was {len} bytes; rewritten during the run?): read it again once it is written")
}

/// A registration: the slot and the message it points to (freed after the slot is cleared).
struct Slot {
    index: usize,
    _message: Box<[u8]>,
}

impl Mapped {
    /// Maps `file` (named `path` in the message a shrinking file gets).
    pub fn map(path: &Path, file: &File) -> std::io::Result<Mapped> {
        // SAFETY: the map is read-only and private to this process. If another process
        // truncates the file while it is mapped, a read past its new end faults with SIGBUS,
        // which the handler registered below turns into one line and exit status 2.
        let map = unsafe { memmap2::Mmap::map(file)? };
        let message = format!(
            "memlens: {}: {}\n",
            crate::error::quoted_path(path),
            shrank_words(map.len())
        );
        let slot = register(
            map.as_ptr() as usize,
            map.len(),
            message.into_bytes().into_boxed_slice(),
        );
        Ok(Mapped {
            map,
            slot,
            file: file.try_clone().ok(),
        })
    }

    /// When the file is now shorter than the map, what to say of it. A read past the new end
    /// faults only on pages wholly beyond it; the rest of the last page reads as zeros, which
    /// the decoder takes for bad bytes: an error then is this, not the bytes'.
    pub fn shrank(&self) -> Option<String> {
        let now = self.file.as_ref()?.metadata().ok()?.len();
        (now < self.map.len() as u64).then(|| shrank_words(self.map.len()))
    }

    /// Advises the kernel that `start..start+len` (page-aligned) is not needed: private,
    /// read-only pages are read back from the file on the next access.
    pub fn dont_need(&self, start: usize, len: usize) {
        // SAFETY: the map is private and read-only, so DONTNEED discards no data.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len)
        };
    }
}

impl std::ops::Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if let Some(s) = self.slot.take() {
            STARTS[s.index].store(0, Ordering::Release);
            LENS[s.index].store(0, Ordering::Release);
            MESSAGES[s.index].store(std::ptr::null_mut(), Ordering::Release);
            MESSAGE_LENS[s.index].store(0, Ordering::Release);
            IN_USE[s.index].store(false, Ordering::Release);
            // The message is freed here, after no slot points to it.
        }
    }
}

/// Registers `start..start+len` with `message`; `None` when every slot is taken.
fn register(start: usize, len: usize, message: Box<[u8]>) -> Option<Slot> {
    INSTALL.call_once(install);
    let index = (0..SLOTS).find(|&i| {
        IN_USE[i]
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    })?;
    MESSAGES[index].store(message.as_ptr() as *mut u8, Ordering::Release);
    MESSAGE_LENS[index].store(message.len(), Ordering::Release);
    LENS[index].store(len, Ordering::Release);
    STARTS[index].store(start, Ordering::Release);
    Some(Slot {
        index,
        _message: message,
    })
}

/// Installs the `SIGBUS` handler.
fn install() {
    // SAFETY: a zeroed sigaction with a handler of the SA_SIGINFO signature and an empty mask
    // is a valid argument; the handler is async-signal-safe (see `on_sigbus`).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
}

/// The `SIGBUS` handler: the registered map that holds the faulting address says its line and
/// the process exits 2; any other fault gets the default action (the handler is reset and the
/// faulting access runs again).
extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for i in 0..SLOTS {
        let start = STARTS[i].load(Ordering::Acquire);
        if start == 0 || addr < start || addr - start >= LENS[i].load(Ordering::Acquire) {
            continue;
        }
        let msg = MESSAGES[i].load(Ordering::Acquire);
        let len = MESSAGE_LENS[i].load(Ordering::Acquire);
        // SAFETY: write(2) and _exit(2) are async-signal-safe; the message lives while its
        // slot is registered, and this map is (its access faulted).
        unsafe {
            if !msg.is_null() {
                libc::write(2, msg as *const libc::c_void, len);
            }
            libc::_exit(2);
        }
    }
    // SAFETY: resetting a signal's disposition is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGBUS, libc::SIG_DFL);
    }
}
