//! One device's live bytes per site at many moments: what the compare page shows at each
//! moment a person can click. The keyer and the kinds of allocations older than the trace are
//! made once for all the moments, and each moment's live set keyed per distinct stack.

use super::{Held, Keyer, ProfileOptions};
use crate::analyze::pretrace::{Kinds, Pretrace};
use crate::analyze::profile::SiteTotal;
use crate::model::{Device, Snapshot};
use crate::replay::DeviceReplay;
use std::collections::BTreeMap;

/// The live set after one event, keyed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SitesAt {
    /// Live bytes and allocations per key (older allocations under their labels).
    pub sites: BTreeMap<String, SiteTotal>,
    /// The kinds of the older allocations among them.
    pub pretrace: BTreeMap<String, Pretrace>,
}

/// The live set of traced device `dev` (replay `r`) after each event of `ats` (-1: before the
/// first), keyed as `opts` says, in the order of `ats`.
pub fn sites_at(
    snap: &Snapshot,
    dev: &Device,
    r: &DeviceReplay,
    ats: &[i64],
    opts: &ProfileOptions,
) -> Vec<SitesAt> {
    let keyer = Keyer::new(snap, *opts);
    let kinds = Kinds::of(snap, r, snap.device_trace(dev));
    // One pass over the allocations: each is added to the moments inside its lifetime
    // (`start <= at < end`), found by binary search among the moments sorted, so the cost is
    // the allocations plus the live sets, not their product.
    let mut sorted: Vec<i64> = ats.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut held: Vec<Held> = (0..sorted.len()).map(|_| Held::default()).collect();
    for a in &r.allocations {
        let first = sorted.partition_point(|&x| x < a.start);
        let last = sorted.partition_point(|&x| x < a.end);
        if first >= last {
            continue;
        }
        match kinds.of_alloc(snap, a) {
            Some(p) => {
                let key = p.label();
                for h in &mut held[first..last] {
                    let e = h.older.entry(key.clone()).or_default();
                    e.bytes += a.size;
                    e.count += 1;
                    h.pretrace.entry(key.clone()).or_insert_with(|| p.clone());
                }
            }
            None => {
                for h in &mut held[first..last] {
                    h.add(a.stack, a.size);
                }
            }
        }
    }
    let keyed: Vec<SitesAt> = held
        .into_iter()
        .map(|held| {
            let mut sites = keyer.by_key(held.per_stack);
            for (k, t) in held.older {
                let e = sites.entry(k).or_default();
                e.bytes += t.bytes;
                e.count += t.count;
            }
            SitesAt {
                sites,
                pretrace: held.pretrace,
            }
        })
        .collect();
    ats.iter()
        .map(|at| keyed[sorted.partition_point(|&x| x < *at)].clone())
        .collect()
}
