//! The size rules of issue 38, checked on the crate's own sources (a unit test, like
//! [`crate::layering`]): no function over [`MAX_FN_LINES`] lines but the [`LONG_FNS`], no
//! file over [`MAX_FILE_LINES`] lines.
//!
//! A function runs from its `fn` line to the first line that is its indentation followed by
//! `}` (rustfmt's layout; a one-line `fn` has none and is skipped).
//! `cargo test --lib code_size -- --nocapture` prints the longest functions and files.

use std::path::{Path, PathBuf};

/// The most lines a function may take, its signature and closing brace included.
const MAX_FN_LINES: usize = 150;

/// The most lines a source file may take.
const MAX_FILE_LINES: usize = 800;

/// Functions allowed past [`MAX_FN_LINES`] (file under `src/`, name), each with its reason.
const LONG_FNS: &[(&str, &str)] = &[
    // The opcode dispatch loop: one arm per opcode, in one function so that the machine's
    // state stays in registers (docs/architecture.md).
    ("pickle/machine/dispatch.rs", "run_inner"),
];

/// Every `.rs` file under `dir`, sorted.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The name of the function a line declares, with the line's indentation.
fn declared_fn(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start();
    let indent = &line[..line.len() - rest.len()];
    // `pub(in crate::pickle)` holds a space: the visibility is cut off whole.
    let rest = match rest.strip_prefix("pub(") {
        Some(r) => r.split_once(')')?.1,
        None => rest,
    };
    let mut words = rest.split_whitespace();
    loop {
        match words.next()? {
            "fn" => break,
            "pub" | "const" | "unsafe" | "async" | "extern" | "\"C\"" => {}
            _ => return None,
        }
    }
    let name = words.next()?;
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    Some((indent, &name[..end]))
}

/// Every function of `text` with its length in lines.
fn functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((indent, name)) = declared_fn(line) else {
            continue;
        };
        // The line that opens the body: none for a declaration (`fn f();`), and a body closed
        // on that line (`fn f() {}`) is one short function.
        let Some(open) = lines[i..]
            .iter()
            .position(|l| l.contains('{') || l.trim_end().ends_with(';'))
            .map(|k| lines[i + k])
        else {
            continue;
        };
        if !open.contains('{') || open.matches('{').count() == open.matches('}').count() {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|l| *l == close) {
            out.push((name.to_owned(), end + 2));
        }
    }
    out
}

#[test]
fn functions_and_files_stay_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(files.len() > 100, "only {} source files found", files.len());
    let (mut fns, mut sizes) = (Vec::new(), Vec::new());
    for path in &files {
        let rel = path
            .strip_prefix(&root)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(path).expect("a source file");
        sizes.push((text.lines().count(), rel.clone()));
        for (name, n) in functions(&text) {
            fns.push((n, rel.clone(), name));
        }
    }
    fns.sort_by(|a, b| b.cmp(a));
    sizes.sort_by(|a, b| b.cmp(a));
    println!("longest functions:");
    for (n, file, name) in fns.iter().take(10) {
        println!("  {n:4} {file} {name}");
    }
    println!("longest files:");
    for (n, file) in sizes.iter().take(5) {
        println!("  {n:4} {file}");
    }
    let long: Vec<String> = fns
        .iter()
        .filter(|(n, file, name)| {
            *n > MAX_FN_LINES && !LONG_FNS.contains(&(file.as_str(), name.as_str()))
        })
        .map(|(n, file, name)| format!("{file} {name}: {n} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them, or say in LONG_FNS why not):\n{}",
        long.join("\n")
    );
    for (file, name) in LONG_FNS {
        assert!(
            fns.iter()
                .any(|(n, f, m)| f == file && m == name && *n > MAX_FN_LINES),
            "{file} {name} is no longer long: remove it from LONG_FNS"
        );
    }
    let big: Vec<String> = sizes
        .iter()
        .filter(|(n, _)| *n > MAX_FILE_LINES)
        .map(|(n, file)| format!("{file}: {n} lines"))
        .collect();
    assert!(
        big.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them by what they do):\n{}",
        big.join("\n")
    );
}

#[test]
fn a_function_is_measured_to_its_closing_brace() {
    let text = "fn a() {\n    x();\n}\n\n    pub(crate) fn b(\n        y: u8,\n    ) -> u8 {\n        y\n    }\nfn c() {}\n    fn d(\n        x: u8,\n    );\nfn e() {\n}\n";
    assert_eq!(
        functions(text),
        vec![
            ("a".to_owned(), 3),
            ("b".to_owned(), 5),
            ("e".to_owned(), 2)
        ]
    );
    assert_eq!(declared_fn("let fn_x = 1;"), None);
    assert_eq!(
        declared_fn("pub(in crate::pickle) fn run<H: Hooks>(&mut self) {"),
        Some(("", "run"))
    );
    assert_eq!(
        declared_fn("    pub const unsafe fn d<T>() {"),
        Some(("    ", "d"))
    );
}
