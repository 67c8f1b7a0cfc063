//! Golden files: `tests/golden/NAME` holds the expected bytes of an output.
//!
//! `MEMLENS_BLESS=1 cargo test` writes every golden file the tests reach (review the diff
//! like code). Otherwise a golden file that differs fails, and so does a missing one, on
//! a developer's machine as under CI: a file the test expects and nobody reviewed is never
//! created silently.

use std::path::Path;

/// Compares `actual` with the file at `path`, or writes it there when `bless`; the reason
/// when it fails.
pub fn compare_golden(path: &Path, actual: &[u8], bless: bool) -> Result<(), String> {
    if bless {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, actual).unwrap();
        return Ok(());
    }
    let expected = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            return Err(format!(
                "golden file {} is missing ({e}); MEMLENS_BLESS=1 writes it, then review it",
                path.display()
            ))
        }
    };
    if expected == actual {
        return Ok(());
    }
    Err(format!(
        "{} differs (MEMLENS_BLESS=1 to accept):\n--- expected\n{}\n--- actual\n{}",
        path.display(),
        String::from_utf8_lossy(&expected),
        String::from_utf8_lossy(actual)
    ))
}

/// Asserts `actual` equals the golden file `tests/golden/NAME` (`NAME` may hold `/`), which
/// `MEMLENS_BLESS=1` rewrites.
pub fn golden(name: &str, actual: &[u8]) {
    let path = super::root().join("tests/golden").join(name);
    if let Err(why) = compare_golden(&path, actual, super::bless()) {
        panic!("{why}");
    }
}
