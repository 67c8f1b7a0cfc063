//! `memlens oom` and `memlens frag` on samples with a known cause, on the real OOM snapshot,
//! and the rebuilt allocator state against the replay at many moments.

use crate::common;
use common::*;
use std::path::Path;

fn oom_json(file: &Path, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args: Vec<std::ffi::OsString> = vec!["oom".into(), "--format".into(), "json".into()];
    args.extend(extra.iter().map(|a| a.into()));
    args.push(file.into());
    let o = memlens(args);
    let code = o.status.code().unwrap();
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&o.stderr));
    (code, serde_json::from_slice(&o.stdout).unwrap())
}

#[test]
fn each_cause_gets_its_verdict_and_the_four_numbers() {
    for name in ["frag_oom", "capacity_oom", "outside_oom"] {
        let t = truth(name);
        let cap = t["capacity_bytes"].as_u64().unwrap().to_string();
        let (_, v) = oom_json(&sample(&format!("{name}.pickle")), &["--capacity", &cap]);
        assert_eq!(v["schema_version"], 1);
        let ooms = v["ooms"].as_array().unwrap();
        assert_eq!(ooms.len(), 1, "{name}");
        let o = &ooms[0];
        assert_eq!(o["verdict"], t["verdict"], "{name}");
        assert_eq!(o["device"], t["device"], "{name}");
        assert_eq!(o["event_index"], t["oom_event_index"], "{name}");
        assert_eq!(o["requested_bytes"], t["tried_to_allocate_bytes"], "{name}");
        assert_eq!(o["device_free_bytes"], t["device_free_bytes"], "{name}");
        assert_eq!(o["allocated_bytes"], t["allocated_bytes"], "{name}");
        assert_eq!(o["reserved_bytes"], t["reserved_bytes"], "{name}");
        assert_eq!(
            o["largest_free_block_bytes"], t["largest_free_block_bytes"],
            "{name}"
        );
        let recs = o["recommendations"].as_array().unwrap();
        assert!(!recs.is_empty(), "{name}");
        // cheapest first, each with its cost
        let rank = |c: &str| {
            ["free", "speed", "results"]
                .iter()
                .position(|x| *x == c)
                .unwrap()
        };
        let costs: Vec<usize> = recs
            .iter()
            .map(|r| rank(r["cost"].as_str().unwrap()))
            .collect();
        assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{name}: {costs:?}");
        for r in recs {
            assert!(
                !r["action"].as_str().unwrap().contains("empty_cache"),
                "{name}"
            );
            assert!(!r["why"].as_str().unwrap().is_empty());
        }
        let expandable = recs.iter().any(|r| {
            r["action"]
                .as_str()
                .unwrap()
                .contains("expandable_segments")
        });
        assert_eq!(
            expandable,
            name == "frag_oom",
            "{name}: expandable_segments only for fragmentation"
        );
    }
}

/// Without `--gpu`: reserved + device free (+ a context) matching a known GPU is taken as the
/// capacity, said so; matching none, the capacity stays unknown and the notes say why.
#[test]
fn without_capacity_it_infers_it_or_says_what_it_cannot_conclude() {
    // GIVEN frag_oom: a 16 GiB device, 14.00 GiB reserved and 1.68 GiB free at the OOM
    let (_, v) = oom_json(&sample("frag_oom.pickle"), &[]);
    let o = &v["ooms"][0];
    let inf = &o["capacity_inferred"];
    let seen = o["reserved_bytes"].as_u64().unwrap() + o["device_free_bytes"].as_u64().unwrap();
    assert_eq!(inf["seen_bytes"].as_u64(), Some(seen));
    assert_eq!(o["capacity_bytes"], inf["capacity_bytes"]);
    assert_eq!(inf["matches"][0]["name"], "V100 16GB");
    assert!(o["capacity_source"]
        .as_str()
        .unwrap()
        .starts_with("inferred"));
    assert!(o["cannot_conclude"].to_string().contains("--gpu"), "{o}");
    assert_eq!(o["verdict"], "fragmentation");
    // GIVEN outside_oom: 1.93 GiB seen of a 24 GiB device another process holds: no GPU matches
    let (_, v) = oom_json(&sample("outside_oom.pickle"), &[]);
    let o = &v["ooms"][0];
    assert!(o["capacity_bytes"].is_null());
    assert!(o["capacity_inferred"].is_null());
    let notes = o["notes"].to_string();
    assert!(
        notes.contains("--gpu") && notes.contains("another process"),
        "{notes}"
    );
    // no capacity verdict from a guess
    assert_eq!(o["verdict"], "unknown");
}

/// Issue 19, item 4: 91 MiB free, 133 MiB cached and a 4.95 GiB request — the shortage is
/// certain, and reserved + free + a context is an 80 GB GPU: capacity, with fixes; headroom
/// against that; never "record a snapshot" to someone reading one.
#[test]
fn the_real_oom_is_decided_without_gpu() {
    let Some(f) = require_real("Constructor-Sun__code_location__memory_snapshot.pickle") else {
        return;
    };
    let (_, v) = oom_json(&f, &[]);
    let o = &v["ooms"][0];
    assert_eq!(o["device"], 1);
    assert_eq!(o["verdict"], "capacity");
    let (res, free) = (
        o["reserved_bytes"].as_u64().unwrap(),
        o["device_free_bytes"].as_u64().unwrap(),
    );
    assert_eq!((res, free), (84_202_749_952, 95_682_560));
    let inf = &o["capacity_inferred"];
    assert_eq!(inf["seen_bytes"].as_u64(), Some(res + free));
    let names: Vec<&str> = inf["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["H100 80GB HBM3", "A100 80GB"]);
    let h100 = memlens::vocab::gpus::lookup("h100").unwrap().capacity_bytes;
    assert_eq!(o["capacity_bytes"].as_u64(), Some(h100));
    assert_eq!(inf["outside_bytes"].as_u64(), Some(h100 - res - free));
    let headline = o["headline"].as_str().unwrap();
    assert!(headline.starts_with("Real shortage"), "{headline}");
    assert!(
        headline.contains("H100 80GB HBM3 or A100 80GB"),
        "{headline}"
    );
    assert!(!o["recommendations"].as_array().unwrap().is_empty());
    let evidence = o["evidence"].to_string();
    assert!(evidence.contains("less likely reading"), "{evidence}");
    assert!(evidence.contains("another process"), "{evidence}");
    // Headroom: device 1 against what it could reach there (the free memory, as its peak
    // reserved is its reserved at the OOM); devices 0 and 2 the same model assumed.
    let h: Vec<&serde_json::Value> = v["headroom"].as_array().unwrap().iter().collect();
    assert_eq!(h[1]["headroom_basis"], "inferred_capacity");
    assert_eq!(
        h[1]["headroom_bytes"].as_i64().unwrap(),
        (res + free) as i64 - h[1]["peak_reserved_bytes"].as_i64().unwrap()
    );
    for d in [0, 2] {
        assert_eq!(h[d]["headroom_basis"], "inferred_capacity");
        assert!(h[d]["capacity_source"]
            .as_str()
            .unwrap()
            .contains("device 1's oom"));
    }
    let text = memlens(["oom".into(), f.clone().into_os_string()]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(!text.contains("Not decidable"), "{text}");
    assert!(!text.contains("record a snapshot"), "{text}");
    assert!(text.contains("What the snapshot cannot tell"), "{text}");
    // --gpu still wins.
    let (_, v) = oom_json(&f, &["--gpu", "a100-80"]);
    assert!(v["ooms"][0]["capacity_inferred"].is_null());
    assert_eq!(v["headroom"][1]["headroom_basis"], "capacity");
}

/// No oom text advises recording a snapshot: the reader has one.
#[test]
fn oom_never_tells_a_snapshot_reader_to_record_one() {
    for f in samples().into_iter().chain(captured()) {
        for extra in [vec![], vec!["--capacity", "24GiB"]] {
            let mut args: Vec<std::ffi::OsString> = vec!["oom".into()];
            args.extend(extra.iter().map(|a| a.into()));
            args.push(f.clone().into());
            let o = memlens(args);
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(
                !text.contains("record a snapshot") && !text.contains("What the message"),
                "{}: {text}",
                f.display()
            );
        }
    }
}

/// Under a per-process limit an OOM implies, headroom is measured against the limit's bounds,
/// even when the GPU's capacity is given.
#[test]
fn headroom_is_measured_against_an_implied_limit() {
    let f = root().join("samples/captured/capacity_oom.pickle");
    for extra in [vec![], vec!["--gpu", "h200"]] {
        let (_, v) = oom_json(&f, &extra);
        let o = &v["ooms"][0];
        let h = &v["headroom"][0];
        assert_eq!(h["headroom_basis"], "implied_limit", "{extra:?}");
        let (lo, hi) = (
            o["implied_limit"]["at_least_bytes"].as_i64().unwrap(),
            o["implied_limit"]["below_bytes"].as_u64().unwrap(),
        );
        let peak = h["peak_reserved_bytes"].as_i64().unwrap();
        assert_eq!(h["headroom_bytes"].as_i64().unwrap(), lo - peak);
        assert_eq!(
            h["headroom_at_most_bytes"].as_u64().unwrap(),
            hi - 1 - peak as u64
        );
        assert_eq!(h["limit_below_bytes"].as_u64(), Some(hi));
        // The real cap (2 GiB) lies inside those bounds, so its headroom does too.
        let cap = 2i64 << 30;
        assert!(lo <= cap && (cap as u64) < hi, "[{lo}, {hi})");
    }
}

#[test]
fn a_snapshot_without_oom_reports_headroom() {
    let (_, v) = oom_json(&sample("train_small.pickle"), &["--gpu", "a100-80"]);
    assert!(v["ooms"].as_array().unwrap().is_empty());
    let h = &v["headroom"][0];
    let snap = load(&sample("train_small.pickle"));
    let r = &memlens::replay::replay(&snap)[0];
    assert_eq!(h["peak_live_bytes"].as_u64().unwrap(), r.peak_bytes);
    let cap = v["capacity_bytes"].as_i64().unwrap();
    assert_eq!(
        h["headroom_bytes"].as_i64().unwrap(),
        cap - h["peak_reserved_bytes"].as_i64().unwrap()
    );
    assert!(v["notes"][0].as_str().unwrap().contains("no oom event"));
}

#[test]
fn the_real_oom_snapshot_is_a_capacity_problem_on_device_1() {
    let Some(f) = require_real("Constructor-Sun__code_location__memory_snapshot.pickle") else {
        return;
    };
    let (_, v) = oom_json(&f, &["--gpu", "h100"]);
    let o = &v["ooms"][0];
    assert_eq!(o["device"], 1);
    assert_eq!(o["verdict"], "capacity");
    // The four numbers add up: reserved = allocated + reserved-but-unallocated.
    assert_eq!(
        o["reserved_bytes"].as_u64().unwrap(),
        o["allocated_bytes"].as_u64().unwrap() + o["reserved_unallocated_bytes"].as_u64().unwrap()
    );
    // expandable_segments is already on: never recommended again.
    assert!(!o["recommendations"]
        .to_string()
        .contains("expandable_segments:True"));
}

/// The rebuilt state at a moment holds exactly the replay's live bytes and reserved bytes.
fn check_state_consistency(file: &Path) {
    let snap = load(file);
    for r in memlens::replay::replay(&snap) {
        if r.unconfirmed_at_end > 0 {
            // The trace and the final segments disagree (a warning says so); skip.
            assert!(snap
                .warnings
                .iter()
                .any(|w| w.code == "trace_state_mismatch"));
            continue;
        }
        let dev = snap.device(r.device).unwrap();
        let n = r.events as i64;
        let mut moments = vec![-1, n - 1, r.peak, n / 2, n / 3];
        moments.retain(|m| (-1..n).contains(m));
        for at in moments {
            let st = memlens::replay::state::state_at(&snap, dev, at);
            if st.inconsistencies > 0 {
                continue;
            }
            let live: u64 = st
                .segments
                .iter()
                .flat_map(|s| &s.blocks)
                .filter(|b| b.state != memlens::model::BlockState::Inactive)
                .map(|b| b.requested)
                .sum();
            assert_eq!(
                live,
                r.live_at(at),
                "{} device {} at {at}: live",
                file.display(),
                r.device
            );
            let reserved: u64 = st.segments.iter().map(|s| s.size).sum();
            if !r.reserved_incomplete {
                assert_eq!(
                    reserved,
                    r.reserved_at(at),
                    "{} device {} at {at}: reserved",
                    file.display(),
                    r.device
                );
            }
            for s in &st.segments {
                let mut a = s.address;
                for b in &s.blocks {
                    assert_eq!(b.address, a, "{}: blocks tile the segment", file.display());
                    a += b.size;
                }
                assert_eq!(
                    a,
                    s.address + s.size,
                    "{}: blocks fill the segment",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn rebuilt_states_agree_with_the_replay() {
    for f in samples().into_iter().chain(captured()) {
        check_state_consistency(&f);
    }
    if let Some(files) = require_shared() {
        for f in &files {
            check_state_consistency(f);
        }
    }
}

#[test]
fn frag_at_the_end_equals_the_summary() {
    for f in samples().into_iter().chain(captured()) {
        let o = memlens([
            "frag".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            f.as_os_str(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let s = summary_json(&f);
        for (fd, sd) in v["devices"]
            .as_array()
            .unwrap()
            .iter()
            .zip(s["devices"].as_array().unwrap())
        {
            let t = &fd["total"];
            assert_eq!(t["reserved_bytes"], sd["reserved_bytes"], "{}", f.display());
            assert_eq!(
                t["allocated_bytes"],
                sd["allocated_bytes"],
                "{}",
                f.display()
            );
            assert_eq!(t["free_bytes"], sd["inactive_bytes"], "{}", f.display());
            assert_eq!(
                t["largest_free_block_bytes"],
                sd["largest_inactive_block_bytes"],
                "{}",
                f.display()
            );
            let free = t["free_bytes"].as_u64().unwrap();
            assert_eq!(
                t["stranded_free_bytes"].as_u64().unwrap()
                    + t["releasable_bytes"].as_u64().unwrap(),
                free
            );
            let hist: u64 = t["free_histogram"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["bytes"].as_u64().unwrap())
                .sum();
            assert_eq!(hist, free);
        }
    }
}

/// Golden `oom` text of the real OOM snapshot without `--gpu`.
#[test]
fn golden_oom_on_the_real_file() {
    let name = "Constructor-Sun__code_location__memory_snapshot.pickle";
    let Some(f) = require_real(name) else {
        return;
    };
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_memlens"))
        .current_dir(f.parent().unwrap())
        .args(["oom", name])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    golden("real/Constructor-Sun.oom.txt", &o.stdout);
}
