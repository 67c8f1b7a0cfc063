"""Many streams: trace entries spread over up to 65,535 distinct stream handles (issue #36).

The case where a stream handle looked up by a linear scan costs entries x streams. Stream k
(0-based) has the handle `STREAM_BASE + k * STREAM_STEP` (never 0, the default stream) and
one segment of its own at `BASE + k * seg`, opened by a `segment_alloc` entry in the first
round. Allocation i (0-based) goes to stream `k = i % streams`, as the `j = i // streams`-th
allocation of that stream: `512 * (1 + k % 8)` bytes at `seg_k + j * 4096`, stack `site{k % 4}`
(one user frame). Nothing is freed; `segments` holds each stream's segment as the final state:
one active block per allocation and the inactive rest. Entries are `streams` segment_allocs then
`entries` allocs, in time order.
"""

import pickle

from .stacks import USER

STREAM_BASE = 0x55D0_0000_0000
STREAM_STEP = 0x4A0
BASE = 0x7F00_0000_0000
SEGMENT_ALIGN = 2 << 20


def handle(k):
    """The raw stream handle of stream k."""
    return STREAM_BASE + k * STREAM_STEP


def snapshot(entries, streams):
    """The snapshot dict (see the module doc)."""
    per = (entries + streams - 1) // streams
    seg = max(SEGMENT_ALIGN, (per * 4096 + SEGMENT_ALIGN - 1) // SEGMENT_ALIGN * SEGMENT_ALIGN)
    stacks = [[{"filename": USER + "/train.py", "line": 10 + s, "name": "site%d" % s}] for s in range(4)]
    trace = []
    t = 1
    for k in range(min(streams, max(entries, 1))):
        trace.append({"action": "segment_alloc", "addr": BASE + k * seg, "size": seg, "stream": handle(k),
                      "time_us": t, "frames": stacks[k % 4]})
        t += 1
    blocks = {}
    for i in range(entries):
        k, j = i % streams, i // streams
        size = 512 * (1 + k % 8)
        addr = BASE + k * seg + j * 4096
        trace.append({"action": "alloc", "addr": addr, "size": size, "stream": handle(k), "time_us": t,
                      "frames": stacks[k % 4]})
        t += 1
        blocks.setdefault(k, []).append((addr, size))
    segments = []
    for k in sorted(blocks):
        bl = [{"address": a, "size": n, "requested_size": n, "state": "active_allocated",
               "frames": stacks[k % 4]} for a, n in blocks[k]]
        used = sum(n for _, n in blocks[k])
        # The gaps between the 4096-byte slots and the tail: inactive.
        end = BASE + k * seg
        out = []
        for b in bl:
            if b["address"] > end:
                out.append({"address": end, "size": b["address"] - end, "requested_size": 0,
                            "state": "inactive", "frames": []})
            out.append(b)
            end = b["address"] + b["size"]
        if end < BASE + (k + 1) * seg:
            out.append({"address": end, "size": BASE + (k + 1) * seg - end, "requested_size": 0,
                        "state": "inactive", "frames": []})
        segments.append({"device": 0, "address": BASE + k * seg, "total_size": seg, "allocated_size": used,
                         "active_size": used, "requested_size": used, "stream": handle(k),
                         "segment_type": "large", "is_expandable": False, "frames": stacks[k % 4],
                         "blocks": out})
    return {"segments": segments, "device_traces": [trace]}


def write_streams(path, entries, streams=65535):
    """Writes the snapshot with protocol 4; returns the file size."""
    if not 1 <= streams <= 65535:
        raise ValueError("streams must be 1..65535 (with the default stream, 65,536 ids)")
    with open(path, "wb") as f:
        pickle.dump(snapshot(entries, streams), f, protocol=4)
        return f.tell()
