//! The resource bounds of one decode (container nesting, stack depth, values without
//! content), scaled to the input.

/// Resource bounds, so a hostile file cannot exhaust memory or time.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most MARKs open at once (container nesting).
    pub max_marks: usize,
    /// Most values on the stack at once.
    pub max_stack: usize,
    /// Values without content (`None`, `True`/`False`, empty containers, `DUP`) allowed
    /// before the density bound applies.
    pub bare_slack: usize,
    /// At most one value without content per this many bytes read (past the slack). Each
    /// costs 16 to 320 bytes of memory for one byte of input: a pickle of nothing else (a
    /// list of a million `None`s or empty dicts, compressed to a few KB) would decode to
    /// gigabytes before the model refused its shape. Snapshots have one per 16 bytes or fewer
    /// (the densest of the real and generated samples: one per 16.3 bytes).
    pub bare_every: usize,
}

impl Limits {
    /// Bounds scaled to an input of `len` bytes: legitimate snapshots stay far below them.
    pub fn for_input(len: usize) -> Self {
        Limits {
            max_marks: 1000,
            max_stack: len / 16 + 65_536,
            bare_slack: 65_536,
            bare_every: 4,
        }
    }
}
