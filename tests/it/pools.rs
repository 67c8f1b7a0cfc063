//! Issue 39, item 7: private pools. `frag --by pool` on `samples/private_pools.pickle`
//! (`samples/gen/memgen/pools.py`) against `samples/truth/pools.json`: per (pool, stream)
//! reserved and active bytes at the end and their peaks, the unknown pool of a segment freed
//! before the dump without a `pool_id`, and the ghost blocks.

use crate::common;
use common::*;
use serde_json::Value;

fn truth() -> Value {
    common::truth("pools")["private_pools.pickle"].clone()
}

fn report() -> Value {
    json_ok(&[
        "frag",
        "--by",
        "pool",
        "--format",
        "json",
        "samples/private_pools.pickle",
    ])["by_pool"][0]
        .clone()
}

fn key(p: &Value) -> String {
    let pool = match p["pool_id"].as_array() {
        None => "unknown".to_string(),
        Some(a) => format!("{}_{}", a[0], a[1]),
    };
    format!("{pool}/{}", p["stream"])
}

#[test]
fn per_pool_and_stream_match_the_truth() {
    let t = truth();
    let r = report();
    let rows = r["pools"].as_array().unwrap();
    assert_eq!(rows.len(), t["pools"].as_object().unwrap().len());
    for p in rows {
        let k = key(p);
        let tt = &t["pools"][&k];
        assert_eq!(p["reserved_bytes"], tt["reserved"], "{k} reserved");
        assert_eq!(p["active_bytes"], tt["active"], "{k} active");
        assert_eq!(
            p["peak_reserved_bytes"], tt["peak_reserved"],
            "{k} peak reserved"
        );
        assert_eq!(p["peak_active_bytes"], tt["peak_active"], "{k} peak active");
    }
    let unknown = rows.iter().find(|p| p["pool_id"].is_null()).unwrap();
    assert_eq!(
        unknown["peak_reserved_bytes"],
        t["freed_segment_bytes_without_pool_id"]
    );
    assert_eq!(unknown["kind"], "unknown");
    let graph = rows.iter().filter(|p| p["kind"] == "graph").count();
    assert_eq!(graph, 2);
}

#[test]
fn ghost_blocks_match_the_truth() {
    let t = truth();
    let r = report();
    assert_eq!(r["ghost_blocks"], t["ghost_blocks"]);
    assert_eq!(r["ghost_bytes"], t["ghost_bytes"]);
    let listed: Vec<(u64, u64)> = r["pools"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["ghosts"].as_array().cloned().unwrap_or_default())
        .map(|g| (g["address"].as_u64().unwrap(), g["size"].as_u64().unwrap()))
        .collect();
    let want: Vec<(u64, u64)> = t["ghosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["address"].as_u64().unwrap(),
                g["requested_size"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(listed, want);
}

#[test]
fn plain_frag_has_no_pool_view() {
    let o = memlens_in_root(["frag", "--format", "json", "samples/private_pools.pickle"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v.get("by_pool").is_none());
}
