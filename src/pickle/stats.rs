//! What one decode counted: returned with its [`super::Heap`] (`Heap::stats`), so the library
//! keeps no process-wide counters; the parallel decoder sums its workers' and prints them
//! under `BuildOptions::timing`.

/// Counters of one decode (or, summed, of every decode of one build).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeStats {
    /// Memo definitions outside the decoded range decoded on demand (a chunk's references to
    /// frames defined earlier in the file).
    pub ext_defs: u64,
    /// Input bytes of those definitions.
    pub ext_bytes: u64,
    /// Dicts offered to the trace entry fast path that it left to the general loop.
    pub declined: u64,
}

impl DecodeStats {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &DecodeStats) {
        self.ext_defs += other.ext_defs;
        self.ext_bytes += other.ext_bytes;
        self.declined += other.declined;
    }
}
