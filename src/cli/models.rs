//! The models a `memlens session` keeps ([`super::pipeline::cache_decodes`]): each keyed by
//! what identifies the bytes it was decoded from, one per path, within a memory budget.
//!
//! The key is the opened file's device, inode, size, modification and status-change times
//! (nanoseconds) and whether it was salvaged; when a time is too recent to tell a later write
//! apart (a file system's clock ticks coarsely: a rewrite within the same tick keeps both
//! times), the SHA-256 of the content joins the key. A new version of a path replaces the
//! old model; past the budget the least recently used models go (the newest always stays).
//! Each model dropped is said in the answer of the request that dropped it.

use super::session_files::Opened;
use crate::model::Snapshot;
use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A time this close to now (or later) may not change on the next write.
const AMBIGUOUS: Duration = Duration::from_secs(2);

/// The session's default budget of models (`--max-memory`).
pub const DEFAULT_BUDGET: u64 = 4 << 30;

/// What identifies the bytes a model was decoded from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    salvage: bool,
    digest: Option<[u8; 32]>,
}

impl Key {
    /// The key of the opened file (its content hashed when a time is ambiguous).
    pub fn of(f: &Opened, salvage: bool) -> std::io::Result<Key> {
        let m = &f.meta;
        let mtime = (m.mtime(), m.mtime_nsec());
        let ctime = (m.ctime(), m.ctime_nsec());
        let digest = if recent(mtime) || recent(ctime) {
            Some(digest(&f.file)?)
        } else {
            None
        };
        Ok(Key {
            dev: m.dev(),
            ino: m.ino(),
            size: m.len(),
            mtime,
            ctime,
            salvage,
            digest,
        })
    }
}

/// Whether a file time (seconds, nanoseconds since the epoch) is within [`AMBIGUOUS`] of now
/// or later.
fn recent((secs, nanos): (i64, i64)) -> bool {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let Ok(secs) = u64::try_from(secs) else {
        return false;
    };
    let t = Duration::new(secs, u32::try_from(nanos).unwrap_or(0));
    t + AMBIGUOUS > now
}

/// The SHA-256 of the file's content, read from its descriptor (from the start; positional
/// reads, so the descriptor's offset stays where it was).
fn digest(file: &std::fs::File) -> std::io::Result<[u8; 32]> {
    use sha2::Digest;
    use std::os::unix::fs::FileExt;
    struct At<'a>(&'a std::fs::File, u64);
    impl Read for At<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read_at(buf, self.1)?;
            self.1 += n as u64;
            Ok(n)
        }
    }
    let mut h = sha2::Sha256::new();
    let mut r = At(file, 0);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..n]);
    }
    Ok(h.finalize().into())
}

/// A model dropped by a request, as its answer says it (`evicted`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Evicted {
    /// The file, as the request that decoded it named it.
    pub file: String,
    /// The model's size in memory (approximate, bytes).
    pub bytes: u64,
    /// `replaced` (a new version of the file was decoded) or `budget` (over `--max-memory`,
    /// least recently used first).
    pub why: &'static str,
}

struct Entry {
    snap: Snapshot,
    bytes: u64,
    used: u64,
    name: String,
    real: PathBuf,
}

/// The models kept, by key, with the path each came from and the budget they share.
pub struct Models {
    budget: u64,
    entries: HashMap<Key, Entry>,
    by_path: HashMap<PathBuf, Key>,
    clock: u64,
    held: u64,
    evicted: Vec<Evicted>,
}

impl Models {
    /// No model yet, `budget` bytes for them all.
    pub fn new(budget: u64) -> Models {
        Models {
            budget,
            entries: HashMap::new(),
            by_path: HashMap::new(),
            clock: 0,
            held: 0,
            evicted: Vec::new(),
        }
    }

    /// A copy of the model decoded from these bytes, if kept (it becomes the most recently
    /// used).
    pub fn get(&mut self, key: &Key) -> Option<Snapshot> {
        self.clock += 1;
        let e = self.entries.get_mut(key)?;
        e.used = self.clock;
        Some(e.snap.clone())
    }

    /// Keeps `snap`, decoded from `key`'s bytes at `real` (named `name` by the request):
    /// the model of an older version of `real` goes, then the least recently used ones while
    /// the budget is passed.
    pub fn insert(&mut self, real: PathBuf, name: String, key: Key, snap: Snapshot) {
        if let Some(old) = self.by_path.remove(&real) {
            if old != key {
                self.drop_entry(&old, "replaced");
            }
        }
        self.clock += 1;
        let bytes = snap.heap_bytes() as u64;
        self.held += bytes;
        if let Some(prev) = self.entries.insert(
            key.clone(),
            Entry {
                snap,
                bytes,
                used: self.clock,
                name,
                real: real.clone(),
            },
        ) {
            self.held -= prev.bytes;
        }
        self.by_path.insert(real, key.clone());
        while self.held > self.budget {
            let Some(lru) = self
                .entries
                .iter()
                .filter(|(k, _)| **k != key)
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.drop_entry(&lru, "budget");
        }
    }

    fn drop_entry(&mut self, key: &Key, why: &'static str) {
        if let Some(e) = self.entries.remove(key) {
            self.held -= e.bytes;
            if self.by_path.get(&e.real) == Some(key) {
                self.by_path.remove(&e.real);
            }
            self.evicted.push(Evicted {
                file: e.name,
                bytes: e.bytes,
                why,
            });
        }
    }

    /// The models dropped since the last call.
    pub fn take_evicted(&mut self) -> Vec<Evicted> {
        std::mem::take(&mut self.evicted)
    }
}
