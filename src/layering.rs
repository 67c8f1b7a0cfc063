//! The crate's layering, checked on its own sources (a unit test, so it runs with
//! `cargo test --lib` and cannot rot).
//!
//! Every `crate::`, `memlens::`, `super::` and `self::` path outside test code is resolved to
//! the module it names (the longest prefix that is a module file). A reference from module
//! `a::b::x` to `a::c::y` is an edge `b -> c` among the children of `a`; a reference to an
//! ancestor or a descendant is none. Two rules:
//!
//! - between top-level modules, an edge only goes down [`LAYERS`];
//! - among the children of any module, the edges make no circle (but the [`KNOWN_CIRCLES`]).
//!
//! `cargo test --lib layering -- --nocapture` prints the top-level edges and every circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules, lowest first: each may import only those before it. `cli` is the
/// command line (private; `run_cli` at the crate root is the binary's way in).
const LAYERS: &[&str] = &[
    "error",
    "units",
    "alloc_guard",
    "timings",
    "pickle",
    "input",
    "model",
    "load",
    "replay",
    "allocator",
    "vocab",
    "analyze",
    "compose",
    "render",
    "serve",
    "cli",
];

/// Items the crate root re-exports (or, for `run_cli`, passes on), and the module each comes
/// from.
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("Error", "error"),
    ("load_with", "load"),
    ("LoadOptions", "load"),
    ("run_cli", "cli"),
];

/// Circles that are known and owed a fix (parent module, its children in the circle, sorted):
/// none since issue 38; a new entry needs a reason beside it.
const KNOWN_CIRCLES: &[(&str, &[&str])] = &[];

/// A module path, `["analyze", "fit"]`; the crate root is empty.
type ModPath = Vec<String>;

/// Edges among the children of one parent: child -> the siblings it imports.
type Edges = BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Whether `path` names a module file under `src/`.
fn is_module(path: &[String]) -> bool {
    if path.is_empty() {
        return false;
    }
    let base = src().join(path.join("/"));
    base.with_extension("rs").is_file() || base.join("mod.rs").is_file()
}

/// The module of a source file: `src/analyze/fit/mod.rs` is `analyze::fit`.
fn module_of(file: &Path) -> ModPath {
    let rel = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: ModPath = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

/// The source lines that are not comments nor test code: an inline `#[cfg(test)] mod x {`
/// runs to the closing brace at its own indentation (the sources are rustfmt'ed); the
/// children declared `#[cfg(test)] mod x;` are returned as test-only.
fn code_lines(text: &str) -> (Vec<&str>, Vec<String>) {
    let mut code = Vec::new();
    let mut test_children = Vec::new();
    let mut lines = text.lines().peekable();
    let mut test_attr = false;
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t.starts_with("//") {
            continue;
        }
        if t == "#[cfg(test)]" {
            test_attr = true;
            continue;
        }
        if test_attr && t.starts_with("#[") {
            continue;
        }
        if test_attr {
            test_attr = false;
            let decl = t
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ");
            if let Some(rest) = decl.strip_prefix("mod ") {
                if let Some(name) = rest.strip_suffix(';') {
                    test_children.push(name.trim().to_string());
                    continue;
                }
                if rest.ends_with('{') {
                    let indent = &line[..line.len() - line.trim_start().len()];
                    let close = format!("{indent}}}");
                    for l in lines.by_ref() {
                        if l == close {
                            break;
                        }
                    }
                    continue;
                }
            }
        }
        code.push(line);
    }
    (code, test_children)
}

/// Paths starting at `crate`, `memlens`, `super` or `self` in code, a `{...}` group (over
/// lines too) expanded into one path per item.
fn paths_in(line: &str) -> Vec<Vec<String>> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        if ident(b[i]) && (i == 0 || !ident(b[i - 1]) && b[i - 1] != b':') {
            let start = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            let first = &line[start..i];
            if matches!(first, "crate" | "memlens" | "super" | "self")
                && line[i..].starts_with("::")
            {
                let (paths, end) = path_from(line, start);
                out.extend(paths);
                i = end;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The path(s) at `start`: `a::b::{c, d::e}` gives `a::b::c` and `a::b::d::e`; and where it
/// ends.
fn path_from(line: &str, start: usize) -> (Vec<Vec<String>>, usize) {
    let b = line.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut segs = Vec::new();
    let mut i = start;
    loop {
        let s = i;
        while i < b.len() && ident(b[i]) {
            i += 1;
        }
        if s == i {
            break;
        }
        segs.push(line[s..i].to_string());
        if line[i..].starts_with("::{") {
            i += 3;
            let mut out = Vec::new();
            loop {
                while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b',') {
                    i += 1;
                }
                if i >= b.len() || b[i] == b'}' {
                    break;
                }
                let (inner, end) = path_from(line, i);
                if end == i {
                    break;
                }
                for p in inner {
                    out.push(segs.iter().cloned().chain(p).collect());
                }
                i = end;
                // Skip `as name` and anything else up to the next item.
                while i < b.len() && b[i] != b',' && b[i] != b'}' {
                    i += 1;
                }
            }
            return (out, (i + 1).min(b.len()));
        }
        if line[i..].starts_with("::") && line[i + 2..].bytes().next().is_some_and(ident) {
            i += 2;
        } else {
            break;
        }
    }
    (vec![segs], i)
}

/// The module a path names from module `me`.
fn resolve(me: &[String], path: &[String]) -> Option<ModPath> {
    let (mut base, rest): (ModPath, &[String]) = match path.first().map(String::as_str) {
        Some("crate" | "memlens") => (Vec::new(), &path[1..]),
        Some("self") => (me.to_vec(), &path[1..]),
        Some("super") => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            (me[..me.len().checked_sub(ups)?].to_vec(), &path[ups..])
        }
        _ => return None,
    };
    if base.is_empty() {
        if let Some(first) = rest.first() {
            if let Some((_, m)) = ROOT_ITEMS.iter().find(|(item, _)| item == first) {
                return Some(vec![m.to_string()]);
            }
        }
    }
    for s in rest {
        base.push(s.clone());
        if !is_module(&base) {
            base.pop();
            break;
        }
    }
    Some(base)
}

/// Every source file under `dir`, test-only children left out.
fn files(dir: &Path, skip: &BTreeSet<PathBuf>, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if skip.contains(&p.with_extension("")) || skip.contains(&p) {
            continue;
        }
        if p.is_dir() {
            files(&p, skip, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The edges among siblings of every module, and the references that name no module.
fn edges() -> (Edges, Vec<String>) {
    let mut skip = BTreeSet::new();
    skip.insert(src().join("layering"));
    // First the test-only children (declared `#[cfg(test)] mod x;`), then the rest.
    let mut all = Vec::new();
    files(&src(), &skip, &mut all);
    for f in &all {
        let text = std::fs::read_to_string(f).unwrap();
        let (_, test_children) = code_lines(&text);
        let me = module_of(f);
        for c in test_children {
            let dir = src().join(me.join("/")).join(&c);
            skip.insert(dir);
        }
    }
    let mut kept = Vec::new();
    files(&src(), &skip, &mut kept);
    let mut edges = Edges::new();
    let mut unknown = Vec::new();
    for f in &kept {
        let me = module_of(f);
        let text = std::fs::read_to_string(f).unwrap();
        let code = code_lines(&text).0.join("\n");
        {
            for path in paths_in(&code) {
                let Some(to) = resolve(&me, &path) else {
                    continue;
                };
                if to.is_empty() {
                    unknown.push(format!("{}: {}", f.display(), path.join("::")));
                    continue;
                }
                let k = me.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if k == me.len() || k == to.len() {
                    continue;
                }
                edges
                    .entry(me[..k].to_vec())
                    .or_default()
                    .entry(me[k].clone())
                    .or_default()
                    .insert(to[k].clone());
            }
        }
    }
    (edges, unknown)
}

/// The circles of a graph: its strongly connected components of more than one node.
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Two nodes are in one component when each reaches the other.
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            for m in g.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let nodes: BTreeSet<&String> = g.keys().chain(g.values().flatten()).collect();
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if done.contains(*n) || !reaches[n].contains(*n) {
            continue;
        }
        let comp: Vec<String> = nodes
            .iter()
            .filter(|m| reaches[n].contains(**m) && reaches[**m].contains(*n))
            .map(|m| m.to_string())
            .collect();
        done.extend(comp.iter().cloned());
        if comp.len() > 1 {
            out.push(comp);
        }
    }
    out
}

#[test]
fn layers_only_import_downwards_and_modules_make_no_circle() {
    let (edges, unknown) = edges();
    assert!(unknown.is_empty(), "paths naming no module: {unknown:#?}");
    let mut broken = Vec::new();
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    println!("top-level imports (lowest layer first):");
    let top = edges.get(&Vec::new()).cloned().unwrap_or_default();
    for layer in LAYERS {
        let to: Vec<&str> = top
            .get(*layer)
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        println!("  {layer} -> {}", to.join(", "));
    }
    for (from, tos) in &top {
        let Some(r) = rank(from) else {
            broken.push(format!("top-level module `{from}` is not in LAYERS"));
            continue;
        };
        for to in tos {
            match rank(to) {
                Some(t) if t < r => {}
                Some(_) => broken.push(format!("`{from}` imports `{to}`, a layer above it")),
                None => broken.push(format!("top-level module `{to}` is not in LAYERS")),
            }
        }
    }
    let mut known_seen = BTreeSet::new();
    for (parent, g) in &edges {
        let parent = parent.join("::");
        for c in circles(g) {
            let known = KNOWN_CIRCLES
                .iter()
                .position(|(p, members)| *p == parent && c.iter().eq(members.iter()));
            let name = if parent.is_empty() { "crate" } else { &parent };
            println!(
                "circle in {name}: {}{}",
                c.join(" <-> "),
                if known.is_some() { " (known)" } else { "" }
            );
            match known {
                Some(k) => {
                    known_seen.insert(k);
                }
                None => broken.push(format!("circle among the children of {name}: {c:?}")),
            }
        }
    }
    for (k, (p, members)) in KNOWN_CIRCLES.iter().enumerate() {
        if !known_seen.contains(&k) {
            println!("known circle {p}: {members:?} is gone: remove it from KNOWN_CIRCLES");
        }
    }
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
}

#[test]
fn paths_and_groups_are_read() {
    let p = paths_in(
        "use crate::analyze::{fit::{self, Fit},\n    oom}; let x = super::super::a::b(1);",
    );
    let names: Vec<String> = p.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        names,
        [
            "crate::analyze::fit::self",
            "crate::analyze::fit::Fit",
            "crate::analyze::oom",
            "super::super::a::b"
        ]
    );
    let me: ModPath = vec!["analyze".into(), "fit".into()];
    let to = resolve(&me, &["super".into(), "oom".into(), "run".into()]).unwrap();
    assert_eq!(to, ["analyze", "oom"]);
    assert_eq!(
        resolve(&me, &["crate".into(), "Error".into()]).unwrap(),
        ["error"]
    );
}
