//! What newer PyTorch writes (issue 19, item 7), on the samples of `samples/gen/memgen/newer.py`
//! against their facts in `samples/truth/newer.json`: pinned host memory (`host_segments`,
//! `host_traces`) reported as a pool of its own and never in a device's figures; segments-only
//! snapshots (`memory_snapshot(include_traces=False)`) and `MemPool.snapshot()`, which holds one
//! pool alone; compile-context annotations; and a snapshot dumped as JSON.

use crate::common;
use common::*;
use serde_json::Value;

fn truth(name: &str) -> Value {
    common::truth("newer")[name].clone()
}

fn json(args: &[&str]) -> Value {
    json_ok(args)
}

fn text(args: &[&str]) -> String {
    let o = memlens_in_root(args);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{args:?}");
    String::from_utf8(o.stdout).unwrap()
}

const HOST_FIELDS: &[&str] = &[
    "segments",
    "blocks",
    "reserved_bytes",
    "allocated_bytes",
    "requested_bytes",
    "pending_free_bytes",
    "inactive_bytes",
    "largest_inactive_block_bytes",
    "trace_entries",
    "peak_live_bytes",
];

#[test]
fn pinned_host_memory_is_a_pool_of_its_own() {
    for name in ["host_pinned.pickle", "host_only.json"] {
        let want = &truth(name)["host"];
        let s = json(&["summary", "--format", "json", &format!("samples/{name}")]);
        let host = &s["host"];
        assert!(host.is_object(), "{name}: no host summary: {s}");
        for k in HOST_FIELDS {
            assert_eq!(host[k], want[k], "{name}: host {k}");
        }
        assert_eq!(host["trace"]["by_action"], want["by_action"], "{name}");
        // The devices are the truth's, and none of them counts the host's bytes.
        let devices: Vec<u64> = s["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["device"].as_u64().unwrap())
            .collect();
        let want_devices: Vec<u64> = want_devices(name);
        assert_eq!(devices, want_devices, "{name}");
        let text = text(&["summary", &format!("samples/{name}")]);
        assert!(
            text.contains("Pinned host memory (not on any device)"),
            "{text}"
        );
        assert!(text.contains("Peak live over the trace:"), "{text}");
    }
}

fn want_devices(name: &str) -> Vec<u64> {
    truth(name)["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap())
        .collect()
}

#[test]
fn device_figures_leave_pinned_memory_out() {
    // The oracle reads `segments` and `device_traces` only: memlens's device totals equal its
    // on the file with host memory, and the replay's peak equals the replay oracle's.
    if !require_python() {
        return;
    }
    let f = sample("host_pinned.pickle");
    let ours = summary_json(&f);
    let theirs = oracle("summary", &f);
    for k in [
        "reserved_bytes",
        "allocated_bytes",
        "requested_bytes",
        "blocks",
        "segments",
    ] {
        assert_eq!(ours["devices"][0][k], theirs["devices"][0][k], "{k}");
    }
    let top = json(&["top", "--format", "json", "samples/host_pinned.pickle"]);
    let snap = load(&f);
    let replays = memlens::replay::replay(&snap);
    assert_eq!(replays.len(), 1);
    assert_eq!(
        top["devices"][0]["live_requested_bytes"].as_u64(),
        Some(replays[0].peak_bytes)
    );
    let host = snap.host.as_ref().expect("host memory");
    assert_eq!(host.segments.len(), 2);
    assert!(host.segments_recorded && host.trace_recorded);
    // Its blocks are in the snapshot's blocks, and no device segment owns them.
    let device_blocks: usize = snap.segments.iter().map(|s| s.blocks.len()).sum();
    let host_blocks: usize = host.segments.iter().map(|s| s.blocks.len()).sum();
    assert_eq!(device_blocks + host_blocks, snap.blocks.len());
}

#[test]
fn device_n_leaves_pinned_memory_out() {
    let s = json(&[
        "summary",
        "--format",
        "json",
        "--device",
        "0",
        "samples/host_pinned.pickle",
    ]);
    assert!(s["host"].is_null(), "{s}");
    let s = json(&["summary", "--format", "json", "samples/train_small.pickle"]);
    assert!(s["host"].is_null(), "a file without host memory: {s}");
}

#[test]
fn host_segments_may_say_device_minus_one_but_device_segments_may_not() {
    // host_only.json writes `device: -1` on host segments (the CPU's index) and nests
    // host_traces one level; both read. The same -1 on a device segment is refused.
    let snap = load(&sample("host_only.json"));
    let host = snap.host.as_ref().unwrap();
    assert_eq!(host.segments.len(), 4);
    assert_eq!(host.events.len(), 22);
    assert!(snap.devices.is_empty());
    let bad = br#"{"segments": [{"device": -1, "address": 4096, "total_size": 512, "blocks": [{"address": 4096, "size": 512, "requested_size": 512, "state": "active_allocated"}]}], "device_traces": []}"#;
    let dir = std::env::temp_dir().join(format!("memlens-newer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bad.json");
    std::fs::write(&p, bad).unwrap();
    let o = memlens(["summary".as_ref(), p.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("key segments[0]: key 'device': expected a device index, found -1"),
        "{e}"
    );
    // host_traces of the wrong type is one line naming the key.
    std::fs::write(&p, br#"{"segments": [], "host_traces": 7}"#).unwrap();
    let o = memlens(["summary".as_ref(), p.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("host_traces"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

fn pools(s: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for p in s["devices"][0]["pools"].as_array().unwrap() {
        let key = format!("{}_{}", p["pool_id"][0], p["pool_id"][1]);
        let e = out.entry(key).or_insert_with(
            || serde_json::json!({"segments": 0, "reserved_bytes": 0, "allocated_bytes": 0}),
        );
        for k in ["segments", "reserved_bytes", "allocated_bytes"] {
            e[k] = (e[k].as_u64().unwrap() + p[k].as_u64().unwrap()).into();
        }
    }
    Value::Object(out)
}

#[test]
fn segments_only_and_mempool_snapshots() {
    for name in ["segments_only.pickle", "mempool_only.pickle"] {
        let s = json(&["summary", "--format", "json", &format!("samples/{name}")]);
        assert_eq!(s["layout"], "segment_list", "{name}");
        assert_eq!(pools(&s), truth(name)["pools"], "{name}");
        assert_eq!(s["devices"][0]["trace_entries"], 0, "{name}");
        let only_pool = s["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["code"] == "private_pools_only");
        // MemPool.snapshot() holds one pool alone and says so; the full list does not.
        assert_eq!(
            only_pool.is_some(),
            name == "mempool_only.pickle",
            "{name}: {s}"
        );
        if let Some(w) = only_pool {
            assert!(w["message"]
                .as_str()
                .unwrap()
                .contains("private pool (0, 1)"));
        }
        // What needs no trace still answers: top of the final blocks, frag of the segments.
        let top = json(&["top", "--format", "json", &format!("samples/{name}")]);
        assert_eq!(
            top["final_state_devices"][0]["basis"], "final_state",
            "{name}"
        );
        let frag = text(&["frag", &format!("samples/{name}")]);
        assert!(frag.contains("(0, 1)"), "{frag}");
    }
}

#[test]
fn compile_contexts_are_counted_per_region() {
    let s = json(&[
        "summary",
        "--format",
        "json",
        "samples/compile_context.pickle",
    ]);
    let want = &truth("compile_context.pickle")["compile_contexts"];
    let got = s["devices"][0]["trace"]["compile_contexts"]
        .as_array()
        .unwrap();
    assert_eq!(got.len(), 2);
    // Most allocated bytes first.
    assert_eq!(got[0]["context"], "Torch-Compiled Region: 0/0");
    for c in got {
        let w = &want[c["context"].as_str().unwrap()];
        for k in ["entries", "allocs", "alloc_bytes"] {
            assert_eq!(c[k], w[k], "{} {k}", c["context"]);
        }
    }
    // "N/A" (outside any region) is no region.
    let plain = json(&["summary", "--format", "json", "samples/train_small.pickle"]);
    assert_eq!(
        plain["devices"][0]["trace"]["compile_contexts"],
        serde_json::json!([])
    );
    let t = text(&["summary", "samples/compile_context.pickle"]);
    assert!(
        t.contains("Compiled regions: Torch-Compiled Region: 0/0: 9 allocations (36.00 MiB)"),
        "{t}"
    );
}

#[test]
fn a_json_dump_reads_like_the_pickle_it_would_have_been() {
    // host_only.json is `json.dump(torch.cuda.memory._snapshot(), f)`; the same object
    // pickled gives the same snapshot (tests/it/roundtrip.rs does this for train_small).
    let from_json = load(&sample("host_only.json"));
    assert_eq!(from_json.layout, memlens::model::Layout::Modern);
    let s = json(&["summary", "--format", "json", "samples/host_only.json"]);
    assert_eq!(
        s["host"]["reserved_bytes"],
        truth("host_only.json")["host"]["reserved_bytes"]
    );
}

#[test]
fn host_sizes_are_bounded_like_device_sizes() {
    // Pinned host memory is added up with the device's: no total of the file may wrap.
    let dir = std::env::temp_dir().join(format!("memlens-newer-bound-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("huge.json");
    let cases = [
        (
            r#"{"segments": [], "host_segments": [{"address": 0, "total_size": 9223372036854775808, "blocks": []}, {"address": 0, "total_size": 9223372036854775808, "blocks": []}]}"#,
            "key host_segments[0]: key 'total_size'",
        ),
        (
            r#"{"segments": [], "host_traces": [{"action": "alloc", "addr": 0, "size": 9223372036854775808}, {"action": "alloc", "addr": 0, "size": 9223372036854775808}]}"#,
            "key host_traces[0]: key 'size'",
        ),
    ];
    for (doc, want) in cases {
        std::fs::write(&p, doc).unwrap();
        let o = memlens(["summary".as_ref(), p.as_os_str()]);
        assert_eq!(o.status.code(), Some(2), "{doc}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.contains(want) && e.contains("past 2^60"), "{e}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
