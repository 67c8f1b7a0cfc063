//! Issue 39, items 3 and 4: the stacks PyTorch writes beside `frames`, on the samples of
//! `samples/gen/memgen/frames2026.py` against `samples/truth/frames2026.json`. A backward-pass
//! entry's `forward_frames` name its site (the forward code whose gradient it computes, context
//! `backward pass`) and make it a gradient, not an activation; an allocation in compiled-graph
//! code (`augment_with_fx_traces=True`) takes its site from the FX node's original trace, the
//! node as context; `slice` writes both back as PyTorch wrote them.

use crate::common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;

fn truth(name: &str) -> Value {
    common::truth("frames2026")[name].clone()
}

fn json(args: &[&str]) -> Value {
    json_ok(args)
}

/// `top --at end` rows as `site [context]` → (bytes, count).
fn live_end_by_site(path: &str) -> BTreeMap<String, (u64, u64)> {
    let v = json(&[
        "top", path, "--at", "end", "--limit", "50", "--format", "json",
    ]);
    let rows = v["devices"][0]["sites"].as_array().expect("sites");
    rows.iter()
        .map(|r| {
            let site = r["site"].as_str().unwrap();
            let key = match r["context"].as_str() {
                Some(c) => format!("{site} [{c}]"),
                None => site.to_string(),
            };
            (
                key,
                (r["bytes"].as_u64().unwrap(), r["count"].as_u64().unwrap()),
            )
        })
        .collect()
}

fn want_by_site(t: &Value) -> BTreeMap<String, (u64, u64)> {
    t["live_end_by_site"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                (v["bytes"].as_u64().unwrap(), v["count"].as_u64().unwrap()),
            )
        })
        .collect()
}

#[test]
fn backward_entries_are_named_by_their_forward_code() {
    let t = truth("forward_frames.pickle");
    assert_eq!(
        live_end_by_site("samples/forward_frames.pickle"),
        want_by_site(&t)
    );
}

#[test]
fn compiled_graph_allocations_are_named_by_the_model_code() {
    let t = truth("fx_frames.pickle");
    assert_eq!(
        live_end_by_site("samples/fx_frames.pickle"),
        want_by_site(&t)
    );
}

#[test]
fn backward_entries_are_gradients_not_activations() {
    let t = truth("forward_frames.pickle");
    let v = json(&[
        "categories",
        "samples/forward_frames.pickle",
        "--at",
        "end",
        "--format",
        "json",
    ]);
    let cats = v["devices"][0]["categories"].as_array().unwrap();
    let bytes = |name: &str| {
        cats.iter()
            .find(|c| c["category"] == name)
            .map_or(0, |c| c["bytes"].as_u64().unwrap())
    };
    // The weight gradients (made with forward_frames, kept: no zero_grad) and the weights.
    let backward: u64 = want_by_site(&t)
        .iter()
        .filter(|(k, _)| k.ends_with("[backward pass]"))
        .map(|(_, (b, _))| b)
        .sum();
    assert_eq!(bytes("gradients"), backward, "{v}");
    assert_eq!(bytes("activations"), 0, "{v}");
}

#[test]
fn slice_writes_forward_frames_and_fx_keys_back() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["forward_frames.pickle", "fx_frames.pickle"] {
        let src = format!("samples/{name}");
        let out = dir.path().join(name);
        let out_s = out.to_str().unwrap();
        let o = memlens_in_root(["slice", src.as_str(), "-o", out_s]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        // The slice reads back to the same sites, so the keys came through.
        assert_eq!(live_end_by_site(out_s), live_end_by_site(&src), "{name}");
        let bytes = std::fs::read(&out).unwrap();
        let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
        if name == "forward_frames.pickle" {
            assert!(has(b"forward_frames"), "{name}");
            assert!(has(
                b"  File \"/home/user/proj/model.py\", line 46, in forward"
            ));
            assert!(
                !has(b"<forward_frames>"),
                "the marker frame is memlens's own"
            );
        } else {
            for key in [
                "fx_node_op",
                "fx_node_name",
                "fx_node_target",
                "fx_original_trace",
            ] {
                assert!(has(key.as_bytes()), "{name}: {key}");
            }
        }
    }
}

#[test]
fn the_summary_counts_what_the_file_holds() {
    let t = truth("forward_frames.pickle");
    let v = json(&[
        "summary",
        "samples/forward_frames.pickle",
        "--format",
        "json",
    ]);
    let trace = &v["devices"][0]["trace"];
    // Entries with frames of their own: a backward entry's forward frames are not its frames.
    assert_eq!(
        trace["entries_with_frames"], t["entries_with_frames"],
        "{trace}"
    );
    assert!(t["entries_with_forward_frames"].as_u64().unwrap() > 0);
}
