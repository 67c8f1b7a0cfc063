//! Issue 52 item 6: `diff` compares like with like (`shared/docs/reading.md` §2). The phase of
//! each run's peak is named, a peak that moved phase is said first, a category at one peak
//! only is absent there (another phase), not gone; each phase's peak is compared with its
//! counterpart; observations lead with the bytes they explain; fragmentation is bytes, and
//! only when material.

use crate::common;
use common::*;
use serde_json::Value;

/// `memlens diff BASE CAND --format json`, exit 0.
fn diff(base: &str, cand: &str) -> Value {
    json_ok(&["diff", base, cand, "--format", "json"])
}

/// `memlens diff BASE CAND --format FORMAT` as text, exit 0.
fn diff_text(base: &str, cand: &str, format: &str) -> String {
    let o = memlens_in_root(["diff", base, cand, "--format", format]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn texts(r: &Value) -> Vec<String> {
    r["observations"]
        .as_array()
        .map(|v| v.iter().map(|o| o.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Every report's observations: the same texts in `observations` and
/// `observation_details`, ordered by the bytes they explain after a moved peak (those about no
/// bytes last), and never a headline on a small base (a fragmentation ratio).
fn check_order(r: &Value) {
    let details = r["observation_details"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let said: Vec<String> = details
        .iter()
        .map(|d| d["text"].as_str().unwrap().into())
        .collect();
    assert_eq!(said, texts(r), "the two lists are parallel");
    let rest: Vec<&Value> = details
        .iter()
        .filter(|d| d["code"] != "peak_moved")
        .collect();
    for w in rest.windows(2) {
        let (a, b) = (w[0]["bytes"].as_u64(), w[1]["bytes"].as_u64());
        assert!(
            match (a, b) {
                (Some(a), Some(b)) => a >= b,
                (None, Some(_)) => false,
                _ => true,
            },
            "ordered by bytes: {w:?}"
        );
    }
    if let Some(i) = details.iter().position(|d| d["code"] == "peak_moved") {
        assert_eq!(i, 0, "a moved peak is said first");
    }
    for t in texts(r) {
        assert!(!t.starts_with("fragmentation "), "a ratio headline: {t}");
    }
    let larger = as_u64(&r["peak"]["base"]).max(as_u64(&r["peak"]["cand"]));
    if let Some(d) = details.iter().find(|d| d["code"] == "reserved_unallocated") {
        let change = r["reserved_unallocated"]["delta_bytes"]
            .as_i64()
            .unwrap()
            .unsigned_abs();
        assert_eq!(as_u64(&d["bytes"]), change);
        assert!(change * 100 >= larger, "immaterial: {d}");
    }
}

/// The categories the scenario keeps at the base's peak only, by memlens's names.
fn only_at_base_peak(t: &Value) -> Vec<&'static str> {
    t["scenario_categories_only_at_base_peak"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| match c.as_str().unwrap() {
            "grad" => "gradients",
            "opt_state" => "optimizer_state",
            "opt_temp" => "temporaries",
            other => panic!("unmapped scenario category {other}"),
        })
        .collect()
}

/// GIVEN one model trained one step at 64 and at 4096 tokens (samples/truth/diff_phase.json):
/// the short run peaks in its first optimizer step, the long one in its forward pass WHEN
/// diffed THEN the first observation says the peak moved from the optimizer step to the
/// forward pass, no category is "gone" (gradients, Adam's state and its temporaries are
/// absent at the candidate's peak because it sits in another phase), every phase's peak
/// equals the scenario's bookkeeping, and the text and Markdown say the same.
#[test]
fn a_peak_in_another_phase_is_said_first_and_nothing_is_gone() {
    let t = common::truth("diff_phase");
    let (b, c) = (
        "samples/diff_phase_base.pickle",
        "samples/diff_phase_cand.pickle",
    );
    let r = diff(b, c);
    check_order(&r);
    let pp = &r["peak_phases"];
    assert_eq!(pp["base"]["phase"], t["base"]["peak_phase"]);
    assert_eq!(pp["cand"]["phase"], t["cand"]["peak_phase"]);
    assert_eq!(pp["moved"], true);
    assert_eq!(r["peak"]["base"], t["base"]["peak_bytes"]);
    assert_eq!(r["peak"]["cand"], t["cand"]["peak_bytes"]);
    assert_eq!(
        r["by_phase"], t["by_phase"],
        "each phase's peak, as the scenario made it"
    );
    let said = texts(&r);
    assert!(
        said[0].starts_with("the peak moved from the optimizer step to the forward pass"),
        "{said:#?}"
    );
    assert_eq!(r["observation_details"][0]["code"], "peak_moved");
    assert!(
        said[1].starts_with("phase by phase, the forward pass peaks"),
        "the widest phase next: {said:#?}"
    );
    for s in &said {
        assert!(
            !s.contains(" is gone ") && !s.contains(" appears in "),
            "{s}"
        );
    }
    for cat in only_at_base_peak(&t) {
        let row = r["categories"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["category"] == cat)
            .unwrap_or_else(|| panic!("{cat}: {}", r["categories"]));
        assert_eq!(row["cand_count"], 0, "{row}");
        let o = said
            .iter()
            .find(|s| s.starts_with(&format!("category {cat} ")))
            .unwrap_or_else(|| panic!("{cat}: {said:#?}"));
        assert!(
            o.contains("absent at the candidate's peak, which is in the forward pass")
                && o.contains("not a removal"),
            "{o}"
        );
    }
    let text = diff_text(b, c, "text");
    assert!(
        text.contains("Phase of the peak: base in the optimizer step of step 1; candidate in the forward pass of step 1 (moved)"),
        "{text}"
    );
    assert!(
        !text.contains("│ removed") && !text.contains("│ new "),
        "{text}"
    );
    assert!(
        text.contains("base peak only")
            && text.contains("Sites at the two peaks, in different phases")
    );
    let md = diff_text(b, c, "md");
    assert!(md.contains("(**moved**)"), "{md}");
    for p in ["forward", "backward", "optimizer"] {
        assert!(md.contains(&format!("\n| {p} | ")), "{p}: {md}");
    }
    assert!(
        !md.contains("| removed |") && !md.contains(" is gone "),
        "{md}"
    );

    // The other way round: the categories are at the candidate's peak only, and not new.
    let r = diff(c, b);
    check_order(&r);
    let said = texts(&r);
    assert!(
        said[0].starts_with("the peak moved from the forward pass to the optimizer step"),
        "{said:#?}"
    );
    for cat in only_at_base_peak(&t) {
        let o = said
            .iter()
            .find(|s| s.starts_with(&format!("category {cat} ")))
            .unwrap_or_else(|| panic!("{cat}: {said:#?}"));
        assert!(o.contains("not a new allocation"), "{o}");
    }
    let rows = r["by_phase"].as_array().unwrap();
    for (row, want) in rows.iter().zip(t["by_phase"].as_array().unwrap()) {
        assert_eq!(row["base_peak_bytes"], want["cand_peak_bytes"]);
        assert_eq!(row["cand_event"], want["base_event"]);
        assert_eq!(
            row["delta_bytes"].as_i64().unwrap(),
            -want["delta_bytes"].as_i64().unwrap()
        );
    }
}

/// GIVEN the generated pair whose peaks sit in one phase (diff_base / diff_cand: the same
/// step with a 256 MiB buffer more) WHEN diffed THEN nothing is said to have moved, categories
/// keep their plain words, and the observations read as before (the step where they part).
#[test]
fn peaks_in_one_phase_read_as_before() {
    let r = diff("samples/diff_base.pickle", "samples/diff_cand.pickle");
    check_order(&r);
    assert_eq!(r["peak_phases"]["moved"], false);
    assert_eq!(
        r["peak_phases"]["base"]["phase"],
        r["peak_phases"]["cand"]["phase"]
    );
    let t = common::truth("diff");
    let delta = t["peak_delta_bytes"].as_i64().unwrap();
    for row in r["by_phase"].as_array().unwrap() {
        // The candidate holds the same step plus buffers made before it: every phase's
        // peak is higher by exactly those bytes.
        assert_eq!(row["delta_bytes"].as_i64().unwrap(), delta, "{row}");
    }
    assert_eq!(
        texts(&r),
        ["the runs part most at step 1 of device 0: its peak is 320.00 MiB higher in the candidate, most at train.py:47:setup_prefetch (+256.00 MiB)"]
    );
}

/// Real pair (`../shared/samples/real`, Wedsonlin/assignment2-systems, one model trained at
/// sequence length 128 and 512). What an engineer reads: the 128 run peaks in its first
/// optimizer step (gradients and Adam's state beside the parameters); the 512 run peaks where
/// its forward's activations are highest — by the phase rule (`analyze::phase`) at the start
/// of its backward pass, after `loss.backward()` made its first tensors and before any
/// activation was freed. So the peak moved phase; gradients are absent at the 512 run's peak,
/// not gone; the fragmentation ratio (90% → 49%, of ~200 MiB) is no observation: the change of
/// reserved-but-unallocated bytes is under 1% of the peak.
#[test]
fn real_pair_whose_peak_moved_from_the_optimizer_step() {
    let (Some(base), Some(cand)) = (
        require_real(
            "Wedsonlin__assignment2-systems__results_medium_128_training_memory_snapshot.pickle",
        ),
        require_real(
            "Wedsonlin__assignment2-systems__results_medium_512_training_memory_snapshot.pickle",
        ),
    ) else {
        return;
    };
    let (b, c) = (base.to_str().unwrap(), cand.to_str().unwrap());
    let r = diff(b, c);
    check_order(&r);
    let pp = &r["peak_phases"];
    assert_eq!(pp["base"]["phase"], "optimizer");
    assert_eq!(pp["cand"]["phase"], "backward");
    assert_eq!(pp["moved"], true);
    let said = texts(&r);
    assert!(
        said[0].starts_with("the peak moved from the optimizer step to the backward pass"),
        "{said:#?}"
    );
    for s in &said {
        assert!(
            !s.contains(" is gone ") && !s.contains(" appears in ") && !s.contains("fragmentation"),
            "{s}"
        );
    }
    assert!(
        said.iter()
            .any(|s| s.starts_with("category gradients is absent at the candidate's peak")),
        "{said:#?}"
    );
    assert!(r["observation_details"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["code"] != "reserved_unallocated"));
    // Each side's phase row at its peak's phase is that peak, at the same event; every other
    // phase peaks lower.
    let rows = r["by_phase"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for (side, phase) in [("base", "optimizer"), ("cand", "backward")] {
        let peak = as_u64(&r["peak"][side]);
        let at = &r["devices"][0][side]["at"]["event_index"];
        for row in rows {
            let v = as_u64(&row[format!("{side}_peak_bytes")]);
            if row["phase"] == phase {
                assert_eq!(v, peak, "{side} {row}");
                assert_eq!(&row[format!("{side}_event")], at, "{side} {row}");
            } else {
                assert!(v < peak, "{side} {row}");
            }
        }
    }
    // The bytes the fragmentation is weighed by are frag's own at each peak.
    for (side, f) in [("base", b), ("cand", c)] {
        let fr = json_ok(&["frag", f, "--at", "peak", "--format", "json"]);
        assert_eq!(
            r["reserved_unallocated"][side], fr["devices"][0]["total"]["free_bytes"],
            "{side}"
        );
    }
    let text = diff_text(b, c, "text");
    assert!(
        !text.contains("│ removed") && !text.contains("is gone"),
        "{text}"
    );
}
