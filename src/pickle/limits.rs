//! The resource bounds of one decode (container nesting, stack depth), scaled to the input.

/// Resource bounds, so a hostile file cannot exhaust memory or time.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most MARKs open at once (container nesting).
    pub max_marks: usize,
    /// Most values on the stack at once.
    pub max_stack: usize,
}

impl Limits {
    /// Bounds scaled to an input of `len` bytes: legitimate snapshots stay far below them.
    pub fn for_input(len: usize) -> Self {
        Limits {
            max_marks: 1000,
            max_stack: len / 16 + 65_536,
        }
    }
}
