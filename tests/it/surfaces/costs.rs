//! Issue 36: costs that grew with the wrong thing (see tests/it/surfaces.rs). What these tests
//! hold is what the cheaper code must still say: a page that ships only the ends of a very
//! deep stack and says how many frames it left out, and the streams of a trace with 65,535
//! of them named with their exact bytes. How long each command takes is measured by
//! `scripts/bench --costs`, not here (no timed tests).

use crate::common::{deep_stack_snapshot, memlens, DeepSite, Pickle};
use serde_json::Value;

/// Frames the page keeps at each end of a stack (`PAGE_FRAMES_EACH_END` in
/// src/compose/page/frames.rs; docs/report.md).
const EACH_END: usize = 128;

/// The data element of a page written by `memlens report`.
fn embedded(html: &str) -> Value {
    let open = r#"<script type="application/json" id="memlens-data">"#;
    let start = html.find(open).expect("data element") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

/// The page of `bytes` (a snapshot), parsed from its data element.
fn page_of(bytes: &[u8]) -> (Value, u64) {
    let dir = tempfile::tempdir().unwrap();
    let (file, page) = (dir.path().join("s.pickle"), dir.path().join("r.html"));
    std::fs::write(&file, bytes).unwrap();
    let o = memlens([
        "report",
        file.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    (embedded(&html), html.len() as u64)
}

#[test]
fn a_deep_stack_ships_its_ends_and_says_how_many_frames_it_left_out() {
    // Two sites whose stacks share 2,999 library frames (innermost first: op_0 .. op_2998),
    // then the user frame train.py:{10 + k}:site{k}.
    let frames = 3000;
    let sites = [
        DeepSite {
            count: 40,
            size: 4096,
        },
        DeepSite {
            count: 3,
            size: 1000,
        },
    ];
    let (data, html_bytes) = page_of(&deep_stack_snapshot(frames, &sites));
    let table = data["frames"].as_array().unwrap();
    let stacks = data["stacks"].as_array().unwrap();
    let elided = (frames - 2 * EACH_END) as u64; // 2,744
    let mut deep = 0;
    for s in stacks {
        let s: Vec<usize> = s
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as usize)
            .collect();
        assert!(s.len() <= 2 * EACH_END + 1, "a stack of {} frames", s.len());
        if s.len() < 2 * EACH_END {
            continue;
        }
        deep += 1;
        let name = |i: usize| table[s[i]]["name"].as_str().unwrap().to_string();
        // Innermost first: op_0 .. op_127, the mark, op_2872 .. op_2998, the user frame.
        assert_eq!(s.len(), 2 * EACH_END + 1);
        assert_eq!(name(0), "op_0");
        assert_eq!(name(EACH_END - 1), format!("op_{}", EACH_END - 1));
        let mark = &table[s[EACH_END]];
        assert_eq!(mark["elided"], elided);
        assert_eq!(mark["label"], "… 2,744 frames not shown");
        assert_eq!(mark["kind"], "user");
        assert_eq!(name(EACH_END + 1), format!("op_{}", frames - EACH_END));
        assert_eq!(name(2 * EACH_END - 1), "op_2998");
        let user = &table[s[2 * EACH_END]];
        assert!(user["name"].as_str().unwrap().starts_with("site"));
    }
    assert_eq!(deep, 2, "both sites' stacks are in the page");
    // Frames: the 128 innermost library frames, the 127 outermost ones, two user frames and
    // one mark (both stacks elide the same count), each written once.
    assert_eq!(table.len(), EACH_END + (EACH_END - 1) + 2 + 1);
    assert_eq!(
        table.iter().filter(|f| f.get("elided").is_some()).count(),
        1
    );
    // The flamegraph's frames are the table's: no tree node names a frame past it.
    let text = data.to_string();
    assert!(!text.contains("op_1000"), "a middle frame reached the page");
    // The page stays the size of what it shows (the same file with 300 frames per stack
    // gives a page within a few KB of this one).
    let (_, small) = page_of(&deep_stack_snapshot(2 * EACH_END, &sites));
    assert!(
        html_bytes < small + 16 * 1024,
        "page {html_bytes} bytes against {small} for a stack the page shows whole"
    );
}

#[test]
fn a_stack_the_page_shows_whole_has_no_mark() {
    let sites = [DeepSite {
        count: 5,
        size: 512,
    }];
    let (data, _) = page_of(&deep_stack_snapshot(2 * EACH_END, &sites));
    let table = data["frames"].as_array().unwrap();
    assert!(table.iter().all(|f| f.get("elided").is_none()));
    let longest = data["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_array().unwrap().len())
        .max();
    assert_eq!(longest, Some(2 * EACH_END));
}

/// Streams of [`many_streams`]: stream k's raw handle.
fn handle(k: u64) -> u64 {
    0x55D0_0000_0000 + k * 0x4A0
}

/// Requested bytes of stream k's one allocation.
fn request(k: u64) -> u64 {
    512 * (1 + k % 8)
}

const SEGMENT: u64 = 2 << 20;
const BASE: u64 = 0x7F00_0000_0000;

/// A trace over `streams` distinct streams: per stream k, a `segment_alloc` of 2 MiB at
/// `BASE + k * 2 MiB`, then one allocation of [`request`]`(k)` bytes at its start; the
/// allocations of streams `k % 3 == 0` are freed again (at the end). `segments` holds the
/// final state: each stream's segment, its block live or not, and the inactive rest.
fn many_streams(streams: u64) -> Vec<u8> {
    let mut p = Pickle::default();
    p.open(b'}');
    p.shared("segments");
    p.open(b']');
    for k in 0..streams {
        let live = if k % 3 == 0 { 0 } else { request(k) };
        p.open(b'}');
        p.item("device", 0);
        p.item("address", BASE + k * SEGMENT);
        p.item("total_size", SEGMENT);
        p.item("allocated_size", live);
        p.item("active_size", live);
        p.item("requested_size", live);
        p.item("stream", handle(k));
        p.shared("segment_type");
        p.shared("large");
        p.shared("is_expandable");
        p.op(0x89);
        p.shared("blocks");
        p.open(b']');
        let block = |p: &mut Pickle, at: u64, size: u64, state: &str| {
            p.open(b'}');
            p.item("address", at);
            p.item("size", size);
            p.item("requested_size", if state == "inactive" { 0 } else { size });
            p.shared("state");
            p.shared(state);
            p.op(b'u');
        };
        if live > 0 {
            block(&mut p, BASE + k * SEGMENT, live, "active_allocated");
        }
        block(
            &mut p,
            BASE + k * SEGMENT + live,
            SEGMENT - live,
            "inactive",
        );
        p.op(b'e'); // blocks
        p.op(b'u'); // the segment
    }
    p.op(b'e');
    p.shared("device_traces");
    p.open(b']');
    p.open(b']');
    let mut t = 0;
    let mut entry = |p: &mut Pickle, action: &str, addr: u64, size: u64, stream: u64| {
        t += 1;
        p.open(b'}');
        p.shared("action");
        p.shared(action);
        p.item("addr", addr);
        p.item("size", size);
        p.item("stream", stream);
        p.item("time_us", t);
        p.op(b'u');
    };
    for k in 0..streams {
        entry(
            &mut p,
            "segment_alloc",
            BASE + k * SEGMENT,
            SEGMENT,
            handle(k),
        );
        entry(&mut p, "alloc", BASE + k * SEGMENT, request(k), handle(k));
    }
    for k in (0..streams).step_by(3) {
        entry(
            &mut p,
            "free_requested",
            BASE + k * SEGMENT,
            request(k),
            handle(k),
        );
        entry(
            &mut p,
            "free_completed",
            BASE + k * SEGMENT,
            request(k),
            handle(k),
        );
    }
    p.op(b'e');
    p.op(b'e');
    p.op(b'u');
    p.finish()
}

#[test]
fn a_trace_over_65535_streams_names_each_with_its_bytes() {
    let streams = 65_535u64;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("streams.pickle");
    std::fs::write(&file, many_streams(streams)).unwrap();
    let f = file.to_str().unwrap();
    let o = memlens(["frag", "--at", "end", "--format", "json", f]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let text = r.to_string();
    // Every stream's handle is named, with its segment's bytes and what is live in it.
    let live_of = |k: u64| {
        if k % 3 == 0 {
            0
        } else {
            request(k).div_ceil(512) * 512
        }
    };
    let total_live: u64 = (0..streams).map(live_of).sum();
    // sum(512 * (1 + k % 8) for k in range(65535) if k % 3), computed apart.
    assert_eq!(total_live, 100_661_760);
    let mut per_stream: std::collections::HashMap<u64, (u64, u64)> = Default::default();
    for p in r["devices"][0]["pools"].as_array().unwrap() {
        let e = per_stream.entry(p["stream"].as_u64().unwrap()).or_default();
        e.0 += p["reserved_bytes"].as_u64().unwrap();
        e.1 += p["allocated_bytes"].as_u64().unwrap();
    }
    assert_eq!(
        per_stream.len(),
        streams as usize,
        "{}",
        &text[..text.len().min(2000)]
    );
    assert!((0..streams).all(|k| per_stream.contains_key(&handle(k))));
    assert_eq!(
        r["devices"][0]["total"]["reserved_bytes"],
        streams * SEGMENT
    );
    assert_eq!(r["devices"][0]["total"]["allocated_bytes"], total_live);
    for k in [0, 1, 2, 7, 8, 1000, 65_533, 65_534] {
        let (reserved, allocated) = per_stream[&handle(k)];
        assert_eq!(reserved, SEGMENT, "stream {k}");
        assert_eq!(allocated, live_of(k), "stream {k}");
    }
    let sum: u64 = per_stream.values().map(|v| v.1).sum();
    assert_eq!(sum, total_live);
}
