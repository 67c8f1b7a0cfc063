"""Samples of what newer PyTorch (2.12-2.14) writes: pinned host memory, segments-only and
MemPool snapshots, compile-context annotations, and a snapshot dumped as JSON on demand.

Shapes (torch/cuda/memory.py; PRs cited in samples/README.md):

* `record_pinned_host_memory=True` (PR #182407, 2.14) adds `host_segments` and `host_traces`
  to the `_snapshot()` dict. The CachingHostAllocator "mimics" the device allocator's
  profiling (context gathering, a RingBuffer trace, getSegments()/getTraces()), so its
  records are written here as the device allocator's are: segment dicts with `blocks`,
  trace entries with `action`/`addr`/`size`/`stream`/`time_us`/`frames`. Their exact key
  set was not readable from the sources at hand: one sample leaves `device` out, the other
  writes `-1` (the CPU's index) and nests `host_traces` one level (a list per allocator), so
  a reader must take either. Pinned blocks are whole `cudaHostAlloc` allocations rounded up
  to a power of two, each its own segment; a freed block is cached and reused by size.
  `record_cuda=False` records host memory only: `device_traces` holds empty lists.
* `memory_snapshot(include_traces=False)` (PR #172672) returns `_snapshot(...)["segments"]`:
  a bare list of every segment, blocks with their frames, no trace.
* `MemPool.snapshot()` returns the same list for the pool's `mempool_id` only: every
  segment carries that `segment_pool_id`.
* `_record_memory_history(compile_context=True)` (PR #152707) puts the top of the
  "Torch-Compiled Region" stack in each entry's `compile_context` (`N/A` outside one).
* A JSON dump (`json.dump(torch.cuda.memory._snapshot(), f)`, as MemoryViz accepts): tuples
  become lists, the 2^64-1 "no line" stays a JSON integer.
"""

from . import layout
from .allocator import STATE
from .scenarios import FUN, LIN, MOD, Run, module_call
from .stacks import TORCH, USER, py

KIB = 1 << 10
MIB = 1 << 20

LOADER = USER + "/loader.py"
TRAIN = USER + "/train.py"
PIN = TORCH + "/utils/data/_utils/pin_memory.py"
INDUCTOR = "/tmp/torchinductor_user/k3/ck3vqyq2m4n6f7y5zqz4bqg6ybwmh2wzt4.py"


class HostAllocator:
    """CachingHostAllocator (a model): a request rounds up to a power of two (at least
    4 KiB), each block is one cudaHostAlloc and its own segment, a free block is cached and
    reused for the same size once the copies that used it have finished."""

    def __init__(self, clock, frames, base=0x7F8000000000):
        self.clock = clock
        self.ft = frames
        self.next_addr = base
        self.blocks = []  # dicts: address, size, requested, state, ctx, seg_ctx
        self.trace = []

    def _entry(self, action, addr, size, ctx, stream=0):
        self.trace.append({"action": action, "addr": addr, "size": size, "stream": stream,
                           "time_us": self.clock.stamp(), "ctx": ctx})

    def malloc(self, n, specs):
        self.clock.advance(5, 60)
        ctx = self.ft.stack(specs)
        size = 1 << max(12, (n - 1).bit_length())
        b = next((b for b in self.blocks if b["state"] == "inactive" and b["size"] == size), None)
        if b is None:
            b = {"address": self.next_addr, "size": size, "requested": 0, "state": "inactive",
                 "ctx": self.ft.empty, "seg_ctx": ctx}
            self.next_addr += size
            self.blocks.append(b)
            self._entry("segment_alloc", b["address"], size, ctx)
        b.update(state="active_allocated", requested=n, ctx=ctx)
        self._entry("alloc", b["address"], n, ctx)
        return b

    def free(self, b, specs, pending=False):
        """A free; with `pending`, a copy on a stream still uses the block (its event is
        recorded): the block waits as active_pending_free until `complete`."""
        self.clock.advance(2, 30)
        ctx = self.ft.stack(specs)
        self._entry("free_requested", b["address"], b["requested"], ctx)
        if pending:
            b["state"] = "active_pending_free"
            b["free_ctx"] = ctx
        else:
            self.complete(b, ctx)

    def complete(self, b, ctx=None):
        self.clock.advance(1, 20)
        self._entry("free_completed", b["address"], b["requested"],
                    ctx if ctx is not None else b.get("free_ctx", self.ft.empty))
        b.update(state="inactive", ctx=self.ft.empty)

    def empty_cache(self, specs):
        ctx = self.ft.stack(specs)
        for b in [b for b in self.blocks if b["state"] == "inactive"]:
            self.clock.advance(3, 40)
            self._entry("segment_free", b["address"], b["size"], ctx)
            self.blocks.remove(b)

    def segments(self, device=None):
        out = []
        for b in sorted(self.blocks, key=lambda b: b["address"]):
            active = b["state"] != "inactive"
            blk = {"address": b["address"], "size": b["size"],
                   "requested_size": b["requested"], "state": b["state"], "frames": b["ctx"]}
            s = {}
            if device is not None:
                s["device"] = device
            s["address"] = b["address"]
            s["total_size"] = b["size"]
            s["allocated_size"] = b["size"] if b["state"] == "active_allocated" else 0
            s["active_size"] = b["size"] if active else 0
            s["requested_size"] = b["requested"] if active else 0
            s["stream"] = 0
            s["blocks"] = [blk]
            s["frames"] = b["seg_ctx"]
            out.append(s)
        return out

    def traces(self):
        out = []
        for t in self.trace:
            d = {"action": t["action"], "addr": t["addr"], "size": t["size"], "stream": t["stream"],
                 "time_us": t["time_us"], "compile_context": layout.fresh("N/A"), "user_metadata": "",
                 "frames": t["ctx"]}
            out.append(d)
        return out

    def facts(self):
        """Totals the summary must report, from the model's own state and trace."""
        f = {"segments": len(self.blocks), "blocks": len(self.blocks),
             "reserved_bytes": sum(b["size"] for b in self.blocks),
             "allocated_bytes": sum(b["size"] for b in self.blocks if b["state"] == "active_allocated"),
             "requested_bytes": sum(b["requested"] for b in self.blocks if b["state"] == "active_allocated"),
             "pending_free_bytes": sum(b["size"] for b in self.blocks if b["state"] == "active_pending_free"),
             "inactive_bytes": sum(b["size"] for b in self.blocks if b["state"] == "inactive"),
             "largest_inactive_block_bytes": max([b["size"] for b in self.blocks if b["state"] == "inactive"] or [0]),
             "trace_entries": len(self.trace)}
        by = {}
        live = peak = 0
        for t in self.trace:
            by[t["action"]] = by.get(t["action"], 0) + 1
            if t["action"] == "alloc":
                live += t["size"]
            elif t["action"] == "free_completed":
                live -= t["size"]
            peak = max(peak, live)
        f["by_action"] = dict(sorted(by.items()))
        f["peak_live_bytes"] = peak  # the trace starts with the allocator (nothing before it)
        return f


def _loader_stack(line):
    return [py("pin_memory", PIN, 64), py("_pin_memory_loop", PIN, 39),
            py("__next__", LOADER, line), py("train", TRAIN, 40), py("<module>", TRAIN, 77)]


def _train(line):
    return [py("train", TRAIN, line), py("<module>", TRAIN, 77)]


def _pinned_loop(r, host, steps, batch_bytes, dev_copy=True):
    """A data loader with pin_memory=True feeding a small model (a staging buffer pinned for
    the whole run): each batch is pinned, copied
    to the device with non_blocking=True (the copy keeps the pinned block until it ends),
    and an index buffer is pinned and freed at once."""
    f32 = 4
    # a staging buffer pinned once and kept for the whole run
    host.malloc(3 * MIB + 5, [py("__init__", LOADER, 30)] + _train(38))
    weights = None
    if dev_copy:
        weights = r.malloc(1024 * 1024 * f32, [py("to", MOD, 1340)] + _train(31), gap=(30, 300))
    pending = None
    for step in range(steps):
        batch = host.malloc(batch_bytes, _loader_stack(88))
        index = host.malloc(3 * KIB + 100, _loader_stack(91))
        host.free(index, _loader_stack(93))
        if pending is not None:
            host.complete(pending)  # last step's copy has finished
        if dev_copy:
            x = r.malloc(batch_bytes, _train(44))
            h = r.malloc(batch_bytes // 2, [py("forward", LIN, 125)] + module_call() + _train(45))
            a = r.malloc(batch_bytes // 2, [py("relu", FUN, 1704)] + _train(45))
            r.free(h, _train(45))
            r.free(a, _train(46))
            r.free(x, _train(47))
        host.free(batch, _train(47), pending=True)
        pending = batch
    return weights, pending


def host_pinned(seed=41):
    """record_pinned_host_memory=True: the device dict plus host_segments and host_traces
    (a flat list, no `device` key on host segments)."""
    r = Run(seed)
    host = HostAllocator(r.clock, r.ft)
    _weights, _pending = _pinned_loop(r, host, steps=5, batch_bytes=6 * MIB + 123 * KIB)
    # a larger batch once (a new size class), then torch.cuda.host_empty_cache() of the rest
    big = host.malloc(12 * MIB, _loader_stack(88))
    host.free(big, _train(52))
    host.empty_cache(_train(53))
    snap = layout.modern_snapshot(r.alloc, r.ft)
    snap["host_segments"] = host.segments()
    snap["host_traces"] = host.traces()
    return snap, {"host": host.facts(), "devices": [0]}


def host_only(seed=42):
    """record_cuda=False, dumped with json.dump: no device memory recorded (`device_traces`
    holds one empty list, `segments` is empty), host segments with `device` -1, and
    `host_traces` as a list holding one list."""
    r = Run(seed)
    host = HostAllocator(r.clock, r.ft, base=0x7F9000000000)
    _pinned_loop(r, host, steps=3, batch_bytes=2 * MIB + 10 * KIB, dev_copy=False)
    snap = {"segments": [], "device_traces": [[]],
            "allocator_settings": layout.allocator_settings(r.alloc.config),
            "external_annotations": [],
            "host_segments": host.segments(device=-1),
            "host_traces": [host.traces()]}
    return snap, {"host": host.facts(), "devices": []}


POOL = (0, 1)


def _pool_run(seed):
    """A model kept in a MemPool (use_mem_pool, pool id (0, 1)) beside default-pool
    tensors; history in state mode (no trace; frames on the live blocks)."""
    r = Run(seed, record_context=STATE, max_entries=1)
    f32 = 4
    outside = [r.malloc(n, _train(line)) for n, line in ((5 * MIB, 20), (300 * KIB, 21))]
    r.dev(0).begin_allocate_to_pool(POOL, 0)
    pool_stack = lambda line: [py("__init__", USER + "/model.py", line)] + _train(25)
    kept = [r.malloc(n * f32, pool_stack(line)) for n, line in ((4 * MIB, 12), (512 * KIB, 13), (2 * KIB, 14))]
    tmp = r.malloc(3 * MIB, pool_stack(15))
    r.free(tmp, pool_stack(16))
    r.dev(0).end_allocate_to_pool()
    late = r.malloc(9 * MIB, _train(30))
    return r, outside + kept + [late]


def _pool_facts(segments):
    by = {}
    for s in segments:
        key = "%d_%d" % tuple(s["segment_pool_id"])
        d = by.setdefault(key, {"segments": 0, "reserved_bytes": 0, "allocated_bytes": 0})
        d["segments"] += 1
        d["reserved_bytes"] += s["total_size"]
        d["allocated_bytes"] += s["allocated_size"]
    return dict(sorted(by.items()))


def segments_only(seed=43):
    """torch.cuda.memory_snapshot(include_traces=False): every segment, no trace."""
    r, _keep = _pool_run(seed)
    segments = layout.modern_snapshot(r.alloc, r.ft)["segments"]
    return segments, {"pools": _pool_facts(segments)}


def mempool_only(seed=43):
    """MemPool.snapshot(): the segments of pool (0, 1) alone."""
    r, _keep = _pool_run(seed)
    segments = [s for s in layout.modern_snapshot(r.alloc, r.ft)["segments"]
                if tuple(s["segment_pool_id"]) == POOL]
    return segments, {"pools": _pool_facts(segments)}


def compile_context(seed=44):
    """_record_memory_history(compile_context=True): entries made inside two compiled regions
    carry "Torch-Compiled Region: 0/0" and "Torch-Compiled Region: 1/0" (inductor-generated
    frames under the user's call), the eager ones "N/A"."""
    r = Run(seed)
    dev = r.dev(0)
    f32 = 4
    w = r.malloc(2048 * 2048 * f32, [py("to", MOD, 1340)] + _train(31), gap=(30, 300))
    regions = []  # (first trace index, end index, context)

    def region(ctx, body):
        start = len(dev.trace.entries())
        body()
        regions.append((start, len(dev.trace.entries()), ctx))

    def inductor(line):
        return [py("call", INDUCTOR, line), py("__call__", TORCH + "/_inductor/output_code.py", 460),
                py("_fn", TORCH + "/_dynamo/eval_frame.py", 655), py("forward", USER + "/model.py", 40)] \
            + module_call() + _train(50)

    for step in range(3):
        x = r.malloc(256 * 2048 * f32, _train(48))
        outs = []

        def fwd():
            buf0 = r.malloc(256 * 2048 * f32, inductor(120))
            buf1 = r.malloc(256 * 8192 * f32, inductor(131))
            r.free(buf0, inductor(140))
            outs.append(r.malloc(256 * 2048 * f32, inductor(152)))
            r.free(buf1, inductor(153))

        region("Torch-Compiled Region: 0/0", fwd)
        y = outs[0]
        z = r.malloc(256 * 2048 * f32, [py("gelu", FUN, 1910)] + _train(51))  # eager, between

        def head():
            logits = r.malloc(256 * 1000 * f32, [py("call", INDUCTOR.replace("k3", "p7"), 88)] + _train(52))
            r.free(logits, _train(53))

        region("Torch-Compiled Region: 1/0", head)
        for t in (x, y, z):
            r.free(t, _train(55))
    entries = dev.trace.entries()
    facts = {}
    for start, end, ctx in regions:
        f = facts.setdefault(ctx, {"entries": 0, "allocs": 0, "alloc_bytes": 0})
        for te in entries[start:end]:
            te.extra = {"compile_context": ctx}
            f["entries"] += 1
            if te.action == "alloc":
                f["allocs"] += 1
                f["alloc_bytes"] += te.size
    assert w.allocated
    return layout.modern_snapshot(r.alloc, r.ft), {"compile_contexts": facts}


# name, writer ("py4" = pickle.dump protocol 4, "json" = json.dump), scenario
NEWER_SAMPLES = [
    ("host_pinned.pickle", "py4", host_pinned),
    ("host_only.json", "json", host_only),
    ("segments_only.pickle", "py4", segments_only),
    ("mempool_only.pickle", "py4", mempool_only),
    ("compile_context.pickle", "py4", compile_context),
]
