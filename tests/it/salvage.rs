//! `--salvage`: a snapshot cut anywhere yields what was complete before the cut, and only that.

use crate::common;
use common::*;
use memlens::model::{build, BuildOptions, Snapshot};

fn salvage(bytes: &[u8]) -> Option<Snapshot> {
    build(
        bytes,
        BuildOptions {
            salvage: true,
            ..Default::default()
        },
    )
    .ok()
}

/// The whole file's trace events spelled out ([`canonical_events`]), per device: what every
/// cut of it is compared with, spelled once per file instead of once per cut.
fn full_traces(full: &Snapshot) -> Vec<Vec<String>> {
    full.devices
        .iter()
        .map(|d| canonical_events(full, full.device_trace(d)))
        .collect()
}

fn check_prefix(full: &Snapshot, full_traces: &[Vec<String>], part: &Snapshot, what: &str) {
    // Trace events: per device, a prefix of the full trace, equal field by field.
    for d in &part.devices {
        let got = part.device_trace(d);
        let Some(fd) = full.devices.iter().position(|fd| fd.id == d.id) else {
            panic!("{what}: device {} appeared", d.id)
        };
        let want = &full_traces[fd];
        assert!(got.len() <= want.len(), "{what}");
        for (a, b) in canonical_events(part, got).iter().zip(want) {
            assert_eq!(a, b, "{what}");
        }
    }
    // Segments: complete ones only, each equal to the full file's.
    assert!(part.segments.len() <= full.segments.len(), "{what}");
    for s in &part.segments {
        let f = full
            .segments
            .iter()
            .find(|f| f.device == s.device && f.address == s.address)
            .expect("segment exists");
        assert_eq!(s.total_size, f.total_size, "{what}");
        assert_eq!(
            part.segment_blocks(s).len(),
            full.segment_blocks(f).len(),
            "{what}"
        );
    }
    assert!(
        part.warnings.iter().any(|w| w.code == "salvaged"),
        "{what}: a salvaged warning names the cut"
    );
}

#[test]
fn cuts_at_many_offsets_keep_a_prefix() {
    let mut files = vec![
        sample("train_small.pickle"),
        sample("cpp_proto2.pickle"),
        sample("legacy_2_0.pickle"),
        sample("expandable_multi.pickle"),
    ];
    if let Some(real) = require_shared() {
        files.extend(real.into_iter().filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("Constructor-Sun") || n.starts_with("JasperSolt") || n.starts_with("Yiyi")
        }));
    }
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let full = build(&bytes, Default::default()).unwrap();
        let traces = full_traces(&full);
        let mut kept_any = 0;
        for k in 1..60 {
            let cut = bytes.len() * k / 60;
            let what = format!("{} cut at {cut}", f.display());
            if let Some(part) = salvage(&bytes[..cut]) {
                check_prefix(&full, &traces, &part, &what);
                kept_any += 1;
            }
        }
        assert!(
            kept_any > 50,
            "{}: only {kept_any} of 59 cuts salvaged",
            f.display()
        );
        // Salvaging a whole file changes nothing (interned ids may be numbered in another
        // order: salvage decodes every entry opcode by opcode).
        let same = salvage(&bytes).unwrap();
        assert_eq!(canonical(&same), canonical(&full), "{}", f.display());
        assert!(same.warnings.iter().all(|w| w.code != "salvaged"));
    }
}

#[test]
fn salvage_through_the_binary_and_compressed_streams() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(sample("loop_freed.pickle")).unwrap();
    let cut = &bytes[..bytes.len() * 2 / 3];
    let p = dir.path().join("cut.pickle");
    std::fs::write(&p, cut).unwrap();
    let o = memlens(["summary".as_ref(), p.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let o = memlens([
        "--salvage".as_ref(),
        "summary".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        p.as_os_str(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let w = v["warnings"][0]["message"].as_str().unwrap();
    assert!(w.contains(&format!("of {}", cut.len())), "{w}");
    let n = v["devices"][0]["trace_entries"].as_u64().unwrap();
    assert!(n > 0);
    // A gzip stream cut in the middle.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &bytes).unwrap();
    let gz = enc.finish().unwrap();
    let pg = dir.path().join("cut.pickle.gz");
    std::fs::write(&pg, &gz[..gz.len() / 2]).unwrap();
    for threads in ["1", "2"] {
        // One line naming the stream and where it broke, whichever decoder was running.
        let o = memlens([
            "--threads".as_ref(),
            threads.as_ref(),
            "summary".as_ref(),
            pg.as_os_str(),
        ]);
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains("decompressed byte") && err.contains("gzip stream is broken"),
            "{err}"
        );
    }
    let o = memlens(["--salvage".as_ref(), "top".as_ref(), pg.as_os_str()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
