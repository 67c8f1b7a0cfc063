//! The test-support module itself (tests/common): the golden helper fails on a missing or
//! different file and writes only when blessing, the CI rule fails instead of skipping, and
//! `canonical` sees a change of any field while ignoring how ids are numbered.

use crate::common;
use common::*;

#[test]
fn a_missing_golden_file_fails_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/out.txt");
    let err = compare_golden(&path, b"x\n", false).unwrap_err();
    assert!(
        err.contains("missing") && err.contains("MEMLENS_BLESS=1"),
        "{err}"
    );
    assert!(!path.exists());
    // Blessing writes it (with its directory); then it compares equal, and a change fails.
    compare_golden(&path, b"x\n", true).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"x\n");
    compare_golden(&path, b"x\n", false).unwrap();
    let err = compare_golden(&path, b"y\n", false).unwrap_err();
    assert!(err.contains("differs"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"x\n");
}

#[test]
fn outside_ci_a_missing_requirement_skips() {
    // Logged to a file of its own: the run's MEMLENS_SKIP_LOG counts only real skips.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skips.log");
    assert_eq!(
        unavailable_logged::<u8>(false, "thing", "absent", Some(&log)),
        None
    );
    assert_eq!(
        unavailable_logged::<u8>(false, "other\nthing", "gone", Some(&log)),
        None
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "rust: thing: absent\nrust: other thing: gone\n"
    );
}

#[test]
#[should_panic(expected = "CI expects ../shared/samples/real: absent")]
fn under_ci_a_missing_requirement_fails() {
    unavailable_under::<u8>(true, "../shared/samples/real", "absent");
}

#[test]
fn env_flags_read_0_false_and_empty_as_off() {
    // The rule on values, without touching this process's environment (tests share it).
    for (value, on) in [
        (Some("1"), true),
        (Some("true"), true),
        (Some("yes"), true),
        (Some("TRUE"), true),
        (Some("0"), false),
        (Some("false"), false),
        (Some("False"), false),
        (Some("no"), false),
        (Some(""), false),
        (Some(" 0 "), false),
        (None, false),
    ] {
        assert_eq!(flag_value(value), on, "{value:?}");
    }
    assert!(!env_flag("MEMLENS_TEST_FLAG_NEVER_SET"));
}

/// A one-segment snapshot with one allocation; `frame_keys_swapped` writes each frame's
/// `name` before its `filename`, so strings are interned in another order.
fn snapshot(size: u64, line: u64, frame_keys_swapped: bool) -> memlens::model::Snapshot {
    let frame = if frame_keys_swapped {
        format!(r#"{{"name": "f", "filename": "/p/train.py", "line": {line}}}"#)
    } else {
        format!(r#"{{"filename": "/p/train.py", "name": "f", "line": {line}}}"#)
    };
    let json = format!(
        r#"{{"segments": [{{"device": 0, "address": 4096, "total_size": 1024, "stream": 0,
        "segment_type": "small", "blocks": [{{"address": 4096, "size": 1024,
        "requested_size": {size}, "state": "active_allocated", "frames": [{frame}]}}]}}],
        "device_traces": [[{{"action": "alloc", "addr": 4096, "size": {size}, "stream": 0,
        "time_us": 7, "frames": [{frame}]}}]]}}"#
    );
    let bytes = memlens::input::json_to_pickle(json.as_bytes()).unwrap();
    memlens::model::build(&bytes, Default::default()).unwrap()
}

#[test]
fn canonical_ignores_id_numbering_and_sees_every_change() {
    let (a, b) = (snapshot(1000, 3, false), snapshot(1000, 3, true));
    // The ids differ...
    assert_ne!(
        format!("{:?}", a.frames.get(memlens::model::FrameId(0))),
        format!("{:?}", b.frames.get(memlens::model::FrameId(0)))
    );
    // ...what they name does not.
    assert_eq!(canonical(&a), canonical(&b));
    // A requested size (block and event) and a line number (frames) are seen.
    assert_ne!(canonical(&snapshot(999, 3, false)), canonical(&a));
    assert_ne!(canonical(&snapshot(1000, 4, false)), canonical(&a));
    let text = canonical(&a).join("\n");
    for needle in [
        "segment 0 ",
        "block 0 ",
        "event 0 ",
        "device ",
        "line: 3",
        "\"/p/train.py\"",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
}
