//! JSON output: pretty, with a trailing newline; keys in declaration order.

use serde::Serialize;
use std::io::Write;

/// Writes `value` as pretty JSON followed by a newline.
pub fn write<T: Serialize>(out: &mut dyn Write, value: &T) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    out.write_all(b"\n")
}
