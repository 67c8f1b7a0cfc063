//! The decoder's one error: a byte offset, what was expected there, and whether the input
//! simply ended too early.

/// A decoding failure at a byte offset of the (decompressed) input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Offset of the opcode (or field) that failed.
    pub offset: u64,
    /// What was expected or what went wrong.
    pub message: String,
    /// True when the input ended before the pickle did.
    pub truncated: bool,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for DecodeError {}
