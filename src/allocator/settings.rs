//! The allocator settings the model follows: read from a snapshot's `allocator_settings`
//! (snapshot-format.md §5) or written as `PYTORCH_CUDA_ALLOC_CONF` (or, since 2025, its
//! device-neutral name `PYTORCH_ALLOC_CONF`) is (`KEY:VALUE,KEY:VALUE`).
//!
//! Only the keys that change where memory goes are modelled; keys that only change speed or
//! locking (`release_lock_on_cudamalloc`, `pinned_*`) are accepted and ignored, and anything
//! else is refused (PyTorch refuses unknown keys too).

use crate::model::{SettingValue, Snapshot};
use crate::Error;
use serde::Serialize;

const MIB: u64 = 1 << 20;

/// Number of `roundup_power2_divisions` size bands: 1 MiB, 2 MiB, ... 32 GiB and above.
pub const BANDS: usize = 16;

/// The caching allocator's settings that decide layout.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Settings {
    /// `expandable_segments`: one growing mapped segment per stream and pool.
    pub expandable_segments: bool,
    /// `max_split_size` in bytes (`null`: unlimited, PyTorch's default): cached blocks this
    /// large are never split, and serve only requests close to their size.
    pub max_split_size: Option<u64>,
    /// `max_non_split_rounding_mb` in bytes (default 20 MiB): how much larger than a request
    /// of at least `max_split_size` an unsplit cached block may be and still serve it.
    pub max_non_split_rounding: u64,
    /// `roundup_power2_divisions` per size band (0 or 1: off), band `i` covering sizes from
    /// 2^i MiB (band 0 everything below 2 MiB, band 15 everything from 32 GiB).
    pub roundup_power2_divisions: [u32; BANDS],
    /// `garbage_collection_threshold` (0: off): above this fraction of the capacity, a miss
    /// first frees the oldest unsplit cached blocks.
    pub garbage_collection_threshold: f64,
    /// `per_process_memory_fraction` (PyTorch PR #161035; `null`: none, the whole device):
    /// the share of the device's memory the process may reserve, checked before each
    /// cudaMalloc or map. The model's capacity becomes this share of the device's memory when
    /// that is known (`--gpu`, or the OOM's reserved + free).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_process_memory_fraction: Option<f64>,
    /// `throw_on_cudamalloc_oom` (PR #179473): with a per-process fraction, a request that
    /// would pass it raises the OOM at once, without freeing cached blocks and retrying.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub throw_on_cudamalloc_oom: bool,
    /// `graph_capture_record_stream_reuse`: blocks freed during a CUDA-graph capture with
    /// `record_stream` may be reused within the capture. Read and reported; the model does
    /// not replay captures, so it changes no figure.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub graph_capture_record_stream_reuse: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            expandable_segments: false,
            max_split_size: None,
            max_non_split_rounding: 20 * MIB,
            roundup_power2_divisions: [0; BANDS],
            garbage_collection_threshold: 0.0,
            per_process_memory_fraction: None,
            throw_on_cudamalloc_oom: false,
            graph_capture_record_stream_reuse: false,
        }
    }
}

/// The settings-string keys of `allocator_settings`, the newer name first.
pub const CONF_KEYS: [&str; 2] = ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"];

/// The settings string a snapshot records and the key it is under (`PYTORCH_ALLOC_CONF` or
/// `PYTORCH_CUDA_ALLOC_CONF`; the first non-empty one), if any.
pub fn recorded_conf(snap: &Snapshot) -> Option<(&'static str, &str)> {
    CONF_KEYS.iter().find_map(|&k| match snap.setting(k) {
        Some(SettingValue::Text(t)) if !t.trim().is_empty() => Some((k, t.as_str())),
        _ => None,
    })
}

fn as_bool(v: &SettingValue) -> Option<bool> {
    match v {
        SettingValue::Bool(b) => Some(*b),
        SettingValue::Text(t) => parse_bool(t),
        other => as_i128(other).map(|i| i != 0),
    }
}

fn parse_bool(t: &str) -> Option<bool> {
    match t.trim() {
        "True" | "true" | "1" => Some(true),
        "False" | "false" | "0" => Some(false),
        _ => None,
    }
}

fn as_i128(v: &SettingValue) -> Option<i128> {
    match v {
        SettingValue::Int(i) => Some(*i as i128),
        SettingValue::UInt(u) => Some(*u as i128),
        SettingValue::Float(f) if f.fract() == 0.0 => Some(*f as i128),
        SettingValue::Bool(b) => Some(*b as i128),
        SettingValue::Text(t) => t.trim().parse().ok(),
        _ => None,
    }
}

impl Settings {
    /// The settings recorded in `snap` (`allocator_settings`), PyTorch's defaults for what it
    /// lacks; `None` when the file records no settings at all.
    pub fn recorded(snap: &Snapshot) -> Option<Settings> {
        snap.allocator_settings.as_ref()?;
        let mut s = Settings::default();
        if let Some(v) = snap.setting("expandable_segments") {
            s.expandable_segments = as_i128(v).is_some_and(|i| i != 0);
        }
        if let Some(v) = snap.setting("max_split_size").and_then(as_i128) {
            // -1 (SIZE_MAX cast to int64) and SIZE_MAX itself mean unlimited.
            s.max_split_size = (v > 0 && v < u64::MAX as i128).then_some(v as u64);
        }
        if let Some(v) = snap
            .setting("max_non_split_rounding_size")
            .and_then(as_i128)
        {
            if v > 0 && v < u64::MAX as i128 {
                s.max_non_split_rounding = v as u64;
            }
        }
        if let Some(SettingValue::Float(f)) = snap.setting("garbage_collection_threshold") {
            s.garbage_collection_threshold = *f;
        }
        if let Some(f) = snap
            .setting("per_process_memory_fraction")
            .and_then(|v| match v {
                SettingValue::Float(f) => Some(*f),
                SettingValue::Text(t) => t.trim().parse().ok(),
                other => as_i128(other).map(|i| i as f64),
            })
        {
            // 1.0 (or an out-of-range value) is the whole device: no limit of its own.
            s.per_process_memory_fraction = (f > 0.0 && f < 1.0).then_some(f);
        }
        if let Some(b) = snap.setting("throw_on_cudamalloc_oom").and_then(as_bool) {
            s.throw_on_cudamalloc_oom = b;
        }
        if let Some(b) = snap
            .setting("graph_capture_record_stream_reuse")
            .and_then(as_bool)
        {
            s.graph_capture_record_stream_reuse = b;
        }
        if let Some(SettingValue::Map(m)) = snap.setting("roundup_power2_divisions") {
            for (k, v) in m {
                let (Ok(mib), Some(d)) = (k.parse::<u64>(), as_i128(v)) else {
                    continue;
                };
                if mib.is_power_of_two() {
                    let band = (mib.trailing_zeros() as usize).min(BANDS - 1);
                    s.roundup_power2_divisions[band] = d.clamp(0, 1 << 20) as u32;
                }
            }
        }
        // The snapshot's own string wins where it says more (older files lack some keys).
        if let Some((_, conf)) = recorded_conf(snap) {
            let _ = s.apply(conf);
        }
        Some(s)
    }

    /// Applies a `PYTORCH_CUDA_ALLOC_CONF`-style list (`KEY:VALUE,KEY:VALUE`, the list form
    /// `roundup_power2_divisions:[256:1,512:2,>:8]` included). Errors name the key.
    pub fn apply(&mut self, conf: &str) -> Result<(), Error> {
        for (key, value) in split_conf(conf)? {
            self.set(key.trim(), value.trim())?;
        }
        Ok(())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let bad = |what: &str| Error::Usage(format!("{key}:{value}: expected {what}"));
        match key {
            "expandable_segments" => {
                self.expandable_segments = parse_bool(value).ok_or_else(|| bad("True or False"))?
            }
            "per_process_memory_fraction" => {
                let f: f64 = value.parse().map_err(|_| bad("a fraction"))?;
                if !(f > 0.0 && f <= 1.0) {
                    return Err(bad("a fraction above 0 and at most 1"));
                }
                self.per_process_memory_fraction = (f < 1.0).then_some(f);
            }
            "throw_on_cudamalloc_oom" => {
                self.throw_on_cudamalloc_oom =
                    parse_bool(value).ok_or_else(|| bad("True or False"))?
            }
            "graph_capture_record_stream_reuse" => {
                self.graph_capture_record_stream_reuse =
                    parse_bool(value).ok_or_else(|| bad("True or False"))?
            }
            "max_split_size_mb" => {
                let mb: u64 = value.parse().map_err(|_| bad("a size in MiB"))?;
                // PyTorch requires more than 20 MiB (kLargeBuffer); smaller values are raised.
                self.max_split_size = Some(mb.max(20).saturating_mul(MIB));
            }
            "max_non_split_rounding_mb" => {
                let mb: u64 = value.parse().map_err(|_| bad("a size in MiB"))?;
                self.max_non_split_rounding = mb.saturating_mul(MIB);
            }
            "garbage_collection_threshold" => {
                let t: f64 = value.parse().map_err(|_| bad("a fraction"))?;
                if !(t > 0.0 && t < 1.0) {
                    return Err(bad("a fraction above 0 and below 1"));
                }
                self.garbage_collection_threshold = t;
            }
            "roundup_power2_divisions" => {
                self.roundup_power2_divisions = parse_divisions(value).ok_or_else(|| {
                    bad("a power of two, or a list such as [256:1,512:2,>:8] of MiB bands")
                })?
            }
            "backend" => {
                if value != "native" {
                    return Err(Error::Usage(format!(
                        "{key}:{value}: only the native caching allocator is modelled"
                    )));
                }
            }
            "release_lock_on_cudamalloc"
            | "pinned_use_cuda_host_register"
            | "pinned_num_register_threads"
            | "pinned_use_background_threads" => {}
            _ => {
                return Err(Error::Usage(format!(
                    "{key}: not an allocator setting memlens models (expandable_segments, \
                     max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions, \
                     garbage_collection_threshold, per_process_memory_fraction, \
                     throw_on_cudamalloc_oom, graph_capture_record_stream_reuse)"
                )))
            }
        }
        Ok(())
    }

    /// The divisions for a rounded request of `size` bytes (CUDAAllocatorConfig's bands).
    pub fn divisions_for(&self, size: u64) -> u32 {
        let log = 63 - size.max(1).leading_zeros() as usize;
        let band = log.saturating_sub(20).min(BANDS - 1);
        self.roundup_power2_divisions[band]
    }

    /// The settings as `PYTORCH_CUDA_ALLOC_CONF` would spell them, defaults left out (`""`
    /// for PyTorch's defaults).
    pub fn conf_string(&self) -> String {
        let d = Settings::default();
        let mut parts = Vec::new();
        if self.expandable_segments {
            parts.push("expandable_segments:True".to_string());
        }
        if let Some(m) = self.max_split_size {
            parts.push(format!("max_split_size_mb:{}", m / MIB));
        }
        if self.max_non_split_rounding != d.max_non_split_rounding {
            parts.push(format!(
                "max_non_split_rounding_mb:{}",
                self.max_non_split_rounding / MIB
            ));
        }
        let r = &self.roundup_power2_divisions;
        if r.iter().any(|&v| v > 1) {
            if r.iter().all(|&v| v == r[0]) {
                parts.push(format!("roundup_power2_divisions:{}", r[0]));
            } else {
                let list: Vec<String> = (0..BANDS)
                    .map(|i| format!("{}:{}", 1u64 << i, r[i]))
                    .collect();
                parts.push(format!("roundup_power2_divisions:[{}]", list.join(",")));
            }
        }
        if self.garbage_collection_threshold > 0.0 {
            parts.push(format!(
                "garbage_collection_threshold:{}",
                self.garbage_collection_threshold
            ));
        }
        if let Some(f) = self.per_process_memory_fraction {
            parts.push(format!("per_process_memory_fraction:{f}"));
        }
        if self.throw_on_cudamalloc_oom {
            parts.push("throw_on_cudamalloc_oom:True".to_string());
        }
        if self.graph_capture_record_stream_reuse {
            parts.push("graph_capture_record_stream_reuse:True".to_string());
        }
        parts.join(",")
    }
}

/// Splits `a:1,b:[x:1,y:2]` into `(a, 1)`, `(b, [x:1,y:2])`: commas inside brackets stay.
fn split_conf(conf: &str) -> Result<Vec<(&str, &str)>, Error> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    let bytes = conf.as_bytes();
    for i in 0..=bytes.len() {
        let c = bytes.get(i).copied();
        match c {
            Some(b'[') => depth += 1,
            Some(b']') => depth -= 1,
            Some(b',') | None if depth <= 0 => {
                let item = conf[start..i].trim();
                start = i + 1;
                if item.is_empty() {
                    continue;
                }
                let Some((k, v)) = item.split_once(':') else {
                    return Err(Error::Usage(format!("{item}: expected KEY:VALUE")));
                };
                out.push((k, v));
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(Error::Usage(format!("{conf}: unbalanced brackets")));
    }
    Ok(out)
}

/// `4` (every band) or `[256:1,512:2,>:8]` (bands by MiB, `>` for every band after the last
/// named one; the first named value also covers the bands below it, as PyTorch does).
fn parse_divisions(v: &str) -> Option<[u32; BANDS]> {
    let ok = |d: u32| d == 0 || d.is_power_of_two();
    let mut out = [0u32; BANDS];
    let Some(list) = v.strip_prefix('[').and_then(|v| v.strip_suffix(']')) else {
        let d: u32 = v.parse().ok()?;
        return ok(d).then_some([d; BANDS]);
    };
    let (mut first, mut last) = (true, 0usize);
    for item in list.split(',') {
        let (k, d) = item.split_once(':')?;
        let d: u32 = d.trim().parse().ok().filter(|&d| ok(d))?;
        if k.trim() == ">" {
            out[(last + 1).min(BANDS)..].fill(d);
            continue;
        }
        let mib: u64 = k
            .trim()
            .parse()
            .ok()
            .filter(|m: &u64| m.is_power_of_two())?;
        let band = (mib.trailing_zeros() as usize).min(BANDS - 1);
        if first {
            out[..band].fill(d);
            first = false;
        }
        out[band] = d;
        last = band;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conf_strings_parse_and_spell_back() {
        let mut s = Settings::default();
        s.apply("expandable_segments:True,max_split_size_mb:512")
            .unwrap();
        assert!(s.expandable_segments);
        assert_eq!(s.max_split_size, Some(512 * MIB));
        assert_eq!(
            s.conf_string(),
            "expandable_segments:True,max_split_size_mb:512"
        );
        s.apply("roundup_power2_divisions:[256:1,512:2,>:8]")
            .unwrap();
        assert_eq!(s.roundup_power2_divisions[0], 1);
        assert_eq!(s.roundup_power2_divisions[8], 1);
        assert_eq!(s.roundup_power2_divisions[9], 2);
        assert_eq!(s.roundup_power2_divisions[10], 8);
        assert_eq!(s.roundup_power2_divisions[15], 8);
        assert_eq!(Settings::default().conf_string(), "");
    }

    #[test]
    fn bad_values_name_the_key() {
        let mut s = Settings::default();
        let e = s
            .apply("expandable_segments:maybe")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expandable_segments:maybe"), "{e}");
        let e = s.apply("max_split_mb:3").unwrap_err().to_string();
        assert!(
            e.starts_with("max_split_mb: not an allocator setting"),
            "{e}"
        );
        assert!(s.apply("roundup_power2_divisions:3").is_err());
        assert!(s.apply("garbage_collection_threshold:1.5").is_err());
        assert!(s.apply("nokeyvalue").is_err());
        assert!(s.apply("per_process_memory_fraction:1.5").is_err());
        assert!(s.apply("throw_on_cudamalloc_oom:yes").is_err());
    }

    #[test]
    fn the_2026_keys_parse_and_spell_back() {
        let mut s = Settings::default();
        s.apply(
            "per_process_memory_fraction:0.5,throw_on_cudamalloc_oom:true,\
             graph_capture_record_stream_reuse:True",
        )
        .unwrap();
        assert_eq!(s.per_process_memory_fraction, Some(0.5));
        assert!(s.throw_on_cudamalloc_oom && s.graph_capture_record_stream_reuse);
        assert_eq!(
            s.conf_string(),
            "per_process_memory_fraction:0.5,throw_on_cudamalloc_oom:True,\
             graph_capture_record_stream_reuse:True"
        );
        // The whole device is no limit.
        s.apply("per_process_memory_fraction:1").unwrap();
        assert_eq!(s.per_process_memory_fraction, None);
    }

    #[test]
    fn bands_follow_the_size() {
        let mut s = Settings::default();
        s.apply("roundup_power2_divisions:[1:2,2:4,4:8]").unwrap();
        assert_eq!(s.divisions_for(512), 2); // below 1 MiB: band 0
        assert_eq!(s.divisions_for(3 * MIB), 4); // [2, 4) MiB: band 1
        assert_eq!(s.divisions_for(5 * MIB), 8);
        assert_eq!(s.divisions_for(64 << 30), 0);
    }
}
