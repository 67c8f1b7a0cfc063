//! The GPU capture scripts (samples/capture, issues 9 and 21) refuse cleanly without CUDA, and
//! their CPU-side self-test (truth writer, site markers, dry run on a toy allocator, the
//! version probing of recording_modes.py, run_all's optional scale_big) passes.

use crate::common;
use common::*;

#[test]
fn capture_scripts_self_test() {
    if !require_python() {
        return;
    }
    let o = std::process::Command::new(python3())
        .arg(root().join("samples/capture/selftest.py"))
        .current_dir(root())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("checks passed"), "{out}");
}
