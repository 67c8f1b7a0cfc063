//! What pins stranded bytes (`frag`'s and `oom`'s `pinners`): the stranded bytes and their
//! pinning blocks equal an independent computation (tests/oracle/snapshot_oracle.py
//! `stranded`) on every sample and real snapshot; the generated samples with known pinners
//! (samples/truth/pinned_pages.json, frag_oom's construction) are named as built; the prices
//! add up.

use crate::common;
use common::*;
use serde_json::Value;
use std::path::Path;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

fn frag_end(file: &Path) -> Value {
    json_report(&["frag", "--at", "end"], file)
}

/// The figures of one device's pinners hold together: attributed + unattributed is the
/// stranded total, the pools add up to it, no site pins more than it, the groups are
/// disjoint parts of it, the prices subtract.
fn check_sums(name: &str, p: &Value) {
    let stranded = as_u64(&p["stranded_bytes"]);
    assert_eq!(
        as_u64(&p["attributed_bytes"]) + as_u64(&p["unattributed_bytes"]),
        stranded,
        "{name}: attributed + unattributed"
    );
    let pools: u64 = p["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| as_u64(&x["stranded_bytes"]))
        .sum();
    assert_eq!(pools, stranded, "{name}: pools");
    let mut sole = 0;
    for s in p["pinners"].as_array().unwrap() {
        let (a, b) = (as_u64(&s["sole_bytes"]), as_u64(&s["shared_bytes"]));
        assert!(a + b <= stranded, "{name}: {s}");
        assert!(as_u64(&s["blocks"]) > 0, "{name}: {s}");
        sole += a;
    }
    assert!(sole <= stranded, "{name}: sole bytes");
    let groups: u64 = p["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| as_u64(&g["stranded_bytes"]))
        .sum();
    assert!(groups <= stranded, "{name}: groups");
    for x in p["prices"].as_array().unwrap() {
        assert_eq!(
            x["stranded_change_bytes"].as_i64().unwrap(),
            as_u64(&x["stranded_bytes"]) as i64 - as_u64(&x["baseline_stranded_bytes"]) as i64,
            "{name}: {x}"
        );
    }
}

/// Against the oracle: the device's stranded and releasable bytes, and for each segment
/// listed, its stranded bytes and that every block named as splitting it is one of the
/// oracle's pinning blocks of that segment.
fn check_against_oracle(file: &Path) {
    let name = file.display().to_string();
    let got = frag_end(file);
    let want = oracle("stranded", file);
    for d in got["devices"].as_array().unwrap() {
        let o = want["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["device"] == d["device"]);
        let (o_stranded, o_releasable) = o.map_or((0, 0), |o| {
            (as_u64(&o["stranded_bytes"]), as_u64(&o["releasable_bytes"]))
        });
        let p = &d["pinners"];
        assert_eq!(as_u64(&p["stranded_bytes"]), o_stranded, "{name}: stranded");
        assert_eq!(
            as_u64(&d["total"]["stranded_free_bytes"]),
            o_stranded,
            "{name}: frag's stranded"
        );
        assert_eq!(
            as_u64(&d["total"]["releasable_bytes"]),
            o_releasable,
            "{name}: releasable"
        );
        check_sums(&name, p);
        for seg in p["segments"].as_array().unwrap() {
            let os = o
                .and_then(|o| {
                    o["segments"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|s| s["address"] == seg["address"])
                })
                .unwrap_or_else(|| panic!("{name}: segment {} not stranded", seg["address"]));
            assert_eq!(seg["stranded_bytes"], os["stranded_bytes"], "{name}");
            let pinners: Vec<u64> = os["pinners"]
                .as_array()
                .unwrap()
                .iter()
                .map(as_u64)
                .collect();
            assert_eq!(
                as_u64(&seg["pinning_blocks"]),
                pinners.len() as u64,
                "{name}"
            );
            for b in seg["split_by"].as_array().unwrap() {
                assert!(pinners.contains(&as_u64(&b["address"])), "{name}: {b}");
            }
        }
    }
}

#[test]
fn stranded_bytes_and_their_pinners_equal_the_oracle_on_every_sample() {
    for file in samples().into_iter().chain(captured()) {
        check_against_oracle(&file);
    }
}

#[test]
fn stranded_bytes_and_their_pinners_equal_the_oracle_on_real_snapshots() {
    let Some(files) = require_shared() else {
        return;
    };
    for file in files {
        check_against_oracle(&file);
    }
}

/// The site `frag` names that ends with `suffix` (sites are shown relative to the snapshot's
/// root).
fn site<'a>(p: &'a Value, suffix: &str) -> &'a Value {
    p["pinners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["site"].as_str().unwrap().ends_with(suffix))
        .unwrap_or_else(|| panic!("no site {suffix} in {p}"))
}

/// GIVEN an expandable range whose base is 8 MiB past a 20 MiB multiple, where three kept
/// blocks and one allocated before history split its pages with freed temporaries WHEN
/// `frag` reads the end THEN the stranded bytes, each kept block's site with the bytes it
/// alone pins and the event that allocated it, and the bytes no site can be named for, are
/// those of the construction (samples/truth/pinned_pages.json).
#[test]
fn pinned_pages_names_each_kept_block_and_the_bytes_it_pins() {
    let t = truth("pinned_pages");
    let d = &frag_end(&sample("pinned_pages.pickle"))["devices"][0];
    let p = &d["pinners"];
    assert_eq!(p["stranded_bytes"], t["stranded_bytes"]);
    assert_eq!(as_u64(&t["stranded_bytes"]), 64 * MIB);
    assert_eq!(d["total"]["releasable_bytes"], t["releasable_bytes"]);
    assert_eq!(p["attributed_bytes"], t["attributed_bytes"]);
    assert_eq!(p["unattributed_bytes"], t["unattributed_bytes"]);
    for (full, bytes) in t["sole_bytes_by_site"].as_object().unwrap() {
        let suffix = full.rsplit('/').next().unwrap();
        let s = site(p, suffix);
        assert_eq!(&s["sole_bytes"], bytes, "{suffix}");
        assert_eq!(s["shared_bytes"], 0, "{suffix}");
        assert_eq!(s["blocks"], 1, "{suffix}");
        assert_eq!(
            s["oldest_allocated_event"], t["allocated_event_by_site"][full],
            "{suffix}"
        );
    }
    let none = site(p, "<no stack recorded>");
    assert_eq!(as_u64(&none["sole_bytes"]), 16 * MIB);
    assert_eq!(none["allocated_before_trace"], 1);
    assert!(none["oldest_allocated_event"].is_null());
    // Most pinned first: keep.py:13 (18 MiB), keep.py:11 (16 MiB), the unnamed 16 MiB,
    // keep.py:12 (14 MiB); ties by name.
    let order: Vec<&str> = p["pinners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["site"].as_str().unwrap())
        .collect();
    assert!(order[0].ends_with("keep.py:13:keep"), "{order:?}");
    assert!(order[3].ends_with("keep.py:12:keep"), "{order:?}");
    // The one segment, split by the three kept blocks and the older one, oldest first.
    let seg = &p["segments"][0];
    assert_eq!(seg["address"], t["range_base"]);
    let split: Vec<u64> = seg["split_by"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| as_u64(&b["address"]))
        .collect();
    let by_site = &t["pinning_block_by_site"];
    let kept = |l: u32| as_u64(&by_site[format!("/home/user/proj/keep.py:{l}:keep")]);
    assert_eq!(
        split,
        vec![
            as_u64(&t["unattributed_block"]),
            kept(11),
            kept(12),
            kept(13)
        ]
    );
    // Expandable already: no setting is priced; the biggest group (keep.py:13 alone) is.
    let changes: Vec<&str> = p["prices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["change"].as_str().unwrap())
        .collect();
    assert_eq!(changes, ["pinners_allocated_first", "pinners_freed"]);
    let words = p["words"].to_string();
    assert!(
        words.contains("cannot name the site of 16.00 MiB"),
        "{words}"
    );
}

/// GIVEN frag_oom (four 3 GiB cached blocks each split by one kept result of model.py lines
/// 60, 62 and 64 and two freed temporaries, then a 2 GiB request) WHEN `oom` reads its OOM
/// THEN the fragmentation verdict carries the pinners: the three lines pin together every
/// byte of the four segments left free, 4 × (3 GiB − (700 + 600 + 400) MiB) plus the 3 × 4 KiB
/// the construction takes off per segment index; the weights' small blocks alone pin the
/// rest of their 2 MiB segment; and expandable segments, priced by the replay, strand less.
#[test]
fn frag_oom_names_the_results_that_pin_the_cache_together() {
    let r = json_ok(&["oom", "samples/frag_oom.pickle", "--format", "json"]);
    let o = &r["ooms"][0];
    assert_eq!(o["verdict"], "fragmentation");
    let p = &o["pinners"];
    check_sums("frag_oom", p);
    let large = 4 * (3 * GIB - 1700 * MIB) + 3 * 4096 * (1 + 2 + 3);
    let small = 2 * MIB - (8192 + 8192 + 65536);
    assert_eq!(as_u64(&p["stranded_bytes"]), large + small);
    let g = &p["groups"][0];
    let sites: Vec<&str> = g["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        sites,
        [
            "model.py:60:forward",
            "model.py:62:forward",
            "model.py:64:forward"
        ]
    );
    assert_eq!(as_u64(&g["stranded_bytes"]), large);
    let w = site(p, "batch_infer.py:121:main");
    assert_eq!(as_u64(&w["sole_bytes"]), small);
    for line in [60, 62, 64] {
        let s = site(p, &format!("model.py:{line}:forward"));
        assert_eq!(
            (as_u64(&s["sole_bytes"]), as_u64(&s["shared_bytes"])),
            (0, large)
        );
        assert_eq!(s["blocks"], 4);
    }
    let exp = p["prices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["change"] == "expandable_segments")
        .unwrap();
    assert!(exp["stranded_change_bytes"].as_i64().unwrap() < 0, "{exp}");
    // The chain from the request leads the reading.
    assert!(
        p["words"][0]
            .as_str()
            .unwrap()
            .starts_with("the 2.00 GiB request found 5.36 GiB cached free in its pool"),
        "{}",
        p["words"][0]
    );
    // `frag` at the OOM reads the same pinners.
    let event = o["event_index"].to_string();
    let f = json_ok(&[
        "frag",
        "samples/frag_oom.pickle",
        "--at",
        &event,
        "--format",
        "json",
    ]);
    let fp = &f["devices"][0]["pinners"];
    assert_eq!(fp["pinners"], p["pinners"]);
    assert_eq!(fp["prices"], p["prices"]);
}

/// Without a trace the blocks' allocation times are unknown and nothing can be replayed:
/// the pinners are still named (the final state's blocks carry their stacks), every age is
/// unknown and the reading says what cannot be priced.
#[test]
fn without_a_trace_pinners_are_named_and_prices_cannot_be_judged() {
    let r = json_ok(&["frag", "samples/bare_list.pickle", "--format", "json"]);
    for d in r["devices"].as_array().unwrap() {
        let p = &d["pinners"];
        check_sums("bare_list", p);
        if as_u64(&p["stranded_bytes"]) == 0 {
            continue;
        }
        assert_eq!(p["prices"], serde_json::json!([]));
        for s in p["pinners"].as_array().unwrap() {
            assert!(s["oldest_allocated_event"].is_null());
            assert_eq!(s["allocated_before_trace"], s["blocks"]);
        }
        assert!(
            p["words"].to_string().contains("cannot price a change"),
            "{p}"
        );
    }
}

/// The real snapshots held to an engineer's reading (tests/data/pinner_readings.json): the
/// set of sites that pins the most stranded bytes, at least its share of them, and whether
/// each change strands less; an OOM that is not fragmentation names no pinners. Every file
/// that disagrees is named in one message.
#[test]
fn real_snapshots_name_what_an_engineer_names() {
    let Some(files) = require_shared() else {
        return;
    };
    let r: Value = serde_json::from_slice(
        &std::fs::read(root().join("tests/data/pinner_readings.json")).unwrap(),
    )
    .unwrap();
    let path = |name: &str| {
        files
            .iter()
            .find(|f| f.file_name().is_some_and(|n| n == name))
            .unwrap_or_else(|| panic!("{name} is not in ../shared/samples/real"))
            .clone()
    };
    let mut failures = Vec::new();
    for want in r["frag"].as_array().unwrap() {
        let name = want["file"].as_str().unwrap();
        let got = json_report(&["frag", "--at", want["at"].as_str().unwrap()], &path(name));
        let d = got["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["device"] == want["device"])
            .unwrap();
        let p = &d["pinners"];
        check_sums(name, p);
        let g = &p["groups"][0];
        let sites: Vec<&str> = g["sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        let named: Vec<&str> = want["pinned_by"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        let same = sites.len() == named.len()
            && named.iter().all(|n| sites.iter().any(|s| s.ends_with(n)));
        if !same {
            failures.push(format!(
                "{name}: the largest group is {sites:?}, not {named:?}"
            ));
        }
        let share = as_u64(&g["stranded_bytes"]) as f64 / as_u64(&p["stranded_bytes"]) as f64;
        if share < want["at_least_share"].as_f64().unwrap() {
            failures.push(format!(
                "{name}: the group pins {share:.3} of the stranded bytes"
            ));
        }
        for (change, way) in want["changes"].as_object().unwrap() {
            let Some(x) = p["prices"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["change"] == change.as_str())
            else {
                failures.push(format!("{name}: {change} is not priced"));
                continue;
            };
            let less = x["stranded_change_bytes"].as_i64().unwrap() < 0;
            if less != (way == "less") {
                failures.push(format!("{name}: {change}: {x}"));
            }
        }
    }
    for want in r["oom"].as_array().unwrap() {
        let name = want["file"].as_str().unwrap();
        let got = json_report(&["oom"], &path(name));
        for o in got["ooms"].as_array().unwrap() {
            if o["verdict"] != want["verdict"] {
                failures.push(format!("{name}: verdict {}", o["verdict"]));
            }
            if o.get("pinners").is_some() != want["pinners"].as_bool().unwrap() {
                failures.push(format!("{name}: pinners {}", o["pinners"]));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
