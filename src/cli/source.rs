//! Source files read for the annotated view (`lines --source-root`, and the page's lines
//! panel under `report`/`serve --source-root`): only read, never run, and bounded.

use crate::Error;
use std::io::Read;
use std::path::Path;

/// The most bytes of one source file read: a larger one is not source.
const MAX_SOURCE_BYTES: u64 = 8 << 20;

/// Reads one source file for the annotated view: a regular file of at most
/// [`MAX_SOURCE_BYTES`], its text taken as UTF-8 (invalid bytes replaced).
pub fn read_source(path: &Path) -> std::io::Result<String> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "not a regular file",
        ));
    }
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {} (not read)",
            crate::units::iec(MAX_SOURCE_BYTES)
        )));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_SOURCE_BYTES)
        .read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A source-root flag (`--source-root DIR`, `--base-source-root DIR`) must name a directory
/// (a usage error, exit 2, otherwise).
pub fn source_dir(flag: &str, dir: Option<&Path>) -> Result<(), Error> {
    match dir {
        Some(dir) if !dir.is_dir() => Err(Error::Usage(format!(
            "{flag} {}: not a directory",
            dir.display()
        ))),
        _ => Ok(()),
    }
}
