//! The one advice engine (issue 52 item 2, reading.md §4-5): the generated samples whose fixes
//! are known by construction (samples/truth/attention_chain.json, vllm_kv.json,
//! no_optimizer_state.json), and one ranked list everywhere: on every sample and every real
//! snapshot, `oom`'s recommendations at each device's first OOM, `fit`'s fixes and the page's
//! advice (`report --format json`: `advice`, `oom.fit`) carry the same ids in the same order,
//! and every fix listed has its premise in the file and matters (reading.md §5).

use crate::common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `memlens COMMAND --format json FILE`, which must exit 0, parsed.
fn json_of(command: &str, file: &Path) -> Value {
    json_report(&[command], file)
}

/// What `fit`, `oom` and the page say about one file, run on three threads.
struct Surfaces {
    fit: Value,
    oom: Value,
    page: Value,
}

fn surfaces(file: &Path) -> Surfaces {
    std::thread::scope(|s| {
        let fit = s.spawn(|| json_of("fit", file));
        let oom = s.spawn(|| json_of("oom", file));
        let page = s.spawn(|| json_of("report", file));
        Surfaces {
            fit: fit.join().unwrap(),
            oom: oom.join().unwrap(),
            page: page.join().unwrap(),
        }
    })
}

/// [`surfaces`] of every file, on a few threads at a time (each runs three commands).
fn surfaces_of(files: &[PathBuf]) -> Vec<(String, Surfaces)> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 6));
    let mut out: Vec<(usize, String, Surfaces)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(f) = files.get(i) else { break };
                        let name = f.file_name().unwrap().to_string_lossy().into_owned();
                        mine.push((i, name, surfaces(f)));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    out.sort_by_key(|(i, _, _)| *i);
    out.into_iter().map(|(_, n, s)| (n, s)).collect()
}

/// The ids of a list of fixes (or of `oom`'s recommendations), in order.
fn ids(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect()
}

/// The entries of a list of per-device objects, by their `device`.
fn by_device(list: &Value) -> BTreeMap<u64, &Value> {
    list.as_array()
        .map(|v| v.iter().map(|d| (as_u64(&d["device"]), d)).collect())
        .unwrap_or_default()
}

/// Fixes whose premise needs optimizer state, and the one that needs a forward no backward
/// follows (reading.md §5).
const NEEDS_OPTIMIZER_STATE: [&str; 2] = ["offload_optimizer_state", "eight_bit_optimizer"];
const NEEDS_NO_BACKWARD: &str = "inference_mode";

/// Where one file's surfaces disagree, or a listed fix breaks a rule of reading.md §5: one line
/// each, naming the device and the ids.
fn disagreements(s: &Surfaces) -> Vec<String> {
    let mut bad = Vec::new();
    let fit = by_device(&s.fit["devices"]);
    let advice = by_device(&s.page["advice"]);
    let page_oom_fit = by_device(&s.page["oom"]["fit"]);
    let oom_fit = by_device(&s.oom["fit"]);
    if fit.keys().ne(advice.keys()) {
        bad.push(format!(
            "devices: fit {:?}, the page's advice {:?}",
            fit.keys().collect::<Vec<_>>(),
            advice.keys().collect::<Vec<_>>()
        ));
    }
    // each device's first OOM (the OOMs are in trace order per device)
    let mut first: BTreeMap<u64, &Value> = BTreeMap::new();
    for o in s.oom["ooms"].as_array().unwrap() {
        first.entry(as_u64(&o["device"])).or_insert(o);
    }
    for (d, o) in &first {
        let recs = ids(&o["recommendations"]);
        let lists = [
            ("fit devices[].fixes", fit.get(d)),
            ("the page's advice[].fixes", advice.get(d)),
            ("the page's oom.fit[].fixes", page_oom_fit.get(d)),
            ("oom's fit[].fixes", oom_fit.get(d)),
        ];
        for (what, list) in lists {
            match list {
                None => bad.push(format!("device {d}: an OOM, and no entry in {what}")),
                Some(l) if ids(&l["fixes"]) != recs => bad.push(format!(
                    "device {d}: oom's recommendations {recs:?}, {what} {:?}",
                    ids(&l["fixes"])
                )),
                Some(l) if l["moment"] != "oom" => bad.push(format!(
                    "device {d}: {what} is at {}, not the OOM",
                    l["moment"]
                )),
                Some(_) => {}
            }
        }
    }
    for (d, f) in &fit {
        if !first.contains_key(d) {
            if let Some(a) = advice.get(d) {
                if ids(&a["fixes"]) != ids(&f["fixes"]) || a["moment"] != f["moment"] {
                    bad.push(format!(
                        "device {d}: the page's advice at {} {:?}, fit at {} {:?}",
                        a["moment"],
                        ids(&a["fixes"]),
                        f["moment"],
                        ids(&f["fixes"])
                    ));
                }
            }
        }
        bad.extend(rule_breaks(*d, f));
    }
    bad
}

/// reading.md §5 on one device's list: listed once, material, with its premise in the file.
fn rule_breaks(d: u64, f: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let fixes = ids(&f["fixes"]);
    let immaterial = ids(&f["immaterial_fixes"]);
    for id in fixes.iter().filter(|i| immaterial.contains(i)) {
        bad.push(format!("device {d}: {id} is both a fix and immaterial"));
    }
    let demand = as_u64(&f["demand_bytes"]);
    let shortfall = f["shortfall_bytes"].as_u64();
    for x in f["fixes"].as_array().unwrap() {
        let saves = as_u64(&x["saves_bytes"]);
        let matters = saves.saturating_mul(100) >= demand
            || shortfall.is_some_and(|s| saves >= s)
            || x["for_verdict"] == true;
        if !matters {
            bad.push(format!(
                "device {d}: {} saves {saves} B of a {demand} B demand (under 1%, shortfall {shortfall:?})",
                x["id"]
            ));
        }
    }
    let every: Vec<&str> = fixes.iter().chain(&immaterial).copied().collect();
    if as_u64(&f["anatomy"]["parts"]["optimizer_state_bytes"]) == 0 {
        for id in every.iter().filter(|i| NEEDS_OPTIMIZER_STATE.contains(i)) {
            bad.push(format!("device {d}: {id} without optimizer state"));
        }
    }
    if f["anatomy"]["flags"]["trains"] == true && every.contains(&NEEDS_NO_BACKWARD) {
        bad.push(format!(
            "device {d}: {NEEDS_NO_BACKWARD} on a training job ({every:?})"
        ));
    }
    bad
}

/// Every file's disagreements, one block per file.
fn check_all(files: &[PathBuf]) {
    assert!(!files.is_empty());
    let bad: Vec<String> = surfaces_of(files)
        .iter()
        .filter_map(|(name, s)| {
            let b = disagreements(s);
            (!b.is_empty()).then(|| format!("{name}:\n  {}", b.join("\n  ")))
        })
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// One list everywhere, on every sample in samples/.
#[test]
fn one_list_everywhere_on_every_sample() {
    let files = samples();
    // the samples with an OOM are among them: the comparison with `oom` is not vacuous
    for s in [
        "frag_oom",
        "capacity_oom",
        "outside_oom",
        "no_optimizer_state",
    ] {
        assert!(files.contains(&sample(&format!("{s}.pickle"))), "{s}");
    }
    check_all(&files);
}

/// One list everywhere, on every real snapshot of ../shared/samples/real.
#[test]
fn one_list_everywhere_on_every_real_snapshot() {
    let Some(files) = require_shared() else {
        return;
    };
    check_all(&files);
}

/// The rules themselves fail where they should: a list that differs from `oom`'s, a fix in
/// both lists, a fix under 1%, an optimizer fix without optimizer state, `inference_mode` on
/// a training job.
#[test]
fn the_cross_surface_check_catches_each_disagreement() {
    let s = surfaces(&sample("no_optimizer_state.pickle"));
    assert!(disagreements(&s).is_empty(), "{:?}", disagreements(&s));
    let swapped = |v: &mut Value| {
        let l = v["devices"][0]["fixes"].as_array_mut().unwrap();
        assert!(l.len() >= 2);
        l.swap(0, 1);
    };
    let mut fit = s.fit.clone();
    swapped(&mut fit);
    let b = disagreements(&Surfaces {
        fit,
        oom: s.oom.clone(),
        page: s.page.clone(),
    });
    assert!(b.iter().any(|l| l.contains("fit devices[].fixes")), "{b:?}");
    let device = |edit: &dyn Fn(&mut Value)| {
        let mut f = s.fit["devices"][0].clone();
        edit(&mut f);
        rule_breaks(0, &f)
    };
    let b = device(&|f| {
        let first = f["fixes"][0].clone();
        f["immaterial_fixes"].as_array_mut().unwrap().push(first);
    });
    assert!(
        b.iter().any(|l| l.contains("both a fix and immaterial")),
        "{b:?}"
    );
    let b = device(&|f| {
        f["fixes"][0]["saves_bytes"] = 1.into();
        f["shortfall_bytes"] = Value::Null;
    });
    assert!(b.iter().any(|l| l.contains("under 1%")), "{b:?}");
    for id in NEEDS_OPTIMIZER_STATE.iter().chain([&NEEDS_NO_BACKWARD]) {
        let b = device(&|f| {
            f["immaterial_fixes"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({ "id": id }))
        });
        assert!(b.iter().any(|l| l.contains(id)), "{id}: {b:?}");
    }
}

fn device0(v: &Value) -> &Value {
    let d = &v["devices"][0];
    assert_eq!(as_u64(&d["device"]), 0, "{v}");
    d
}

fn fix<'a>(d: &'a Value, id: &str) -> Option<(usize, &'a Value)> {
    d["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .find(|(_, f)| f["id"] == id)
}

/// attention_chain: the score-shaped tensors fit finds are the chain's softmax and dropout
/// outputs of every layer, no transient score and no projection, made in the attention
/// module's own forward; fused attention saves exactly what it finds, at the generator's peak.
#[test]
fn attention_chain_prices_fused_attention_at_the_kept_scores() {
    let t = truth("attention_chain");
    let v = json_of("fit", &sample("attention_chain.pickle"));
    let d = device0(&v);
    let (b, h, s, layers) = (
        as_u64(&t["B"]),
        as_u64(&t["heads"]),
        as_u64(&t["S"]),
        as_u64(&t["layers"]),
    );
    let z = b * h * s * s * 4;
    assert_eq!(z, as_u64(&t["score_tensor_bytes"]));
    let kinds = &t["score_bytes_at_peak_by_kind"];
    assert_eq!(as_u64(&kinds["softmax"]), layers * z);
    assert_eq!(as_u64(&kinds["dropout_output"]), layers * z);
    assert_eq!(as_u64(&kinds["dropout_mask"]), layers * b * h * s * s);
    assert_eq!(d["moment"], "peak");
    assert_eq!(
        as_u64(&d["at"]["event_index"]),
        as_u64(&t["peak"]["peak_event_index"])
    );
    let a = &d["anatomy"]["attention"];
    assert_eq!(a["function"], t["attention_function"]);
    assert_eq!(as_u64(&a["score_tensor_bytes"]), z);
    assert_eq!(a["softmax_seen"], true);
    let found = as_u64(&a["bytes"]);
    // at least every softmax and dropout output, at most every B×H×S×S tensor kept
    assert!(found >= 2 * layers * z, "{a}");
    assert!(found <= as_u64(&t["score_bytes_at_peak"]), "{a}");
    let (_, f) = fix(d, "fused_attention").expect("fused_attention offered");
    assert_eq!(f["cost"], "free");
    assert_eq!(as_u64(&f["saves_bytes"]), found);
    assert_eq!(
        as_u64(&d["anatomy"]["parts"]["attention_scores_bytes"]),
        found
    );
}

/// attention_chain, exactly: fused attention saves every B×H×S×S tensor the chain keeps,
/// the dropout's bool masks included (reading.md §4: flash and memory-efficient kernels keep
/// no mask either): a bool tensor of exactly a quarter of fp32 scores under a dropout frame.
#[test]
fn attention_chain_fused_attention_saves_every_kept_score_tensor() {
    let t = truth("attention_chain");
    let v = json_of("fit", &sample("attention_chain.pickle"));
    let d = device0(&v);
    let a = &d["anatomy"]["attention"];
    assert_eq!(
        as_u64(&a["bytes"]),
        as_u64(&t["score_bytes_at_peak"]),
        "{a}"
    );
    assert_eq!(as_u64(&a["tensors"]), as_u64(&t["score_tensors_at_peak"]));
    let (_, f) = fix(d, "fused_attention").unwrap();
    assert_eq!(
        as_u64(&f["saves_bytes"]),
        as_u64(&t["fused_attention_saves_bytes"])
    );
}

/// vllm_kv: the engine's pre-sized KV cache is the first fix, saving exactly its bytes, and
/// 8-bit weights never come before it; `oom`-less, so the page advises at the peak the same.
#[test]
fn vllm_kv_cache_leads_with_gpu_memory_utilization() {
    let t = truth("vllm_kv");
    let file = sample("vllm_kv.pickle");
    let s = surfaces(&file);
    let d = device0(&s.fit);
    let kv = as_u64(&t["kv_cache_bytes"]);
    assert_eq!(
        kv,
        as_u64(&t["layers"]) * as_u64(&t["kv_cache_tensor_bytes"])
    );
    assert_eq!(d["moment"], "peak");
    assert_eq!(
        as_u64(&d["at"]["event_index"]),
        as_u64(&t["peak"]["peak_event_index"])
    );
    assert_eq!(as_u64(&d["anatomy"]["parts"]["kv_cache_bytes"]), kv);
    assert_eq!(as_u64(&d["anatomy"]["flags"]["engine_kv_cache_bytes"]), kv);
    assert_eq!(d["anatomy"]["flags"]["engine"], "vLLM");
    let first = &d["fixes"][0];
    assert_eq!(first["id"], t["first_fix"]);
    assert_eq!(first["id"], "vllm_gpu_memory_utilization");
    assert_eq!(as_u64(&first["saves_bytes"]), kv);
    assert_eq!(
        as_u64(&first["peak_after_bytes"]),
        as_u64(&d["demand_bytes"]) - kv
    );
    if let Some((i, _)) = fix(d, "int8_weights") {
        assert!(i > 0);
    }
    assert!(s.oom["ooms"].as_array().unwrap().is_empty());
    assert_eq!(ids(&s.page["advice"][0]["fixes"]), ids(&d["fixes"]));
}

/// no_optimizer_state: SGD without momentum keeps no state; at its OOM (a capacity one, in
/// the forward of a training job) neither `oom` nor `fit` offers optimizer offload, an 8-bit
/// optimizer or `inference_mode`, and both give the one list.
#[test]
fn no_optimizer_state_gets_no_optimizer_or_inference_fix() {
    let t = truth("no_optimizer_state");
    let s = surfaces(&sample("no_optimizer_state.pickle"));
    let ooms = s.oom["ooms"].as_array().unwrap();
    assert_eq!(ooms.len(), 1);
    let o = &ooms[0];
    assert_eq!(o["verdict"], t["verdict"]);
    assert_eq!(as_u64(&o["event_index"]), as_u64(&t["oom_event_index"]));
    assert_eq!(
        as_u64(&o["requested_bytes"]),
        as_u64(&t["tried_to_allocate_bytes"])
    );
    let d = device0(&s.fit);
    assert_eq!(d["moment"], "oom");
    assert_eq!(
        as_u64(&d["at"]["event_index"]),
        as_u64(&t["oom_event_index"])
    );
    let parts = &d["anatomy"]["parts"];
    assert_eq!(as_u64(&parts["optimizer_state_bytes"]), 0);
    assert_eq!(as_u64(&parts["gradients_bytes"]), 0);
    assert_eq!(
        as_u64(&parts["parameters_bytes"]),
        as_u64(&t["parameter_bytes"])
    );
    assert_eq!(d["anatomy"]["flags"]["trains"], true);
    assert_eq!(d["moment_phase"]["phase"], t["phase_at_oom"]);
    let never: Vec<&str> = t["fixes_never_offered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert_eq!(
        never,
        [
            "offload_optimizer_state",
            "eight_bit_optimizer",
            "inference_mode"
        ]
    );
    let recs = ids(&o["recommendations"]);
    assert!(!recs.is_empty());
    assert_ne!(recs[0], NEEDS_NO_BACKWARD);
    let listed: Vec<&str> = recs
        .iter()
        .copied()
        .chain(ids(&d["fixes"]))
        .chain(ids(&d["immaterial_fixes"]))
        .collect();
    for id in never {
        assert!(!listed.contains(&id), "{id} offered: {listed:?}");
    }
    assert_eq!(recs, ids(&d["fixes"]));
}
