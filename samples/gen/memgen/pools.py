"""Private pools (issue 39 item 7): a CUDA-graph capture with two private pools on a capture
stream (PR #187929: several pools per graph; entries made under capture carry `pool_id`), a
`MemPool` pool on the default stream, the default pools, segment frees (empty_cache), and
three "ghost blocks": live at dump time in `segments` but their `alloc` never recorded (the
allocator's alloc/free recording is off while their segment's `segment_alloc` is recorded).

The facts (samples/truth/pools.json) come from the simulation's own knowledge of which pool
each trace entry was made in, not from the written file."""

from . import layout
from .allocator import ALLOC_A, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP, SEGMENT_UNMAP
from .scenarios import Run
from .stacks import USER, py

KIB = 1024
MIB = 1024 * KIB
CAPTURE_STREAM = 0x7F00
GRAPH_POOLS = ((2, 0), (0, 3))  # the graph's own pool (graph id, 0) and a handle's  # two pools of one CUDA graph (#187929)
MEMPOOL = (0, 1)  # torch.cuda.MemPool() pool id (id 1 of the user counter)


def _st(fn, line):
    return [py(fn, USER + "/pools.py", line), py("main", USER + "/pools.py", 90)]


def _tag(dev, start, pool, stream):
    """Entries made while allocating to `pool` on `stream` carry its `pool_id`; returns how
    many entries the trace has now (the next region's start)."""
    entries = dev.trace.entries()
    for te in entries[start:]:
        if te.stream == stream:
            te.extra = {"pool_id": list(pool)}
    return len(entries)


def _facts(entries, true_pool, ghost_at):
    """Per (pool, stream) reserved/active at the end and their peaks, from the entries and the
    pool each was truly made in; plus the segment bytes freed before the dump that carry no
    pool id (memlens: unknown pool)."""
    rows = {}
    for i, te in enumerate(entries):
        pool = true_pool[i]
        key = "unknown/%d" % te.stream if pool is None else "%d_%d/%d" % (pool[0], pool[1], te.stream)
        r = rows.setdefault(key, {"reserved": 0, "active": 0, "peak_reserved": 0, "peak_active": 0})
        if te.action in (SEGMENT_ALLOC, SEGMENT_MAP):
            r["reserved"] += te.size
        elif te.action in (SEGMENT_FREE, SEGMENT_UNMAP):
            r["reserved"] -= te.size
        elif te.action == ALLOC_A:
            r["active"] += te.size
        elif te.action == FREE_COMPLETED:
            r["active"] -= te.size
        for g_i, g_key, g_size in ghost_at:
            if g_i == i:
                rows[g_key]["active"] += g_size
        r["peak_reserved"] = max(r["peak_reserved"], r["reserved"])
        r["peak_active"] = max(r["peak_active"], r["active"])
    return rows


def private_pools(seed=61):
    r = Run(seed)
    dev = r.dev(0)
    true_pool = []

    def mark(pool):
        while len(true_pool) < len(dev.trace.entries()):
            true_pool.append(pool)

    weights = r.malloc(6 * MIB, _st("load", 10))
    act = r.malloc(3 * MIB, _st("load", 11))
    r.free(act, _st("load", 12))
    mark((0, 0))
    big = r.malloc(30 * MIB, _st("load", 14))  # its own segment, freed by empty_cache
    r.free(big, _st("load", 15))
    r.empty_cache(_st("load", 13))  # a default-pool segment freed: no pool id on its entries
    # the reader cannot know that segment's pool: its entries are the unknown pool's
    mark(None)
    # MemPool on the default stream
    dev.begin_allocate_to_pool(MEMPOOL, 0)
    start = len(dev.trace.entries())
    kept = [r.malloc(n, _st("mempool", 20 + i)) for i, n in enumerate((4 * MIB, 512 * KIB))]
    tmp = r.malloc(2 * MIB, _st("mempool", 24))
    r.free(tmp, _st("mempool", 25))
    dev.end_allocate_to_pool()
    _tag(dev, start, MEMPOOL, 0)
    mark(MEMPOOL)
    # CUDA graph capture: two pools on the capture stream
    graph = []
    for k, pool in enumerate(GRAPH_POOLS):
        dev.begin_allocate_to_pool(pool, CAPTURE_STREAM)
        start = len(dev.trace.entries())
        a = r.malloc((8 + 4 * k) * MIB, _st("capture", 30 + k), stream=CAPTURE_STREAM)
        b = r.malloc((1 + k) * MIB, _st("capture", 32 + k), stream=CAPTURE_STREAM)
        c = r.malloc(256 * KIB, _st("capture", 34 + k), stream=CAPTURE_STREAM)
        r.free(b, _st("capture", 36 + k))
        graph += [a, c]
        dev.end_allocate_to_pool()
        _tag(dev, start, pool, CAPTURE_STREAM)
        mark(pool)
    # ghost blocks: alloc/free recording off, a fresh segment's segment_alloc still recorded
    dev.record_alloc_trace = False
    ghosts, ghost_at = [], []
    for i, n in enumerate((24 * MIB, 1 * MIB, 64 * KIB)):
        ghosts.append(r.malloc(n, _st("ghost", 40 + i)))
        # active from the last entry before it was made (its segment's segment_alloc)
        ghost_at.append((len(dev.trace.entries()) - 1, "0_0/0", n))
    dev.record_alloc_trace = True
    mark((0, 0))
    late = r.malloc(2 * MIB, _st("train", 50))
    mark((0, 0))
    keep = [weights, late] + kept + graph + ghosts
    entries = list(dev.trace.entries())
    assert len(entries) == len(true_pool)
    rows = _facts(entries, true_pool, ghost_at)
    freed_default = sum(te.size for te in entries if te.action == SEGMENT_FREE)
    snap = layout.modern_snapshot(r.alloc, r.ft)
    for te, d in zip(entries, snap["device_traces"][0]):
        if te.extra and "pool_id" in te.extra:
            d["pool_id"] = tuple(te.extra["pool_id"])
    ghost_rows = [{"size": g.size, "requested_size": g.requested_size, "address": g.ptr}
                  for g in sorted(ghosts, key=lambda g: -g.size)]
    facts = {
        "pools": rows,
        "freed_segment_bytes_without_pool_id": freed_default,
        "ghost_blocks": len(ghosts),
        "ghost_bytes": sum(g.size for g in ghosts),
        "ghosts": ghost_rows,
        "live_blocks": len(keep),
    }
    return snap, facts


POOLS_SAMPLES = [
    ("private_pools.pickle", "py4", private_pools),
]
