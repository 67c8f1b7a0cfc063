//! What pass 1 produces: chunks of the big lists, and the plan that holds them with the
//! table of memo definitions.

use super::defs::Defs;

/// Which big list a chunk belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Elements are segment dicts (`segments`, or a bare top-level list).
    Segments,
    /// Elements are trace entry dicts (`device_traces[d]`).
    Trace,
}

/// Consecutive elements of one big list, decodable on their own.
#[derive(Clone, Copy, Debug)]
pub struct Chunk {
    /// Offset of the first element's first opcode.
    pub start: u64,
    /// Offset just past the last element (may include batch `APPENDS`/`MARK` opcodes inside).
    pub end: u64,
    /// Memo counter when the first element starts (implicit `MEMOIZE` numbering).
    pub memo_base: u64,
    /// Memo counter at `end`.
    pub memo_end: u64,
    /// True when the first element sits above an open `MARK` (an `APPENDS` batch).
    pub mark_open: bool,
    /// Number of elements.
    pub items: u32,
    /// The list the elements belong to.
    pub target: Target,
}

/// The result of pass 1.
#[derive(Debug)]
pub struct Plan {
    /// Chunks in file order.
    pub chunks: Vec<Chunk>,
    /// Definitions of referenced memo entries.
    pub defs: Defs,
    /// Regions of a split pass 1 walked by helper threads and adopted (0 unsplit).
    pub regions_adopted: usize,
}
