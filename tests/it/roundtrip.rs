//! The same snapshot re-pickled with every protocol (0-5), compressed with gzip and zstd, and
//! transcoded to JSON gives an identical report.

use crate::common;
use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Re-pickles `src` with each protocol of `outputs` into its path, through CPython's own
/// pickler (restricted loader): one Python for all of them, its cyclic GC off (the process
/// ends after the dumps; collecting while loading a real file was most of this test's time).
fn repickle(src: &Path, outputs: &[(u8, PathBuf)]) {
    let script = r#"
import gc, pickle, sys
gc.disable()
class R(pickle.Unpickler):
    def find_class(self, m, n):
        raise pickle.UnpicklingError("global refused")
obj = R(open(sys.argv[1], "rb")).load()
for dst, protocol in zip(sys.argv[2::2], sys.argv[3::2]):
    with open(dst, "wb") as f:
        pickle.dump(obj, f, protocol=int(protocol))
"#;
    let mut cmd = Command::new(python3());
    cmd.arg("-c").arg(script).arg(src);
    for (protocol, dst) in outputs {
        cmd.arg(dst).arg(protocol.to_string());
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn inputs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = samples()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pickle"))
        .collect();
    if let Some(real) = require_shared() {
        for name in [
            "Yiyi-philosophy__LLM-inference__oom_snapshot.pickle",
            "Muduard__LayoutEditing__memory_snapshot.pkl",
            "drisspg__transformer_nuggets__test_data_mini_snapshot.pickle",
            "Constructor-Sun__code_location__memory_snapshot.pickle",
            "volcengine__verl__mem.pickle",
        ] {
            v.extend(real.iter().filter(|p| p.ends_with(name)).cloned());
        }
    }
    v
}

#[test]
fn every_protocol_and_container_gives_the_same_report() {
    let dir = tempfile::tempdir().unwrap();
    let python = require_python();
    for src in inputs() {
        let expected = summary_json(&src);
        let bytes = std::fs::read(&src).unwrap();
        let stem = src.file_stem().unwrap().to_string_lossy().to_string();
        let mut variants = Vec::new();

        let gz = dir.path().join(format!("{stem}.pickle.gz"));
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&bytes).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        variants.push(gz);

        let zst = dir.path().join(format!("{stem}.pickle.zst"));
        std::fs::write(&zst, zstd::encode_all(&bytes[..], 1).unwrap()).unwrap();
        variants.push(zst);

        if python {
            let outputs: Vec<(u8, PathBuf)> = (0..=5u8)
                .map(|protocol| (protocol, dir.path().join(format!("{stem}.p{protocol}"))))
                .collect();
            repickle(&src, &outputs);
            variants.extend(outputs.into_iter().map(|(_, p)| p));
        }
        for v in variants {
            assert_eq!(
                summary_json(&v),
                expected,
                "{} vs {}",
                v.display(),
                src.display()
            );
        }
    }
}

#[test]
fn json_snapshot_equals_its_pickle() {
    let json = sample("snapshot.json");
    let pickle = sample("train_small.pickle");
    let a = summary_json(&json);
    let b = summary_json(&pickle);
    assert_eq!(a["devices"], b["devices"]);
}
