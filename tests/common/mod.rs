//! The one test-support module of the integration tests (`tests/it/main.rs` has `mod common;`).
//!
//! - [`canonical`](canonical::canonical): a snapshot spelled out with ids resolved, for
//!   comparing two decodes of one file.
//! - [`golden`](golden::golden): golden files under `tests/golden/`; `MEMLENS_BLESS=1` writes
//!   them, a missing or different one fails.
//! - [`require_shared`](env::require_shared), [`require_real`](env::require_real),
//!   [`require_python`](env::require_python): what lives outside the repository; a skip
//!   (`skipped: ...` on stderr) on a developer's machine, a failure under CI ([`ci`](ci::ci),
//!   the one definition of it, in tests/common/ci.rs).
//! - Paths of the samples, the binary, the Python oracle, and [`Pickle`], a pickle writer for
//!   snapshots built opcode by opcode.
#![allow(dead_code)]

mod canonical;
mod ci;
mod env;
mod golden;
// Each test binary uses some of these.
#[allow(unused_imports)]
pub use {canonical::*, ci::*, env::*, golden::*};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A file under `samples/`.
pub fn sample(name: &str) -> PathBuf {
    root().join("samples").join(name)
}

/// All committed sample snapshots (pickles and JSON), sorted.
pub fn samples() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("samples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("pickle") | Some("json")
            )
        })
        .collect();
    v.sort();
    v
}

/// One small file per layout of the benchmark (`samples/layouts/*.pickle`: the generator's
/// shared, protocol-2, fresh, torch, memo and C++ layouts; `gen_samples.py layouts`), and the
/// torch layout with several batches of trace entries (where a split pass 1 starts regions).
pub fn layouts() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("samples/layouts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("pickle"))
        .collect();
    v.sort();
    assert_eq!(
        v.len(),
        7,
        "samples/layouts: one file per layout, and torch_batches"
    );
    v
}

/// The truth file of generated sample `name` (`samples/truth/NAME.json`: what the sample holds
/// by construction).
pub fn truth(name: &str) -> serde_json::Value {
    serde_json::from_slice(
        &std::fs::read(root().join("samples/truth").join(format!("{name}.json"))).unwrap(),
    )
    .unwrap()
}

/// memlens's standard output for `args` (run in the repository root), which must exit 0,
/// parsed as JSON.
pub fn json_ok(args: &[&str]) -> serde_json::Value {
    let o = memlens_in_root(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// `v` as a u64, or a panic naming it.
pub fn as_u64(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

/// `memlens ARGS --format json FILE`, which must exit 0, parsed.
pub fn json_report(args: &[&str], file: &Path) -> serde_json::Value {
    let mut a: Vec<std::ffi::OsString> = args.iter().map(|x| x.into()).collect();
    a.push("--format".into());
    a.push("json".into());
    a.push(file.into());
    let o = memlens(a);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?} {}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The real snapshots captured on a GPU (`samples/captured/*.pickle`, see
/// samples/capture/README.md), sorted.
pub fn captured() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("samples/captured"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pickle"))
        .collect();
    v.sort();
    v
}

/// Runs the memlens binary.
pub fn memlens<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(args)
        .output()
        .expect("run memlens")
}

/// Runs the Python oracle `tests/oracle/snapshot_oracle.py CMD FILE` and parses its JSON.
pub fn oracle(cmd: &str, file: &Path) -> serde_json::Value {
    let out = Command::new(python3())
        .arg(root().join("tests/oracle/snapshot_oracle.py"))
        .arg(cmd)
        .arg(file)
        .output()
        .expect("run oracle");
    assert!(
        out.status.success(),
        "oracle failed on {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("oracle JSON")
}

/// Loads a snapshot through the library.
pub fn load(path: &Path) -> memlens::model::Snapshot {
    memlens::load(path, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

/// The summary of `path` as JSON, through the library.
pub fn summary_json(path: &Path) -> serde_json::Value {
    serde_json::to_value(memlens::analyze::summary::run(&load(path))).unwrap()
}

/// Warning codes that mean an invariant of the format is broken (not a data-quality note).
pub const INVARIANT_CODES: &[&str] = &[
    "segment_total_mismatch",
    "segment_sum_mismatch",
    "blocks_not_contiguous",
    "block_size_unaligned",
    "segments_overlap",
    "requested_exceeds_size",
    "segments_unsorted",
];

/// Runs the memlens binary in the repository root (relative sample paths, stable output).
pub fn memlens_in_root<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_memlens"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("run memlens")
}

/// A protocol-4 pickle written opcode by opcode: every string, list and dict memoized
/// (MEMOIZE, as CPython's pickler does), an object written again as a memo reference
/// (BINGET, or LONG_BINGET past id 255).
pub struct Pickle {
    b: Vec<u8>,
    memo: u32,
    shared: std::collections::HashMap<String, u32>,
}

impl Default for Pickle {
    /// PROTO 4.
    fn default() -> Pickle {
        Pickle {
            b: vec![0x80, 4],
            memo: 0,
            shared: Default::default(),
        }
    }
}

impl Pickle {
    fn memoize(&mut self) -> u32 {
        self.b.push(0x94);
        self.memo += 1;
        self.memo - 1
    }

    /// A reference to memo id `id`.
    pub fn get(&mut self, id: u32) {
        match u8::try_from(id) {
            Ok(i) => self.b.extend([b'h', i]),
            Err(_) => {
                self.b.push(b'j');
                self.b.extend(id.to_le_bytes());
            }
        }
    }

    /// A new string object (SHORT_BINUNICODE: under 256 bytes).
    pub fn str(&mut self, s: &str) {
        self.b
            .extend([0x8c, u8::try_from(s.len()).expect("a short string")]);
        self.b.extend(s.as_bytes());
        self.memoize();
    }

    /// One string object for every use of `s` (dict keys, `"alloc"`): written the first
    /// time, a memo reference after.
    pub fn shared(&mut self, s: &str) {
        match self.shared.get(s) {
            Some(&id) => self.get(id),
            None => {
                self.str(s);
                self.shared.insert(s.to_string(), self.memo - 1);
            }
        }
    }

    /// A non-negative integer in the smallest opcode: BININT1, BININT2, BININT or LONG1.
    pub fn int(&mut self, v: u64) {
        if v < 1 << 8 {
            self.b.extend([b'K', v as u8]);
        } else if v < 1 << 16 {
            self.b.push(b'M');
            self.b.extend((v as u16).to_le_bytes());
        } else if v < 1 << 31 {
            self.b.push(b'J');
            self.b.extend((v as u32).to_le_bytes());
        } else {
            // Little-endian two's complement, with a zero byte when the top bit is set.
            let n = (64 - v.leading_zeros() as usize) / 8 + 1;
            self.b.extend([0x8a, n as u8]);
            self.b.extend(&v.to_le_bytes()[..n.min(8)]);
            self.b.resize(self.b.len() + n.saturating_sub(8), 0);
        }
    }

    /// A dict key (shared) and an integer value.
    pub fn item(&mut self, key: &str, v: u64) {
        self.shared(key);
        self.int(v);
    }

    /// Opens a new list (`b']'`) or dict (`b'}'`) for its items; its memo id.
    pub fn open(&mut self, kind: u8) -> u32 {
        self.b.push(kind);
        let id = self.memoize();
        self.b.push(b'(');
        id
    }

    /// One opcode without argument: APPENDS (`b'e'`) or SETITEMS (`b'u'`) closing what
    /// [`Pickle::open`] opened, NEWFALSE (`0x89`), ...
    pub fn op(&mut self, op: u8) {
        self.b.push(op);
    }

    /// The pickle, with STOP.
    pub fn finish(mut self) -> Vec<u8> {
        self.b.push(b'.');
        self.b
    }
}

/// The live allocations of one site of [`deep_stack_snapshot`]: `count` of `size` bytes.
#[derive(Clone, Copy, Debug)]
pub struct DeepSite {
    /// Allocations.
    pub count: u64,
    /// Requested bytes of each.
    pub size: u64,
}

/// The common directory of [`deep_stack_snapshot`]'s user frames.
pub const DEEP_USER: &str = "/home/user/proj/";

/// The block of a request: its size rounded up to 512 bytes.
fn deep_block(size: u64) -> u64 {
    size.div_ceil(512) * 512
}

/// The segment [`deep_stack_snapshot`] reserves: every block, rounded up to 2 MiB.
pub fn deep_stack_reserved(sites: &[DeepSite]) -> u64 {
    let used: u64 = sites.iter().map(|s| s.count * deep_block(s.size)).sum();
    used.div_ceil(2 << 20).max(1) * (2 << 20)
}

/// A snapshot whose trace entries all share deep stacks (as `samples/gen/memgen/deep.py`
/// writes one): the allocations of `sites[k]` reference one `frames` list of `frames` frames,
/// `frames - 1` inside torch (never a site), then the site `train.py:{10 + k}:site{k}` under
/// [`DEEP_USER`]. The trace is a `segment_alloc` of [`deep_stack_reserved`] bytes, then every
/// allocation, none freed; `segments` holds that segment with one block per allocation
/// (sharing its entry's list, as PyTorch's blocks do) and the free rest. `sites` must not
/// be empty.
pub fn deep_stack_snapshot(frames: usize, sites: &[DeepSite]) -> Vec<u8> {
    let base = 0x7F00_0000_0000u64;
    let total = deep_stack_reserved(sites);
    let mut allocs = Vec::new(); // (site, address, size)
    let mut addr = base;
    for (k, s) in sites.iter().enumerate() {
        for _ in 0..s.count {
            allocs.push((k, addr, s.size));
            addr += deep_block(s.size);
        }
    }
    let used = addr - base;
    let mut p = Pickle::default();
    let mut lists: Vec<Option<u32>> = vec![None; sites.len()];
    // The frames list of site k: written the first time, a memo reference after.
    let mut stack = |p: &mut Pickle, k: usize| {
        p.shared("frames");
        if let Some(id) = lists[k] {
            return p.get(id);
        }
        lists[k] = Some(p.open(b']'));
        for i in 0..frames {
            p.open(b'}');
            p.shared("filename");
            let user = i + 1 == frames;
            if user {
                p.str(&format!("{DEEP_USER}train.py"));
            } else {
                let lib = "/opt/conda/lib/python3.11/site-packages/torch/_refs";
                p.str(&format!("{lib}/mod{}.py", i % 50));
            }
            p.item("line", if user { 10 + k as u64 } else { i as u64 + 1 });
            p.shared("name");
            p.str(&if user {
                format!("site{k}")
            } else {
                format!("op_{i}")
            });
            p.op(b'u');
        }
        p.op(b'e');
    };
    p.open(b'}');
    p.shared("segments");
    p.open(b']');
    p.open(b'}');
    p.item("device", 0);
    p.item("address", base);
    p.item("total_size", total);
    p.item("allocated_size", used);
    p.item("active_size", used);
    p.item("requested_size", allocs.iter().map(|a| a.2).sum());
    p.item("stream", 0);
    p.shared("segment_type");
    p.shared("large");
    p.shared("is_expandable");
    p.op(0x89);
    stack(&mut p, 0);
    p.shared("blocks");
    p.open(b']');
    for &(k, addr, size) in &allocs {
        p.open(b'}');
        p.item("address", addr);
        p.item("size", deep_block(size));
        p.item("requested_size", size);
        p.shared("state");
        p.shared("active_allocated");
        stack(&mut p, k);
        p.op(b'u');
    }
    if total > used {
        p.open(b'}');
        p.item("address", addr);
        p.item("size", total - used);
        p.item("requested_size", 0);
        p.shared("state");
        p.shared("inactive");
        p.shared("frames");
        p.open(b']');
        p.op(b'e');
        p.op(b'u');
    }
    p.op(b'e'); // blocks
    p.op(b'u'); // the segment
    p.op(b'e'); // segments
    p.shared("device_traces");
    p.open(b']');
    p.open(b']');
    let entries = std::iter::once((0, "segment_alloc", base, total)).chain(
        allocs
            .iter()
            .map(|&(k, addr, size)| (k, "alloc", addr, size)),
    );
    for (t, (k, action, addr, size)) in entries.enumerate() {
        p.open(b'}');
        p.shared("action");
        p.shared(action);
        p.item("addr", addr);
        p.item("size", size);
        p.item("stream", 0);
        p.item("time_us", 1 + t as u64);
        stack(&mut p, k);
        p.op(b'u');
    }
    p.op(b'e'); // device 0
    p.op(b'e'); // device_traces
    p.op(b'u');
    p.finish()
}

/// Caps `cmd`'s address space at `cap` bytes (`RLIMIT_AS`, as `ulimit -v`) in the child, so
/// that an allocation past it is refused as under a container's limit.
pub fn cap_address_space(cmd: &mut Command, cap: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: cap,
                rlim_max: cap,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `o` with memlens's `peak_rss_bytes N` line (printed under `MEMLENS_PEAK_RSS=1`) taken out
/// of its stderr, and N (0 when it died before printing it).
pub fn split_peak_rss(mut o: Output) -> (Output, u64) {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let mut rss = 0;
    let mut kept = String::new();
    for l in err.lines() {
        match l.strip_prefix("peak_rss_bytes ") {
            Some(n) => rss = n.parse().unwrap(),
            None => kept.push_str(&format!("{l}\n")),
        }
    }
    o.stderr = kept.into_bytes();
    (o, rss)
}

/// `tests/oracle/replay_oracle.py peak FILE`: the independent replay's peak and what was
/// alive there (JSON).
pub fn replay_oracle_peak(file: &std::path::Path) -> serde_json::Value {
    let out = std::process::Command::new(python3())
        .arg(root().join("tests/oracle/replay_oracle.py"))
        .arg("peak")
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
