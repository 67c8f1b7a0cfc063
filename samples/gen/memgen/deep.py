"""Deep shared stacks: many trace entries that all reference one long traceback.

The pathological case of issue #16: work done per allocation that walks the frames of its
stack costs frames x entries, although the file holds one distinct stack. Every `alloc`
entry of a site references the same frames list (pickle.dump writes it once, then
BINGET/LONG_BINGET at every later use); its frames are innermost first: `frames - 1`
library frames inside torch (never a site), then the user frame
`/home/user/proj/train.py:{10 + k}:site{k}` of site k, the site of its allocations.
Site 0 has `entries` allocations of `size` bytes, site 1 `extra` of `extra_size`.

The trace is one `segment_alloc` followed by the allocations, none freed; `segments` holds
that segment as the final state: one active block per allocation (its frames the entry's
list, as PyTorch shares it) and the free rest. tests/common/mod.rs
(`deep_stack_snapshot`) writes the same objects opcode by opcode for the tests.
"""

import pickle

from .stacks import PY, USER

SEGMENT_ALIGN = 2 << 20


def stack(frames, site):
    """The traceback of `site`: `frames` frame dicts, innermost first, the user frame last."""
    lib = [{"filename": "%s/site-packages/torch/_refs/mod%d.py" % (PY, i % 50), "line": i + 1,
            "name": "op_%d" % i} for i in range(frames - 1)]
    return lib + [{"filename": USER + "/train.py", "line": 10 + site, "name": "site%d" % site}]


def snapshot(entries, size, frames=1000, extra=0, extra_size=0):
    """The snapshot dict (see the module doc)."""
    main = stack(frames, 0)
    warm = stack(frames, 1)
    block = lambda n: (n + 511) // 512 * 512  # noqa: E731
    live = entries * size + extra * extra_size
    total = max(SEGMENT_ALIGN, (entries * block(size) + extra * block(extra_size) + SEGMENT_ALIGN - 1)
                // SEGMENT_ALIGN * SEGMENT_ALIGN)
    base = 0x7F0000000000
    trace = [{"action": "segment_alloc", "addr": base, "size": total, "stream": 0, "time_us": 1,
              "frames": main}]
    addr = base
    for i in range(entries + extra):
        n, fr = (size, main) if i < entries else (extra_size, warm)
        trace.append({"action": "alloc", "addr": addr, "size": n, "stream": 0, "time_us": 2 + i,
                      "frames": fr})
        addr += block(n)
    used = addr - base
    blocks = [{"address": e["addr"], "size": block(e["size"]), "requested_size": e["size"],
               "state": "active_allocated", "frames": e["frames"]} for e in trace[1:]]
    if total > used:
        blocks.append({"address": addr, "size": total - used, "requested_size": 0, "state": "inactive",
                       "frames": []})
    segment = {"device": 0, "address": base, "total_size": total, "allocated_size": used,
               "active_size": used, "requested_size": live, "stream": 0, "segment_type": "large",
               "is_expandable": False, "frames": main, "blocks": blocks}
    return {"segments": [segment], "device_traces": [trace]}


def write_deep(path, entries, size, frames=1000, extra=0, extra_size=0):
    """Writes the snapshot with protocol 4; returns the file size."""
    with open(path, "wb") as f:
        pickle.dump(snapshot(entries, size, frames, extra, extra_size), f, protocol=4)
        return f.tell()
