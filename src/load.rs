//! A snapshot file in, a [`Snapshot`] out: joins [`crate::input`] (the file's bytes,
//! decompressed or transcoded) and [`crate::model`] (the builder), so that input knows nothing
//! of snapshots and the model nothing of files. Decode errors are placed in the file's terms
//! (`byte N`, `decompressed byte N`, `transcoded byte N`, `key K`) and name the path.

use crate::error::Error;
use crate::input::{self, Input};
use crate::model::{self, BuildError, BuildOptions, Snapshot, Warning};
use crate::pickle::{self, scan::Followed};
use std::path::Path;

/// How a file is read and decoded; the default is what `memlens FILE` does without flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Decoder threads; 0 = one per core ([`crate::model::default_threads`]), 1 = the
    /// sequential decoder.
    pub threads: usize,
    /// Keep what was complete before a truncation or corruption instead of failing
    /// (`--salvage`; see [`BuildOptions::salvage`]). A compressed stream that breaks off then
    /// keeps the bytes decompressed before the break.
    pub salvage: bool,
    /// Decode trace entries opcode by opcode, without the decoder's fast path (and so without
    /// the parallel decoder); for comparing both paths (`MEMLENS_FLAT=0`).
    pub no_fast_entries: bool,
    /// Which decoder ([`BuildOptions::strategy`]; the CLI maps `MEMLENS_STRATEGY` onto it).
    pub strategy: model::Strategy,
    /// Regions of a split pass 1 ([`BuildOptions::split_regions`]; `MEMLENS_SPLIT_REGIONS`).
    pub split_regions: usize,
    /// Pass 1 before the workers, untimed ([`BuildOptions::prescan`]; `MEMLENS_PRESCAN`).
    pub prescan: bool,
    /// Phase times and decode counters to stderr ([`BuildOptions::timing`];
    /// `MEMLENS_TIMING`).
    pub timing: bool,
}

/// Opens `path` for [`build`]: a gzip or zstd file is decompressed by a thread of its own
/// while the decode starts, except with `salvage`, where the stream is read whole so that a
/// break keeps what came before it. A stream or a decompressor holding a pickle is read only
/// as far as the pickle goes (its `STOP`), and refused at the first byte that is no opcode.
pub fn read(path: &Path, opts: &LoadOptions) -> Result<Input, Error> {
    read_keeping(path, opts, false)
}

/// Like [`read`]; with `keep_stored`, the input also holds its bytes as stored
/// ([`Input::stored`]: compressed or JSON), so they can be hashed without reading the file
/// again.
pub fn read_keeping(path: &Path, opts: &LoadOptions, keep_stored: bool) -> Result<Input, Error> {
    input::read_opts(
        path,
        &input::ReadOptions {
            salvage: opts.salvage,
            overlap: !opts.salvage,
            keep_stored,
            extent: Some(follow_pickle),
        },
    )
}

/// Like [`read`], from `file`, a regular file of `len` bytes already opened and checked by
/// the caller (`path` names it in errors): the file is not opened again by path.
pub fn read_opened(
    path: &Path,
    file: &std::fs::File,
    len: u64,
    opts: &LoadOptions,
) -> Result<Input, Error> {
    input::read_opened(
        path,
        file,
        len,
        &input::ReadOptions {
            salvage: opts.salvage,
            overlap: !opts.salvage,
            keep_stored: false,
            extent: Some(follow_pickle),
        },
    )
}

/// The pickle layer's walk ([`pickle::scan::Follow`]) as the input layer's [`input::Extent`].
struct Follow(pickle::scan::Follow);

impl input::Extent for Follow {
    fn feed(&mut self, chunk: &[u8]) -> input::End {
        match self.0.feed(chunk) {
            Followed::More => input::End::More,
            Followed::End(at) => input::End::At(at),
            Followed::Refused(at, why) => input::End::Refused(at, why),
        }
    }
}

fn follow_pickle() -> Box<dyn input::Extent> {
    Box::new(Follow(pickle::scan::Follow::new()))
}

/// Builds the snapshot from input already read from `path`; `progress` gets the decoded
/// byte offset now and then. A broken compressed stream is the error of record, whatever the
/// decoder made of the bytes before it.
pub fn build(
    path: &Path,
    input: &Input,
    opts: &LoadOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Snapshot, Error> {
    let release = |start: usize, len: usize| input.release(start, len);
    let options = BuildOptions {
        progress: Some(progress),
        release: Some(&release),
        threads: opts.threads,
        salvage: opts.salvage,
        no_fast_entries: opts.no_fast_entries,
        strategy: opts.strategy,
        split_regions: opts.split_regions,
        prescan: opts.prescan,
        timing: opts.timing,
        ..Default::default()
    };
    let built = match input.arriving() {
        Some(src) if !opts.salvage => model::build_arriving(src, options),
        _ => model::build(input.bytes(), options),
    };
    input.finish()?;
    if built.is_err() {
        if let Some(message) = input.shrank() {
            return Err(Error::Io {
                path: path.to_path_buf(),
                message,
            });
        }
    }
    let mut snap = built.map_err(|e| match e {
        BuildError::Decode(d) => Error::Input {
            path: path.to_path_buf(),
            location: input.location(d.offset),
            message: d.message,
            truncated: d.truncated,
        },
        BuildError::Shape { path: key, message } => Error::Input {
            path: path.to_path_buf(),
            location: format!("key {key}"),
            message,
            truncated: false,
        },
    })?;
    if let Some(why) = &input.cut {
        snap.warnings.insert(
            0,
            Warning {
                code: "salvaged",
                device: None,
                message: format!(
                    "the compressed stream breaks off ({why}); kept what decompressed before it"
                ),
            },
        );
    }
    Ok(snap)
}

/// Reads and builds the snapshot at `path` with `opts` ([`read`], then [`build`]).
pub fn load_with(
    path: &Path,
    opts: &LoadOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Snapshot, Error> {
    let input = read(path, opts)?;
    build(path, &input, opts, progress)
}

/// Reads and builds the snapshot at `path` with the default options; `progress` gets the
/// decoded byte offset now and then.
pub fn load(path: &Path, progress: &mut dyn FnMut(u64)) -> Result<Snapshot, Error> {
    load_with(path, &LoadOptions::default(), progress)
}

/// Builds the snapshot from already-read input bytes with the default options.
pub fn build_input(
    path: &Path,
    input: &Input,
    progress: &mut dyn FnMut(u64),
) -> Result<Snapshot, Error> {
    build(path, input, &LoadOptions::default(), progress)
}

/// Like [`build_input`]; with `salvage`, keeps what was complete before a truncation or
/// corruption (see [`BuildOptions::salvage`]).
pub fn build_input_with(
    path: &Path,
    input: &Input,
    progress: &mut dyn FnMut(u64),
    salvage: bool,
) -> Result<Snapshot, Error> {
    let opts = LoadOptions {
        salvage,
        ..LoadOptions::default()
    };
    build(path, input, &opts, progress)
}
