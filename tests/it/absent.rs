//! Issue 19, item 3: `categories`, `timeline`, `leaks` and `diff` on snapshots without a trace,
//! without any allocation in the trace, or without stack frames say what is absent and what
//! they still say — in text, and in JSON as `absent` entries with a stable code — instead of
//! printing nothing or comparing against zeros.

use crate::common;
use common::*;
use serde_json::Value;
use std::path::Path;

/// `memlens ARGS --format json FILE`: (exit code, JSON, stderr).
fn json(args: &[&str], files: &[&Path]) -> (i32, Value, String) {
    let mut a: Vec<std::ffi::OsString> = args.iter().map(|x| x.into()).collect();
    a.push("--format".into());
    a.push("json".into());
    a.extend(files.iter().map(|f| f.as_os_str().to_owned()));
    let o = memlens(a);
    (
        o.status.code().unwrap(),
        serde_json::from_slice(&o.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `memlens ARGS FILE...` in the repository root: (exit code, stdout, stderr).
fn text(args: &[&str]) -> (i32, String, String) {
    let o = memlens_in_root(args);
    (
        o.status.code().unwrap(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The codes of a report's `absent` list, with their devices.
fn codes(v: &Value) -> Vec<(String, Option<u64>)> {
    v["absent"]
        .as_array()
        .unwrap_or_else(|| panic!("no absent list: {v}"))
        .iter()
        .map(|a| {
            (
                a["code"].as_str().unwrap().to_string(),
                a["device"].as_u64(),
            )
        })
        .collect()
}

fn code(c: &str, d: Option<u64>) -> (String, Option<u64>) {
    (c.to_string(), d)
}

/// GIVEN bare_list (a segment list, no trace) WHEN categories runs THEN its final blocks are
/// categorised by their frames: the weights `.to()` allocated are parameters, the rest says
/// how it was told — and that the peak was not recorded.
#[test]
fn categories_need_no_trace() {
    let (code_, v, _) = json(&["categories"], &[&sample("bare_list.pickle")]);
    assert_eq!(code_, 0);
    let d = &v["devices"][0];
    assert_eq!(d["basis"], "final_state");
    assert_eq!(d["at"]["event_index"], -1);
    let summary = summary_json(&sample("bare_list.pickle"));
    let requested = summary["devices"][0]["requested_bytes"].as_u64().unwrap();
    assert_eq!(d["live_requested_bytes"].as_u64(), Some(requested));
    let rows = d["categories"].as_array().unwrap();
    let total: u64 = rows.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
    assert_eq!(total, requested);
    // 4 conv layers (3→64→128→256→512, 3×3) and a 512→1000 linear, weights and biases, fp32.
    let weights = (3 * 64 * 9 + 64 + 64 * 128 * 9 + 128 + 128 * 256 * 9 + 256 + 256 * 512 * 9)
        + 512
        + 1000 * 512
        + 1000;
    let params = rows.iter().find(|r| r["category"] == "parameters").unwrap();
    assert_eq!(params["bytes"].as_u64(), Some(weights * 4));
    assert_eq!(params["confidence"], "high");
    // nothing is "allocated before the first step": there are no steps
    assert!(!v.to_string().contains("before the first step"));
    assert_eq!(codes(&v), [code("no_trace", Some(0))]);
    assert!(v["absent"][0]["message"]
        .as_str()
        .unwrap()
        .contains("peak was not recorded"));
    // Text: the final state, and the note.
    let (_, t, _) = text(&["categories", "samples/bare_list.pickle"]);
    assert!(t.contains("final state (no allocation recorded)"), "{t}");
    assert!(t.contains("note: device 0 has no trace"), "{t}");
}

/// GIVEN no frames at all (state_only) THEN everything is unknown and it says only the total
/// is known; GIVEN a lone `snapshot` marker (legacy_2_0) THEN the trace is no trace; GIVEN a
/// moment a traceless device cannot place THEN it says so and categorises nothing.
#[test]
fn categories_say_what_they_cannot_tell_apart() {
    let (_, v, _) = json(&["categories"], &[&sample("state_only.pickle")]);
    let rows = v["devices"][0]["categories"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["category"], "unknown");
    assert_eq!(
        codes(&v),
        [code("no_trace", Some(0)), code("no_frames", Some(0))]
    );
    let (_, v, _) = json(&["categories"], &[&sample("legacy_2_0.pickle")]);
    assert_eq!(v["devices"][0]["basis"], "final_state");
    assert_eq!(codes(&v), [code("no_activity", Some(0))]);
    let (code_, v, _) = json(&["categories", "--at", "5"], &[&sample("bare_list.pickle")]);
    assert_eq!(code_, 0);
    assert_eq!(v["devices"], serde_json::json!([]));
    assert_eq!(codes(&v), [code("no_moment", Some(0))]);
}

/// GIVEN no trace WHEN timeline runs THEN JSON has the final state and a `no_trace` note, CSV
/// stays CSV and the note goes to stderr, SVG draws the note.
#[test]
fn a_timeline_without_a_trace_says_so() {
    let f = sample("bare_list.pickle");
    let (code_, v, _) = json(&["timeline"], &[&f]);
    assert_eq!(code_, 0);
    assert_eq!(codes(&v), [code("no_trace", Some(0))]);
    let s = summary_json(&f)["devices"][0].clone();
    let fs = &v["final_states"][0];
    assert_eq!(fs["device"], 0);
    assert_eq!(fs["live_requested_bytes"], s["requested_bytes"]);
    assert_eq!(fs["allocated_bytes"], s["allocated_bytes"]);
    assert_eq!(fs["reserved_bytes"], s["reserved_bytes"]);
    let (_, csv, err) = text(&["timeline", "samples/bare_list.pickle"]);
    assert_eq!(csv.lines().count(), 1, "{csv}");
    assert!(err.contains("note: device 0 has no trace"), "{err}");
    assert!(err.contains("26.49 MiB live"), "{err}");
    let (_, svg, _) = text(&["timeline", "--format", "svg", "samples/bare_list.pickle"]);
    assert!(svg.contains("device 0 has no trace"), "{svg}");
    // A trace without an allocation is drawn flat, and says why.
    let (_, v, _) = json(&["timeline"], &[&sample("legacy_2_0.pickle")]);
    assert_eq!(codes(&v), [code("no_activity", Some(0))]);
}

/// GIVEN snapshots leaks cannot judge WHEN leaks runs THEN it never says "no memory grows":
/// it names what is missing (with a code) and what the final state holds.
#[test]
fn leaks_that_cannot_be_judged_are_not_called_absent() {
    for (name, want) in [
        ("bare_list", vec![code("no_trace", Some(0))]),
        ("state_only", vec![code("no_trace", Some(0))]),
        ("legacy_2_0", vec![code("no_activity", Some(0))]),
        ("adam_loop", vec![code("too_few_steps", Some(0))]),
        (
            "expandable_multi",
            vec![code("no_steps", Some(0)), code("no_steps", Some(1))],
        ),
    ] {
        let file = format!("samples/{name}.pickle");
        let (code_, v, _) = json(&["leaks"], &[&root().join(&file)]);
        assert_eq!(code_, 0, "{name}");
        assert_eq!(codes(&v), want, "{name}");
        assert_eq!(v["judged_devices"], serde_json::json!([]), "{name}");
        let (_, t, _) = text(&["leaks", &file]);
        assert!(!t.contains("No memory grows"), "{name}: {t}");
        assert!(t.contains("\ncannot judge: "), "{name}: {t}");
        assert_eq!(v["judgement"]["state"], "cannot_judge", "{name}");
    }
    let (_, v, _) = json(&["leaks"], &[&sample("bare_list.pickle")]);
    let m = v["absent"][0]["message"].as_str().unwrap();
    assert!(m.contains("26.49 MiB in 13 live blocks"), "{m}");
    // A device that was judged says so.
    let (_, v, _) = json(&["leaks"], &[&sample("kv_cache.pickle")]);
    assert_eq!(v["judged_devices"], serde_json::json!([0]));
    assert_eq!(codes(&v), []);
    assert_eq!(v["judgement"]["state"], "none");
}

/// GIVEN a side without stack frames WHEN diff runs THEN sites and categories are not compared
/// (no "parameters X → 0 B"), only the totals; GIVEN one side categorised from its trace and
/// the other from final blocks THEN categories are not compared either.
#[test]
fn diff_does_not_compare_what_one_side_lacks() {
    let (base, frameless) = (sample("train_small.pickle"), sample("state_only.pickle"));
    let (code_, v, _) = json(&["diff"], &[&base, &frameless]);
    assert_eq!(code_, 0);
    assert_eq!(v["sites_compared"], false);
    assert!(v["categories"].is_null());
    let a: Vec<(String, String)> = v["absent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["code"].as_str().unwrap().into(),
                a["side"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert!(
        a.contains(&("sites_not_comparable".into(), "candidate".into())),
        "{a:?}"
    );
    assert!(
        a.contains(&("no_trace".into(), "candidate".into())),
        "{a:?}"
    );
    let (_, t, _) = text(&[
        "diff",
        "samples/train_small.pickle",
        "samples/state_only.pickle",
    ]);
    assert!(t.contains("Sites: not compared"), "{t}");
    assert!(!t.contains("removed"), "{t}");
    assert!(!t.contains("parameters"), "{t}");
    // A traceless side with frames: sites compared, categories not (different bases).
    let (_, v, _) = json(&["diff"], &[&base, &sample("bare_list.pickle")]);
    assert_eq!(v["sites_compared"], true);
    assert!(v["categories"].is_null());
    assert!(codes(&v)
        .iter()
        .any(|(c, _)| c == "categories_not_comparable"));
    // Two traceless sides: both categorised from their final blocks, compared.
    let (_, v, _) = json(
        &["diff"],
        &[&sample("bare_list.pickle"), &sample("bare_list.pickle")],
    );
    assert!(v["categories"].is_array(), "{v}");
    // Two traced sides: nothing absent.
    let (_, v, _) = json(
        &["diff"],
        &[&sample("diff_base.pickle"), &sample("diff_cand.pickle")],
    );
    assert_eq!(codes(&v), []);
    assert_eq!(v["sites_compared"], true);
}

/// Golden text of the commands on the samples without a trace.
#[test]
fn golden_text_without_a_trace() {
    for name in ["bare_list", "state_only", "legacy_2_0"] {
        let file = format!("samples/{name}.pickle");
        for cmd in ["categories", "leaks"] {
            let (_, t, _) = text(&[cmd, &file]);
            golden(&format!("absent/{name}.{cmd}.txt"), t.as_bytes());
        }
        let (_, _, err) = text(&["timeline", &file]);
        golden(&format!("absent/{name}.timeline.stderr"), err.as_bytes());
    }
    let (_, t, _) = text(&[
        "diff",
        "samples/train_small.pickle",
        "samples/state_only.pickle",
    ]);
    golden("absent/diff_frameless.txt", t.as_bytes());
}

/// The same on real snapshots: a segment dump without frames or trace, an RLHF state dump with
/// frames and no trace, and a one-entry state-mode trace.
#[test]
fn golden_text_without_a_trace_on_real_files() {
    let names = [
        "Muduard__LayoutEditing__33ade60__dump_snapshot.pickle",
        "volcengine__verl__mem.pickle",
        "LfieLike__SketchKV2__my_snapshot.pickle",
    ];
    for name in names {
        let Some(f) = require_real(name) else {
            return;
        };
        let dir = f.parent().unwrap();
        for cmd in ["categories", "leaks"] {
            let o = std::process::Command::new(env!("CARGO_BIN_EXE_memlens"))
                .current_dir(dir)
                .args([cmd, name])
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(0), "{name} {cmd}");
            let short = name.split("__").next().unwrap();
            golden(&format!("absent/real_{short}.{cmd}.txt"), &o.stdout);
        }
    }
    // The issue's case: a diff against a side without stacks compared "parameters 9.90 GiB
    // → 0 B"; now the sites and categories are not compared, and it says why.
    let base = "Muduard__LayoutEditing__413b2eb__dump_snapshot.pickle";
    let Some(f) = require_real(base) else {
        return;
    };
    let cand = "Muduard__LayoutEditing__33ade60__dump_snapshot.pickle";
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_memlens"))
        .current_dir(f.parent().unwrap())
        .args(["diff", base, cand])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("Sites: not compared") && !t.contains("parameters"),
        "{t}"
    );
    golden("absent/real_Muduard_diff.txt", &o.stdout);
}
