//! `memlens explain` (issue #4): the OOM-message corpus in `tests/data/oom_messages/`, the
//! command line, and golden text outputs in `tests/golden/explain/` (`MEMLENS_BLESS=1`).

use crate::common;
use common::*;
use memlens::analyze::explain::{self, Options};
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn corpus() -> Vec<PathBuf> {
    let dir = root().join("tests/data/oom_messages");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    v.sort();
    v
}

fn report(text: &str) -> Value {
    serde_json::to_value(explain::run(text, &Options::default()).unwrap()).unwrap()
}

/// Checks what every explained OOM must satisfy, whatever its numbers.
fn assert_advice_rules(name: &str, oom: &Value) {
    let recs = oom["recommendations"].as_array().unwrap();
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
    assert!(
        costs.windows(2).all(|w| w[0] <= w[1]),
        "{name}: not cheapest first: {costs:?}"
    );
    for r in recs {
        let action = r["action"].as_str().unwrap();
        assert!(
            !action.contains("empty_cache"),
            "{name}: empty_cache recommended: {action}"
        );
        assert!(
            !r["why"].as_str().unwrap().is_empty(),
            "{name}: a recommendation without why"
        );
        if action.contains("expandable_segments:True") && !action.contains("upgrade") {
            assert_eq!(
                oom["verdict"], "fragmentation",
                "{name}: expandable_segments outside fragmentation"
            );
        }
    }
    if oom["verdict"] == "fragmentation" && oom["wording"] == "sentences" {
        assert!(
            recs[0]["action"]
                .as_str()
                .unwrap()
                .contains("expandable_segments:True"),
            "{name}: fragmentation without expandable_segments first"
        );
    }
    assert!(!oom["headline"].as_str().unwrap().is_empty());
}

#[test]
fn corpus_has_at_least_15_messages_across_wordings() {
    let files = corpus();
    assert!(files.len() >= 15, "{} messages", files.len());
    let mut wordings = std::collections::BTreeSet::new();
    for f in &files {
        for o in report(&std::fs::read_to_string(f).unwrap())["ooms"]
            .as_array()
            .unwrap()
        {
            wordings.insert(format!("{}/{}", o["backend"], o["wording"]));
        }
    }
    for want in [
        "\"CUDA\"/\"parenthesized\"",
        "\"CUDA\"/\"sentences\"",
        "\"CUDA\"/\"cuda_malloc_async\"",
        "\"HIP\"/\"sentences\"",
        "\"XPU\"/\"sentences\"",
    ] {
        assert!(wordings.contains(want), "no {want} in {wordings:?}");
    }
}

#[test]
fn corpus_numbers_to_the_byte_and_verdicts() {
    for f in corpus() {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let got = report(&std::fs::read_to_string(&f).unwrap());
        let want: Value = serde_json::from_str(
            &std::fs::read_to_string(f.with_extension("expect.json")).unwrap(),
        )
        .unwrap();
        let (got, want) = (
            got["ooms"].as_array().unwrap(),
            want["ooms"].as_array().unwrap(),
        );
        assert_eq!(got.len(), want.len(), "{name}: number of OOMs");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            for (k, v) in w.as_object().unwrap() {
                assert_eq!(&g[k], v, "{name}: ooms[{i}].{k}");
            }
            assert_eq!(g["event_index"], Value::Null);
            assert_eq!(g["largest_free_block_bytes"], Value::Null);
            assert_advice_rules(&name, g);
        }
    }
}

fn corpus_report(name: &str) -> Value {
    let text = std::fs::read_to_string(root().join("tests/data/oom_messages").join(name)).unwrap();
    report(&text)["ooms"][0].clone()
}

fn actions(o: &Value) -> Vec<String> {
    o["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn fragmentation_leads_with_expandable_segments_and_quotes_the_gap() {
    let o = corpus_report("07_v2_4_fragmentation_traceback.txt");
    let r = &o["recommendations"][0];
    assert_eq!(r["cost"], "free");
    assert!(r["action"]
        .as_str()
        .unwrap()
        .contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
    assert!(r["why"].as_str().unwrap().contains("3.24 GiB"));
    assert!(r["why"].as_str().unwrap().contains("764.00 MiB"));
    assert!(o["notes"][0]
        .as_str()
        .unwrap()
        .contains("empty_cache() would not help"));
}

#[test]
fn pre_2_1_fragmentation_gets_max_split_size_not_expandable_segments() {
    let o = corpus_report("01_v2_0_fragmentation_t4.txt");
    assert_eq!(o["verdict"], "fragmentation");
    assert!(actions(&o)[0].starts_with("Set PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512"));
}

#[test]
fn rocm_fragmentation_mentions_the_hip_variable() {
    let o = corpus_report("14_hip_fragmentation_mi300x.txt");
    assert!(actions(&o)[0].contains("PYTORCH_HIP_ALLOC_CONF"));
}

#[test]
fn capacity_orders_free_speed_results_and_never_expandable_segments() {
    let o = corpus_report("06_v2_1_capacty_typo.txt");
    assert_eq!(o["verdict"], "capacity");
    let a = actions(&o);
    assert!(a.iter().all(|x| !x.contains("expandable_segments")));
    let pos = |s: &str| a.iter().position(|x| x.contains(s)).unwrap();
    assert!(pos("inference_mode") < pos("micro-batch"));
    assert!(pos("micro-batch") < pos("checkpointing"));
    assert!(pos("checkpointing") < pos("AdamW8bit"));
    assert!(pos("AdamW8bit") < pos("QLoRA"));
}

#[test]
fn other_processes_are_named_in_the_first_fix() {
    let o = corpus_report("09_v2_3_other_process.txt");
    assert_eq!(o["verdict"], "outside_pytorch");
    assert_eq!(o["non_pytorch_bytes"], 50_422_916_056u64);
    assert!(actions(&o)[0].contains("Stop process 4188012 (46.20 GiB)"));
    let o = corpus_report("10_v2_3_dataloader_workers.txt");
    assert!(actions(&o).iter().any(|a| a.contains("DataLoader workers")));
}

#[test]
fn vllm_logs_get_vllm_flags() {
    let o = corpus_report("17_vllm_worker.txt");
    let a = actions(&o).join("\n");
    assert!(a.contains("--max-num-seqs") && a.contains("--enforce-eager"));
    assert!(!a.contains("gradient"));
}

#[test]
fn the_limit_and_private_pools_are_acted_on() {
    let o = corpus_report("12_v2_4_allowed_fraction.txt");
    assert!(actions(&o)[0].contains("set_per_process_memory_fraction"));
    let o = corpus_report("11_v2_4_private_pools.txt");
    assert!(actions(&o).iter().any(|a| a.contains("CUDA graphs")));
}

#[test]
fn a_capacity_option_completes_a_message_without_one() {
    let text = "CUDA out of memory. Tried to allocate 2.00 GiB. Of the allocated memory 76.00 GiB is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated.";
    let without = report(text);
    assert_eq!(without["ooms"][0]["verdict"], "unknown");
    assert!(without["ooms"][0]["cannot_conclude"][0]
        .as_str()
        .unwrap()
        .contains("--gpu"));
    let opts = Options {
        capacity_bytes: Some(84_986_665_370),
        capacity_source: Some("--gpu A100 80GB".into()),
    };
    let with = serde_json::to_value(explain::run(text, &opts).unwrap()).unwrap();
    assert_eq!(with["ooms"][0]["verdict"], "capacity");
    assert_eq!(with["ooms"][0]["capacity_source"], "--gpu A100 80GB");
}

// ---- command line ----

fn explain_cmd(args: &[&str], stdin: Option<&str>) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memlens"));
    c.current_dir(root()).arg("explain").args(args);
    c.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    if let Some(s) = stdin {
        child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn msg_path(name: &str) -> String {
    format!("tests/data/oom_messages/{name}")
}

#[test]
fn cli_json_contract() {
    let o = explain_cmd(
        &[
            "--format",
            "json",
            "--message-file",
            &msg_path("09_v2_3_other_process.txt"),
        ],
        None,
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema_version"], 1);
    let oom = &v["ooms"][0];
    // serde_json::Value sorts keys; the contract's order is checked on the text.
    let text = String::from_utf8_lossy(&o.stdout);
    let contract = [
        "device",
        "event_index",
        "requested_bytes",
        "device_free_bytes",
        "reserved_bytes",
        "allocated_bytes",
        "largest_free_block_bytes",
        "capacity_bytes",
        "process_bytes",
        "verdict",
        "recommendations",
    ];
    let at: Vec<usize> = contract
        .iter()
        .map(|k| {
            text.find(&format!("\n      \"{k}\":"))
                .unwrap_or_else(|| panic!("{k}"))
        })
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "contract keys out of order"
    );
    assert!(oom.get("reserved_unallocated_bytes").is_some());
    assert_eq!(oom["reserved_bytes"], 33_468_532_654u64);
    // action, cost, why, and the id shared with `fit`'s fixes (a message has no savings).
    for r in oom["recommendations"].as_array().unwrap() {
        assert_eq!(r.as_object().unwrap().len(), 4, "{r}");
        assert!(r["id"].as_str().is_some_and(|id| !id.is_empty()), "{r}");
    }
}

#[test]
fn cli_message_as_argument_words_and_stdin_agree() {
    let text =
        std::fs::read_to_string(root().join(msg_path("07_v2_4_fragmentation_traceback.txt")))
            .unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("torch.OutOfMemoryError"))
        .unwrap();
    let a = explain_cmd(&["--format", "json", line], None);
    let words: Vec<&str> = line.split(' ').collect();
    let mut args = vec!["--format", "json"];
    args.extend(&words);
    let b = explain_cmd(&args, None);
    let c = explain_cmd(&["--format", "json"], Some(&text));
    assert_eq!(a.status.code(), Some(0));
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(a.stdout, c.stdout);
}

#[test]
fn cli_unparsable_message_is_exit_2_with_one_line() {
    for input in [
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied",
        "",
    ] {
        let o = explain_cmd(&[], Some(input));
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("memlens: expected a PyTorch out-of-memory message"),
            "{err}"
        );
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn cli_bad_gpu_and_capacity_are_exit_2() {
    let m = msg_path("20_truncated_needs_more.txt");
    for args in [
        vec!["--gpu", "voodoo5", "--message-file", &m],
        vec!["--capacity", "80 parsecs", "--message-file", &m],
        vec!["--gpu", "a100", "--message-file", &m],
    ] {
        let o = explain_cmd(&args, None);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
    }
    let o = explain_cmd(
        &["--gpu", "h100", "--capacity", "80GiB", "--message-file", &m],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn cli_output_file_needs_force_to_replace() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("explain.txt");
    let out_s = out.to_str().unwrap();
    let m = msg_path("02_v2_0_capacity_8gb.txt");
    let o = explain_cmd(&["--message-file", &m, "-o", out_s], None);
    assert_eq!(o.status.code(), Some(0));
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains("Verdict: Real shortage"));
    let o = explain_cmd(&["--message-file", &m, "-o", out_s], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    let o = explain_cmd(
        &[
            "--message-file",
            &m,
            "-o",
            out_s,
            "--force",
            "--format",
            "json",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(std::fs::read_to_string(&out).unwrap().starts_with('{'));
}

// ---- golden text outputs ----

#[test]
fn golden_outputs() {
    for (name, extra) in [
        ("07_v2_4_fragmentation_traceback", vec![]),
        ("06_v2_1_capacty_typo", vec![]),
        ("09_v2_3_other_process", vec![]),
        ("02_v2_0_capacity_8gb", vec![]),
        ("18_torchrun_two_ranks_wrapped", vec![]),
        ("20_truncated_needs_more", vec!["--gpu", "h100"]),
    ] {
        let m = msg_path(&format!("{name}.txt"));
        let mut args = vec!["--message-file", m.as_str()];
        args.extend(extra.iter());
        let o = explain_cmd(&args, None);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        golden(&format!("explain/{name}.txt"), &o.stdout);
    }
    let m = msg_path("07_v2_4_fragmentation_traceback.txt");
    let o = explain_cmd(&["--format", "json", "--message-file", &m], None);
    golden("explain/07_v2_4_fragmentation_traceback.json", &o.stdout);
}
