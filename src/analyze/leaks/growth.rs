//! Per call site: live bytes and live tensors at every step boundary after the warm-up, the
//! tensors still alive at the end, and whether the site grows steadily. Boundaries are the
//! same phase (the end) of consecutive steps: what a step makes and releases, or replaces in
//! the next (its gradients, its temporaries), is flat there; only what every step adds grows.

use crate::model::{Snapshot, StackId, StrId};
use crate::replay::{annotations, DeviceReplay, NEVER};
use crate::vocab::sites::{self, SiteOptions};
use rustc_hash::FxHashMap;

/// One call site over the measured steps.
#[derive(Clone, Debug)]
pub(super) struct SiteSeries {
    /// `filename:line:name` (see [`sites::site_label`]).
    pub label: String,
    /// Live requested bytes at each step boundary after the warm-up.
    pub bytes: Vec<u64>,
    /// Live allocations at each of those boundaries.
    pub counts: Vec<u64>,
    /// Live requested bytes at the end of the trace.
    pub end_bytes: u64,
    /// Live allocations at the end of the trace.
    pub end_count: u64,
    /// Some allocation alive at the end runs under a module's forward.
    pub forward: bool,
    /// Some allocation alive at the end is annotated as packed into the autograd graph.
    pub annotated: bool,
    /// Per `annotate` text attached to allocations alive at the end: how many carry it and
    /// their requested bytes.
    pub notes: FxHashMap<StrId, (u64, u64)>,
    /// Indices (into the replay's allocations) of the allocations made in a measured step and
    /// still alive at the end: the tensors the growth consists of.
    pub kept: Vec<usize>,
}

/// How a series grows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Growth {
    /// Least-squares slope, bytes (or tensors) per step.
    pub slope: f64,
    /// R² of the linear fit (1 = perfectly steady).
    pub r2: f64,
    /// Rises every step or nearly (falls at most a quarter as often as it rises), fits a line
    /// (R² ≥ 0.8), has a positive slope and still grows in the last third of the steps.
    pub steady: bool,
}

/// Least-squares slope and R² of `v` against 0, 1, 2, ...
pub(super) fn fit(v: &[u64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mx = (n - 1.0) / 2.0;
    let my = v.iter().map(|&y| y as f64).sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (i, &y) in v.iter().enumerate() {
        let (dx, dy) = (i as f64 - mx, y as f64 - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    let slope = if sxx == 0.0 { 0.0 } else { sxy / sxx };
    let r2 = if syy == 0.0 {
        0.0
    } else {
        sxy * sxy / (sxx * syy)
    };
    (slope, r2)
}

/// How `v` grows (see [`Growth::steady`]).
pub(super) fn growth(v: &[u64]) -> Growth {
    let (slope, r2) = fit(v);
    let b = v.len();
    let rises = v.windows(2).filter(|w| w[1] > w[0]).count();
    let falls = v.windows(2).filter(|w| w[1] < w[0]).count();
    let tail = (b / 3).max(1);
    let still_growing = b > tail && v[b - 1] > v[b - 1 - tail];
    Growth {
        slope,
        r2,
        steady: slope > 0.0 && r2 >= 0.8 && falls * 4 <= rises && still_growing,
    }
}

/// True when a stack runs under a module's forward (where autograd saves tensors for
/// backward).
pub(super) fn under_forward(snap: &Snapshot, stack: StackId) -> bool {
    crate::replay::steps::under_module_forward(snap, stack)
}

/// The series of every site with an allocation alive at a boundary or at the end.
/// `bounds` are the boundaries' event indices; `measured_from` the first event of the first
/// measured step (allocations from there on that stay alive are the growth).
pub(super) fn measure(
    snap: &Snapshot,
    r: &DeviceReplay,
    bounds: &[i64],
    measured_from: i64,
    opts: SiteOptions,
) -> Vec<SiteSeries> {
    let b = bounds.len();
    let end = r.events as i64 - 1;
    // `annotate` events (2026+), attached to the allocation live at their address: the
    // texts shown per site, and the mark of an allocation packed into the autograd graph.
    let trace = snap.device_trace(snap.device(r.device).expect("replayed device exists"));
    let notes = annotations::attach(r, trace, snap);
    let mut labels: FxHashMap<StackId, (usize, bool)> = FxHashMap::default();
    let mut index: FxHashMap<String, usize> = FxHashMap::default();
    let mut out: Vec<SiteSeries> = Vec::new();
    // Per site: difference arrays of bytes and counts over the boundaries.
    let mut diffs: Vec<(Vec<i64>, Vec<i64>)> = Vec::new();
    for (ai, a) in r.allocations.iter().enumerate() {
        let lo = bounds.partition_point(|&x| x < a.start);
        let hi = if a.end == NEVER {
            b
        } else {
            bounds.partition_point(|&x| x < a.end)
        };
        let alive_at_end = a.live_at(end);
        if lo >= hi && !alive_at_end {
            continue;
        }
        let (k, under) = *labels.entry(a.stack).or_insert_with(|| {
            let label = sites::site_label(snap, a.stack, opts);
            let k = *index.entry(label.clone()).or_insert_with(|| {
                out.push(SiteSeries {
                    label,
                    bytes: Vec::new(),
                    counts: Vec::new(),
                    end_bytes: 0,
                    end_count: 0,
                    forward: false,
                    annotated: false,
                    notes: FxHashMap::default(),
                    kept: Vec::new(),
                });
                diffs.push((vec![0; b + 1], vec![0; b + 1]));
                out.len() - 1
            });
            (k, under_forward(snap, a.stack))
        });
        if lo < hi {
            let (db, dc) = &mut diffs[k];
            db[lo] += a.size as i64;
            db[hi] -= a.size as i64;
            dc[lo] += 1;
            dc[hi] -= 1;
        }
        if alive_at_end {
            let s = &mut out[k];
            s.end_bytes += a.size;
            s.end_count += 1;
            s.forward |= under;
            s.annotated |= notes.mentions(snap, ai as u32, "autograd");
            let texts = notes.of(ai as u32);
            for (k, t) in texts.iter().enumerate() {
                if !texts[..k].contains(t) {
                    let e = s.notes.entry(*t).or_default();
                    e.0 += 1;
                    e.1 += a.size;
                }
            }
            if a.start >= measured_from {
                s.kept.push(ai);
            }
        }
    }
    for (s, (db, dc)) in out.iter_mut().zip(diffs) {
        s.bytes = running(&db[..b]);
        s.counts = running(&dc[..b]);
    }
    out
}

/// The running sums of a difference array, never below zero.
fn running(d: &[i64]) -> Vec<u64> {
    let mut acc = 0i64;
    d.iter()
        .map(|x| {
            acc += x;
            acc.max(0) as u64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_growth_and_plateaus() {
        assert!(growth(&[10, 20, 30, 40, 50]).steady);
        assert_eq!(growth(&[10, 20, 30, 40, 50]).slope, 10.0);
        // filled once, then flat: no growth
        assert!(!growth(&[50, 50, 50, 50]).steady);
        // grew, then stopped in the last third
        assert!(!growth(&[10, 20, 30, 40, 40, 40]).steady);
        // up and down
        assert!(!growth(&[10, 30, 10, 30, 10, 30]).steady);
    }
}
