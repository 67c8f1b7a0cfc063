//! Replay and `top` against an independent replay (tests/oracle/replay_oracle.py) on every
//! real snapshot, sample and GPU capture (samples/captured), and against the known answers of the scenario samples.

use crate::common;
use common::*;
use std::path::Path;

fn top_json(file: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["top", "--format", "json"];
    if !extra.contains(&"-n") {
        args.extend_from_slice(&["-n", "100000"]);
    }
    args.extend_from_slice(extra);
    let mut cmd: Vec<std::ffi::OsString> = args.iter().map(|a| a.into()).collect();
    cmd.push(file.into());
    let o = memlens(cmd);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn compare_with_oracle(file: &Path) {
    let snap = load(file);
    let replays = memlens::replay::replay(&snap);
    let oracle = replay_oracle_peak(file);
    let odevs = oracle["devices"].as_array().unwrap();
    assert_eq!(replays.len(), odevs.len(), "{}", file.display());
    // The oracle's site is the innermost Python frame outside torch, libraries included, and
    // `<no frames>` for C++-only stacks: memlens's `--keep libraries --frames python`.
    let top = top_json(file, &["--keep", "libraries", "--frames", "python"]);
    for ((r, o), t) in replays
        .iter()
        .zip(odevs)
        .zip(top["devices"].as_array().unwrap())
    {
        let f = file.display();
        assert_eq!(r.device as u64, o["device"].as_u64().unwrap(), "{f}");
        assert_eq!(
            r.initial_bytes,
            o["initial_bytes"].as_u64().unwrap(),
            "{f} initial"
        );
        assert_eq!(
            r.peak_bytes,
            o["peak_bytes"].as_u64().unwrap(),
            "{f} peak bytes"
        );
        assert_eq!(
            r.peak,
            o["peak_event_index"].as_i64().unwrap(),
            "{f} peak index"
        );
        assert_eq!(
            r.live.last().copied().unwrap_or(r.initial_bytes),
            o["end_bytes"].as_u64().unwrap(),
            "{f} end"
        );
        // top --at peak: same moment, same live bytes, same sites with the same bytes and counts.
        assert_eq!(t["at"]["event_index"], o["peak_event_index"], "{f}");
        assert_eq!(t["live_requested_bytes"], o["peak_bytes"], "{f}");
        // Memory alive before the trace without frames is labelled by its likely kind
        // (`<before trace, no stack> likely parameters`): the oracle counts it apart, and
        // among its `<no frames>`.
        let rows = t["sites"].as_array().unwrap();
        let older = |r: &&serde_json::Value| r["predates_trace"] == true;
        let older_bytes: u64 = rows.iter().filter(older).map(|s| as_u64(&s["bytes"])).sum();
        let older_count: u64 = rows.iter().filter(older).map(|s| as_u64(&s["count"])).sum();
        let want = &o["before_trace_no_frames"];
        assert_eq!(
            (older_bytes, older_count),
            (as_u64(&want["bytes"]), as_u64(&want["count"])),
            "{f}: memory older than the trace without frames"
        );
        for r in rows.iter().filter(older) {
            assert!(
                r["site"]
                    .as_str()
                    .unwrap()
                    .starts_with("<before trace, no stack>"),
                "{f}: {r}"
            );
        }
        let mut ours: Vec<(String, u64, u64)> = Vec::new();
        for s in rows {
            let site = if older(&s) {
                "<no frames>".to_string()
            } else {
                s["site"].as_str().unwrap().to_string()
            };
            match ours.iter_mut().find(|r| r.0 == site) {
                Some(r) => {
                    r.1 += as_u64(&s["bytes"]);
                    r.2 += as_u64(&s["count"]);
                }
                None => ours.push((site, as_u64(&s["bytes"]), as_u64(&s["count"]))),
            }
        }
        ours.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let theirs: Vec<(String, u64, u64)> = o["sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["site"].as_str().unwrap().to_string(),
                    s["bytes"].as_u64().unwrap(),
                    s["count"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(ours, theirs, "{f}: sites at the peak");
        let total: u64 = ours.iter().map(|s| s.1).sum();
        assert_eq!(total, r.peak_bytes, "{f}: sites add up to the peak");
    }
}

#[test]
fn replay_matches_the_oracle_on_real_snapshots() {
    if !require_python() {
        return;
    }
    let Some(files) = require_shared() else {
        return;
    };
    for f in &files {
        compare_with_oracle(f);
    }
}

#[test]
fn replay_matches_the_oracle_on_samples() {
    if !require_python() {
        return;
    }
    for f in samples().into_iter().chain(captured()) {
        compare_with_oracle(&f);
    }
}

fn truth(name: &str) -> serde_json::Value {
    let p = root().join("samples/truth").join(format!("{name}.json"));
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

#[test]
fn known_peaks_and_top_sites() {
    for name in [
        "loop_freed",
        "dominant_stack",
        "retained_graph",
        "list_leak",
        "kv_cache",
        "adam_loop",
    ] {
        let t = truth(name);
        let p = &t["peak"];
        let top = top_json(&sample(&format!("{name}.pickle")), &[]);
        let d = &top["devices"][0];
        assert_eq!(d["at"]["event_index"], p["peak_event_index"], "{name}");
        assert_eq!(d["live_requested_bytes"], p["peak_bytes"], "{name}");
        assert_eq!(d["sites"][0]["site"], p["top_site"], "{name}");
        assert_eq!(d["sites"][0]["bytes"], p["top_site_bytes"], "{name}");
        assert_eq!(d["sites"][0]["count"], p["top_site_count"], "{name}");
    }
}

#[test]
fn a_dominant_stack_has_its_share() {
    let t = truth("dominant_stack");
    let top = top_json(&sample("dominant_stack.pickle"), &[]);
    let row = &top["devices"][0]["sites"][0];
    assert_eq!(row["site"], t["peak"]["top_site"]);
    let share = row["share"].as_f64().unwrap();
    let expected = t["dominant_share"].as_f64().unwrap_or(0.694444);
    assert!((share - expected).abs() < 1e-4, "{share} vs {expected}");
}

#[test]
fn a_trace_that_starts_mid_history_counts_earlier_allocations() {
    // Checked by hand (samples/README.md): 100970496 bytes of final blocks the trace never
    // allocated + 16898048 bytes freed by 7 orphan frees; the peak is 123330560 at event 70.
    let snap = load(&sample("wrapped_ring.pickle"));
    let r = &memlens::replay::replay(&snap)[0];
    assert_eq!(r.initial_bytes, 100_970_496 + 16_898_048);
    assert_eq!(r.peak, 70);
    assert_eq!(r.peak_bytes, 123_330_560);
}

#[test]
fn top_json_contract() {
    let v = top_json(&sample("train_small.pickle"), &["-n", "3"]);
    assert_eq!(v["schema_version"], 1);
    let d = &v["devices"][0];
    assert!(d["device"].is_u64());
    assert!(d["at"]["event_index"].is_i64());
    assert!(d["at"]["time_us"].is_i64());
    assert!(d["live_requested_bytes"].is_u64());
    let sites = d["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 3);
    for w in sites.windows(2) {
        assert!(w[0]["bytes"].as_u64() >= w[1]["bytes"].as_u64());
    }
    for s in sites {
        assert!(s["site"].is_string() && s["bytes"].is_u64() && s["count"].is_u64());
    }
}

#[test]
fn other_costs_add_up() {
    let f = sample("loop_freed.pickle");
    let snap = load(&f);
    let r = &memlens::replay::replay(&snap)[0];
    // allocated over the whole trace = Σ alloc sizes of the trace
    let trace = snap.device_trace(&snap.devices[0]);
    let allocated: u64 = trace
        .iter()
        .filter(|e| e.action == memlens::model::Action::Alloc)
        .map(|e| e.size)
        .sum();
    let v = top_json(&f, &["--cost", "allocated"]);
    assert_eq!(v["devices"][0]["total"].as_u64().unwrap(), allocated);
    // never freed = what is live at the end minus what was live before the trace and survived
    let v = top_json(&f, &["--cost", "never-freed"]);
    let survivors: u64 = r
        .allocations
        .iter()
        .filter(|a| a.end == memlens::replay::NEVER)
        .map(|a| a.size)
        .sum();
    assert_eq!(v["devices"][0]["total"].as_u64().unwrap(), survivors);
    assert_eq!(survivors, *r.live.last().unwrap());
    // a window that ends before the peak moves the peak into the window
    let v = top_json(&f, &["--window", ":100"]);
    let at = v["devices"][0]["at"]["event_index"].as_i64().unwrap();
    assert!(at <= 100);
    let best = (-1..=100).map(|i| r.live_at(i)).max().unwrap();
    assert_eq!(
        v["devices"][0]["live_requested_bytes"].as_u64().unwrap(),
        best
    );
}

#[test]
fn timeline_keeps_the_peak_exact_when_downsampled() {
    let f = sample("loop_freed.pickle");
    let snap = load(&f);
    let r = &memlens::replay::replay(&snap)[0];
    let o = memlens([
        "timeline".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        "--points".as_ref(),
        "20".as_ref(),
        f.as_os_str(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let pts = v["devices"][0]["points"].as_array().unwrap();
    assert!(pts.len() <= 23, "{}", pts.len());
    let max = pts
        .iter()
        .map(|p| p["live_requested_bytes"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(max, r.peak_bytes);
    for p in pts {
        let i = p["event_index"].as_i64().unwrap();
        assert_eq!(p["live_requested_bytes"].as_u64().unwrap(), r.live_at(i));
    }
    assert!(v["devices"][0]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "ProfilerStep#3"));
}

#[test]
fn flame_weights_equal_live_bytes() {
    let f = sample("loop_freed.pickle");
    let o = memlens([
        "flame".as_ref(),
        "--format".as_ref(),
        "folded".as_ref(),
        f.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8(o.stdout).unwrap();
    let total: u64 = text
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    let snap = load(&f);
    assert_eq!(total, memlens::replay::replay(&snap)[0].peak_bytes);
    assert!(text.lines().all(|l| l.starts_with("device_0;")));
    let o = memlens(["flame".as_ref(), f.as_os_str()]);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("<?xml"));
    let o = memlens([
        "flame".as_ref(),
        "--format".as_ref(),
        "speedscope".as_ref(),
        f.as_os_str(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let w: u64 = v["profiles"][0]["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(w, total);
}

/// GIVEN every sample and capture WHEN the state is rebuilt at the peak THEN each live block
/// carries the stack of its allocation as the replay has it (a block rebuilt by undoing its
/// free would otherwise carry the free's stack: the freeing context, `~TensorImpl` and all,
/// when history records every stack).
#[test]
fn rebuilt_blocks_carry_their_allocation_stacks() {
    let mut checked = 0;
    for file in samples().into_iter().chain(captured()) {
        let snap = load(&file);
        for r in memlens::replay::replay(&snap) {
            let dev = snap.device(r.device).unwrap();
            let st = memlens::replay::state::state_at(&snap, dev, r.peak);
            let alloc: std::collections::HashMap<u64, memlens::model::StackId> = r
                .live_allocations(r.peak)
                .filter(|a| a.start >= 0)
                .map(|a| (a.addr, a.stack))
                .collect();
            for b in st.segments.iter().flat_map(|s| &s.blocks) {
                if let (true, Some(&stack)) = (b.estimated, alloc.get(&b.address)) {
                    assert_eq!(b.stack, stack, "{}: block {:#x}", file.display(), b.address);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} rebuilt blocks checked");
}
