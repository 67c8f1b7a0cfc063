//! `memlens report`: the page's data against the other commands and against arithmetic done
//! here from the JSON alone (band layout, peaks kept by the downsampling, flame and state
//! totals), the HTML's embedded data against `--format json`, output rules, and the page in
//! headless Chromium (tests/browser/check_report.mjs): drawn, no error, no request, hover,
//! zoom, pin, and the figures shown equal to the JSON of `timeline` and `oom`.

use crate::common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A command's JSON; exit 1 (findings: `leaks`) is a report too.
fn json_of(args: &[&str]) -> Value {
    let o = memlens(args);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "memlens {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn report_json(file: &Path) -> Value {
    json_of(&["report", file.to_str().unwrap(), "--format", "json"])
}

#[track_caller]
fn u(v: &Value) -> u64 {
    match v.as_u64() {
        Some(n) => n,
        None => panic!("not a size: {v}"),
    }
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an index: {v}"))
}

/// What the stacking check reads of one band at every sample, read from the JSON once (a
/// lookup per band and sample made the check most of this module's time on real files).
struct Stacked<'a> {
    band: &'a Value,
    first: usize,
    last: usize,
    size: u64,
    /// The change points of its base: (sample, base) pairs.
    base: Vec<(u64, u64)>,
}

impl<'a> Stacked<'a> {
    fn new(band: &'a Value) -> Self {
        let pts = band["base"].as_array().unwrap();
        Stacked {
            band,
            first: u(&band["first_sample"]) as usize,
            last: u(&band["last_sample"]) as usize,
            size: u(&band["size"]),
            base: pts
                .chunks(2)
                .map(|pair| (u(&pair[0]), u(&pair[1])))
                .collect(),
        }
    }

    /// Its base at sample `s`, from its change points.
    fn base_at(&self, s: u64) -> u64 {
        let mut base = None;
        for &(at, b) in &self.base {
            if at <= s {
                base = Some(b);
            }
        }
        base.unwrap_or_else(|| panic!("no base at sample {s}: {}", self.band))
    }
}

/// Every invariant of one report's JSON that can be checked from the JSON itself, plus the
/// figures shared with `timeline`, `oom`, `summary`, `leaks` and `categories`.
fn check_report(file: &Path, r: &Value) {
    let name = file.display();
    let f = file.to_str().unwrap();
    assert_eq!(r["schema_version"], 1);
    let n_frames = r["frames"].as_array().unwrap().len() as u64;
    let n_stacks = r["stacks"].as_array().unwrap().len() as u64;
    for st in r["stacks"].as_array().unwrap() {
        for fr in st.as_array().unwrap() {
            assert!(u(fr) < n_frames, "{name}: frame index out of range");
        }
    }
    // The embedded reports are those commands' own JSON.
    let mut summary = json_of(&["summary", f, "--format", "json"]);
    summary.as_object_mut().unwrap().remove("file");
    assert_eq!(r["summary"], summary, "{name}: summary");
    assert_eq!(
        r["leaks"],
        json_of(&["leaks", f, "--format", "json"]),
        "{name}: leaks"
    );
    assert_eq!(
        r["categories"],
        json_of(&["categories", f, "--format", "json"]),
        "{name}: categories"
    );
    let oom = json_of(&["oom", f, "--format", "json"]);
    if oom["ooms"].as_array().unwrap().is_empty() {
        assert!(r["oom"].is_null(), "{name}: no OOM, no OOM section");
    } else {
        assert_eq!(r["oom"], oom, "{name}: oom");
    }
    let timeline = json_of(&["timeline", f, "--format", "json"]);
    for dev in r["devices"].as_array().unwrap() {
        let d = u(&dev["device"]);
        let t = &dev["timeline"];
        // The summary's warning that a one-entry trace makes no timeline, and the page, agree.
        let single = r["summary"]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "single_entry_trace" && w["device"] == d);
        let absent_as = |code: &str| {
            r["absent"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["code"] == code && a["device"] == d)
        };
        assert_eq!(
            absent_as("single_entry_trace"),
            single,
            "{name}: device {d}"
        );
        if single {
            assert!(
                t.is_null(),
                "{name}: device {d}: a one-entry trace drew a timeline"
            );
        } else if t.is_null() {
            assert!(
                absent_as("no_trace"),
                "{name}: device {d} has no timeline and no absence note"
            );
            assert_eq!(dev["moments"].as_array().unwrap().len(), 1);
        } else {
            check_timeline(&name.to_string(), t, n_stacks);
            let tl = timeline["devices"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["device"] == d)
                .unwrap();
            assert_eq!(t["peak_bytes"], tl["peak_bytes"], "{name}: peak");
            assert_eq!(t["peak"], tl["peak"], "{name}: peak moment");
            assert_eq!(t["max_reserved_bytes"], tl["max_reserved_bytes"], "{name}");
            let ooms: Vec<Value> = oom["ooms"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| o["device"] == d)
                .map(|o| o["event_index"].clone())
                .collect();
            assert_eq!(
                t["oom_events"].as_array().unwrap(),
                &ooms,
                "{name}: OOM marks"
            );
            let peak = &dev["moments"][0];
            assert_eq!(peak["name"], "peak");
            assert_eq!(peak["at"], t["peak"]);
            assert_eq!(peak["live_bytes"], t["peak_bytes"]);
        }
        for m in dev["moments"].as_array().unwrap() {
            check_moment(&format!("{name} device {d} {}", m["name"]), m, n_stacks);
        }
        // The first moment's pinners are `frag`'s at the same moment, computed the same way.
        // (-1 is the recorded final state of a device without a trace, `--at end`, else the
        // state rebuilt before the first event, `--at start`.)
        let page = &dev["moments"][0]["frag"];
        let spec = match page["at"]["event_index"].as_i64().unwrap() {
            -1 if page["exact"] == true => "end".to_string(),
            -1 => "start".to_string(),
            i => i.to_string(),
        };
        let frag = json_of(&[
            "frag",
            f,
            "--at",
            &spec,
            "--device",
            &d.to_string(),
            "--format",
            "json",
        ]);
        let (page, cli) = (&page["pinners"], &frag["devices"][0]["pinners"]);
        assert_eq!(
            page, cli,
            "{name}: device {d}: the page's pinners are frag's"
        );
        check_lines(f, &format!("{name}"), dev, &[]);
    }
}

/// Lines per moment on the page (`PAGE_LINES`).
const PAGE_LINES: usize = 50;

/// Each moment's lines panel is `memlens lines --at MOMENT --device D`'s device (the live
/// cost), every figure the same, its hottest 50 lines kept and their number given, its
/// sources chosen among all lines (`extra`: more arguments of both, `--source-root DIR`).
/// A moment at -1 is `--at end` for the recorded final state of a device without a trace,
/// else `--at start`, the state rebuilt before the first event (as the pinners above).
fn check_lines(f: &str, name: &str, dev: &Value, extra: &[&str]) {
    let d = u(&dev["device"]).to_string();
    for m in dev["moments"].as_array().unwrap() {
        let spec = match i(&m["at"]["event_index"]) {
            -1 if m["frag"]["exact"] == true => "end".to_string(),
            -1 => "start".to_string(),
            e => e.to_string(),
        };
        let mut args = vec![
            "lines", f, "--at", &spec, "--device", &d, "--format", "json",
        ];
        args.extend_from_slice(extra);
        let cli = json_of(&args);
        let mut want = cli["devices"][0].clone();
        let all = want["lines"].as_array().unwrap().len();
        want["lines"].as_array_mut().unwrap().truncate(PAGE_LINES);
        want["line_count"] = all.into();
        assert_eq!(
            m["lines"], want,
            "{name}: device {d}, moment {}: the page's lines are `memlens lines --at {spec}`'s",
            m["name"]
        );
    }
}

fn check_timeline(name: &str, t: &Value, n_stacks: u64) {
    let s = &t["samples"];
    let ev: Vec<i64> = s["event_index"].as_array().unwrap().iter().map(i).collect();
    let live: Vec<u64> = s["live_bytes"].as_array().unwrap().iter().map(u).collect();
    let reserved: Vec<u64> = s["reserved_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(u)
        .collect();
    let other: Vec<u64> = s["other_bytes"].as_array().unwrap().iter().map(u).collect();
    let n = ev.len();
    assert!(n > 0, "{name}: no sample");
    assert_eq!(live.len(), n);
    assert_eq!(reserved.len(), n);
    assert_eq!(other.len(), n);
    assert!(
        ev.windows(2).all(|w| w[0] < w[1]),
        "{name}: samples in order"
    );
    assert_eq!(ev[0], i(&t["window"]["first"]), "{name}: window start");
    assert_eq!(ev[n - 1], i(&t["window"]["last"]), "{name}: window end");
    // The downsampling keeps the maxima: the peak and the reserved maximum are samples.
    assert_eq!(
        *live.iter().max().unwrap(),
        u(&t["peak_bytes"]),
        "{name}: peak kept"
    );
    let pk = ev
        .iter()
        .position(|&e| e == i(&t["peak"]["event_index"]))
        .expect("the peak is a sample");
    assert_eq!(live[pk], u(&t["peak_bytes"]));
    assert_eq!(
        *reserved.iter().max().unwrap(),
        u(&t["max_reserved_bytes"]),
        "{name}"
    );
    // Bands: live exactly between their alloc and free, stacked in order without gaps.
    let bands = t["bands"].as_array().unwrap();
    let smallest = u(&t["smallest_band_bytes"]);
    assert!(
        bands.len() as u64 <= 1000,
        "{name}: at most --bands bands by default"
    );
    if u(&t["other_allocations"]) == 0 {
        assert_eq!(
            t["largest_other_bytes"], 0,
            "{name}: an empty aggregate band"
        );
    }
    for b in bands {
        assert!(u(&b["stack"]) < n_stacks);
        assert!(u(&b["size"]) >= smallest, "{name}: smallest_band_bytes");
        let alloc = i(&b["alloc_event"]);
        let free = b["free_event"].as_i64().unwrap_or(i64::MAX);
        let live_samples: Vec<usize> = (0..n).filter(|&k| alloc <= ev[k] && ev[k] < free).collect();
        assert_eq!(
            (live_samples[0], *live_samples.last().unwrap()),
            (
                u(&b["first_sample"]) as usize,
                u(&b["last_sample"]) as usize
            ),
            "{name}: band live range {b}"
        );
        // Its alloc and free are samples (the band starts and ends where it does).
        if alloc >= ev[0] {
            assert!(ev.contains(&alloc), "{name}: alloc sample");
        }
        if free <= ev[n - 1] {
            assert!(ev.contains(&free), "{name}: free sample");
        }
    }
    let stacked: Vec<Stacked> = bands.iter().map(Stacked::new).collect();
    for k in 0..n {
        let mut base = 0;
        for b in &stacked {
            if b.first <= k && k <= b.last {
                assert_eq!(b.base_at(k as u64), base, "{name}: base at sample {k}");
                base += b.size;
            }
        }
        assert_eq!(
            base + other[k],
            live[k],
            "{name}: stack height at sample {k}"
        );
    }
}

/// The root's value of a flat pre-order tree, after checking its shape: parents come
/// first, depths follow them, callees weigh no more than their caller together.
fn check_tree(tree: &Value, at: &str) -> u64 {
    let value: Vec<u64> = tree["value"].as_array().unwrap().iter().map(u).collect();
    let parent: Vec<i64> = tree["parent"].as_array().unwrap().iter().map(i).collect();
    let depth: Vec<u64> = tree["depth"].as_array().unwrap().iter().map(u).collect();
    assert_eq!(parent[0], -1, "{at}: the root comes first");
    assert_eq!(tree["frame"][0], -2, "{at}: the root");
    let mut callees = vec![0u64; value.len()];
    for k in 1..value.len() {
        let p = parent[k];
        assert!(
            p >= 0 && (p as usize) < k,
            "{at}: a caller before its callees"
        );
        assert_eq!(depth[k], depth[p as usize] + 1, "{at}: depth");
        callees[p as usize] += value[k];
    }
    for k in 0..value.len() {
        assert!(
            callees[k] <= value[k],
            "{at}: callees weigh more than their caller"
        );
    }
    value[0]
}

fn check_moment(name: &str, m: &Value, n_stacks: u64) {
    let top = &m["top"];
    let total = u(&top["total"]);
    for view in ["all", "no_cpp", "no_torch", "user"] {
        let tree = &m["flame"][view];
        assert_eq!(
            check_tree(tree, name),
            total,
            "{name}: flame {view} = top total"
        );
    }
    assert_eq!(u(&m["flame"]["total"]), total);
    assert_eq!(
        top["row_stacks"].as_array().unwrap().len(),
        top["sites"].as_array().unwrap().len()
    );
    for s in top["row_stacks"].as_array().unwrap() {
        assert!(u(s) < n_stacks);
    }
    // The blocks drawn add up to the frag figures of the same moment.
    let (mut reserved, mut allocated, mut free, mut pending) = (0, 0, 0, 0);
    for seg in m["state"]["segments"].as_array().unwrap() {
        reserved += u(&seg["size"]);
        let mut end = 0;
        for b in seg["blocks"].as_array().unwrap() {
            let (off, size) = (u(&b[0]), u(&b[1]));
            assert!(off >= end, "{name}: blocks overlap");
            end = off + size;
            match i(&b[3]) {
                0 => allocated += size,
                1 => pending += size,
                2 => free += size,
                x => panic!("{name}: block state {x}"),
            }
            if i(&b[3]) != 2 {
                assert!(u(&b[4]) < n_stacks);
            }
        }
    }
    let t = &m["frag"]["total"];
    assert_eq!(reserved, u(&t["reserved_bytes"]), "{name}: reserved");
    assert_eq!(allocated, u(&t["allocated_bytes"]), "{name}: allocated");
    assert_eq!(free, u(&t["free_bytes"]), "{name}: free");
    assert_eq!(pending, u(&t["pending_free_bytes"]), "{name}: pending");
}

#[test]
fn samples_and_captures_hold_the_page_invariants() {
    for file in samples().into_iter().chain(captured()) {
        check_report(&file, &report_json(&file));
    }
}

#[test]
fn real_snapshots_hold_the_page_invariants() {
    let Some(files) = require_shared() else {
        return;
    };
    for file in files {
        check_report(&file, &report_json(&file));
    }
}

/// `report --format json --bands 2` of a JSON snapshot holding `trace` (entries joined by
/// commas) on device 0 and no segments.
fn two_band_report(trace: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hand.json");
    let doc = format!(r#"{{"segments":[],"device_traces":[[{trace}]]}}"#);
    std::fs::write(&path, doc).unwrap();
    let file = path.to_str().unwrap();
    json_of(&["report", file, "--format", "json", "--bands", "2"])
}

/// A trace small enough to lay out by hand: A (100 B) at event 0, B (200 B) at 1, A freed at
/// 2, C (50 B) at 3. With two bands, A and B get one each and C is the aggregate.
#[test]
fn band_layout_by_hand() {
    let entry = |action: &str, addr: u64, size: u64| {
        format!(
            r#"{{"action":"{action}","addr":{addr},"size":{size},"stream":0,"time_us":{addr},"frames":[{{"name":"f{addr}","filename":"/home/u/train.py","line":{addr}}}]}}"#
        )
    };
    let trace = [
        entry("alloc", 1000, 100),
        entry("alloc", 2000, 200),
        entry("free_requested", 1000, 100),
        entry("free_completed", 1000, 100),
        entry("alloc", 3000, 50),
    ]
    .join(",");
    let r = two_band_report(&trace);
    let t = &r["devices"][0]["timeline"];
    let s = &t["samples"];
    assert_eq!(s["event_index"], serde_json::json!([-1, 0, 1, 2, 3, 4]));
    assert_eq!(
        s["live_bytes"],
        serde_json::json!([0, 100, 300, 300, 200, 250])
    );
    assert_eq!(s["other_bytes"], serde_json::json!([0, 0, 0, 0, 0, 50]));
    let bands = t["bands"].as_array().unwrap();
    assert_eq!(bands.len(), 2);
    assert_eq!((u(&bands[0]["size"]), u(&bands[1]["size"])), (100, 200));
    // A: samples 1-3 at the bottom; B: samples 2-5, on A until A is freed at event 3.
    assert_eq!(bands[0]["base"], serde_json::json!([1, 0]));
    assert_eq!(
        (u(&bands[0]["first_sample"]), u(&bands[0]["last_sample"])),
        (1, 3)
    );
    assert_eq!(bands[1]["base"], serde_json::json!([2, 100, 4, 0]));
    assert_eq!(
        (u(&bands[1]["first_sample"]), u(&bands[1]["last_sample"])),
        (2, 5)
    );
    assert_eq!(bands[0]["free_requested_event"], 2);
    assert_eq!(bands[0]["free_event"], 3);
    assert!(bands[1]["free_event"].is_null());
    assert_eq!(t["other_allocations"], 1);
    assert_eq!(t["smallest_band_bytes"], 100);
    assert_eq!(t["largest_other_bytes"], 50);
    assert_eq!(bands[0]["site"], "/home/u/train.py:1000:f1000");
}

/// On a long trace the largest allocations are short temporaries; half the bands go to the
/// largest by bytes × lifetime, so a small allocation alive throughout still gets one.
#[test]
fn long_lived_allocations_get_bands_beside_the_largest() {
    let entry = |action: &str, addr: u64, size: u64| {
        format!(r#"{{"action":"{action}","addr":{addr},"size":{size},"stream":0,"frames":[]}}"#)
    };
    let mut trace = vec![entry("alloc", 1, 20)];
    for k in 0..4 {
        let addr = 100 + k;
        trace.push(entry("alloc", addr, 100));
        trace.push(entry("free_completed", addr, 100));
    }
    let r = two_band_report(&trace.join(","));
    let t = &r["devices"][0]["timeline"];
    let bands: Vec<(u64, u64)> = t["bands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (u(&b["address"]), u(&b["size"])))
        .collect();
    // The long-lived 20 bytes (20 x 9 events) and the first 100-byte temporary (the largest).
    assert_eq!(bands, vec![(1, 20), (100, 100)]);
    assert_eq!(t["other_allocations"], 3);
    assert_eq!(t["largest_other_bytes"], 100);
    assert_eq!(t["smallest_band_bytes"], 20);
}

/// The embedded data of the HTML page, as the page parses it.
fn embedded(html: &str) -> Value {
    let open = r#"<script type="application/json" id="memlens-data">"#;
    let start = html.find(open).expect("data element") + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

#[test]
fn the_page_is_self_contained_and_embeds_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let file = sample("frag_oom.pickle");
    let out = dir.path().join("r.html");
    let o = memlens([
        "report",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&out).unwrap();
    let mut json = report_json(&file);
    assert_eq!(embedded(&html), json);
    json["file"] = Value::Null;
    // Nothing is loaded from anywhere: no src/href to a resource, and a CSP that forbids every
    // request (the script's `fetch` of a served page's windows cannot run here: no
    // `connect-src`, and the page knows no server).
    assert!(html.contains(r#"content="default-src 'none'; script-src 'sha256-"#));
    assert!(html.contains("; img-src data:\">"));
    assert!(!html.contains("unsafe-inline"));
    assert!(!html.contains("connect-src"));
    assert!(html.contains(r#"<script type="application/json" id="memlens-serve">null</script>"#));
    for needle in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "@import",
        "XMLHttpRequest",
        "<link",
    ] {
        assert!(!html.contains(needle), "the page holds {needle:?}");
    }
    // -o never replaces a file without --force.
    let again = memlens([
        "report",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
}

#[test]
fn hostile_text_cannot_escape_the_data_element() {
    let trace = r#"{"action":"alloc","addr":4096,"size":512,"stream":0,"frames":[{"name":"</script><script>window.pwned=1</script>","filename":"/home/u/<b>x.py","line":1}]}"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("<b>x\".json");
    std::fs::write(
        &path,
        format!(r#"{{"segments":[],"device_traces":[[{trace}]]}}"#),
    )
    .unwrap();
    let o = memlens(["report", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        html.matches("</script>").count(),
        3,
        "only the page's own elements close"
    );
    assert!(
        !html.contains("<b>x"),
        "the file name is escaped in the title"
    );
    let data = embedded(&html);
    assert!(data["frames"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["name"] == "</script><script>window.pwned=1</script>"));
}

/// The samples the browser test opens: OOMs, leaks and phases, several streams, no trace,
/// C++ frames, and real files with several devices and an OOM.
fn browser_files() -> Vec<PathBuf> {
    let mut v = vec![
        sample("frag_oom.pickle"),
        sample("retained_graph.pickle"),
        sample("bare_list.pickle"),
        sample("expandable_multi.pickle"),
        sample("late_grads.pickle"),
        root().join("samples/captured/stacks_all.pickle"),
    ];
    for real in [
        "Constructor-Sun__code_location__memory_snapshot.pickle",
        "Yiyi-philosophy__LLM-inference__oom_snapshot.pickle",
        "volcengine__verl__mem.pickle",
    ] {
        if let Some(p) = require_real(real) {
            v.push(p);
        }
    }
    v
}

#[test]
fn the_page_works_in_headless_chromium() {
    let Some(browser) = require_browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for file in browser_files() {
        let f = file.to_str().unwrap();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let html = dir.path().join(format!("{name}.html"));
        write_page(f, &html);
        check_page(&name, f, &drive_page(&browser, &name, &html));
    }
}

/// The notebook shows the page packed (`memlens._notebook.inline_page`: gzip in base64 and a
/// loader, issue 54): unpacked by Chromium itself, it is the whole page, held to the same
/// checks as the page opened from its file.
#[test]
fn the_notebook_s_packed_page_unpacks_and_works_in_headless_chromium() {
    let Some(browser) = require_browser() else {
        return;
    };
    if !require_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sample = root().join("samples/frag_oom.pickle");
    let f = sample.to_str().unwrap();
    let html = dir.path().join("page.html");
    let packed = dir.path().join("packed.html");
    write_page(f, &html);
    let pack = std::process::Command::new(python3())
        .args([
            "-c",
            "import sys; from memlens._notebook import inline_page; \
             open(sys.argv[2], 'w', encoding='utf-8').write(inline_page(open(sys.argv[1], encoding='utf-8').read()))",
        ])
        .arg(&html)
        .arg(&packed)
        .env("PYTHONPATH", root().join("python"))
        .env("MEMLENS_BIN", env!("CARGO_BIN_EXE_memlens"))
        .output()
        .unwrap();
    assert!(
        pack.status.success(),
        "{}",
        String::from_utf8_lossy(&pack.stderr)
    );
    let (page_len, packed_len) = (
        std::fs::metadata(&html).unwrap().len(),
        std::fs::metadata(&packed).unwrap().len(),
    );
    assert!(
        packed_len * 3 < page_len,
        "packed {packed_len} of {page_len} bytes"
    );
    let name = "frag_oom.pickle (packed)";
    check_page(name, f, &drive_page(&browser, name, &packed));
}

/// The pinners drawn beside the allocator state are those of the moment shown, in its JSON:
/// the same sites in the same order with the same bytes, the bytes in IEC units as the CLI
/// writes them, and the same sentences; nothing drawn when nothing is stranded.
fn check_pinners(name: &str, page: &Value, device: &Value) {
    let shown = &page["pinners"];
    let m = device["moments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == shown["moment"])
        .unwrap_or_else(|| panic!("{name}: the state view shows no moment of the JSON"));
    let p = &m["frag"]["pinners"];
    if u(&p["stranded_bytes"]) == 0 {
        assert!(
            shown["shown"].is_null(),
            "{name}: pinners drawn with nothing stranded"
        );
        return;
    }
    let drawn = &shown["shown"];
    assert_eq!(drawn["bytes"], p["stranded_bytes"], "{name}");
    let rows = drawn["rows"].as_array().unwrap();
    let want = p["pinners"].as_array().unwrap();
    assert_eq!(rows.len(), want.len().min(8), "{name}: pinner rows");
    for (r, w) in rows.iter().zip(want) {
        assert_eq!(r["site"], w["site"], "{name}");
        assert_eq!(r["sole"], w["sole_bytes"], "{name}");
        assert_eq!(r["shared"], w["shared_bytes"], "{name}");
        assert_eq!(
            r["cells"][1],
            memlens::units::iec(u(&w["sole_bytes"])),
            "{name}"
        );
        assert_eq!(
            r["cells"][2],
            memlens::units::iec(u(&w["shared_bytes"])),
            "{name}"
        );
        assert_eq!(r["visible"], true, "{name}: a pinner row is not drawn");
    }
    assert_eq!(drawn["words"], p["words"], "{name}: the reading");
}

/// The lines panel as drawn (`shown`, read by check_report.mjs) is the JSON of the moment
/// the page shows: a row per line in its order with its file:line, function, and self and total
/// bytes in IEC units as the CLI writes them (`memlens::units::iec`) and exact in data-bytes;
/// the hot files' source where it is embedded, each line's bytes before it and the hot lines
/// marked; else the one line that says `--source-root DIR` adds it.
fn check_lines_shown(name: &str, shown: &Value, device: &Value) {
    let m = device["moments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == shown["moment"])
        .unwrap_or_else(|| panic!("{name}: the lines panel shows no moment of the JSON: {shown}"));
    let l = &m["lines"];
    let rows = shown["rows"].as_array().unwrap();
    let want = l["lines"].as_array().unwrap();
    assert_eq!(rows.len(), want.len(), "{name}: one row per line");
    for (r, w) in rows.iter().zip(want) {
        let site = format!("{}:{}", w["file"].as_str().unwrap(), w["line"]);
        assert_eq!(r["cells"][0], site.as_str(), "{name}");
        assert_eq!(r["cells"][1], w["function"], "{name}: {site}");
        let (own, total) = (u(&w["self_bytes"]), u(&w["total_bytes"]));
        assert_eq!(r["cells"][2], memlens::units::iec(own), "{name}: {site}");
        assert_eq!(r["cells"][3], memlens::units::iec(total), "{name}: {site}");
        assert_eq!(r["bytes"][2], own.to_string(), "{name}: {site}");
        assert_eq!(r["bytes"][3], total.to_string(), "{name}: {site}");
    }
    if let Some(first) = rows.first() {
        assert_eq!(
            first["visible"], true,
            "{name}: the first line's row is not drawn"
        );
    }
    let files = shown["files"].as_array().unwrap();
    let sources = l["sources"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        files.len(),
        sources.len(),
        "{name}: one panel per source file"
    );
    if sources.is_empty() {
        let hint = shown["hint"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no hint: {shown}"));
        assert!(hint.contains("--source-root DIR"), "{name}: {hint}");
    } else {
        assert!(
            shown["hint"].is_null(),
            "{name}: the hint beside the source"
        );
    }
    for (f, w) in files.iter().zip(&sources) {
        assert_eq!(f["file"], w["file"], "{name}");
        let lines = f["lines"].as_array().unwrap();
        let want = w["lines"].as_array().unwrap();
        assert_eq!(lines.len(), want.len(), "{name}: {}", w["file"]);
        for (x, y) in lines.iter().zip(want) {
            let (own, total) = (u(&y["self_bytes"]), u(&y["total_bytes"]));
            assert_eq!(x["line"], y["line"], "{name}");
            assert_eq!(x["self"], own, "{name}");
            assert_eq!(x["total"], total, "{name}");
            assert_eq!(x["hot"], own > 0 || total > 0, "{name}: {x}");
            let self_text = if own > 0 {
                memlens::units::iec(own)
            } else {
                String::new()
            };
            assert_eq!(x["cells"][0], self_text.as_str(), "{name}: {x}");
            assert_eq!(x["cells"][2], y["line"].to_string().as_str(), "{name}");
            assert_eq!(x["cells"][3], y["text"], "{name}");
        }
    }
}

/// `memlens report FILE -o HTML`, which must succeed.
fn write_page(file: &str, html: &Path) {
    let o = memlens(["report", file, "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// What check_report.mjs saw of the page `html` in headless Chromium (its one JSON object).
fn drive_page(browser: &Browser, name: &str, html: &Path) -> Value {
    let run = std::process::Command::new("node")
        .arg(&browser.script)
        .arg(html)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{name}: the driver failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("{name}: {e}: {}", String::from_utf8_lossy(&run.stdout)))
}

fn check_page(name: &str, file: &str, page: &Value) {
    assert_eq!(page["ready"], true, "{name}: {page}");
    assert_eq!(page["console_errors"], serde_json::json!([]), "{name}");
    assert_eq!(page["page_errors"], serde_json::json!([]), "{name}");
    assert_eq!(
        page["requests"],
        serde_json::json!([]),
        "{name}: a network request"
    );
    let report = report_json(Path::new(file));
    check_header(name, page, &report);
    // The device the page opened on (the first OOM's, else the highest peak's).
    let first = report["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == page["header"]["device"])
        .unwrap_or_else(|| panic!("{name}: the page opened on no device of its JSON"));
    check_sites_as_the_cli_shows_them(name, file, page, first);
    check_judgements(name, page, &report, first["device"].as_u64().unwrap());
    check_pinners(name, page, first);
    check_lines_shown(name, &page["lines"], first);
    check_lines_shown(name, &page["lines_after"], first);
    assert!(
        u(&page["drawn"]["state_blocks"]) > 0,
        "{name}: state view drawn"
    );
    assert!(u(&page["drawn"]["flame_nodes"]) > 0, "{name}: flame drawn");
    // Memory alive before the trace with no stack: its row's tooltip and expanded details
    // give the likely kind's evidence, not an empty stack.
    let older = first["moments"][0]["top"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["predates_trace"] == true);
    match older {
        Some(row) => {
            let shown = &page["pretrace"];
            assert_eq!(shown["site"], row["site"], "{name}: {shown}");
            let evidence = row["evidence"].as_str().unwrap();
            assert!(
                shown["title"].as_str().unwrap().contains(evidence),
                "{name}: {shown}"
            );
            let details = shown["details"].as_str().unwrap().trim();
            assert!(details.contains(evidence), "{name}: {details}");
            if let Some(kind) = row["likely_kind"].as_str() {
                assert!(details.starts_with(&format!("Likely {kind}")), "{details}");
            }
        }
        None => assert!(page["pretrace"].is_null(), "{name}: {}", page["pretrace"]),
    }
    // The OOM verdicts shown are those of `memlens oom`.
    let oom = json_of(&["oom", file, "--format", "json"]);
    let verdicts = page["oom_verdicts"].as_array().unwrap();
    let ooms = oom["ooms"].as_array().unwrap();
    assert_eq!(verdicts.len(), ooms.len(), "{name}: one verdict per OOM");
    for (shown, o) in verdicts.iter().zip(ooms) {
        let text = shown.as_str().unwrap();
        assert!(
            text.contains(o["verdict"].as_str().unwrap()),
            "{name}: {text}"
        );
    }
    if first["timeline"].is_null() {
        let absent = page["absent_texts"].to_string();
        // No trace, or one entry (the summary's warning says there is no timeline; no flat
        // plot is drawn).
        assert!(
            absent.contains("has no trace") || absent.contains("trace holds one entry"),
            "{name}: {absent}"
        );
        assert_eq!(u(&page["drawn"]["timeline_bands"]), 0, "{name}");
        return;
    }
    // The peak shown is `memlens timeline`'s.
    let timeline = json_of(&["timeline", file, "--format", "json"]);
    let shown = timeline["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == first["device"])
        .unwrap_or_else(|| panic!("{name}: no timeline of the device shown"));
    assert_eq!(page["peak_bytes"], shown["peak_bytes"], "{name}");
    assert!(
        u(&page["drawn"]["timeline_bands"]) > 0,
        "{name}: bands drawn"
    );
    // Hovering the largest band shows its stack: its innermost frame's function.
    let bands = first["timeline"]["bands"].as_array().unwrap();
    let b = u(&page["hover"]["band"]) as usize;
    let stack = &report["stacks"][u(&bands[b]["stack"]) as usize];
    let tooltip = page["hover"]["tooltip"].as_str().unwrap();
    if let Some(f) = stack.as_array().unwrap().iter().find(|f| {
        let kind = &report["frames"][u(f) as usize]["kind"];
        kind != "noise" && kind != "cpp"
    }) {
        let fname = report["frames"][u(f) as usize]["name"].as_str().unwrap();
        assert!(
            tooltip.contains(fname),
            "{name}: tooltip {tooltip:?} lacks {fname}"
        );
    }
    // Dragging zooms in; a double-click restores the whole window.
    let span = |v: &Value| i(&v["last"]) - i(&v["first"]);
    let zoom = &page["zoom"];
    assert!(
        span(&zoom["after"]) < span(&zoom["before"]),
        "{name}: {zoom}"
    );
    assert_eq!(zoom["reset"], zoom["before"], "{name}");
    // A click pins the band, and its site's row in the top table lights up when listed.
    assert_eq!(
        page["pin"]["pinned"], page["hover"]["band"],
        "{name}: pinned"
    );
    let site = &bands[b]["site"];
    let listed = first["moments"][0]["top"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .any(|row| &row["site"] == site);
    assert_eq!(
        page["pin"]["highlighted_row"], listed,
        "{name}: {site} highlighted"
    );
}

/// Issue 52 item 4: the page's top table shows each site, and its library context, as
/// `memlens top`'s text does (the snapshot's root and library prefixes stripped): every label
/// the page shows is a line of the CLI's table, a row with a context shows it ("via ..."), and
/// no shown label keeps a path the CLI strips.
fn check_sites_as_the_cli_shows_them(name: &str, file: &str, page: &Value, first: &Value) {
    let rows = page["top_rows"].as_array().unwrap();
    let sites = first["moments"][0]["top"]["sites"].as_array().unwrap();
    assert_eq!(rows.len(), sites.len(), "{name}: one row per site");
    let moment = first["moments"][0]["top"]["at"]["event_index"].as_i64();
    let limit = (rows.len() + 1).to_string();
    let mut args = vec![
        "top", file, "--width", "1000", "--limit", &limit, "--device",
    ];
    let dev = first["device"].to_string();
    args.push(&dev);
    let at = moment.filter(|&e| e >= 0).map(|e| format!("index:{e}"));
    if let Some(a) = &at {
        args.extend(["--at", a]);
    }
    let o = memlens(&args);
    let cli = String::from_utf8_lossy(&o.stdout);
    let cells: Vec<&str> = cli
        .lines()
        .filter_map(|l| l.split('┆').next_back())
        .map(|c| c.trim_end_matches('│').trim())
        .collect();
    for (row, site) in rows.iter().zip(sites) {
        assert_eq!(row["site"], site["site"], "{name}");
        let shown = row["shown"].as_str().unwrap();
        if !shown.starts_with('<') {
            assert!(
                cells.contains(&shown),
                "{name}: {shown:?} is not a site of `memlens top`"
            );
        }
        match site["context"].as_str() {
            Some(_) => {
                let via = row["via"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name}: {shown}: no context"));
                assert!(cells.contains(&via), "{name}: {via:?} not in `memlens top`");
            }
            None => assert!(row["via"].is_null(), "{name}: {row}"),
        }
    }
}

/// The header and the device the page opens on, against the page's JSON and `memlens oom`:
/// the page opens on the first OOM's device (else the highest peak's); the header's capacity is
/// the one given or the one the OOM infers — never "not known" beside an OOM that names a GPU.
fn check_header(name: &str, page: &Value, report: &Value) {
    let h = &page["header"];
    let ooms = report["oom"]["ooms"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let want = match ooms.iter().find_map(|o| o["device"].as_u64()) {
        Some(d) => d,
        None => {
            // the highest peak among the devices with a trace (a `peak` moment; a one-entry
            // trace draws no timeline but has one), the first on ties
            let mut best: Option<(u64, u64)> = None;
            for d in report["devices"].as_array().unwrap() {
                let m = &d["moments"][0];
                if m["name"] != "peak" {
                    continue;
                }
                let p = m["live_bytes"].as_u64().unwrap();
                if best.map_or(true, |(_, b)| p > b) {
                    best = Some((d["device"].as_u64().unwrap(), p));
                }
            }
            best.map_or(report["devices"][0]["device"].as_u64().unwrap(), |b| b.0)
        }
    };
    assert_eq!(
        h["device"], want,
        "{name}: the page opened on another device"
    );
    let text = h["capacity"].as_str().unwrap();
    match ooms
        .iter()
        .find_map(|o| o["capacity_inferred"]["capacity_bytes"].as_u64())
    {
        Some(bytes) => {
            assert_eq!(report["capacity_shown"]["bytes"], bytes, "{name}");
            assert!(text.contains("inferred at the OOM"), "{name}: {text}");
            assert!(!text.contains("not known"), "{name}: {text}");
        }
        None => assert!(text.contains("not known"), "{name}: {text}"),
    }
}

/// The page's judgement lines for the device it shows first, against the page's JSON (the
/// commands' reports): the leaks card says the device's judgement when it has no finding and
/// each kind's state when it has; the categories card says a judgement that is not `found`; the
/// advice card says "Capacity: Cannot judge" without a capacity (unless the OOM card holds
/// the list). Text is compared without markup (backticks become code).
fn check_judgements(name: &str, page: &Value, report: &Value, dev: u64) {
    let shown = page["judgements"].as_array().unwrap();
    let of =
        |testid: &str| -> Vec<&Value> { shown.iter().filter(|j| j["testid"] == testid).collect() };
    let plain = |s: &str| s.replace('`', "");
    let says = |testid: &str, j: &Value| {
        let lines = of(testid);
        assert_eq!(lines.len(), 1, "{name}: {testid}: {shown:?}");
        let line = lines[0];
        assert_eq!(line["state"], j["state"], "{name}: {testid}");
        let text = line["text"].as_str().unwrap();
        let why = plain(j["why"].as_str().unwrap());
        assert!(
            text.contains(&why),
            "{name}: {testid}: {text:?} lacks {why:?}"
        );
        if j["state"] == "cannot_judge" {
            assert!(text.contains("Cannot judge: "), "{name}: {text}");
            let record = plain(j["record"].as_str().unwrap());
            assert!(text.contains(&record), "{name}: {text:?} lacks {record:?}");
        }
    };
    let by_device = |list: &Value| -> Value {
        list.as_array()
            .unwrap()
            .iter()
            .find(|d| d["device"] == dev)
            .cloned()
            .unwrap_or(Value::Null)
    };
    // leaks
    let leaks = &report["leaks"];
    let dl = leaks["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == dev);
    let found = leaks["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["device"] == dev);
    let src = dl.unwrap_or(leaks);
    if found {
        assert!(of("leaks-judgement").is_empty(), "{name}");
        let kinds = of("leaks-kinds");
        assert_eq!(kinds.len(), 1, "{name}: {shown:?}");
        assert_eq!(kinds[0]["leak"], src["leak"]["state"], "{name}");
        assert_eq!(
            kinds[0]["retained_graph"], src["retained_graph"]["state"],
            "{name}"
        );
    } else {
        says("leaks-judgement", &src["judgement"]);
        assert!(of("leaks-kinds").is_empty(), "{name}");
    }
    // categories
    let c = by_device(&report["categories"]["devices"]);
    if c.is_null() || c["judgement"]["state"] == "found" {
        assert!(of("categories-judgement").is_empty(), "{name}");
    } else {
        says("categories-judgement", &c["judgement"]);
    }
    // capacity, in the advice card (the OOM card holds the list at an OOM)
    let a = by_device(&report["advice"]);
    let at_oom = a["moment"] == "oom" && !report["oom"].is_null();
    if a.is_null() || at_oom || !a["plan"].is_null() {
        assert!(of("capacity-judgement").is_empty(), "{name}");
    } else {
        assert_eq!(a["capacity"]["state"], "cannot_judge", "{name}");
        says("capacity-judgement", &a["capacity"]);
    }
}

/// A snapshot of pinned host memory alone has nothing to draw per device, and says where
/// its figures are rather than that there is nothing at all.
#[test]
fn host_memory_alone_is_named_not_called_nothing() {
    let r = report_json(&sample("host_only.json"));
    assert_eq!(r["devices"], serde_json::json!([]));
    assert!(!r["summary"]["host"].is_null());
    let absent = r["absent"].to_string();
    assert!(absent.contains("only pinned host memory"), "{absent}");
    assert!(absent.contains("no_devices"), "{absent}");
}

/// The live index `memlens serve` finds a window's allocations with gives what a pass over
/// every allocation gives, on every sample and real file, for windows at, around and between
/// its checkpoints.
#[test]
fn the_live_index_finds_what_a_full_pass_finds() {
    use memlens::compose::page::bands::LiveIndex;
    use memlens::replay::{self, Window};
    let mut files = samples();
    files.extend(require_shared().unwrap_or_default());
    let mut windows_checked = 0;
    for file in files {
        let snap = load(&file);
        for r in replay::replay(&snap) {
            let index = LiveIndex::new(&r);
            let last = r.events as i64 - 1;
            let mut edges: Vec<i64> = vec![-1, 0, 1, last / 3, last / 2, last - 1, last];
            for k in 1..4 {
                let c = k * 16_384 - 1;
                edges.extend([c - 1, c, c + 1]);
            }
            edges.retain(|&e| (-1..=last).contains(&e));
            for &first in &edges {
                for &to in &edges {
                    if to < first {
                        continue;
                    }
                    let w = Window { first, last: to };
                    let brute: Vec<usize> = (0..r.allocations.len())
                        .filter(|&i| {
                            let a = &r.allocations[i];
                            a.start <= w.last && a.end > w.first
                        })
                        .collect();
                    assert_eq!(
                        index.overlapping(&r, w),
                        brute,
                        "{}: window {first}..{to}",
                        file.display()
                    );
                    windows_checked += 1;
                }
            }
        }
    }
    assert!(windows_checked > 500, "{windows_checked}");
}

/// GIVEN late_grads (gradients older than the trace, made without frames) WHEN the page is
/// written THEN its embedded data labels that memory as `top` does in the site table (with
/// the likely kind and the evidence the row's details show), in the flamegraph (a node of its
/// own, marked `predates_trace`, weighing the row's bytes) and on its timeline bands (so a
/// pinned band finds its row); the frameless memory made during the trace stays `<no frames>`.
#[test]
fn the_page_labels_memory_older_than_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let file = sample("late_grads.pickle");
    let out = dir.path().join("r.html");
    let o = memlens([
        "report",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let data = embedded(&std::fs::read_to_string(&out).unwrap());
    let label = "<before trace, no stack> likely gradients";
    let top = json_of(&[
        "top",
        file.to_str().unwrap(),
        "-n",
        "100",
        "--format",
        "json",
    ]);
    let want = top["devices"][0]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["site"] == label)
        .unwrap();
    let dev = &data["devices"][0];
    let peak = &dev["moments"][0];
    assert_eq!(peak["name"], "peak");
    let rows = peak["top"]["sites"].as_array().unwrap();
    let row = rows.iter().find(|r| r["site"] == label).unwrap();
    for k in [
        "bytes",
        "count",
        "predates_trace",
        "likely_kind",
        "kind_confidence",
        "evidence",
    ] {
        assert_eq!(row[k], want[k], "{k}");
    }
    assert!(rows
        .iter()
        .any(|r| r["site"] == "<no frames>" && r.get("predates_trace").is_none()));
    // The flamegraph: one node under the root, in every view.
    let frames = data["frames"].as_array().unwrap();
    let marked: Vec<usize> = (0..frames.len())
        .filter(|&i| frames[i]["predates_trace"] == true)
        .collect();
    assert_eq!(marked.len(), 1);
    assert_eq!(frames[marked[0]]["label"], label);
    for view in ["all", "no_cpp", "no_torch", "user"] {
        let tree = &peak["flame"][view];
        let k = tree["frame"]
            .as_array()
            .unwrap()
            .iter()
            .position(|f| i(f) == marked[0] as i64)
            .unwrap_or_else(|| panic!("{view}: no node"));
        assert_eq!(tree["depth"][k], 1, "{view}");
        assert_eq!(tree["value"][k], want["bytes"], "{view}");
    }
    // The bands of those allocations carry the row's label.
    let bands = dev["timeline"]["bands"].as_array().unwrap();
    let labelled = bands.iter().filter(|b| b["site"] == label).count();
    assert!(labelled > 0, "{bands:?}");
    for b in bands.iter().filter(|b| b["site"] == label) {
        assert_eq!(b["alloc_event"], -1);
    }
}

/// What `memlens serve` answers for a window and a moment labels memory older than the trace
/// as the page does: the bands of late_grads' frameless gradients carry the `top` row's label,
/// and the moment's rows are the page's, whether its verdicts were made once (the window
/// index) or for the request.
#[test]
fn served_windows_and_moments_label_memory_older_than_the_trace() {
    use memlens::compose::page::window::{moment, window, WindowIndex, WindowRequest};
    use memlens::compose::page::PageOptions;
    let file = sample("late_grads.pickle");
    let snap = load(&file);
    let replays = memlens::replay::replay(&snap);
    let index = WindowIndex::new(&snap, &replays);
    let label = "<before trace, no stack> likely gradients";
    let w = window(
        &snap,
        &replays,
        &index,
        &WindowRequest {
            device: 0,
            first: -1,
            last: replays[0].events as i64 - 1,
            columns: 100,
        },
    )
    .unwrap();
    let w = serde_json::to_value(&w).unwrap();
    assert!(w["bands"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["site"] == label));
    let page = json_of(&["report", file.to_str().unwrap(), "--format", "json"]);
    let peak = &page["devices"][0]["moments"][0];
    let at = peak["at"]["event_index"].as_i64().unwrap();
    let opts = PageOptions::default();
    for made in [index.made(0), None] {
        let m = moment(&snap, &replays, made, 0, at, "peak", &opts).unwrap();
        let m = serde_json::to_value(&m).unwrap();
        // (`share` is left out: a float read back from text may differ in its last digit.)
        let rows = |v: &Value| -> Vec<Vec<Value>> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    [
                        "site",
                        "bytes",
                        "count",
                        "predates_trace",
                        "likely_kind",
                        "evidence",
                    ]
                    .iter()
                    .map(|k| r.get(*k).cloned().unwrap_or(Value::Null))
                    .collect()
                })
                .collect()
        };
        assert_eq!(
            rows(&m["moment"]["top"]["sites"]),
            rows(&peak["top"]["sites"])
        );
        assert!(m["frames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["predates_trace"] == true && f["label"] == label));
    }
}

/// `report --source-root DIR` embeds the hot files' source at each moment as `memlens lines
/// --source-root DIR` computes it, and Chromium shows it: a source tree written here for
/// samples/lines/nested_lines.pickle, whose lines at the peak are known from its construction
/// (samples/truth/lines.json): every hot line of a file shown carries its self bytes.
#[test]
fn the_page_shows_the_annotated_source_under_source_root() {
    const NESTED: &str = "samples/lines/nested_lines.pickle";
    const USER: &str = "/home/user/proj/";
    let truth: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("samples/truth/lines.json")).unwrap(),
    )
    .unwrap();
    let peak = &truth["lines/nested_lines.pickle"]["live_peak"]["lines"];
    let dir = tempfile::tempdir().unwrap();
    let proj = dir.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    // Each file: `# line N`, its hot lines `hot_N()`.
    let mut files: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    for key in peak.as_object().unwrap().keys() {
        let (file, line) = key.rsplit_once(':').unwrap();
        let file = file.strip_prefix(USER).unwrap().to_string();
        files.entry(file).or_default().push(line.parse().unwrap());
    }
    for (file, hot) in &files {
        let n = hot.iter().max().unwrap() + 3;
        let text: Vec<String> = (1..=n)
            .map(|l| {
                if hot.contains(&l) {
                    format!("    hot_{l}()")
                } else {
                    format!("# line {l}")
                }
            })
            .collect();
        std::fs::write(proj.join(file), text.join("\n")).unwrap();
    }
    let root_arg = dir.path().to_str().unwrap();
    let o = memlens_in_root([
        "report",
        NESTED,
        "--source-root",
        root_arg,
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = root().join(NESTED);
    for dev in r["devices"].as_array().unwrap() {
        check_lines(
            f.to_str().unwrap(),
            NESTED,
            dev,
            &["--source-root", root_arg],
        );
        for m in dev["moments"].as_array().unwrap() {
            assert!(
                !m["lines"]["sources"].as_array().unwrap().is_empty(),
                "{}: no source embedded",
                m["name"]
            );
        }
    }
    let Some(browser) = require_browser() else {
        return;
    };
    let html = dir.path().join("page.html");
    let o = memlens_in_root([
        "report",
        NESTED,
        "--source-root",
        root_arg,
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = drive_page(&browser, "nested_lines.pickle", &html);
    assert_eq!(page["page_errors"], serde_json::json!([]));
    assert_eq!(page["requests"], serde_json::json!([]), "a network request");
    check_lines_shown("nested_lines.pickle", &page["lines"], &r["devices"][0]);
    check_lines_shown(
        "nested_lines.pickle",
        &page["lines_after"],
        &r["devices"][0],
    );
    // At the peak, each file shown: every line the construction charges self bytes to is a
    // hot line, its code and its bytes as the truth has them.
    let shown = &page["lines"];
    assert_eq!(shown["moment"], "peak");
    let drawn = shown["files"].as_array().unwrap();
    assert!(!drawn.is_empty(), "no source drawn: {shown}");
    for f in drawn {
        let file = f["file"].as_str().unwrap();
        let lines = f["lines"].as_array().unwrap();
        for (key, t) in peak.as_object().unwrap() {
            let (tf, tl) = key.rsplit_once(':').unwrap();
            let own = u(&t["self_bytes"]);
            if tf != file || own == 0 {
                continue;
            }
            let x = lines
                .iter()
                .find(|x| x["line"] == tl.parse::<i64>().unwrap())
                .unwrap_or_else(|| panic!("{key} not shown: {f}"));
            assert_eq!(x["hot"], true, "{key}");
            assert_eq!(u(&x["self"]), own, "{key}");
            assert_eq!(x["cells"][0], memlens::units::iec(own).as_str(), "{key}");
            assert_eq!(x["cells"][3], format!("    hot_{tl}()").as_str(), "{key}");
        }
    }
}

/// The page keeps a moment's 50 hottest lines, in `lines`' order, and says how many there are:
/// a trace of 60 live allocations from 60 lines of one file (1 KiB more per line), whose
/// panel is `memlens lines`' cut to its first 50.
#[test]
fn the_page_keeps_the_hottest_fifty_lines() {
    let entry = |k: u64| {
        format!(
            r#"{{"action":"alloc","addr":{},"size":{},"stream":0,"time_us":{k},"frames":[{{"name":"f","filename":"/home/u/train.py","line":{k}}}]}}"#,
            (k + 1) << 20,
            k << 10
        )
    };
    let trace: Vec<String> = (1..=60).map(entry).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sixty.json");
    let doc = format!(
        r#"{{"segments":[],"device_traces":[[{}]]}}"#,
        trace.join(",")
    );
    std::fs::write(&path, doc).unwrap();
    let file = path.to_str().unwrap();
    let r = report_json(&path);
    let dev = &r["devices"][0];
    for m in dev["moments"].as_array().unwrap() {
        let l = &m["lines"];
        assert_eq!(l["line_count"], 60, "{}", m["name"]);
        let lines = l["lines"].as_array().unwrap();
        assert_eq!(lines.len(), PAGE_LINES);
        // The hottest first: lines 60 down to 11.
        let kept: Vec<i64> = lines.iter().map(|x| i(&x["line"])).collect();
        assert_eq!(kept, (11..=60).rev().collect::<Vec<i64>>());
        assert_eq!(u(&lines[0]["self_bytes"]), 60 << 10);
    }
    check_lines(file, "sixty lines", dev, &[]);
}

/// Every real snapshot's page, driven in headless Chromium: it opens on the device the rule
/// names, without an error or a request, its judgement lines, the pinners beside the
/// allocator state and the lines panel (at the first moment and the last) are those of its
/// JSON, the state view and the flamegraph are drawn. (The hover and zoom checks of
/// `check_page` run on `browser_files`.)
#[test]
fn every_real_page_shows_its_panels_in_headless_chromium() {
    let Some(browser) = require_browser() else {
        return;
    };
    let Some(files) = require_shared() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for file in files {
        let f = file.to_str().unwrap();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let html = dir.path().join(format!("{name}.html"));
        write_page(f, &html);
        let page = drive_page(&browser, &name, &html);
        assert_eq!(page["ready"], true, "{name}: {page}");
        assert_eq!(page["page_errors"], serde_json::json!([]), "{name}");
        assert_eq!(page["requests"], serde_json::json!([]), "{name}");
        let report = report_json(&file);
        check_header(&name, &page, &report);
        let first = report["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["device"] == page["header"]["device"])
            .unwrap();
        check_judgements(&name, &page, &report, first["device"].as_u64().unwrap());
        check_pinners(&name, &page, first);
        check_lines_shown(&name, &page["lines"], first);
        check_lines_shown(&name, &page["lines_after"], first);
        assert!(u(&page["drawn"]["state_blocks"]) > 0, "{name}: state view");
        assert!(u(&page["drawn"]["flame_nodes"]) > 0, "{name}: flame");
    }
}
