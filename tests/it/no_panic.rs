//! Issue 53: a few hundred bytes made `oom`, `fit`, `whatif --suggest` and `report` panic
//! (exit 101, "index out of bounds: ... 4294967295"): one small segment, a small allocation,
//! then an `oom` of 1 GiB or more with nothing free. The allocator model's replay with
//! expandable segments asked for more than one reservation holds and followed the last
//! block's `next` link (a `u32::MAX` sentinel) as an index. Links are now `Option<BlockId>`,
//! checked where followed (src/allocator/pool.rs). Every command on that file, through the
//! binary: exit 0, or 1/2 with one line, never a panic.

use crate::common::*;

#[path = "../../fuzz/fuzz_targets/oom_paths_harness.rs"]
#[allow(dead_code)]
mod oom_paths_harness;

/// Writes the small OOM snapshot (a pickle, as PyTorch writes) into `dir`.
fn write_small_oom(dir: &std::path::Path, oom: u64, conf: &str) -> std::path::PathBuf {
    let json = serde_json::to_vec(&oom_paths_harness::small_oom(oom, conf)).unwrap();
    let pickle = memlens::input::json_to_pickle(&json).unwrap();
    let path = dir.join(format!("small_oom_{oom}_{}.pickle", conf.len()));
    std::fs::write(&path, pickle).unwrap();
    path
}

/// Runs `args` and checks the outcome: exit 0 with output (on standard output unless `-o`), or exit 1/2 with one line on
/// standard error.
fn answers(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let o = memlens(args);
    let err = String::from_utf8_lossy(&o.stderr);
    match o.status.code() {
        // `-o` writes the file instead of standard output.
        Some(0) => assert!(
            !o.stdout.is_empty() || args.contains(&"-o".as_ref()),
            "{args:?}: exit 0 without output"
        ),
        Some(1 | 2) => assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}"),
        c => panic!("{args:?}: exit {c:?}: {err}"),
    }
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    o
}

#[test]
fn the_small_oom_trace_goes_through_every_command_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    for conf in ["", "expandable_segments:True"] {
        for oom in [1u64 << 30, 1 << 40] {
            let f = write_small_oom(dir.path(), oom, conf);
            let f = f.as_os_str();
            let html = dir.path().join("page.html");
            let commands: [&[&str]; 9] = [
                &["oom"],
                &["fit"],
                &["whatif", "--suggest"],
                &["leaks"],
                &["top"],
                &["frag"],
                &["timeline"],
                &["oom", "--capacity", "80GiB"],
                &["fit", "--at", "oom"],
            ];
            for c in commands {
                let mut args: Vec<&std::ffi::OsStr> = c.iter().map(|a| a.as_ref()).collect();
                args.push(f);
                let o = answers(&args);
                assert_eq!(o.status.code(), Some(0), "{c:?} {conf:?} {oom}");
            }
            answers(&["diff".as_ref(), f, f]);
            let o = answers(&[
                "report".as_ref(),
                f,
                "-o".as_ref(),
                html.as_os_str(),
                "-f".as_ref(),
            ]);
            assert_eq!(o.status.code(), Some(0));
            assert!(std::fs::read_to_string(&html).unwrap().contains("</html>"));
            // `explain` reads a message, not a snapshot: the file is refused in one line.
            let o = answers(&["explain".as_ref(), "--message-file".as_ref(), f]);
            assert_eq!(o.status.code(), Some(2));
        }
    }
}

/// The OOM's numbers come through `oom --format json` as written: the request and the
/// 2 MiB reserved, with `fit` attached at it.
#[test]
fn the_small_oom_reports_its_request_and_a_fit_at_it() {
    let dir = tempfile::tempdir().unwrap();
    let f = write_small_oom(dir.path(), 1 << 30, "expandable_segments:True");
    let r = json_report(&["oom"], &f);
    let ooms = r["ooms"].as_array().unwrap();
    assert_eq!(ooms.len(), 1, "{r}");
    assert_eq!(as_u64(&ooms[0]["requested_bytes"]), 1 << 30, "{}", ooms[0]);
    assert_eq!(as_u64(&ooms[0]["reserved_bytes"]), 2 << 20, "{}", ooms[0]);
    assert_eq!(as_u64(&ooms[0]["allocated_bytes"]), 512, "{}", ooms[0]);
    assert_eq!(r["fit"].as_array().map(Vec::len), Some(1), "{r}");
}
