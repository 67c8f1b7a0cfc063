//! The page's private-pools panel: `memlens frag --by pool` with each pool's series of
//! reserved and active bytes thinned to what a chart can show.

use crate::analyze::frag::pools::{self, DevicePools};
use crate::model::Snapshot;
use crate::replay::DeviceReplay;

/// Most points of one pool's series on the page.
pub const POOL_POINTS: usize = 1000;

/// The pools of every replayed device, when the snapshot has a private pool (else empty: the
/// page shows no panel). Each series keeps at most [`POOL_POINTS`] points: per run of
/// consecutive points, the first's event index with the run's highest reserved and highest
/// active bytes, so every peak is drawn at its height.
pub fn panel(snap: &Snapshot, replays: &[DeviceReplay]) -> Vec<DevicePools> {
    if !pools::has_private_pool(snap) {
        return Vec::new();
    }
    let mut out = pools::run(snap, replays, true);
    for d in &mut out {
        for p in &mut d.pools {
            p.series = thin(&p.series, POOL_POINTS);
        }
    }
    out
}

/// `series` (`[event, reserved, active]`) in at most `max` points: each run of
/// `ceil(len / max)` points becomes its first event with the run's maxima; the last point is
/// kept as it is (the state at the end).
pub fn thin(series: &[[i64; 3]], max: usize) -> Vec<[i64; 3]> {
    if series.len() <= max || max < 2 {
        return series.to_vec();
    }
    let run = series.len().div_ceil(max - 1);
    let (body, last) = series.split_at(series.len() - 1);
    let mut out: Vec<[i64; 3]> = body
        .chunks(run)
        .map(|c| {
            let r = c.iter().map(|p| p[1]).max().unwrap_or(0);
            let a = c.iter().map(|p| p[2]).max().unwrap_or(0);
            [c[0][0], r, a]
        })
        .collect();
    out.extend_from_slice(last);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GIVEN a long series WHEN thinned THEN it has at most `max` points, keeps both peaks at
    /// their height, starts at the first event and ends with the last point.
    #[test]
    fn thinning_keeps_peaks_and_ends() {
        let series: Vec<[i64; 3]> = (0..10_000i64)
            .map(|i| {
                [
                    i - 1,
                    (i % 97) * 10,
                    if i == 4321 { 99_999 } else { i % 13 },
                ]
            })
            .collect();
        let t = thin(&series, 100);
        assert!(t.len() <= 100, "{}", t.len());
        assert_eq!(t[0][0], -1);
        assert_eq!(*t.last().unwrap(), series[9_999]);
        assert_eq!(t.iter().map(|p| p[1]).max(), Some(960));
        assert_eq!(t.iter().map(|p| p[2]).max(), Some(99_999));
        assert!(t.windows(2).all(|w| w[0][0] < w[1][0]));
        assert_eq!(thin(&series[..50], 100), series[..50].to_vec());
    }
}
