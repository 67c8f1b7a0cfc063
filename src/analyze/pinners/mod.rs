//! Which allocations strand the cache: at a moment, the live blocks that keep each segment's
//! free bytes from being released ([`frag::pinned::pieces`]), grouped by the site that made
//! them (as `profile` keys sites), per pool and per device; the segments they split, with the
//! events that created and split them; and what the allocator replay says changes would leave
//! stranded ([`prices`]). `frag`, `oom` (at a fragmentation OOM) and the page show it.

mod prices;
mod words;

use crate::analyze::frag::pinned::{
    self, DevicePinners, PinnedSegment, PinnerGroup, PinnerSite, PinningBlock, PoolPinners,
};
use crate::analyze::frag::{self, FragOptions, FragReport};
use crate::analyze::oom::SnapshotOom;
use crate::analyze::profile::{Keyer, ProfileOptions};
use crate::model::{Action, PoolKind, Snapshot, StackId};
use crate::replay::state::{self, AllocatorState, BlockAt};
use crate::replay::{self, DeviceReplay, Moment};
use crate::vocab::advice::Verdict;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// Sites kept per device (the rest are summed in the totals).
pub const SITES_KEPT: usize = 20;
/// Sites kept per pool.
pub const POOL_SITES_KEPT: usize = 10;
/// Groups of sites kept per device.
pub const GROUPS_KEPT: usize = 5;
/// Segments kept per device.
pub const SEGMENTS_KEPT: usize = 5;
/// Pinning blocks listed per segment.
pub const BLOCKS_KEPT: usize = 8;

/// The site of a block with no recorded stack.
pub const NO_STACK: &str = "<no stack recorded>";

/// Where each live block of a moment came from, by the replay: its allocation event (`None`:
/// before the trace), that event's time, and its allocation stack (a block the state rebuilt
/// by undoing a free carries the free's stack; the replay's allocation carries the alloc's).
struct Origins<'a> {
    starts: FxHashMap<u64, (i64, StackId)>,
    trace: &'a [crate::model::TraceEvent],
}

impl Origins<'_> {
    fn event(&self, address: u64) -> Option<u64> {
        self.starts
            .get(&address)
            .filter(|s| s.0 >= 0)
            .map(|s| s.0 as u64)
    }

    /// The allocation stack of the block at `address`: the replay's, else the state's.
    fn stack(&self, b: &BlockAt) -> StackId {
        self.starts.get(&b.address).map_or(b.stack, |s| s.1)
    }

    fn time(&self, address: u64) -> Option<i64> {
        self.event(address)
            .and_then(|e| self.trace.get(e as usize))
            .and_then(|e| e.time())
    }
}

/// One site's running totals.
#[derive(Default)]
struct Tally {
    sole: u64,
    shared: u64,
    blocks: u64,
    block_bytes: u64,
    oldest: Option<u64>,
    before_trace: u64,
}

impl Tally {
    fn out(&self, site: &str, at: &Moment, origins: &Origins) -> PinnerSite {
        PinnerSite {
            site: site.to_string(),
            sole_bytes: self.sole,
            shared_bytes: self.shared,
            blocks: self.blocks,
            block_bytes: self.block_bytes,
            oldest_allocated_event: if self.before_trace > 0 {
                None
            } else {
                self.oldest
            },
            allocated_before_trace: self.before_trace,
            oldest_age_us: if self.before_trace > 0 {
                None
            } else {
                let t = self
                    .oldest
                    .and_then(|e| origins.trace.get(e as usize)?.time());
                at.time_us.zip(t).map(|(now, then)| now - then)
            },
        }
    }
}

type PoolKey = (PoolKind, (u64, u64), u64);

/// The sites' tallies of one scope (a device or a pool).
#[derive(Default)]
struct Scope {
    stranded: u64,
    sites: BTreeMap<String, Tally>,
}

impl Scope {
    fn sorted(&self, kept: usize, at: &Moment, origins: &Origins) -> Vec<PinnerSite> {
        let mut v: Vec<PinnerSite> = self
            .sites
            .iter()
            .map(|(k, t)| t.out(k, at, origins))
            .collect();
        let pinned = |s: &PinnerSite| s.sole_bytes + s.shared_bytes;
        v.sort_by(|a, b| {
            (pinned(b), b.sole_bytes, &a.site).cmp(&(pinned(a), a.sole_bytes, &b.site))
        });
        v.truncate(kept);
        v
    }
}

fn recorded(stack: StackId) -> bool {
    stack.is_recorded() && stack != StackId::EMPTY
}

/// What pins the stranded bytes of `st` (the state of one device at `at`), by site; with
/// `price`, what the allocator replay says changes would leave stranded (one replay per
/// change, up to the moment).
pub fn device_pinners(
    snap: &Snapshot,
    st: &AllocatorState,
    at: Moment,
    replay: Option<&DeviceReplay>,
    keyer: &Keyer,
    price: bool,
) -> DevicePinners {
    let trace = snap
        .device(st.device)
        .map(|d| snap.device_trace(d))
        .unwrap_or(&[]);
    let origins = Origins {
        starts: replay
            .map(|r| {
                r.live_allocations(st.at)
                    .map(|a| (a.addr, (a.start, a.stack)))
                    .collect()
            })
            .unwrap_or_default(),
        trace,
    };
    let created = segment_events(trace, st.at);
    let site = |b: &BlockAt| -> String {
        let stack = origins.stack(b);
        if recorded(stack) {
            keyer.key(stack).to_string()
        } else {
            NO_STACK.to_string()
        }
    };
    let mut device = Scope::default();
    let mut pools: BTreeMap<PoolKey, Scope> = BTreeMap::new();
    let (mut attributed, mut unattributed) = (0u64, 0u64);
    let mut segments = Vec::new();
    let mut site_blocks: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut groups: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for s in &st.segments {
        let pieces = pinned::pieces(s);
        if pieces.is_empty() {
            continue;
        }
        let pool = pools.entry((s.pool, s.pool_id, s.stream)).or_default();
        let mut pinning: Vec<usize> = Vec::new();
        let mut stranded = 0;
        for piece in &pieces {
            stranded += piece.bytes;
            let mut names: Vec<String> =
                piece.pinners.iter().map(|&i| site(&s.blocks[i])).collect();
            names.sort();
            names.dedup();
            if piece
                .pinners
                .iter()
                .any(|&i| recorded(origins.stack(&s.blocks[i])))
            {
                attributed += piece.bytes;
            } else {
                unattributed += piece.bytes;
            }
            *groups.entry(names.clone()).or_default() += piece.bytes;
            for scope in [&mut device, &mut *pool] {
                for n in &names {
                    let t = scope.sites.entry(n.clone()).or_default();
                    if names.len() == 1 {
                        t.sole += piece.bytes;
                    } else {
                        t.shared += piece.bytes;
                    }
                }
            }
            pinning.extend(&piece.pinners);
        }
        device.stranded += stranded;
        pool.stranded += stranded;
        pinning.sort_unstable();
        pinning.dedup();
        for &i in &pinning {
            let b = &s.blocks[i];
            let name = site(b);
            let ev = origins.event(b.address);
            for scope in [&mut device, &mut *pool] {
                let t = scope.sites.entry(name.clone()).or_default();
                t.blocks += 1;
                t.block_bytes += b.size;
                match ev {
                    Some(e) => t.oldest = Some(t.oldest.map_or(e, |o| o.min(e))),
                    None => t.before_trace += 1,
                }
            }
            if let Some(e) = ev {
                site_blocks.entry(name).or_default().push(e);
            }
        }
        segments.push(segment(s, stranded, &pinning, &created, &origins, &site));
    }
    segments.sort_by(|a, b| (b.stranded_bytes, a.address).cmp(&(a.stranded_bytes, b.address)));
    segments.truncate(SEGMENTS_KEPT);
    let pinners = device.sorted(SITES_KEPT, &at, &origins);
    let mut groups: Vec<PinnerGroup> = groups
        .into_iter()
        .map(|(sites, stranded_bytes)| PinnerGroup {
            sites,
            stranded_bytes,
        })
        .collect();
    groups.sort_by(|a, b| (b.stranded_bytes, &a.sites).cmp(&(a.stranded_bytes, &b.sites)));
    groups.truncate(GROUPS_KEPT);
    let mut pool_rows: Vec<PoolPinners> = pools
        .iter()
        .filter(|(_, p)| p.stranded > 0)
        .map(|(&(pool, pool_id, stream), p)| PoolPinners {
            pool,
            pool_id: [pool_id.0, pool_id.1],
            stream,
            stranded_bytes: p.stranded,
            pinners: p.sorted(POOL_SITES_KEPT, &at, &origins),
        })
        .collect();
    pool_rows.sort_by_key(|p| std::cmp::Reverse(p.stranded_bytes));
    let mut out = DevicePinners {
        device: st.device,
        at,
        stranded_bytes: device.stranded,
        attributed_bytes: attributed,
        unattributed_bytes: unattributed,
        pinners,
        pinning_sites: device.sites.len() as u64,
        groups,
        pools: pool_rows,
        segments,
        prices: Vec::new(),
        words: Vec::new(),
    };
    let mut notes = Vec::new();
    if price {
        match prices::price(snap, &out, &site_blocks) {
            Ok(p) => out.prices = p,
            Err(why) => notes.push(why),
        }
    }
    out.words = words::words(&out, snap, notes);
    out
}

/// The pinners at each OOM whose verdict is fragmentation, priced (`memlens oom`, the page):
/// the reading starts with the chain from the request to what pins the free bytes it could
/// not use.
pub fn at_ooms(snap: &Snapshot, replays: &[DeviceReplay], ooms: &mut [SnapshotOom]) {
    let keyer = Keyer::new(snap, ProfileOptions::default());
    for o in ooms
        .iter_mut()
        .filter(|o| o.explained.verdict == Verdict::Fragmentation)
    {
        let (Some(device), Some(event)) = (o.explained.device, o.explained.event_index) else {
            continue;
        };
        let Some(dev) = snap.device(device) else {
            continue;
        };
        let at = event as i64;
        let st = state::state_at(snap, dev, at);
        let moment = replay::moment(snap.device_trace(dev), at);
        let r = replays.iter().find(|r| r.device == device);
        let mut p = device_pinners(snap, &st, moment, r, &keyer, true);
        let largest = o.explained.largest_free_block_bytes.unwrap_or(0);
        p.words.insert(
            0,
            words::chain(&p, o.request_rounded_bytes, o.pool_free_bytes, largest),
        );
        o.pinners = Some(p);
    }
}

/// `frag` with each device's pinners (priced where fragmentation matters, [`FragReading`]).
///
/// [`FragReading`]: crate::analyze::frag::FragReading
pub fn frag_report(
    snap: &Snapshot,
    replays: &[DeviceReplay],
    opts: &FragOptions,
) -> Result<FragReport, String> {
    let keyer = Keyer::new(snap, ProfileOptions::default());
    frag::run_with(snap, replays, opts, &mut |st, d, r| {
        Some(device_pinners(snap, st, d.at, r, &keyer, d.reading.matters))
    })
}

/// The latest `segment_alloc` / `segment_map` at each address up to `at`.
fn segment_events(trace: &[crate::model::TraceEvent], at: i64) -> FxHashMap<u64, u64> {
    let end = ((at + 1).max(0) as usize).min(trace.len());
    trace[..end]
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.action, Action::SegmentAlloc | Action::SegmentMap))
        .map(|(i, e)| (e.addr, i as u64))
        .collect()
}

fn segment(
    s: &crate::replay::state::SegmentAt,
    stranded: u64,
    pinning: &[usize],
    created: &FxHashMap<u64, u64>,
    origins: &Origins,
    site: &dyn Fn(&BlockAt) -> String,
) -> PinnedSegment {
    let mut split_by: Vec<PinningBlock> = pinning
        .iter()
        .map(|&i| {
            let b = &s.blocks[i];
            PinningBlock {
                address: b.address,
                size: b.size,
                site: site(b),
                allocated_event: origins.event(b.address),
                allocated_time_us: origins.time(b.address),
            }
        })
        .collect();
    // Oldest first: before the trace, then by event.
    split_by.sort_by_key(|b| (b.allocated_event.map_or(-1, |e| e as i64), b.address));
    split_by.truncate(BLOCKS_KEPT);
    PinnedSegment {
        address: s.address,
        size: s.size,
        pool: s.pool,
        stream: s.stream,
        expandable: s.expandable,
        stranded_bytes: stranded,
        created_event: created.get(&s.address).copied(),
        split_by,
        pinning_blocks: pinning.len() as u64,
    }
}
