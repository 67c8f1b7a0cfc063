//! What a rank file's path says of where it sits in a job: the training step it was dumped at
//! (`iteration_30/rank3_memory_snapshot.pickle`, torchtitan's layout; `step_200`, `iter-5`) and
//! its parallel coordinates (`tp1_pp0_rank3.pickle`, `pp-2/tp-0/...`), or the coordinates a
//! topology gives each rank (`--topology FILE`: the sizes of the parallel dimensions and their
//! order, Megatron's `tp-cp-ep-dp-pp` by default).

use std::collections::BTreeMap;

/// The parallel dimensions understood: tensor, context, expert, data and pipeline.
pub const AXES: &[&str] = &["tp", "cp", "ep", "dp", "pp"];

/// Megatron-LM's default rank order, the first dimension varying fastest.
pub const DEFAULT_ORDER: &str = "tp-cp-ep-dp-pp";

/// Whether byte `i` of `s` starts a word: the start, or after a character that is not a
/// letter or a digit.
fn word_start(s: &[u8], i: usize) -> bool {
    i == 0 || !s[i - 1].is_ascii_alphanumeric()
}

/// The digits at `from` (after one optional `_` or `-`): their value and where they end; the
/// digits must not run into a letter.
fn number_at(s: &[u8], mut from: usize) -> Option<(u64, usize)> {
    if from < s.len() && (s[from] == b'_' || s[from] == b'-') {
        from += 1;
    }
    let end = s[from..]
        .iter()
        .position(|c| !c.is_ascii_digit())
        .map_or(s.len(), |p| from + p);
    if end == from || (end < s.len() && s[end].is_ascii_alphabetic()) {
        return None;
    }
    std::str::from_utf8(&s[from..end])
        .ok()?
        .parse()
        .ok()
        .map(|v| (v, end))
}

/// The last `word` + number in `path` (case-insensitive), e.g. `step_200`; the word must
/// start a word (`global_step_5` counts, `substep5` does not).
fn last_tagged(path: &str, words: &[&str]) -> Option<u64> {
    let lower = path.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut found = None;
    for w in words {
        let mut from = 0;
        while let Some(p) = lower[from..].find(w) {
            let at = from + p;
            if word_start(b, at) || (at > 0 && b[at - 1] == b'_') {
                if let Some((v, end)) = number_at(b, at + w.len()) {
                    if found.map_or(true, |(e, _)| end > e) {
                        found = Some((end, v));
                    }
                }
            }
            from = at + w.len();
        }
    }
    found.map(|(_, v)| v)
}

/// The training step a path names: the last `iteration`, `iter` or `step` followed by a
/// number (`memory_snapshot/iteration_30/rank3.pickle` -> 30; torchtitan's OOM dumps in
/// `iteration_30_exit/` -> 30).
pub fn step_of_path(path: &str) -> Option<u64> {
    last_tagged(path, &["iteration", "iter", "step"])
}

/// The parallel coordinates a path names: each of [`AXES`] followed by a number, at a word
/// start (`rank3_tp1_pp0.pickle` -> tp 1, pp 0; `pp-2/tp_rank_0/...` -> pp 2, tp 0).
pub fn coords_of_path(path: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for axis in AXES {
        let v =
            last_tagged(path, &[&format!("{axis}_rank"), axis]).and_then(|v| u32::try_from(v).ok());
        if let Some(v) = v {
            out.insert(axis.to_string(), v);
        }
    }
    out
}

/// A job's parallel layout: dimension sizes in rank order, the first varying fastest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// (dimension, size), fastest first; dimensions of size 1 are kept (their coordinate is 0).
    pub axes: Vec<(String, u32)>,
}

impl Topology {
    /// Parses a topology file's JSON: `{"tp": 8, "pp": 4, "dp": 32, "order": "tp-cp-ep-dp-pp"}`
    /// (sizes of any of [`AXES`], missing ones 1; `order` optional, [`DEFAULT_ORDER`] by
    /// default, naming every dimension given). The error says which key and what was expected.
    pub fn parse(text: &str) -> Result<Topology, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let obj = v
            .as_object()
            .ok_or("expected an object like {\"tp\": 8, \"pp\": 4, \"dp\": 32}")?;
        let mut sizes: BTreeMap<&str, u32> = BTreeMap::new();
        for (k, val) in obj {
            if k == "order" {
                continue;
            }
            if !AXES.contains(&k.as_str()) {
                return Err(format!(
                    "key {k:?}: expected one of {}, or \"order\"",
                    AXES.join(", ")
                ));
            }
            let n = val
                .as_u64()
                .filter(|&n| (1..=1 << 20).contains(&n))
                .ok_or(format!("key {k:?}: expected a size from 1 to 1048576"))?;
            sizes.insert(
                AXES[AXES.iter().position(|a| a == k).unwrap_or(0)],
                n as u32,
            );
        }
        if sizes.is_empty() {
            return Err(format!(
                "expected the size of at least one of {}",
                AXES.join(", ")
            ));
        }
        let order = match obj.get("order") {
            None => DEFAULT_ORDER.to_string(),
            Some(serde_json::Value::String(s)) => s.to_ascii_lowercase(),
            Some(_) => return Err("key \"order\": expected a string like \"tp-dp-pp\"".into()),
        };
        let names: Vec<&str> = order
            .split(['-', ',', ' '])
            .filter(|s| !s.is_empty())
            .collect();
        for n in &names {
            if !AXES.contains(n) {
                return Err(format!(
                    "key \"order\": {n:?} is not one of {}",
                    AXES.join(", ")
                ));
            }
        }
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(format!("key \"order\": {n:?} appears twice"));
            }
        }
        if let Some(k) = sizes.keys().find(|k| !names.contains(k)) {
            return Err(format!(
                "key \"order\": {k:?} has a size but is not in the order"
            ));
        }
        let mut total: u64 = 1;
        let axes = names
            .iter()
            .map(|n| {
                let s = sizes.get(n).copied().unwrap_or(1);
                total = total.saturating_mul(s as u64);
                (n.to_string(), s)
            })
            .collect();
        if total > u32::MAX as u64 {
            return Err(format!(
                "the sizes multiply to {total} ranks, more than a rank can number"
            ));
        }
        Ok(Topology { axes })
    }

    /// How many ranks the sizes make.
    pub fn world_size(&self) -> u64 {
        self.axes.iter().map(|(_, s)| *s as u64).product()
    }

    /// The coordinates of `rank` (dimensions of size 1 left out); `None` beyond the world.
    pub fn coords(&self, rank: u32) -> Option<BTreeMap<String, u32>> {
        if rank as u64 >= self.world_size() {
            return None;
        }
        let mut r = rank;
        let mut out = BTreeMap::new();
        for (axis, size) in &self.axes {
            if *size > 1 {
                out.insert(axis.clone(), r % size);
            }
            r /= size;
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_from_paths() {
        for (path, want) in [
            (
                "memory_snapshot/iteration_30/rank3_memory_snapshot.pickle",
                Some(30),
            ),
            (
                "memory_snapshot/iteration_30_exit/rank3_memory_snapshot.pickle",
                Some(30),
            ),
            ("runs/step-200/rank0.pickle", Some(200)),
            ("runs/global_step_5/rank0.pickle", Some(5)),
            ("job_r7_step3.pickle", Some(3)),
            ("iter12/rank0.pickle", Some(12)),
            ("step_10/iteration_20/rank1.pickle", Some(20)),
            ("substep5/rank0.pickle", None),
            ("steps/rank0.pickle", None),
            ("step_5x/rank0.pickle", None),
            ("rank0.pickle", None),
        ] {
            assert_eq!(step_of_path(path), want, "{path}");
        }
    }

    #[test]
    fn coordinates_from_paths() {
        let c = |p: &str| {
            coords_of_path(p)
                .into_iter()
                .map(|(k, v)| format!("{k}{v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(c("rank3_tp1_pp0.pickle"), "pp0 tp1");
        assert_eq!(c("pp-2/tp_rank_0/rank9.pickle"), "pp2 tp0");
        assert_eq!(c("job/dp3-ep1-cp0/rank9.pickle"), "cp0 dp3 ep1");
        assert_eq!(c("http/stp1/rank0.pickle"), "");
        assert_eq!(c("rank0.pickle"), "");
    }

    #[test]
    fn topology_places_ranks_fastest_first() {
        let t = Topology::parse(r#"{"tp": 2, "pp": 2, "dp": 3}"#).unwrap();
        assert_eq!(t.world_size(), 12);
        // Megatron's order: tp fastest, then dp, then pp.
        let c = t.coords(7).unwrap();
        assert_eq!((c["tp"], c["dp"], c["pp"]), (1, 0, 1));
        assert!(!c.contains_key("cp"));
        assert_eq!(t.coords(12), None);
        let t = Topology::parse(r#"{"tp": 2, "pp": 2, "order": "pp-tp"}"#).unwrap();
        let c = t.coords(1).unwrap();
        assert_eq!((c["pp"], c["tp"]), (1, 0));
        for (bad, says) in [
            ("[1]", "expected an object"),
            (r#"{"xp": 2}"#, "key \"xp\""),
            (r#"{"tp": 0}"#, "key \"tp\": expected a size"),
            (r#"{"tp": 2, "order": "tp-tp"}"#, "appears twice"),
            (r#"{"tp": 2, "pp": 2, "order": "tp"}"#, "\"pp\" has a size"),
            (r#"{"order": "tp"}"#, "at least one"),
            ("{", "not JSON"),
        ] {
            let e = Topology::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
