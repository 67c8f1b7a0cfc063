"""Samples with known pinners (issue 56): live blocks that keep cached free bytes from being
released, with the sites that made them and the events that split the segments.

pinned_pages: expandable_segments:True, one large-pool range whose base (es_base) is 8 MiB
past a multiple of 20 MiB, so its 20 MiB pages start at the range base, not at multiples of
20 MiB. Offsets in MiB from the base:

    [0,4)   P   4 MiB, allocated with history off (no stack, no trace entry)
    [4,30)  t1  26 MiB temporary (freed)     pieces: [4,20) pinned by P, [20,30) by K1
    [30,34) K1  4 MiB kept   (keep.py:11)
    [34,70) t2  36 MiB temporary (freed)     pieces: [34,40) by K1, [40,60) a whole free page
                                                     (releasable), [60,70) by K2
    [70,76) K2  6 MiB kept   (keep.py:12)
    [76,90) t3  14 MiB temporary (freed)     pieces: [76,80) by K2, [80,90) by K3
    [90,92) K3  2 MiB kept   (keep.py:13)
    [92,100)    the mapped tail (free)       piece:  [92,100) by K3

Stranded 64 MiB: keep.py:11 alone 16 MiB, keep.py:12 alone 14 MiB, keep.py:13 alone 18 MiB,
16 MiB pinned only by P (no stack: its site cannot be named); 20 MiB releasable. The truth
file also holds the trace index of each kept block's `alloc` (the event that split its page).
"""

from . import layout
from .allocator import AllocatorConfig
from .scenarios import Run
from .stacks import USER, py
from .truth import Tracker

MIB = 1 << 20
PAGE = 20 * MIB
KEEP = USER + "/keep.py"


def _stranded(blocks, base):
    """Independent of memlens: the stranded bytes of one expandable range, by pinning block
    (its offset), from (offset, size, live) triples in address order."""
    pinned = {}
    for i, (off, size, live) in enumerate(blocks):
        if live:
            continue
        start, end = off, off + size
        lo = -(-(start - base) // PAGE) * PAGE + base
        hi = (end - base) // PAGE * PAGE + base
        prev = blocks[i - 1][0] if i > 0 and blocks[i - 1][2] else None
        nxt = blocks[i + 1][0] if i + 1 < len(blocks) and blocks[i + 1][2] else None
        if lo > hi:
            for p in (prev, nxt):
                pinned[p] = pinned.get(p, 0) + size
            continue
        if lo > start:
            pinned[prev] = pinned.get(prev, 0) + lo - start
        if end > hi:
            pinned[nxt] = pinned.get(nxt, 0) + end - hi
    return pinned


def pinned_pages(seed=56):
    cfg = AllocatorConfig(expandable_segments=True)
    r = Run(seed, config=cfg, per_device={0: {"capacity": 80 * GIB}})
    dev = r.dev(0)
    main = [py("main", KEEP, 40), py("<module>", KEEP, 50)]
    dev.set_history(False)
    pre = r.malloc(4 * MIB, main)
    dev.set_history(True)
    tk = Tracker(r)
    tmp = lambda line: [py("scratch", KEEP, line)] + main
    keep = lambda line: [py("keep", KEEP, line)] + main
    t1 = tk.malloc(26 * MIB, tmp(20), cat="temp")
    k1 = tk.malloc(4 * MIB, keep(11), cat="kept")
    e1 = tk._last("alloc", k1.ptr)[0]
    t2 = tk.malloc(36 * MIB, tmp(21), cat="temp")
    k2 = tk.malloc(6 * MIB, keep(12), cat="kept")
    e2 = tk._last("alloc", k2.ptr)[0]
    t3 = tk.malloc(14 * MIB, tmp(22), cat="temp")
    k3 = tk.malloc(2 * MIB, keep(13), cat="kept")
    e3 = tk._last("alloc", k3.ptr)[0]
    for b in (t1, t2, t3):
        tk.free(b, tmp(30))
    base = pre.ptr
    assert (base - 0x7E2000000000) % PAGE == 0 and base % PAGE != 0
    assert [b.ptr - base for b in (k1, k2, k3)] == [30 * MIB, 70 * MIB, 90 * MIB]
    layout_mib = [(0, 4, True), (4, 26, False), (30, 4, True), (34, 36, False), (70, 6, True),
                  (76, 14, False), (90, 2, True), (92, 8, False)]
    blocks = [(base + o * MIB, n * MIB, live) for o, n, live in layout_mib]
    assert dev.memory_reserved() == 100 * MIB
    pinned = _stranded(blocks, base)
    site = lambda line: "%s:%d:keep" % (KEEP, line)
    by_site = {site(11): pinned[k1.ptr], site(12): pinned[k2.ptr], site(13): pinned[k3.ptr]}
    assert by_site == {site(11): 16 * MIB, site(12): 14 * MIB, site(13): 18 * MIB}
    assert pinned[pre.ptr] == 16 * MIB
    truth = {
        "sample": "pinned_pages.pickle",
        "scenario": "expandable range, base 8 MiB past a 20 MiB multiple: three kept blocks and "
                    "one allocated before history split 20 MiB pages with freed temporaries",
        "range_base": base,
        "stranded_bytes": sum(pinned.values()),
        "releasable_bytes": 20 * MIB,
        "attributed_bytes": sum(by_site.values()),
        "unattributed_bytes": pinned[pre.ptr],
        "sole_bytes_by_site": by_site,
        "pinning_block_by_site": {site(11): k1.ptr, site(12): k2.ptr, site(13): k3.ptr},
        "allocated_event_by_site": {site(11): e1, site(12): e2, site(13): e3},
        "unattributed_block": pre.ptr,
    }
    r.clock.advance(100, 500)
    return layout.modern_snapshot(r.alloc, r.ft), truth


GIB = 1 << 30

FINDING_SAMPLES = [("pinned_pages", "pinned_pages.pickle", pinned_pages)]
