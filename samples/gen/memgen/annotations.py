"""`annotate` trace entries and entry metadata (PyTorch 2.14-2.15).

Shapes (torch/csrc/cuda/CUDACachingAllocator.cpp, torch/cuda/memory.py):

* `torch.cuda.memory._annotate_memory(ptr, md)` / `_annotate_tensor(t, md)` (PR #190575)
  record a trace entry `action: "annotate"` whose `addr` is the base of a live block, `size`
  0, its own `frames` and `time_us`, the text in `user_metadata`. It is not an allocation.
* `_set_memory_metadata(md)` (PR #165490) stamps every later entry's `user_metadata`; since
  PR #193432 a dict is written as compact JSON (`{"phase":"fwd","model":"a"}`).
* `internal_metadata` carries allocator tags (`mallocWithAddress`), only when non-empty.

One small training step on device 0 (one 20 MiB segment, blocks placed by hand: no
splitting logic is needed since addresses are written as the allocator would hand them out
in order). A weight block predates the trace (in `segments`, not allocated in the trace).
"""

import json

MIB = 1 << 20
BASE = 0x7F0000000000
SEG = 20 * MIB  # a large segment: PyTorch rounds them to 20 MiB (kLargeBuffer)
TRAIN = "/home/user/project/train.py"


def _frames(line, name="train_step"):
    return [{"filename": TRAIN, "line": line, "name": name},
            {"filename": TRAIN, "line": 90, "name": "<module>"}]


def _md(d):
    return json.dumps(d, separators=(",", ":"))


def annotated():
    trace = []
    t = [1000]
    live = {}  # addr -> dict(size, line, md, notes)
    allocs = []  # every allocation made in the trace or before it, in order
    unattached = [0]

    def entry(action, addr, size, line, md="", internal=None):
        t[0] += 10
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t[0],
             "frames": _frames(line), "user_metadata": md}
        if internal:
            e["internal_metadata"] = internal
        trace.append(e)

    def alloc(off, size, line, md="", internal=None):
        addr = BASE + off
        entry("alloc", addr, size, line, md, internal)
        a = {"addr": addr, "size": size, "line": line, "md": md, "internal": internal or "",
             "notes": [], "before_trace": False}
        live[addr] = a
        allocs.append(a)

    def free(off):
        addr = BASE + off
        a = live.pop(addr)
        entry("free_requested", addr, a["size"], a["line"], a["md"])
        entry("free_completed", addr, a["size"], a["line"], a["md"])

    def annotate(off, text, line=70):
        addr = BASE + off
        entry("annotate", addr, 0, line, text)
        if addr in live:
            live[addr]["notes"].append(text)
        else:
            unattached[0] += 1

    # Before the trace: the weight at BASE (1 MiB), in `segments` only.
    weight = {"addr": BASE, "size": MIB, "line": 12, "md": "", "internal": "", "notes": [],
              "before_trace": True}
    live[BASE] = weight
    allocs.append(weight)
    fwd = _md({"phase": "fwd", "model": "a"})
    bwd = _md({"phase": "bwd", "model": "a"})
    alloc(1 * MIB, 2 * MIB, 41, fwd)           # activation, saved for backward
    annotate(1 * MIB, "packed into autograd graph")
    annotate(1 * MIB, "checkpoint candidate")
    alloc(3 * MIB, MIB // 2, 42, fwd)          # temporary
    annotate(0, "frozen weight")               # on the block older than the trace
    alloc(4 * MIB, MIB, 43, "data loader")     # a plain-string metadata
    free(3 * MIB)
    alloc(3 * MIB, MIB // 4, 44, bwd)          # same address, a new allocation
    annotate(3 * MIB, "grad buffer")
    alloc(5 * MIB, MIB, 45, bwd, "mallocWithAddress")
    annotate(6 * MIB, "nobody home")           # a dead address: unattached
    alloc(6 * MIB, MIB // 8, 46, _md({"model": "a"}))  # JSON without "phase"
    peak_live = {a["addr"]: a for a in live.values()}
    peak_bytes = sum(a["size"] for a in peak_live.values())
    free(6 * MIB)
    # End: the peak was right before that free (every later change frees).

    blocks = []
    used = sorted(live.values(), key=lambda a: a["addr"])
    cursor = BASE
    for a in used:
        if a["addr"] > cursor:
            blocks.append({"address": cursor, "size": a["addr"] - cursor, "requested_size": 0,
                           "state": "inactive", "frames": []})
        blocks.append({"address": a["addr"], "size": a["size"], "requested_size": a["size"],
                       "state": "active_allocated", "frames": _frames(a["line"])})
        cursor = a["addr"] + a["size"]
    if cursor < BASE + SEG:
        blocks.append({"address": cursor, "size": BASE + SEG - cursor, "requested_size": 0,
                       "state": "inactive", "frames": []})
    active = sum(a["size"] for a in used)
    seg = {"device": 0, "address": BASE, "total_size": SEG, "allocated_size": active,
           "active_size": active, "requested_size": active, "stream": 0,
           "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
           "frames": [], "blocks": blocks}
    obj = {"segments": [seg], "device_traces": [trace],
           "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""}}

    site = lambda a: f"train.py:{a['line']}:train_step"  # noqa: E731
    per_site = {}
    for a in allocs:
        for text in dict.fromkeys(a["notes"]):
            s = per_site.setdefault(site(a), {})
            c = s.setdefault(text, {"count": 0, "bytes": 0})
            c["count"] += 1
            c["bytes"] += a["size"]
    phase = {}
    for a in peak_live.values():
        md = a["md"]
        if not md:
            key = "(none)"
        else:
            try:
                v = json.loads(md)
                key = v["phase"] if isinstance(v, dict) and "phase" in v else "(no phase)"
            except ValueError:
                key = "(no phase)"
        phase[key] = phase.get(key, 0) + a["size"]
    facts = {
        "allocations": [{"addr": a["addr"], "size": a["size"], "before_trace": a["before_trace"],
                         "user_metadata": a["md"], "internal_metadata": a["internal"],
                         "annotations": a["notes"]} for a in allocs],
        "per_site_annotations": per_site,
        "unattached": unattached[0],
        "peak_live_bytes": peak_bytes,
        "moment": "peak",
        "metadata_phase_live_bytes_at_peak": dict(sorted(phase.items())),
    }
    return obj, facts


def annotated_graph():
    """Six profiler steps; each makes a 1 MiB tensor at train.py:9 that the code annotates as
    packed into the autograd graph and keeps (a loss accumulated with its graph, made outside
    any module's forward), and a 512 KiB temporary at train.py:10 that it frees. The first step
    also annotates a 256 KiB scratch block *before* allocating it at that address: the
    annotation finds nothing live there and marks nothing. `leaks` must call the kept tensors a
    retained graph on the annotation's evidence and list it with its tensors and bytes."""
    trace = []
    ann = []
    t = [1000]
    steps = 6
    kept = MIB
    temp = MIB // 2

    def entry(action, addr, size, line, md=""):
        t[0] += 10
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t[0],
             "frames": _frames(line)}
        if md:
            e["user_metadata"] = md
        trace.append(e)

    entry("segment_alloc", BASE, SEG, 9)
    kept_addrs = []
    scratch = BASE + steps * kept + temp
    for step in range(steps):
        t[0] += 10
        ann.append({"name": f"ProfilerStep#{step}", "stage": "START", "device": 0,
                    "time_us": t[0]})
        addr = BASE + step * kept
        entry("alloc", addr, kept, 9)
        entry("annotate", addr, 0, 9, "packed into autograd graph")
        kept_addrs.append(addr)
        tmp = BASE + steps * kept
        entry("alloc", tmp, temp, 10)
        if step == 0:
            entry("annotate", scratch, 0, 11, "scratch, not yet made")
            entry("alloc", scratch, MIB // 4, 11)
            entry("free_requested", scratch, MIB // 4, 11)
            entry("free_completed", scratch, MIB // 4, 11)
        entry("free_requested", tmp, temp, 10)
        entry("free_completed", tmp, temp, 10)
        t[0] += 10
        ann.append({"name": f"ProfilerStep#{step}", "stage": "END", "device": 0,
                    "time_us": t[0]})
    used = steps * kept
    blocks = [{"address": a, "size": kept, "requested_size": kept, "state": "active_allocated",
               "frames": _frames(9)} for a in kept_addrs]
    blocks.append({"address": BASE + used, "size": SEG - used, "requested_size": 0,
                   "state": "inactive", "frames": []})
    seg = {"device": 0, "address": BASE, "total_size": SEG, "allocated_size": used,
           "active_size": used, "requested_size": used, "stream": 0,
           "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
           "frames": [], "blocks": blocks}
    obj = {"segments": [seg], "device_traces": [trace],
           "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""},
           "external_annotations": ann}
    facts = {
        "finding": {"kind": "retained_graph", "graph_evidence": "autograd_annotation",
                    "site": "train.py:9:train_step", "bytes_per_step": kept,
                    "live_bytes_at_end": steps * kept, "tensors_at_end": steps},
        "annotations": [{"text": "packed into autograd graph", "count": steps,
                         "bytes": steps * kept}],
        "unattached": 1,
    }
    return obj, facts


ANNOTATION_SAMPLES = [
    ("annotated.pickle", "py4", annotated),
    ("annotated_graph.pickle", "py4", annotated_graph),
]
