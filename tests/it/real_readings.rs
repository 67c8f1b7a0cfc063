//! The real snapshots held to an engineer's reading of each (issue 52, "Truth and tests").
//!
//! `tests/data/real_readings.json` is that reading, written independently of what memlens
//! says (docs/fit.md, "Truth: real traces, read by an engineer"): for every file of
//! `../shared/samples/real` the device of its OOM or peak, the phase of the peak, the first fix,
//! the fixes whose premise the file lacks, and whether a leak can be judged; for each related
//! pair what `diff` should say of the two peaks. The tests compare memlens's JSON with it, and
//! render every text command on every file to find two statements about one part that cannot
//! both be true. Each test gathers every file that fails and names them all in one message.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Every fix id the catalogue knows (docs/fit.md), and `none`.
const FIX_IDS: &[&str] = &[
    "none",
    "expandable_segments",
    "zero_grad_set_to_none",
    "inference_mode",
    "no_grad_forward",
    "detach_retained_graph",
    "gradient_accumulation",
    "micro_batch",
    "activation_checkpointing",
    "offload_optimizer_state",
    "eight_bit_optimizer",
    "fused_attention",
    "bf16_autocast",
    "lora",
    "int8_weights",
    "vllm_gpu_memory_utilization",
    "raise_process_limit",
    "free_other_process",
    "fix_request_shape",
];

const PHASES: &[&str] = &["forward", "backward", "optimizer", "between", "unknown"];
const LEAKS: &[&str] = &["found", "none", "cannot_judge"];

/// The text commands the contradiction test renders.
const TEXT_COMMANDS: &[&str] = &[
    "summary",
    "top",
    "categories",
    "timeline",
    "leaks",
    "oom",
    "fit",
    "frag",
];

fn readings() -> Value {
    let path = root().join("tests/data/real_readings.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn rows<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v[key].as_array().unwrap()
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string in {v}"))
}

/// The real snapshot `name` among `files`.
fn real(files: &[PathBuf], name: &str) -> PathBuf {
    files
        .iter()
        .find(|f| f.file_name().is_some_and(|n| n == name))
        .unwrap_or_else(|| panic!("{name} is not in ../shared/samples/real"))
        .clone()
}

/// memlens `args` then `files`: exit code, standard output, standard error. Text is never
/// wrapped (`--width` is not given and the output is a pipe: lines stay whole).
fn run(args: &[&str], files: &[&Path]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(args)
        .args(files)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run memlens");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The first two non-empty lines of standard error (a panic's place and its message).
fn first_lines(err: &str) -> String {
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(2)
        .collect();
    lines.join(" ")
}

/// `memlens CMD --format json FILES`, exit 0 or 1 (`leaks` exits 1 on a finding); an error
/// message naming the command otherwise.
fn json_of(cmd: &str, files: &[&Path]) -> Result<Value, String> {
    let (code, out, err) = run(&[cmd, "--format", "json"], files);
    if !matches!(code, Some(0) | Some(1)) {
        return Err(format!("`{cmd}` exited {code:?}: {}", first_lines(&err)));
    }
    serde_json::from_str(&out).map_err(|e| format!("`{cmd}`: not JSON: {e}"))
}

/// `f` over `items` on parallel threads (one per core, at least 2), results in order.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(2, 8);
    let next = AtomicUsize::new(0);
    let mut out: Vec<(usize, R)> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                sc.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        mine.push((i, f(item)));
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
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// Fails naming every problem, one a line, when there is any.
fn no_failures(what: &str, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{what}: {} failing\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

/// The truth's rows with their files, or `None` (a skip outside CI) without the real files.
fn cases() -> Option<(Vec<PathBuf>, Value)> {
    let files = require_shared()?;
    Some((files, readings()))
}

/// `fit`'s device `dev` (the truth's device: the one the OOM is on, else the peak's).
fn fit_device(fit: &Value, dev: u64) -> Option<&Value> {
    fit["devices"]
        .as_array()?
        .iter()
        .find(|d| d["device"].as_u64() == Some(dev))
}

fn fix_ids(dev: &Value) -> Vec<String> {
    dev["fixes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_truth_reads_every_real_snapshot_once() {
    let Some((files, t)) = cases() else {
        return;
    };
    let mut named: Vec<&str> = rows(&t, "files").iter().map(|r| s(r, "file")).collect();
    named.sort();
    let on_disk: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(named, on_disk, "one reading per real snapshot, none else");
    for r in rows(&t, "files") {
        let file = s(r, "file");
        assert!(r["device"].is_u64(), "{file}: device");
        assert!(PHASES.contains(&s(r, "peak_phase")), "{file}: peak_phase");
        assert!(LEAKS.contains(&s(r, "leak")), "{file}: leak");
        assert!(FIX_IDS.contains(&s(r, "first_fix")), "{file}: first_fix");
        assert!(!s(r, "cause").is_empty() && !s(r, "notes").is_empty());
        if let Some(gap) = r["memlens_today"].as_object() {
            // A known gap says why, and names fields the tests compare.
            assert!(!s(&r["memlens_today"], "why").is_empty(), "{file}: why");
            for k in gap.keys().filter(|k| *k != "why") {
                assert!(
                    ["first_fix", "peak_phase"].contains(&k.as_str()),
                    "{file}: {k}"
                );
            }
        }
        for id in r["not_offered"].as_array().unwrap() {
            let id = id.as_str().unwrap();
            assert!(FIX_IDS.contains(&id) && id != "none", "{file}: {id}");
            assert_ne!(id, s(r, "first_fix"), "{file}: first fix not offered");
        }
    }
    let phase_of = |f: &str| {
        rows(&t, "files")
            .iter()
            .find(|r| s(r, "file") == f)
            .map(|r| s(r, "peak_phase").to_string())
            .unwrap_or_else(|| panic!("pair names {f}, which has no reading"))
    };
    for p in rows(&t, "pairs") {
        let (b, c) = (s(p, "base"), s(p, "cand"));
        assert_eq!(phase_of(b), s(p, "base_peak_phase"), "{b} -> {c}");
        assert_eq!(phase_of(c), s(p, "cand_peak_phase"), "{b} -> {c}");
        // Moved only when both phases are known and differ.
        let known = |x: &str| x != "unknown";
        let moved = known(s(p, "base_peak_phase"))
            && known(s(p, "cand_peak_phase"))
            && s(p, "base_peak_phase") != s(p, "cand_peak_phase");
        assert_eq!(p["moved"].as_bool(), Some(moved), "{b} -> {c}");
        assert!(!s(p, "leading_change").is_empty());
    }
}

/// What `fit` says of one file beside the truth: its failures (first fix, a fix whose
/// premise is absent, the phase of the peak).
fn fit_failures(files: &[PathBuf], r: &Value) -> Vec<String> {
    let file = s(r, "file");
    let path = real(files, file);
    let v = match json_of("fit", &[&path]) {
        Ok(v) => v,
        Err(e) => return vec![format!("{file}: {e}")],
    };
    let dev_id = r["device"].as_u64().unwrap();
    let Some(dev) = fit_device(&v, dev_id) else {
        return vec![format!("{file}: fit has no device {dev_id}")];
    };
    let ids = fix_ids(dev);
    let mut out = Vec::new();
    let first = ids.first().map(String::as_str).unwrap_or("none");
    if let Some(e) = disagreement(r, "first_fix", first) {
        out.push(format!("{file}: first fix {e} ({})", s(r, "notes")));
    }
    let banned: Vec<&str> = r["not_offered"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let wrong: Vec<&String> = ids
        .iter()
        .filter(|i| banned.contains(&i.as_str()))
        .collect();
    if !wrong.is_empty() {
        out.push(format!("{file}: offers {wrong:?}, whose premise is absent"));
    }
    let got = dev["moment_phase"]["phase"].as_str().unwrap_or("(absent)");
    if let Some(e) = disagreement(r, "peak_phase", got) {
        out.push(format!("{file}: phase of the peak {e}"));
    }
    out
}

/// What memlens says (`got`) of the reading's `field` beside the engineer's answer: `None`
/// when they agree, or when they differ exactly as the reading's `memlens_today` records (a
/// known gap, with why; stated in the reading so it is never silent). A recorded gap that
/// memlens no longer shows fails too: the reading must then drop it.
fn disagreement(r: &Value, field: &str, got: &str) -> Option<String> {
    let want = s(r, field);
    let known = r["memlens_today"][field].as_str();
    match known {
        Some(k) if got == want => Some(format!(
            "`{got}` now agrees with the engineer: drop memlens_today.{field} (`{k}`)"
        )),
        Some(k) if got == k => None,
        _ if got == want => None,
        _ => Some(format!("`{got}`, the engineer's `{want}`")),
    }
}

/// `fit_failures` of every reading, computed once for the three tests that read them.
fn fit_all(files: &[PathBuf], t: &Value) -> &'static [String] {
    static ALL: OnceLock<Vec<String>> = OnceLock::new();
    ALL.get_or_init(|| {
        par_map(rows(t, "files"), |r| fit_failures(files, r))
            .into_iter()
            .flatten()
            .collect()
    })
}

#[test]
fn fit_gives_the_engineers_first_fix() {
    let Some((files, t)) = cases() else {
        return;
    };
    let failures = fit_all(&files, &t)
        .iter()
        .filter(|l| l.contains(": first fix ") || l.contains(" exited "))
        .cloned()
        .collect();
    no_failures("fit's first fix (devices[i].fixes[0].id)", failures);
}

#[test]
fn fit_offers_no_fix_whose_premise_the_file_lacks() {
    let Some((files, t)) = cases() else {
        return;
    };
    let failures = fit_all(&files, &t)
        .iter()
        .filter(|l| l.contains("whose premise is absent") || l.contains(" exited "))
        .cloned()
        .collect();
    no_failures("fixes without their premise", failures);
}

#[test]
fn fit_names_the_phase_of_the_peak() {
    let Some((files, t)) = cases() else {
        return;
    };
    let failures = fit_all(&files, &t)
        .iter()
        .filter(|l| l.contains("phase of the peak") || l.contains(" exited "))
        .cloned()
        .collect();
    no_failures(
        "the phase of the peak (devices[i].moment_phase.phase)",
        failures,
    );
}

#[test]
fn leaks_judges_as_the_engineer_does() {
    let Some((files, t)) = cases() else {
        return;
    };
    let failures = par_map(rows(&t, "files"), |r| {
        let file = s(r, "file");
        let want = s(r, "leak");
        match json_of("leaks", &[&real(&files, file)]) {
            Err(e) => Some(format!("{file}: {e}")),
            Ok(v) => {
                let got = v["judgement"]["state"].as_str().unwrap_or("(absent)");
                (got != want)
                    .then(|| format!("{file}: leaks judges `{got}`, the engineer `{want}`"))
            }
        }
    });
    no_failures(
        "leaks' judgement.state",
        failures.into_iter().flatten().collect(),
    );
}

#[test]
fn diff_names_the_phase_of_each_peak_and_whether_it_moved() {
    let Some((files, t)) = cases() else {
        return;
    };
    let failures = par_map(rows(&t, "pairs"), |p| {
        let (b, c) = (s(p, "base"), s(p, "cand"));
        let v = match json_of("diff", &[&real(&files, b), &real(&files, c)]) {
            Ok(v) => v,
            Err(e) => return vec![format!("{b} -> {c}: {e}")],
        };
        diff_failures(&v, p)
            .into_iter()
            .map(|e| format!("{b} -> {c}: {e}"))
            .collect()
    });
    no_failures(
        "diff's peak_phases",
        failures.into_iter().flatten().collect(),
    );
}

/// `peak_phases` of one diff against the pair's truth. Where the truth cannot place a peak
/// (`unknown`: no trace), memlens may leave `peak_phases` out, but must not say it moved.
fn diff_failures(v: &Value, p: &Value) -> Vec<String> {
    let pp = &v["peak_phases"];
    let (wb, wc) = (s(p, "base_peak_phase"), s(p, "cand_peak_phase"));
    let moved = p["moved"].as_bool().unwrap();
    if pp.is_null() {
        return if wb == "unknown" || wc == "unknown" {
            Vec::new()
        } else {
            vec!["no peak_phases, though both traces place their peaks".into()]
        };
    }
    let mut out = Vec::new();
    for (side, want) in [("base", wb), ("cand", wc)] {
        let got = pp[side]["phase"].as_str().unwrap_or("(absent)");
        if got != want {
            out.push(format!("{side} peak `{got}`, the engineer's `{want}`"));
        }
    }
    if pp["moved"].as_bool() != Some(moved) {
        out.push(format!("moved {}, the engineer's {moved}", pp["moved"]));
    }
    out
}

/// Every text command's output for one file (command, text), with an entry for each that
/// failed to run (a panic or a bad exit is a finding of its own).
fn render_all(path: &Path) -> (Vec<(&'static str, String)>, Vec<String>) {
    let mut texts = Vec::new();
    let mut errors = Vec::new();
    for cmd in TEXT_COMMANDS {
        let (code, out, err) = run(&[cmd], &[path]);
        if matches!(code, Some(0) | Some(1)) {
            texts.push((*cmd, out));
        } else {
            errors.push(format!("`{cmd}` exited {code:?}: {}", first_lines(&err)));
        }
    }
    (texts, errors)
}

/// The sections of one command's text that speak of one moment: split at each device
/// (`Device N —`) or OOM (`OOM k of n`) heading; the text before the first heading is one
/// section too.
fn sections(text: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for line in text.lines() {
        if line.starts_with("Device ") || line.starts_with("OOM ") {
            out.push(String::new());
        }
        let cur = out.last_mut().unwrap();
        cur.push_str(line);
        cur.push('\n');
    }
    out
}

/// The bytes of a part's row in an anatomy or category table (`│ gradients ┆ 7.44 GiB`):
/// `Some(true)` when the row shows a non-zero size, `Some(false)` for zero, `None` without a
/// row.
fn part_row_nonzero(section: &str, part: &str) -> Option<bool> {
    let head = format!("│ {part} ");
    let line = section.lines().find(|l| l.starts_with(&head))?;
    let cell = line.split('┆').nth(1)?.trim();
    let number = cell.split_whitespace().next()?;
    Some(number.parse::<f64>().is_ok_and(|x| x > 0.0))
}

/// Contradictions inside one section of one command (one device or one OOM), each rule with
/// what it holds to.
fn section_contradictions(cmd: &str, sec: &str, trains: bool) -> Vec<String> {
    let mut out = Vec::new();
    // A statement about the file, not a fix's action words: LoRA's action says "no gradients
    // or optimizer state for them" of the adapters' frozen base weights.
    let claims = || sec.lines().filter(|l| !l.contains("low-rank adapters"));
    let has = |needle: &str| claims().any(|l| l.contains(needle));
    // 1. "no gradients" (fit's setup line) beside a sentence that says gradients are alive:
    //    "gradients or optimizer state are alive", "gradients are alive" — unless that
    //    sentence itself denies them ("no gradients or optimizer state are alive yet").
    let says_no_grads = has("no gradients");
    let says_grads_alive = claims().any(|l| {
        (l.contains("gradients or optimizer state are alive")
            || l.contains("gradients are alive")
            || l.contains("gradients alive"))
            && !l.contains("no gradients")
    });
    if says_no_grads && says_grads_alive {
        out.push(format!(
            "`{cmd}`: says there are no gradients and that gradients are alive"
        ));
    }
    // 2. "no gradients" / "no optimizer state" beside a table row that shows that part with
    //    bytes (the anatomy table of the same device and moment).
    for (claim, part) in [
        ("no gradients", "gradients"),
        ("no optimizer state", "optimizer state"),
        ("no parameters found", "parameters"),
    ] {
        if has(claim) && part_row_nonzero(sec, part) == Some(true) {
            out.push(format!(
                "`{cmd}`: says \"{claim}\" and lists {part} with bytes"
            ));
        }
    }
    // 3. "no optimizer state" beside an offer to offload or quantize optimizer state
    //    (the catalogue's action words of offload_optimizer_state and eight_bit_optimizer).
    if has("no optimizer state")
        && (has("keep the optimizer state in CPU memory") || has("use an 8-bit optimizer"))
    {
        out.push(format!(
            "`{cmd}`: says there is no optimizer state and offers to offload or quantize it"
        ));
    }
    // 4. One ranked list per moment: an OOM section with two lists of fixes ("What to
    //    change, cheapest first" and "Fixes, cheapest first"), or two items numbered 1.
    if cmd == "oom" && sec.starts_with("OOM ") {
        let lists = sec
            .lines()
            .filter(|l| l.trim_end().ends_with("cheapest first"))
            .count();
        let firsts = sec
            .lines()
            .filter(|l| {
                let t = l.trim_start();
                t.starts_with("1. [free]")
                    || t.starts_with("1. [slower]")
                    || t.starts_with("1. [changes")
            })
            .count();
        if lists > 1 || firsts > 1 {
            out.push(format!(
                "`oom`: {lists} fix lists and {firsts} first fixes for one OOM"
            ));
        }
        // 5. A training job (fit: the trace runs a backward) whose first OOM recommendation
        //    is inference_mode (its action words: "torch.inference_mode()").
        let first = sec
            .lines()
            .find(|l| l.trim_start().starts_with("1. ["))
            .unwrap_or("");
        if trains && first.contains("torch.inference_mode()") {
            out.push("`oom`: a training job's first recommendation is inference_mode".into());
        }
    }
    out
}

/// Contradictions across one file's outputs.
fn file_contradictions(texts: &[(&str, String)], trains: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (cmd, text) in texts {
        for sec in sections(text) {
            out.extend(section_contradictions(cmd, &sec, trains));
        }
    }
    // 6. "No leak" (leaks' "No memory grows step after step", any "no leak" sentence of any
    //    command) beside a leak or retained-graph finding of `leaks` on the same file.
    let lines = || texts.iter().flat_map(|(_, t)| t.lines());
    let says_none = lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.contains("no leak") || l.contains("no memory grows")
    });
    let finds = lines().any(|l| {
        let t = l.trim_start();
        t.contains(". leak on device") || t.contains(". retained graph on device")
    });
    if says_none && finds {
        out.push("says there is no leak and reports a leak".into());
    }
    // 7. `leaks` of a one-device file that says it cannot judge and reports a leak: one
    //    verdict per device.
    if let Some((_, leaks)) = texts.iter().find(|(c, _)| *c == "leaks") {
        let devices = leaks.lines().filter(|l| l.starts_with("Device ")).count();
        if devices <= 1 && finds && leaks.to_ascii_lowercase().contains("cannot judge") {
            out.push("`leaks`: says it cannot judge and reports a leak".into());
        }
    }
    out
}

/// Whether fit says the file's trace runs a backward (any device): memlens's own fact, so
/// the rule checks memlens against itself.
fn trains(path: &Path) -> bool {
    json_of("fit", &[path]).is_ok_and(|v| {
        v["devices"].as_array().is_some_and(|ds| {
            ds.iter()
                .any(|d| d["anatomy"]["flags"]["training"].as_bool() == Some(true))
        })
    })
}

#[test]
fn no_file_gets_contradictory_statements() {
    let Some(files) = require_shared() else {
        return;
    };
    let failures = par_map(&files, |path| {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let (texts, errors) = render_all(path);
        let mut found = errors;
        found.extend(file_contradictions(&texts, trains(path)));
        found
            .into_iter()
            .map(|f| format!("{name}: {f}"))
            .collect::<Vec<_>>()
    });
    no_failures(
        "contradictory statements about one part in one file's outputs",
        failures.into_iter().flatten().collect(),
    );
}

#[test]
fn the_contradiction_rules_catch_what_they_name() {
    // Each rule on a made-up section, so a rule that can never fire fails here.
    let no_grads = "Device 0 — at peak\n│ gradients       ┆   7.44 GiB ┆ 20% │\n\
                    setup: no gradients and no optimizer state: inference\n\
                    note: training code (gradients or optimizer state are alive)\n\
                    1 ┆ slower ┆ keep the optimizer state in CPU memory (ZeRO)\n";
    let found = section_contradictions("fit", no_grads, false);
    assert_eq!(found.len(), 3, "{found:?}");
    let denied = "Device 0\nsetup: no gradients and no optimizer state\n\
                  note: called from training code, though no gradients or optimizer state are alive yet\n\
                  │ gradients ┆ 0 B ┆ 0% │\n";
    assert!(section_contradictions("fit", denied, false).is_empty());
    // LoRA's action words are not a statement about the file.
    let lora = "Device 0\n│ gradients ┆ 1.00 GiB ┆ 9% │\n\
                │ 8 ┆ changes results ┆ fine-tune low-rank adapters (LoRA) with the base weights frozen: no gradients or optimizer state for them │\n";
    assert!(section_contradictions("fit", lora, false).is_empty());
    let oom = "OOM 1 of 1\nWhat to change, cheapest first\n  1. [free] run evaluation/generation under torch.inference_mode() (or torch.no_grad())\n\
               Fixes, cheapest first\n  1. [slower] checkpoint each layer\n";
    let found = section_contradictions("oom", oom, true);
    assert_eq!(found.len(), 2, "{found:?}");
    let leaks = vec![(
        "leaks",
        "No memory grows step after step.\n  1. leak on device 0: +200 KiB per step\n".to_string(),
    )];
    assert_eq!(file_contradictions(&leaks, false).len(), 1);
    assert_eq!(
        part_row_nonzero("│ parameters ┆ 1.59 GiB ┆ x", "parameters"),
        Some(true)
    );
    assert_eq!(
        part_row_nonzero("│ gradients ┆ 0 B ┆ x", "gradients"),
        Some(false)
    );
    assert_eq!(sections("a\nDevice 0 — x\nb\nOOM 1 of 2\nc\n").len(), 3);
}
