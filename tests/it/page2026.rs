//! Issue 39 on the page, in headless Chromium (tests/browser/check_notes.mjs reads the page;
//! this file asserts against `memlens report --format json` and the samples' truth):
//! annotations and metadata in the top rows, the by-metadata table and the block and band
//! hovers; the private-pools panel by its pixels; device labels named by the file's type.

use crate::common;
use common::*;
use serde_json::Value;
use std::path::Path;

/// The page of `sample` as check_notes.mjs reads it, with the report's JSON.
fn page_of(sample_name: &str) -> Option<(Value, Value)> {
    let browser = require_browser()?;
    let script = browser.script.with_file_name("check_notes.mjs");
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("page.html");
    let file = sample(sample_name);
    let o = memlens([
        "report",
        file.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = std::process::Command::new("node")
        .arg(&script)
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{sample_name}: the driver failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let page: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(page["ready"], true, "{sample_name}: {page}");
    assert_eq!(page["errors"], serde_json::json!([]), "{sample_name}");
    let report = json_report(&["report"], Path::new(&file));
    Some((page, report))
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The texts a note must show: each annotation, the user and the internal metadata.
fn note_texts(note: &Value) -> Vec<String> {
    let mut v = strs(&note["annotations"]);
    for k in ["user_metadata", "internal_metadata"] {
        if let Some(s) = note[k].as_str() {
            v.push(s.to_string());
        }
    }
    v
}

#[test]
fn annotations_and_metadata_are_shown_where_the_allocation_is() {
    let Some((page, report)) = page_of("annotated.pickle") else {
        return;
    };
    let m = &report["devices"][0]["moments"][0];
    // Top rows: up to 3 annotation lines per site, as the JSON counts them.
    let mut want_rows = serde_json::Map::new();
    for r in m["top"]["sites"].as_array().unwrap() {
        let Some(a) = r["annotations"].as_array() else {
            continue;
        };
        let lines: Vec<Value> = a
            .iter()
            .take(3)
            .map(|n| {
                Value::String(format!(
                    "annotated \u{201c}{}\u{201d} on {}",
                    n["text"].as_str().unwrap(),
                    n["count"]
                ))
            })
            .collect();
        want_rows.insert(r["site"].as_str().unwrap().to_string(), Value::Array(lines));
    }
    assert!(!want_rows.is_empty());
    let got_rows = page["row_annotations"].as_object().unwrap();
    assert_eq!(got_rows.len(), want_rows.len(), "{page}");
    for (site, lines) in &want_rows {
        let got = strs(&got_rows[site]);
        for (g, w) in got.iter().zip(lines.as_array().unwrap()) {
            assert!(g.starts_with(w.as_str().unwrap()), "{site}: {g} vs {w}");
        }
    }
    // The by-metadata table: every row with its bytes, as `top --by metadata` at that moment.
    let want_md: Vec<(String, u64)> = m["by_metadata"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["site"].as_str().unwrap().to_string(), as_u64(&r["bytes"])))
        .collect();
    let got_md: Vec<(String, u64)> = page["metadata_rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_str().unwrap().to_string(), as_u64(&r[1])))
        .collect();
    assert_eq!(got_md, want_md);
    // Independent arithmetic: the rows add up to the live bytes of the moment.
    assert_eq!(
        got_md.iter().map(|r| r.1).sum::<u64>(),
        as_u64(&m["live_bytes"])
    );
    // Block hovers: every block with a note names each of its texts.
    let notes = m["state"]["notes"].as_array().unwrap();
    let tips = page["block_tips"].as_array().unwrap();
    let mut want_tips = 0;
    for (r, sg) in m["state"]["segments"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        for bn in sg["block_notes"].as_array().into_iter().flatten() {
            want_tips += 1;
            let (k, n) = (as_u64(&bn[0]), as_u64(&bn[1]) as usize);
            let tip = tips
                .iter()
                .find(|t| as_u64(&t["row"]) == r as u64 && as_u64(&t["block"]) == k)
                .unwrap_or_else(|| panic!("no hover of block {r}/{k}"));
            let text = tip["tooltip"].as_str().unwrap_or_else(|| panic!("{tip}"));
            for t in note_texts(&notes[n]) {
                assert!(text.contains(&t), "block {r}/{k}: {t:?} not in {text}");
            }
        }
    }
    // The truth: six allocations live at the peak carry a note (annotations or metadata).
    let truth = common::truth("annotations")["annotated.pickle"].clone();
    let noted = truth["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| {
            !a["annotations"].as_array().unwrap().is_empty()
                || a["user_metadata"] != ""
                || a["internal_metadata"] != ""
        })
        .count();
    assert_eq!(want_tips, 6);
    assert!(noted >= want_tips);
    assert_eq!(tips.len(), want_tips);
    // Band hovers: each band with a note that can be pointed at names its texts.
    let bands = report["devices"][0]["timeline"]["bands"]
        .as_array()
        .unwrap();
    let band_tips = page["band_tips"].as_array().unwrap();
    assert!(band_tips.len() >= 3, "{page}");
    for t in band_tips {
        let b = &bands[as_u64(&t["band"]) as usize];
        let text = t["tooltip"].as_str().unwrap();
        for s in note_texts(&b["note"]) {
            assert!(text.contains(&s), "{s:?} not in {text}");
        }
    }
}

#[test]
fn the_private_pools_panel_paints_each_pools_peaks() {
    let Some((page, report)) = page_of("private_pools.pickle") else {
        return;
    };
    let pools = report["pools"][0]["pools"].as_array().unwrap();
    let truth = common::truth("pools")["private_pools.pickle"].clone();
    assert!(pools.len() >= 4, "{truth}");
    let top = pools
        .iter()
        .map(|p| as_u64(&p["peak_reserved_bytes"]).max(as_u64(&p["peak_active_bytes"])))
        .max()
        .unwrap();
    let drawn = page["pools"].as_array().unwrap();
    assert_eq!(drawn.len(), pools.len());
    for (i, p) in pools.iter().enumerate() {
        let d = &drawn[i];
        let h = as_u64(&d["height"]) as f64 / d["dpr"].as_f64().unwrap();
        let rows = |bytes: u64| (bytes as f64 / top as f64 * (h - 2.0)).round() as i64;
        let want_a = rows(as_u64(&p["peak_active_bytes"]));
        let want_r = rows(as_u64(&p["peak_reserved_bytes"]));
        let (got_a, got_r) = (
            d["active_top"].as_i64().unwrap(),
            d["reserved_top"].as_i64().unwrap(),
        );
        // One row of slack: the reserved line is drawn over the active area's top row where
        // the two are equal.
        assert!(
            (got_a - want_a).abs() <= 1,
            "pool {i}: active {got_a} rows, want {want_a}"
        );
        assert!(
            (got_r - want_r).abs() <= 1,
            "pool {i}: reserved {got_r} rows, want {want_r}"
        );
    }
    assert!(strs(&page["headings"]).iter().any(|h| h == "Private pools"));
}

#[test]
fn devices_are_named_by_the_type_the_file_says_never_assumed_cuda() {
    let truth = common::truth("settings2026")["xpu_device1.pickle"].clone();
    if let Some((page, report)) = page_of("xpu_device1.pickle") {
        assert_eq!(
            report["summary"]["device_type"]["name"],
            truth["device_type"]
        );
        assert_eq!(
            page["device_mentions"],
            serde_json::json!([truth["device_label"]])
        );
        assert_eq!(page["text_has_cuda"], false);
    }
    // Nothing says the type: "device 0".
    if let Some((page, report)) = page_of("alloc_conf_2026.pickle") {
        assert!(report["summary"].get("device_type").is_none());
        assert_eq!(page["device_mentions"], serde_json::json!(["device 0"]));
        assert_eq!(page["text_has_cuda"], false);
    }
}
