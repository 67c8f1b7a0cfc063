//! The one error type of the library: every failure names the file and where in it.

use std::path::{Path, PathBuf};

/// A failure to read or understand an input, or a bad request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The file could not be opened or read.
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        message: String,
    },
    /// The file was read but is not a usable snapshot.
    Input {
        /// The file.
        path: PathBuf,
        /// Where: `byte N` or `key a.b[3]`.
        location: String,
        /// What was expected.
        message: String,
        /// True when the file ends too early (a dump that died).
        truncated: bool,
    },
    /// A command-line or option error.
    Usage(String),
}

impl Error {
    /// An input error at a byte offset.
    pub fn at_byte(path: &Path, offset: u64, message: impl Into<String>) -> Self {
        Error::Input {
            path: path.to_path_buf(),
            location: format!("byte {offset}"),
            message: message.into(),
            truncated: false,
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: &Path, e: &std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io { path, message } => write!(f, "{}: {message}", quoted_path(path)),
            Error::Input {
                path,
                location,
                message,
                ..
            } => write!(f, "{}: {location}: {message}", quoted_path(path)),
            Error::Usage(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

/// `path` for a one-line message: as it is when it is printable UTF-8, else in double quotes
/// with control characters, quotes and invalid bytes escaped (`"a\nb.pickle"`), so a name
/// holding a newline cannot break the line.
pub fn quoted_path(path: &Path) -> String {
    match path.to_str() {
        Some(s) if !s.chars().any(|c| c.is_control() || c == '"') => s.to_string(),
        _ => {
            use std::os::unix::ffi::OsStrExt;
            let mut out = String::from("\"");
            for chunk in path.as_os_str().as_bytes().utf8_chunks() {
                for c in chunk.valid().chars() {
                    out.extend(c.escape_debug());
                }
                for b in chunk.invalid() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            out.push('"');
            out
        }
    }
}
