//! The hottest files' source around their hot lines, each source line beside its bytes (the
//! per-file view of Mosaic): the files holding the most self bytes, read from `--source-root`
//! or from the paths as recorded. Source is only read, never run; reading is the caller's
//! (the command line hands a reader in), so this module touches no file itself.

use super::{DeviceLines, LineRow, LinesReport};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Files shown per device: those holding the most self bytes.
pub const HOT_FILES: usize = 3;
/// Hot lines shown per file (by total bytes).
pub const HOT_LINES: usize = 8;
/// Source lines shown before and after each hot line.
pub const CONTEXT: i64 = 2;
/// Characters of one source line shown; the rest is cut.
const LINE_CHARS: usize = 160;

/// One hot file's source near its hot lines.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SourceFile {
    /// The file as recorded.
    pub file: String,
    /// Where it was read; absent when it could not be (see `note`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The self bytes of the file's lines.
    pub self_bytes: u64,
    /// The lines shown, in order (a jump in `line` is a gap).
    pub lines: Vec<SourceLine>,
    /// Why the file could not be read, or what did not match (a line past its end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One source line and the bytes charged to it (0 for a line shown as context).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SourceLine {
    /// Line number.
    pub line: i64,
    /// Its text (without its line break; cut after 160 characters).
    pub text: String,
    /// The line's self cost.
    pub self_bytes: u64,
    /// The line's total cost.
    pub total_bytes: u64,
}

/// Reads a source file: `Err` of kind `NotFound` when there is none at that path.
pub type Reader<'a> = &'a dyn Fn(&Path) -> std::io::Result<String>;

/// Adds the hottest files' source to every device of `report`. With `source_root`, a recorded
/// path is looked up below it (its longest tail that exists there: `DIR/proj/model.py`, then
/// `DIR/model.py` for `/home/u/proj/model.py`), and a file found nowhere is one note; without
/// it, the recorded path is read as it is and a missing file is passed over in silence.
pub fn annotate(report: &mut LinesReport, source_root: Option<&Path>, read: Reader) {
    let mut sources = Sources::new(source_root, read);
    for d in &mut report.devices {
        sources.annotate(d);
    }
}

/// The source files read for [`annotate`], each read once however many devices (or moments,
/// on the page) show it.
pub struct Sources<'a> {
    source_root: Option<&'a Path>,
    read: Reader<'a>,
    cache: FxHashMap<String, Result<(PathBuf, String), String>>,
}

impl<'a> Sources<'a> {
    /// No file read yet; files are looked for as [`annotate`] says.
    pub fn new(source_root: Option<&'a Path>, read: Reader<'a>) -> Self {
        Sources {
            source_root,
            read,
            cache: FxHashMap::default(),
        }
    }

    /// Adds the hottest files' source to `d` (its `lines` whole: the hot files and lines are
    /// chosen among all of them).
    pub fn annotate(&mut self, d: &mut DeviceLines) {
        let (source_root, read) = (self.source_root, self.read);
        for (file, self_bytes) in hot_files(d) {
            let got = self
                .cache
                .entry(file.clone())
                .or_insert_with(|| find(&file, source_root, read));
            let shown = match got {
                Ok((path, text)) => {
                    let mut s = excerpt(&d.lines, &file, text);
                    s.path = Some(path.display().to_string());
                    s
                }
                Err(_) if source_root.is_none() => continue,
                Err(why) => SourceFile {
                    file: file.clone(),
                    path: None,
                    self_bytes: 0,
                    lines: Vec::new(),
                    note: Some(why.clone()),
                },
            };
            d.sources.push(SourceFile {
                self_bytes,
                ..shown
            });
        }
    }
}

/// The device's files with the most self bytes, most first (ties by name).
fn hot_files(d: &DeviceLines) -> Vec<(String, u64)> {
    let mut per: FxHashMap<&str, u64> = FxHashMap::default();
    for l in &d.lines {
        *per.entry(l.file.as_str()).or_default() += l.self_bytes;
    }
    let mut files: Vec<(String, u64)> = per
        .into_iter()
        .filter(|(_, b)| *b > 0)
        .map(|(f, b)| (f.to_string(), b))
        .collect();
    files.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    files.truncate(HOT_FILES);
    files
}

/// The first readable place of `file` (below `source_root` by its longest tail that exists
/// there, else as recorded), and its text; else why none was.
pub fn find(
    file: &str,
    source_root: Option<&Path>,
    read: Reader,
) -> Result<(PathBuf, String), String> {
    let candidates: Vec<PathBuf> = match source_root {
        None => vec![PathBuf::from(file)],
        Some(dir) => {
            let parts: Vec<&str> = file
                .split(['/', '\\'])
                .filter(|p| !p.is_empty() && *p != "." && *p != "..")
                .collect();
            (0..parts.len())
                .map(|i| parts[i..].iter().fold(dir.to_path_buf(), |p, c| p.join(c)))
                .collect()
        }
    };
    for c in &candidates {
        match read(c) {
            Ok(text) => return Ok((c.clone(), text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{}: cannot be read: {e}", c.display())),
        }
    }
    Err(match source_root {
        Some(dir) => format!(
            "not found under {} (nor any tail of its path)",
            dir.display()
        ),
        None => "not found".to_string(),
    })
}

/// The lines of `text` near the hot lines of `file` among `lines`, each with its bytes.
fn excerpt(lines: &[LineRow], file: &str, text: &str) -> SourceFile {
    let mine: Vec<&LineRow> = lines.iter().filter(|l| l.file == file).collect();
    let bytes: FxHashMap<i64, (u64, u64)> = mine
        .iter()
        .map(|l| (l.line, (l.self_bytes, l.total_bytes)))
        .collect();
    // `lines` is sorted by total: the file's first rows are its hot lines.
    let hot: Vec<i64> = mine.iter().take(HOT_LINES).map(|l| l.line).collect();
    let source: Vec<&str> = text.lines().collect();
    let n = source.len() as i64;
    let mut shown: Vec<i64> = hot
        .iter()
        .flat_map(|&l| (l - CONTEXT)..=(l + CONTEXT))
        .filter(|l| (1..=n).contains(l))
        .collect();
    shown.sort_unstable();
    shown.dedup();
    let past: Vec<String> = hot
        .iter()
        .filter(|&&l| l > n)
        .map(|l| l.to_string())
        .collect();
    SourceFile {
        file: file.to_string(),
        path: None,
        self_bytes: 0,
        lines: shown
            .into_iter()
            .map(|l| {
                let (self_bytes, total_bytes) = bytes.get(&l).copied().unwrap_or_default();
                SourceLine {
                    line: l,
                    text: clip(source[(l - 1) as usize]),
                    self_bytes,
                    total_bytes,
                }
            })
            .collect(),
        note: (!past.is_empty()).then(|| {
            format!(
                "line {} past the end of the file ({n} lines): the source read is not the one that ran",
                past.join(", ")
            )
        }),
    }
}

/// A source line cut to [`LINE_CHARS`] characters, its tabs as four spaces.
fn clip(line: &str) -> String {
    let line = line.replace('\t', "    ");
    match line.char_indices().nth(LINE_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}
