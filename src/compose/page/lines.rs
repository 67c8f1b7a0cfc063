//! The page's "Memory by source line" panel: `memlens lines` (the live cost) at each moment,
//! from the live set the moment's `top` selected (nothing selected twice), its hottest lines
//! kept and, where source could be read (`--source-root`, or the recorded paths as they are),
//! the hot files' source around their hot lines as `memlens lines` annotates them.

use crate::analyze::lines::{DeviceLines, Reader, Sources};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Lines kept per moment on the page (the hottest, by total then self).
pub const PAGE_LINES: usize = 50;

/// Where the page reads the hot files' source from: `read` absent, none is read.
#[derive(Clone, Debug, Default)]
pub struct SourceOptions {
    /// `--source-root`: recorded paths are looked up below it (else read as recorded).
    pub root: Option<PathBuf>,
    /// Reads one source file (the command line's reader: regular files of a bounded size).
    pub read: Option<fn(&Path) -> std::io::Result<String>>,
}

impl SourceOptions {
    /// The files to annotate with, read once per page; `None` when no source is read.
    pub fn sources(&self) -> Option<Sources<'_>> {
        let read: Reader = self.read.as_ref()?;
        Some(Sources::new(self.root.as_deref(), read))
    }
}

/// `memlens lines --at MOMENT` (live cost) of the device, its hottest lines only.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MomentLines {
    /// `memlens lines --at MOMENT --device D --format json`'s device, its `lines` cut to the
    /// [`PAGE_LINES`] hottest (`sources` are chosen among all of them).
    #[serde(flatten)]
    pub lines: DeviceLines,
    /// How many lines the device has in all (`lines` holds the first [`PAGE_LINES`]).
    pub line_count: usize,
}

/// The moment's lines for the page: annotated from `sources` (when given) with all its lines,
/// then cut to the hottest.
pub fn view(mut d: DeviceLines, sources: Option<&mut Sources>) -> MomentLines {
    if let Some(s) = sources {
        s.annotate(&mut d);
    }
    let line_count = d.lines.len();
    d.lines.truncate(PAGE_LINES);
    MomentLines {
        lines: d,
        line_count,
    }
}
