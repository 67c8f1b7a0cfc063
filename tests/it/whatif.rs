//! `memlens whatif` and the allocator model (`src/allocator/`): the model replayed as recorded
//! against every sample, capture and real file (segment events and reserved peaks, per file,
//! from a truth table: a regression fails), a prediction checked against a real GPU run under
//! the other setting, the OOM verdicts, and the command line.

use crate::common;
use common::*;
use memlens::analyze::whatif::{self, WhatifOptions, WhatifReport};
use serde_json::Value;
use std::path::Path;

/// (file, device, recorded segment events, of them reproduced, recorded peak reserved bytes).
/// `real:` names a file of ../shared/samples/real. Every file with a trace is here.
const TRUTH: &[(&str, u32, u64, u64, u64)] = &[
    ("samples/adam_loop.pickle", 0, 20, 20, 1243611136),
    ("samples/capacity_oom.pickle", 0, 68, 68, 23639097344),
    ("samples/compile_context.pickle", 0, 3, 3, 39845888),
    ("samples/cpp_proto2.pickle", 0, 5, 5, 138412032),
    ("samples/diff_base.pickle", 0, 19, 19, 1042284544),
    ("samples/diff_shifted.pickle", 0, 19, 19, 1042284544),
    ("samples/diff_cand.pickle", 0, 20, 20, 1377828864),
    ("samples/diff_phase_base.pickle", 0, 12, 12, 44040192),
    ("samples/diff_phase_cand.pickle", 0, 17, 17, 161480704),
    ("samples/dominant_stack.pickle", 0, 23, 23, 1258291200),
    ("samples/expandable_multi.pickle", 0, 11, 11, 278921216),
    ("samples/expandable_multi.pickle", 1, 8, 8, 17408458752),
    ("samples/frag_oom.pickle", 0, 10, 10, 15135145984),
    ("samples/host_pinned.pickle", 0, 1, 1, 20971520),
    ("samples/kv_cache.pickle", 0, 33, 33, 1574961152),
    ("samples/legacy_2_0.pickle", 0, 0, 0, 383778816),
    ("samples/late_grads.pickle", 0, 0, 0, 375390208),
    // 5 pages of 20 MiB (pinned_pages.json), mapped in 3 steps.
    ("samples/pinned_pages.pickle", 0, 3, 3, 104857600),
    ("samples/serve_kv.pickle", 0, 4, 4, 278921216),
    ("samples/train_stacks_all.pickle", 0, 15, 15, 379584512),
    ("samples/line_max.pickle", 0, 2, 2, 23068672),
    ("samples/forward_frames.pickle", 0, 2, 2, 23068672),
    ("samples/fx_frames.pickle", 0, 4, 4, 60817408),
    ("samples/skip_free_requested.pickle", 0, 8, 8, 180355072),
    ("samples/skip_free_completed.pickle", 0, 8, 8, 180355072),
    ("samples/unknown_actions.pickle", 0, 8, 8, 180355072),
    ("samples/alloc_conf_2026.pickle", 0, 8, 8, 180355072),
    ("samples/xpu_device1.pickle", 1, 8, 8, 180355072),
    ("samples/list_leak.pickle", 0, 10, 10, 1285554176),
    ("samples/loop_freed.pickle", 0, 24, 24, 2451570688),
    ("samples/outside_oom.pickle", 0, 10, 10, 1868562432),
    ("samples/retained_graph.pickle", 0, 21, 21, 929038336),
    ("samples/retained_graph_fixed.pickle", 0, 16, 16, 593494016),
    ("samples/retained_val.pickle", 0, 24, 24, 50331648),
    ("samples/retained_loss.pickle", 0, 2, 2, 4194304),
    ("samples/eval_autograd.pickle", 0, 15, 15, 643825664),
    ("samples/eval_no_grad.pickle", 0, 6, 6, 392167424),
    ("samples/fwd_attention.pickle", 0, 17, 17, 379584512),
    ("samples/fwd_stale_grads.pickle", 0, 14, 14, 1247805440),
    ("samples/attention_chain.pickle", 0, 55, 55, 497025024),
    ("samples/no_optimizer_state.pickle", 0, 41, 41, 15302918144),
    ("samples/vllm_kv.pickle", 0, 33, 33, 3193962496),
    ("samples/backward_layers.pickle", 0, 16, 16, 90177536),
    ("samples/train_small.pickle", 0, 8, 8, 180355072),
    ("samples/wrapped_ring.pickle", 0, 2, 2, 144703488),
    ("samples/snapshot.json", 0, 8, 8, 180355072),
    (
        "samples/captured/alloc_settings_default.pickle",
        0,
        8,
        8,
        2147483648,
    ),
    (
        "samples/captured/alloc_settings_expandable.pickle",
        0,
        25,
        25,
        2160066560,
    ),
    (
        "samples/captured/alloc_settings_max_split_128.pickle",
        0,
        63,
        63,
        2181038080,
    ),
    (
        "samples/captured/alloc_settings_roundup4.pickle",
        0,
        8,
        8,
        2147483648,
    ),
    (
        "samples/captured/alloc_settings_gc06_max_split_128.pickle",
        0,
        63,
        63,
        2155872256,
    ),
    ("samples/captured/capacity_oom.pickle", 0, 6, 6, 1679818752),
    ("samples/captured/diff_base.pickle", 0, 9, 9, 178257920),
    ("samples/captured/diff_extra.pickle", 0, 10, 10, 312475648),
    ("samples/captured/frag_oom.pickle", 0, 20, 20, 2097152000),
    (
        "samples/captured/frag_oom_expandable.pickle",
        0,
        51,
        51,
        2097152000,
    ),
    ("samples/captured/kv_cache.pickle", 0, 7, 7, 226492416),
    (
        "samples/captured/kv_cache_leak.pickle",
        0,
        19,
        19,
        478150656,
    ),
    ("samples/captured/protocol4.pickle", 0, 3, 3, 48234496),
    ("samples/captured/protocol5.pickle", 0, 3, 3, 48234496),
    (
        "samples/captured/protocol_default.pickle",
        0,
        3,
        3,
        48234496,
    ),
    (
        "samples/captured/retained_graph.pickle",
        0,
        30,
        30,
        369098752,
    ),
    (
        "samples/captured/retained_graph_fixed.pickle",
        0,
        11,
        11,
        182452224,
    ),
    ("samples/captured/side_stream.pickle", 0, 6, 6, 304087040),
    (
        "samples/captured/side_stream_after.pickle",
        0,
        7,
        7,
        306184192,
    ),
    ("samples/captured/stacks_all.pickle", 0, 4, 4, 90177536),
    (
        "real:Constructor-Sun__code_location__memory_snapshot.pickle",
        0,
        175,
        175,
        8541700096,
    ),
    (
        "real:Constructor-Sun__code_location__memory_snapshot.pickle",
        1,
        46,
        46,
        84202749952,
    ),
    (
        "real:Constructor-Sun__code_location__memory_snapshot.pickle",
        2,
        78,
        78,
        21883781120,
    ),
    (
        "real:JasperSolt__EoR_NN__snapshot.pickle",
        0,
        7,
        7,
        134217728,
    ),
    (
        "real:LfieLike__SketchKV2__my_snapshot.pickle",
        0,
        0,
        0,
        17133731840,
    ),
    (
        "real:MAGMA27__assignment2-systems__memory_snapshot.pickle",
        0,
        0,
        0,
        14180941824,
    ),
    (
        "real:Maphsge4__select_n__04d383c__snapshot.pickle",
        0,
        1163,
        1163,
        22519218176,
    ),
    (
        "real:MercuryB1__SQAttn__cuda_memory_snapshot.pickle",
        0,
        840,
        840,
        5802819584,
    ),
    (
        "real:Muduard__LayoutEditing__413b2eb__dump_snapshot.pickle",
        0,
        0,
        0,
        0,
    ),
    (
        "real:Muduard__LayoutEditing__413b2eb__dump_snapshot.pickle",
        1,
        0,
        0,
        11274289152,
    ),
    (
        "real:Wedsonlin__assignment2-systems__results_medium_1024_inference_memory_snapshot.pickle",
        0,
        0,
        0,
        3204448256,
    ),
    (
        "real:Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle",
        0,
        0,
        0,
        25178406912,
    ),
    (
        "real:Wedsonlin__assignment2-systems__results_medium_128_inference_memory_snapshot.pickle",
        0,
        0,
        0,
        1763704832,
    ),
    (
        "real:Wedsonlin__assignment2-systems__results_medium_128_training_memory_snapshot.pickle",
        0,
        0,
        0,
        7235174400,
    ),
    (
        "real:Wedsonlin__assignment2-systems__results_medium_256_inference_memory_snapshot.pickle",
        0,
        0,
        0,
        1864368128,
    ),
    (
        "real:Wedsonlin__assignment2-systems__results_medium_256_training_memory_snapshot.pickle",
        0,
        0,
        0,
        9265217536,
    ),
    (
        "real:Wedsonlin__assignment2-systems__results_medium_512_inference_memory_snapshot.pickle",
        0,
        0,
        0,
        1981808640,
    ),
    (
        "real:Wedsonlin__assignment2-systems__results_medium_512_training_memory_snapshot.pickle",
        0,
        1,
        1,
        12660506624,
    ),
    (
        "real:Yiyi-philosophy__LLM-inference__1.3b_snapshot.pickle",
        0,
        0,
        0,
        7608467456,
    ),
    (
        "real:Yiyi-philosophy__LLM-inference__oom_snapshot.pickle",
        0,
        0,
        0,
        11844714496,
    ),
    (
        "real:ZidongLiu__DeComFL__memory.pickle",
        0,
        61,
        61,
        1897922560,
    ),
    (
        "real:bcrafton__assignment2-systems__memory_snapshot.pickle",
        0,
        0,
        0,
        4238344192,
    ),
    (
        "real:cranberrii__ftcourse__memory_snapshot.pickle",
        0,
        152,
        152,
        6471811072,
    ),
    (
        "real:drisspg__transformer_nuggets__test_data_mini_snapshot.pickle",
        0,
        14,
        14,
        421527552,
    ),
    (
        "real:jogregoire__How-Diffusion-Models-Work__my_snapshot.pickle",
        0,
        0,
        0,
        33554432,
    ),
    (
        "real:kkaitlyn111__cs336-a2-systems__memory_2.7b_forward.pickle",
        0,
        920,
        920,
        51849986048,
    ),
    (
        "real:kkaitlyn111__cs336-a2-systems__memory_files_memory_ctx128_forward_mixed.pickle",
        0,
        461,
        461,
        24245174272,
    ),
    (
        "real:kkaitlyn111__cs336-a2-systems__memory_small_forward.pickle",
        0,
        3,
        3,
        1107296256,
    ),
    (
        "real:notHanmin__assignment2-systems__memory_snapshot.pickle",
        0,
        0,
        0,
        23842521088,
    ),
    (
        "real:notHanmin__assignment2-systems__memory_snapshot_forward.pickle",
        0,
        0,
        0,
        47234154496,
    ),
    (
        "real:shreyansh26__MLSys-Experiments__model_memory_usage_profile_grad.pkl",
        0,
        7,
        7,
        4439670784,
    ),
    (
        "real:shreyansh26__MLSys-Experiments__model_memory_usage_profile_no_grad.pkl",
        0,
        7,
        7,
        4439670784,
    ),
    (
        "real:silmont2000__assignment2-systems__mem_snapshot.pickle",
        0,
        9,
        9,
        3781165056,
    ),
    (
        "real:silmont2000__assignment2-systems__memory_forward_bf16_128.pickle",
        0,
        0,
        0,
        861929472,
    ),
    (
        "real:silmont2000__assignment2-systems__memory_forward_fp32_128.pickle",
        0,
        0,
        0,
        610271232,
    ),
];

fn report(path: &Path, opts: &WhatifOptions) -> WhatifReport {
    let snap = load(path);
    let replays = memlens::replay::replay(&snap);
    whatif::run(&snap, &replays, opts).unwrap()
}

fn name_of(path: &Path) -> String {
    let s = path.to_string_lossy().to_string();
    match s.find("samples/real/") {
        Some(i) => format!("real:{}", &s[i + "samples/real/".len()..]),
        // the last `samples/`: a checkout's own path may hold one (`/work/wt/i52-samples/`)
        None => s[s.rfind("samples/").unwrap()..].to_string(),
    }
}

/// Samples whose blocks the generator placed by hand rather than through its allocator
/// simulator (`memgen/annotations.py`: annotations on chosen addresses; `memgen/pools.py`:
/// private pools laid out by the scenario): no caching allocator would lay them out so, so the
/// model is not held to them.
const HAND_PLACED: &[&str] = &[
    "samples/annotated.pickle",
    "samples/annotated_graph.pickle",
    "samples/private_pools.pickle",
];

fn check_fidelity(files: &[std::path::PathBuf], exact: bool) {
    for path in files {
        let name = name_of(path);
        if HAND_PLACED.contains(&name.as_str()) {
            continue;
        }
        let r = report(path, &WhatifOptions::default());
        for d in &r.devices {
            let f = &d.fidelity;
            let row = TRUTH
                .iter()
                .find(|t| t.0 == name && t.1 == d.device)
                .unwrap_or_else(|| panic!("{name} device {}: add it to TRUTH ({f:?})", d.device));
            assert_eq!(f.segment_events_recorded, row.2, "{name} d{}", d.device);
            assert_eq!(f.segment_events_matched, row.3, "{name} d{}", d.device);
            assert_eq!(
                f.recorded_peak_reserved_bytes, row.4,
                "{name} d{}",
                d.device
            );
            assert!(f.segment_events_modelled >= f.segment_events_matched);
            if exact {
                assert_eq!(f.agreement, 1.0, "{name} d{}: {f:?}", d.device);
                assert_eq!(f.model_peak_reserved_bytes, f.recorded_peak_reserved_bytes);
                assert_eq!(f.first_difference_event, None, "{name}");
            } else {
                assert!(f.agreement >= 0.99, "{name} d{}: {f:?}", d.device);
            }
            // The recorded run is the first scenario and measures what the model reserved.
            assert_eq!(d.scenarios[0].label, "as recorded");
            assert_eq!(
                d.scenarios[0].peak_reserved_bytes,
                f.model_peak_reserved_bytes
            );
        }
    }
}

#[test]
fn the_model_reproduces_every_samples_segment_events() {
    check_fidelity(&samples(), true);
}

#[test]
fn the_model_reproduces_every_captures_segment_events() {
    check_fidelity(&captured(), true);
}

#[test]
fn the_model_reproduces_the_real_files_segment_events() {
    let Some(files) = require_shared() else {
        return;
    };
    // At least 99% is the goal; every real file is exact today (TRUTH holds the counts).
    check_fidelity(&files, false);
    let total: u64 = TRUTH
        .iter()
        .filter(|t| t.0.starts_with("real:"))
        .map(|t| t.2)
        .sum();
    assert!(total > 2000, "the real files hold {total} segment events");
}

fn json(args: &[&str]) -> Value {
    let out = memlens(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn expandable_segments_remove_the_fragmentation_oom_as_the_gpu_run_did() {
    // frag_oom ran out under a 2 GiB cap with 1.76 GiB cached in holes; frag_oom_expandable
    // is the same workload run on the GPU with expandable_segments:True.
    let frag = sample("captured/frag_oom.pickle");
    let d = &json(&[
        "whatif",
        frag.to_str().unwrap(),
        "--set",
        "expandable_segments:True",
        "--format",
        "json",
    ])["devices"][0];
    assert_eq!(d["capacity"]["bytes"], 2u64 << 30);
    assert_eq!(d["capacity"]["kind"], "per_process_limit");
    let (base, exp) = (&d["scenarios"][0], &d["scenarios"][1]);
    assert_eq!(base["ooms"], 1);
    assert_eq!(base["first_oom_event"], 240);
    assert_eq!(exp["ooms"], 0);
    assert_eq!(exp["ooms_change"], -1);
    assert!(d["verdict"]
        .as_str()
        .unwrap()
        .starts_with("expandable_segments:True avoids the OOM: the OOM at event 240 does not happen; peak reserved"));
    // The prediction is what the GPU did: same peak and end reserved, maps and unmaps.
    let real = sample("captured/frag_oom_expandable.pickle");
    let r = &json(&["whatif", real.to_str().unwrap(), "--format", "json"])["devices"][0];
    let f = &r["fidelity"];
    assert_eq!(
        exp["peak_reserved_bytes"],
        f["recorded_peak_reserved_bytes"]
    );
    assert_eq!(exp["peak_reserved_bytes"], 2097152000u64);
    assert_eq!(exp["end_reserved_bytes"], 922746880u64);
    assert_eq!(
        exp["end_reserved_bytes"],
        r["scenarios"][0]["end_reserved_bytes"]
    );
    assert_eq!(exp["device_mallocs"], 21);
    assert_eq!(exp["device_frees"], 30);
}

#[test]
fn no_setting_avoids_a_capacity_oom_and_whatif_says_so() {
    let cap = sample("captured/capacity_oom.pickle");
    let d = &json(&[
        "whatif",
        cap.to_str().unwrap(),
        "--suggest",
        "--format",
        "json",
    ])["devices"][0];
    let scenarios = d["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 1 + whatif::SUGGESTED.len());
    assert!(scenarios.iter().all(|s| s["ooms"].as_u64().unwrap() >= 1));
    let oom = &d["recorded_ooms"][0];
    assert_eq!(oom["exceeds_capacity_when_packed"], true);
    // 1.5 GiB (and two 512-byte blocks) live + a 1 GiB request > the 2 GiB cap.
    assert_eq!(oom["request_bytes"], 1u64 << 30);
    assert_eq!(oom["live_bytes"], (3u64 << 29) + 1024);
    assert_eq!(d["capacity"]["bytes"], 2u64 << 30);
    assert!(d["verdict"].as_str().unwrap().starts_with(
        "no allocator setting avoids this OOM; the request exceeds what is free even when packed"
    ));
    let text = memlens(["whatif", cap.to_str().unwrap()]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("no allocator setting avoids this OOM"),
        "{text}"
    );
}

#[test]
fn suggest_ranks_fewest_ooms_then_lowest_peak_after_the_recorded_run() {
    let frag = sample("captured/frag_oom.pickle");
    let d = &json(&[
        "whatif",
        frag.to_str().unwrap(),
        "--suggest",
        "--format",
        "json",
    ])["devices"][0];
    let s = d["scenarios"].as_array().unwrap();
    assert_eq!(s[0]["label"], "as recorded");
    assert_eq!(s[1]["label"], "expandable_segments:True");
    let keys: Vec<(u64, u64)> = s[1..]
        .iter()
        .map(|x| {
            (
                x["ooms"].as_u64().unwrap(),
                x["peak_reserved_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(keys.windows(2).all(|w| w[0] <= w[1]), "{keys:?}");
    for x in s {
        let change = x["peak_reserved_bytes"].as_i64().unwrap()
            - s[0]["peak_reserved_bytes"].as_i64().unwrap();
        assert_eq!(x["peak_reserved_change_bytes"].as_i64().unwrap(), change);
    }
}

#[test]
fn several_keys_make_one_scenario_and_the_settings_are_spelled_back() {
    let f = sample("train_small.pickle");
    let d = &json(&[
        "whatif",
        f.to_str().unwrap(),
        "--set",
        "expandable_segments:True,max_split_size_mb:512",
        "--set",
        "roundup_power2_divisions:[256:1,512:2,>:8]",
        "--format",
        "json",
    ])["devices"][0];
    let s = d["scenarios"].as_array().unwrap();
    assert_eq!(s.len(), 3);
    let both = s
        .iter()
        .find(|x| x["set"] == "expandable_segments:True,max_split_size_mb:512")
        .unwrap();
    assert_eq!(both["settings"]["expandable_segments"], true);
    assert_eq!(both["settings"]["max_split_size_bytes"], 512u64 << 20);
    assert_eq!(
        both["conf"],
        "expandable_segments:True,max_split_size_mb:512"
    );
    let r = s
        .iter()
        .find(|x| x["set"].as_str().unwrap().starts_with("roundup"))
        .unwrap();
    let bands: Vec<u64> = r["settings"]["roundup_power2_divisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(bands, [1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8]);
}

#[test]
fn a_bad_setting_is_one_line_and_exit_2() {
    let f = sample("train_small.pickle");
    for (set, says) in [
        (
            "expandable_segments:maybe",
            "--set expandable_segments:maybe: expected True or False",
        ),
        ("max_split:3", "--set max_split: not an allocator setting"),
        ("nokey", "--set nokey: expected KEY:VALUE"),
    ] {
        let out = memlens(["whatif", f.to_str().unwrap(), "--set", set]);
        assert_eq!(out.status.code(), Some(2), "{set}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with(&format!("memlens: {says}")), "{err}");
    }
}

#[test]
fn a_file_without_a_trace_has_nothing_to_replay() {
    let f = sample("bare_list.pickle");
    let r = &json(&["whatif", f.to_str().unwrap(), "--format", "json"]);
    assert_eq!(r["devices"].as_array().unwrap().len(), 0);
    assert_eq!(
        r["notes"],
        serde_json::json!(["device 0 has no trace: there are no requests to replay"])
    );
}

#[test]
fn oom_and_the_report_show_the_predicted_effect_of_the_allocator_setting_fix() {
    let frag = sample("captured/frag_oom.pickle");
    let o = json(&["oom", frag.to_str().unwrap(), "--format", "json"]);
    let recs = o["ooms"][0]["recommendations"].as_array().unwrap();
    let fix = recs
        .iter()
        .find(|r| {
            r["action"]
                .as_str()
                .unwrap()
                .contains("expandable_segments:True")
        })
        .unwrap();
    let p = &fix["predicted"];
    assert_eq!(p["set"], "expandable_segments:True");
    assert_eq!(p["avoids_oom"], true);
    assert_eq!(p["ooms"], 0);
    assert_eq!(p["peak_reserved_bytes"], 2097152000u64);
    assert_eq!(p["predicted_peak_reserved_bytes"], 2097152000u64);
    assert_eq!(
        p["words"],
        "replaying the trace with expandable_segments:True: the OOM at event 240 does not \
         happen; peak reserved 1.95 GiB → 1.95 GiB"
    );
    // Fixes that are not allocator settings predict nothing.
    assert!(recs
        .iter()
        .filter(|r| r != &fix)
        .all(|r| r.get("predicted").is_none()));
    let text = String::from_utf8(memlens(["oom", frag.to_str().unwrap()]).stdout).unwrap();
    assert!(text.contains("Predicted: replaying the trace with expandable_segments:True: the OOM at event 240 does not happen"), "{text}");
    // The page's data carries the same prediction.
    let page = json(&["report", frag.to_str().unwrap(), "--format", "json"]);
    let in_page = &page["oom"]["ooms"][0]["recommendations"];
    assert!(
        in_page
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["predicted"] == *p),
        "{in_page}"
    );
    // explain has no trace to replay: no prediction.
    let msg = "CUDA out of memory. Tried to allocate 72.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 137.33 GiB is free. Including non-PyTorch memory, this process has 2.46 GiB memory in use. 2.00 GiB allowed; Of the allocated memory 200.00 MiB is allocated by PyTorch, and 1.76 GiB is reserved by PyTorch but unallocated.";
    let e = json(&["explain", msg, "--format", "json"]);
    assert!(!e.to_string().contains("predicted"), "{e}");
}
