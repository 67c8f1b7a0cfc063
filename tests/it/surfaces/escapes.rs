//! Issue 36, item 2: snapshot strings reach terminals, CI logs, Markdown, SVG and XML. One
//! snapshot (samples/snapshot.json with its frame names, file names, step annotations and
//! metadata replaced by terminal escapes, bidi overrides, backticks, pipes, markup and
//! newlines, in a file whose own name holds them too) goes through every text command: no
//! control character reaches the output, the escaped form does, exit codes and the FAIL lines
//! of `check` stay, Markdown keeps its table, SVG and XML parse. And the page: its policy runs
//! only its own script (issue 36, item 6).

use crate::common::{memlens, python3, require_browser, root};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A frame name that, printed raw, erases the line above and the current one, returns the
/// cursor, closes a Markdown code span and cell, opens a script, reverses the text after it
/// and breaks the line.
const NAME: &str = "ma\x1b[2K\x1b[1A\rin`|<script>window.pwned=1</script>\u{202e}|x\ny";
/// Its escaped form, as every text output shows it.
const NAME_SHOWN: &str =
    "ma\\u{1b}[2K\\u{1b}[1A\\rin`|<script>window.pwned=1</script>\\u{202e}|x\\ny";
/// A file name with an OSC 8 hyperlink, a bell and Markdown punctuation.
const FILE: &str = "/home/user/proj/tr\x1b]8;;http://e\x07ain`|*_[a]&<b>.py";
/// Its base name escaped.
const FILE_SHOWN: &str = "tr\\u{1b}]8;;http://e\\u{7}ain`|*_[a]&<b>.py";
/// A second frame name: backspace, DEL, a C1 control (NEL), a bidi isolate.
const NAME2: &str = "st\x08\x7f\u{85}ep\u{2066}";
const NAME2_SHOWN: &str = "st\\u{8}\\u{7f}\\u{85}ep\\u{2066}";
/// What the snapshot file itself is called (titles and `check`'s file lines show it).
const FILE_NAME: &str = "ev`il|\x1b[31m.json";
const FILE_NAME_SHOWN: &str = "ev`il|\\u{1b}[31m.json";

fn replace(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match (k.as_str(), x.as_str()) {
                    ("name", Some("main")) => *x = NAME.into(),
                    ("name", Some("step")) => *x = NAME2.into(),
                    ("name", Some(s)) if s.starts_with("ProfilerStep#") => {
                        *x = format!("{s}\x1b[2K\r").into()
                    }
                    ("filename", Some("/home/user/proj/train.py")) => *x = FILE.into(),
                    ("user_metadata", Some(_)) => *x = "meta\x1b[31mred\u{202e}".into(),
                    _ => replace(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(replace),
        _ => {}
    }
}

/// The hostile snapshot, written in `dir`.
fn hostile(dir: &Path) -> PathBuf {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root().join("samples/snapshot.json")).unwrap())
            .unwrap();
    replace(&mut v);
    let text = serde_json::to_string(&v).unwrap();
    assert!(
        text.contains("\\u001b[2K\\u001b[1A\\rin"),
        "the names were replaced"
    );
    let p = dir.join(FILE_NAME);
    std::fs::write(&p, text).unwrap();
    p
}

/// The characters of `s` a terminal or a log would act on: C0 but newline, DEL, C1, bidi
/// controls.
fn acted_on(s: &str) -> Vec<char> {
    s.chars()
        .filter(|&c| {
            (c < ' ' && c != '\n')
                || ('\x7f'..='\u{9f}').contains(&c)
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)
        })
        .collect()
}

fn run(args: &[&str], file: &Path) -> (Output, String) {
    let mut a: Vec<std::ffi::OsString> = args.iter().map(|x| x.into()).collect();
    a.push(file.into());
    let o = memlens(a);
    let out = String::from_utf8(o.stdout.clone()).expect("UTF-8 output");
    let err = String::from_utf8(o.stderr.clone()).expect("UTF-8 errors");
    for (what, s) in [("stdout", &out), ("stderr", &err)] {
        assert_eq!(acted_on(s), Vec::<char>::new(), "{args:?}: {what}:\n{s}");
    }
    (o, out)
}

#[test]
fn every_text_output_shows_snapshot_strings_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let f = hostile(dir.path());
    // Every command's text, CSV and folded output; none holds a control but `\n`.
    let cases: &[(&[&str], i32, &[&str])] = &[
        (&["summary"], 0, &[FILE_NAME_SHOWN]),
        (&["top"], 0, &[NAME_SHOWN, FILE_SHOWN]),
        (&["top", "--full-stacks"], 0, &[NAME_SHOWN, NAME2_SHOWN]),
        (&["top", "--by", "function"], 0, &[NAME_SHOWN]),
        (&["top", "--by", "stack"], 0, &[NAME_SHOWN]),
        (&["top", "--by", "file"], 0, &[FILE_SHOWN]),
        (&["top", "--cost", "allocated", "--width", "60"], 0, &[]),
        (&["diff", "samples/snapshot.json"], 0, &[]),
        (
            &["flame", "--format", "folded"],
            0,
            &[NAME_SHOWN, NAME2_SHOWN],
        ),
        (&["leaks"], 0, &[]),
        (&["leaks", "--steps"], 0, &["ProfilerStep#1\\u{1b}[2K\\r"]),
        (&["categories"], 0, &[]),
        (&["fit"], 0, &[]),
        (&["oom"], 0, &[]),
        (&["whatif"], 0, &[]),
        (&["frag"], 0, &[]),
        (&["timeline"], 0, &[]),
        (&["batch"], 0, &[FILE_NAME_SHOWN, FILE_SHOWN]),
        (
            &["batch", "--format", "csv"],
            0,
            &[FILE_NAME_SHOWN, FILE_SHOWN],
        ),
        (&["explain"], 2, &[]),
    ];
    for (args, code, shown) in cases {
        let mut a = args.to_vec();
        let diff_base = root().join("samples/snapshot.json");
        if a[0] == "diff" {
            a[1] = diff_base.to_str().unwrap();
        }
        let (o, out) = run(&a, &f);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {out}");
        for s in *shown {
            assert!(out.contains(s), "{args:?} shows {s:?}:\n{out}");
        }
    }
    // A folded line per stack, whatever its frames hold: `device_N;frame;... weight`.
    let (_, folded) = run(&["flame", "--format", "folded"], &f);
    let (_, plain) = run(
        &["flame", "--format", "folded"],
        &root().join("samples/snapshot.json"),
    );
    assert_eq!(folded.lines().count(), plain.lines().count());
    for line in folded.lines() {
        let (stack, weight) = line.rsplit_once(' ').unwrap();
        assert!(
            weight.parse::<u64>().is_ok() && stack.starts_with("device_"),
            "{line}"
        );
    }
}

#[test]
fn check_keeps_its_fail_lines_and_markdown_its_table() {
    let dir = tempfile::tempdir().unwrap();
    let f = hostile(dir.path());
    let (o, out) = run(&["check", "--max-peak", "1KiB"], &f);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!("FAIL {}", f.display()).replace("\x1b", "\\u{1b}")
    );
    assert!(
        lines[1].starts_with("  FAIL max_peak: peak 150.84 MiB"),
        "{out}"
    );
    assert_eq!(lines.last(), Some(&"1 of 1 file(s) broke a budget"));
    assert!(
        out.contains(&format!("{FILE_SHOWN}:88:{NAME_SHOWN}")),
        "{out}"
    );
    let json: serde_json::Value = {
        let o = memlens([
            "check".as_ref(),
            "--max-peak".as_ref(),
            "1KiB".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            f.as_os_str(),
        ]);
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let sites = json["files"][0]["budgets"][0]["top_sites"]
        .as_array()
        .unwrap()
        .len();
    assert!(sites >= 3);

    let (o, md) = run(&["check", "--format", "md", "--max-peak", "1KiB"], &f);
    assert_eq!(o.status.code(), Some(1));
    // Two tables: the budgets (header, rule, one row) and the top sites (header, rule, a row a
    // site); every row has its four cell borders (a `|` not escaped), nothing else starts one.
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(rows.len(), 3 + 2 + sites, "{md}");
    for r in &rows {
        let borders = r
            .char_indices()
            .filter(|&(i, c)| c == '|' && (i == 0 || r.as_bytes()[i - 1] != b'\\'))
            .count();
        let cells = if r.contains("budget") || r.starts_with("|---|") || r.contains("❌") {
            5
        } else {
            4
        };
        assert_eq!(borders, cells, "{r}");
    }
    // Outside code spans (and backslash escapes) there is no `<` (no HTML), no backtick run
    // left open.
    for line in md.lines() {
        let bare = without_escapes(&without_code_spans(line));
        assert!(!bare.contains('<') && !bare.contains('`'), "{line}");
    }
    assert!(
        md.contains("``tr\\u{1b}]8;;http://e\\u{7}ain`\\|*_[a]&<b>.py:88:ma\\u{1b}[2K"),
        "{md}"
    );
    assert!(md.contains("### ❌ ``/"), "{md}");
    assert!(md.contains("/ev`il\\|\\u{1b}[31m.json``\n"), "{md}");

    // JUnit XML parses, with the site escaped in the failure.
    let (o, junit) = run(&["check", "--format", "junit", "--max-peak", "1KiB"], &f);
    assert_eq!(o.status.code(), Some(1));
    xml_parses(&junit, "JUnit");
    assert!(
        junit.contains("ma\\u{1b}[2K\\u{1b}[1A\\rin`|&lt;script&gt;"),
        "{junit}"
    );
}

/// `line` with its code spans (a run of N backticks to the next run of exactly N) removed.
fn without_code_spans(line: &str) -> String {
    let b: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != '`' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let n = b[i..].iter().take_while(|&&c| c == '`').count();
        let mut j = i + n;
        let mut closed = None;
        while j < b.len() {
            let m = b[j..].iter().take_while(|&&c| c == '`').count();
            if m == n {
                closed = Some(j + m);
                break;
            }
            j += m.max(1);
        }
        match closed {
            Some(end) => i = end,
            None => {
                out.extend(&b[i..]);
                break;
            }
        }
    }
    out
}

/// `s` without its backslash escapes (`\\<` and the character escaped).
fn without_escapes(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            chars.next();
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` parses as XML 1.0 (Python's expat, as CI has python3).
fn xml_parses(text: &str, what: &str) {
    let mut p = Command::new(python3())
        .args([
            "-c",
            "import sys, xml.dom.minidom as m; m.parseString(sys.stdin.buffer.read())",
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = p.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "{what} is not XML: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn svg_outputs_are_valid_xml_for_any_name() {
    let dir = tempfile::tempdir().unwrap();
    let f = hostile(dir.path());
    for args in [
        &["flame"][..],
        &["flame", "--cost", "allocated"][..],
        &["timeline", "--format", "svg"][..],
    ] {
        let (o, svg) = run(args, &f);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        xml_parses(&svg, &format!("{args:?}"));
        if args[0] == "flame" {
            assert!(
                svg.contains("ma\\u{1b}[2K\\u{1b}[1A\\rin`|&lt;script&gt;"),
                "{args:?}"
            );
        }
    }
}

#[test]
fn an_error_quoting_a_snapshot_string_stays_one_visible_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.json");
    let text = std::fs::read_to_string(root().join("samples/snapshot.json"))
        .unwrap()
        .replacen(
            "\"state\":\"active_allocated\"",
            "\"state\":\"x\\u001b[2K\\r\\u202eOK\"",
            1,
        );
    std::fs::write(&p, text).unwrap();
    let (o, _) = run(&["summary"], &p);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(r#"found "x\u{1b}[2K\r\u{202e}OK""#), "{err}");
}

/// The page's script text and the hash its policy names for it.
fn page_script_and_policy(html: &str) -> (String, String) {
    let script = html.rsplit_once("<script>").unwrap().1;
    let script = &script[..script.find("</script>").unwrap()];
    let csp = html
        .split_once("Content-Security-Policy\" content=\"")
        .unwrap()
        .1;
    let csp = &csp[..csp.find('"').unwrap()];
    (script.to_string(), csp.to_string())
}

#[test]
fn the_page_policy_names_its_one_script_by_hash() {
    let dir = tempfile::tempdir().unwrap();
    let f = hostile(dir.path());
    let out = dir.path().join("page.html");
    let o = memlens([
        "report".as_ref(),
        f.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let html = std::fs::read_to_string(&out).unwrap();
    let (script, csp) = page_script_and_policy(&html);
    // The hash computed apart from memlens (Python's hashlib and base64).
    let mut p = Command::new(python3())
        .args(["-c", "import sys, hashlib, base64; print(base64.b64encode(hashlib.sha256(sys.stdin.buffer.read()).digest()).decode())"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    p.stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let hash = String::from_utf8(p.wait_with_output().unwrap().stdout).unwrap();
    assert!(
        csp.starts_with(&format!(
            "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-",
            hash.trim()
        )),
        "{csp}"
    );
    assert!(csp.ends_with("; img-src data:"), "{csp}");
    assert!(!html.contains("unsafe-inline"));
}

#[test]
fn the_page_shows_markup_in_names_as_text_and_runs_no_slipped_script() {
    let Some(_browser) = require_browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root().join("samples/snapshot.json")).unwrap())
            .unwrap();
    let markup = "<img src=x onerror=\"window.pwned='img'\"><script>window.pwned='name'</script>";
    fn put(v: &mut serde_json::Value, markup: &str) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if k == "name" && x == "main" {
                        *x = markup.into();
                    } else {
                        put(x, markup);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| put(x, markup)),
            _ => {}
        }
    }
    put(&mut v, markup);
    let f = dir.path().join("xss.json");
    std::fs::write(&f, serde_json::to_string(&v).unwrap()).unwrap();
    let html = dir.path().join("xss.html");
    let o = memlens([
        "report".as_ref(),
        f.as_os_str(),
        "-o".as_ref(),
        html.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let run = Command::new("node")
        .arg(root().join("tests/browser/check_hostile.mjs"))
        .arg(&html)
        .arg(markup)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "the driver failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let page: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(page["ready"], true, "{page}");
    assert_eq!(page["page_errors"], serde_json::json!([]), "{page}");
    // Nothing ran: not the names (shown as text), not the script and handlers slipped in.
    assert_eq!(page["pwned"], serde_json::Value::Null, "{page}");
    assert_eq!(
        page["shown"][markup], true,
        "the name is shown literally: {page}"
    );
    let violations: Vec<&str> = page["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        violations.iter().any(|v| v.starts_with("script-src")),
        "the policy refused the slipped script: {page}"
    );
    // The page's own styles and scripts broke no rule before the slip (console errors are the
    // policy's refusals, all of them of the slipped code).
    let refusals = page["console_errors"].as_array().unwrap().len();
    assert_eq!(refusals, violations.len(), "{page}");
}
