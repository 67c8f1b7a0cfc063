//! The one error of building a snapshot: a broken pickle, or a value of the wrong shape.

use crate::pickle::DecodeError;

/// Why a decoded pickle is not a snapshot: a key path (or byte offset) and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// The pickle itself is broken or refused.
    Decode(DecodeError),
    /// The pickle decoded, but a value is not what a snapshot holds there.
    Shape {
        /// Key path such as `device_traces[0][12].size`.
        path: String,
        /// What was expected.
        message: String,
    },
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Decode(e) => e.fmt(f),
            BuildError::Shape { path, message } => write!(f, "key {path}: {message}"),
        }
    }
}

impl std::error::Error for BuildError {}
