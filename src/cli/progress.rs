//! Progress on stderr for long work (decodes, batches, the analyses and pages of large
//! snapshots), shown only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// Inputs smaller than this decode in well under a second: no bar.
const MIN_BYTES: u64 = 64 << 20;

/// A bar over `total` bytes, or a hidden one.
pub fn bytes_bar(total: u64, label: &str) -> ProgressBar {
    if total < MIN_BYTES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap()
        .progress_chars("=> "),
    );
    bar.set_message(label.to_string());
    bar
}

/// A bar over `total` files of a batch, or a hidden one (stderr not a terminal, one file).
pub fn files_bar(total: u64) -> ProgressBar {
    if total < 2 || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "batch [{bar:30}] {pos}/{len} files {per_sec} eta {eta} {msg}",
        )
        .unwrap()
        .progress_chars("=> "),
    );
    bar
}

/// A spinner with the elapsed time for work on a snapshot whose model holds `model_bytes`
/// (the analysis of a large file, the page built from it), saying `label`; hidden below the
/// size of a decode that shows a bar, or when stderr is not a terminal. `set_message` names
/// each stage; `finish_and_clear` removes it before the command's own lines.
pub fn work_spinner(model_bytes: u64, label: &str) -> ProgressBar {
    if model_bytes < MIN_BYTES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap()
            .tick_chars("|/-\\ "),
    );
    bar.set_message(label.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}
