"""A toy stand-in for ``torch``, used only by ``selftest.py`` (dry run on CPU).

It is NOT PyTorch.  It models the *native* CUDA caching allocator rules the capture
scripts rely on (round_size with optional ``roundup_power2_divisions``, small/large pools,
get_allocation_size, best fit on the same stream and pool, split thresholds,
``max_split_size_mb`` (oversize blocks are not split, small requests do not take them,
oversize cached blocks are released first on a miss), a crude
``garbage_collection_threshold`` (unsplit cached segments are released when reserved memory
passes the threshold of the cap), merge on free, the per-process fraction cap with a flush
of unsplit cached segments before ``oom``, record_stream pending frees processed on the next
malloc after a sync, private pools for ``MemPool``/CUDA graphs, a ring buffer of
``max_entries``) and emits the snapshot dict format, with just enough tensor API to run
every capture script end to end.  It also counts ``memory_stats()`` (``num_alloc_retries``,
``num_ooms``, segment counts, reserved/allocated peaks).

Autograd exists only for ``torch.nn`` modules and ``torch.nn.functional.mse_loss``: raw
ops (``torch.mm`` ...) save nothing for backward, so ``retained_graph`` cannot leak here.
``backward()`` of an nn graph allocates gradients and temporaries as on PyTorch's autograd
thread: no Python frames.  With ``stacks="all"`` every recorded stack gets a few synthetic
C++ frames (``filename "??"``, line 0).  It has no expandable segments, so
``frag_oom_expandable`` (and the expandable run of ``alloc_settings``) are expected to
report story-failed.

Feature switches (for the self-test of version probing; comma-separated in
``MEMLENS_FAKE_TORCH_HIDE``): ``host`` (no ``record_pinned_host_memory``), ``mempool`` (no
``torch.cuda.MemPool``/``use_mem_pool``), ``graph`` (no CUDA graphs), ``include_traces``
(``memory_snapshot`` without ``include_traces``), ``oom_observer`` (no
``torch._C._cuda_attach_out_of_memory_observer``; otherwise observers attached there are
called as ``observer(device, alloc, device_allocated, device_free)`` after the ``oom`` trace
entry and before ``OutOfMemoryError`` is raised, as PyTorch does).  ``MEMLENS_FAKE_TORCH_JSON_DUMP=1``
makes ``_dump_snapshot`` write JSON for a ``.json`` filename -- a hypothetical behaviour,
only there to exercise the JSON branch of ``recording_modes.py``.
"""
import builtins, collections, contextlib, json, math, os, pickle, sys, time, itertools

__version__ = "0.0-fake"
MiB = 1 << 20
_THIS = os.path.dirname(os.path.abspath(__file__))
_HIDE = {s.strip() for s in os.environ.get("MEMLENS_FAKE_TORCH_HIDE", "").split(",") if s.strip()}
_JSON_DUMP = os.environ.get("MEMLENS_FAKE_TORCH_JSON_DUMP") == "1"


class version:
    cuda = "12.fake"


class OutOfMemoryError(RuntimeError):
    pass


class _DType:
    def __init__(self, name, size):
        self.name, self.itemsize = name, size


uint8 = _DType("uint8", 1)
float32 = _DType("float32", 4)
int64 = _DType("int64", 8)
preserve_format = object()


class device:
    def __init__(self, kind):
        self.type = str(kind).split(":")[0]

    def __repr__(self):
        return "device(type=%r)" % self.type


def _parse_conf():
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF") or ""
    cfg = {"conf": conf, "max_split": None, "roundup": 0, "gc": 0.0, "expandable_requested": False}
    for part in conf.split(","):
        if ":" not in part:
            continue
        k, v = (s.strip() for s in part.split(":", 1))
        if k == "max_split_size_mb":
            cfg["max_split"] = int(v) * MiB
        elif k == "roundup_power2_divisions":
            cfg["roundup"] = int(v)
        elif k == "garbage_collection_threshold":
            cfg["gc"] = float(v)
        elif k == "expandable_segments":
            cfg["expandable_requested"] = v == "True"
    return cfg


_CFG = _parse_conf()
_rec = {"stacks": "all", "host": False, "cuda": True}
_tls = {"backward": False}
_CPP_INNER = [{"name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)",
               "filename": "??", "line": 0},
              {"name": "at::empty_strided(...)", "filename": "??", "line": 0}]
_CPP_MAIN = [{"name": "_PyEval_EvalFrameDefault", "filename": "??", "line": 0},
             {"name": "_start", "filename": "", "line": 0}]
_CPP_BACKWARD = [{"name": "torch::autograd::Engine::evaluate_function(...)", "filename": "??", "line": 0},
                 {"name": "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
                  "filename": "??", "line": 0},
                 {"name": "start_thread", "filename": "", "line": 0}]


def _frames():
    py = []
    if not _tls["backward"]:
        f = sys._getframe(1)
        while f is not None:
            fn = f.f_code.co_filename
            if not os.path.abspath(fn).startswith(_THIS):
                py.append({"name": f.f_code.co_name, "filename": fn, "line": f.f_lineno})
            f = f.f_back
    if _rec["stacks"] != "all":
        return py
    return list(_CPP_INNER) + py + (list(_CPP_BACKWARD) if _tls["backward"] else list(_CPP_MAIN))


class _Stream:
    _ids = itertools.count(0x55550000, 0x1000)

    def __init__(self, handle=None):
        self.cuda_stream = next(_Stream._ids) if handle is None else handle

    def wait_stream(self, other):
        pass

    def query(self):
        return False

    def synchronize(self):
        pass


_default_stream = _Stream(0)
_cur = [_default_stream]
_pool = [(0, 0)]          # pool that new allocations of this thread go to


class Block:
    def __init__(self, seg, size):
        self.seg, self.size, self.requested, self.state, self.frames = seg, size, 0, "inactive", []
        self.stream_uses = set()


class Segment:
    def __init__(self, addr, size, stream, small, pool):
        self.addr, self.size, self.stream, self.small, self.pool = addr, size, stream, small, pool
        self.blocks = [Block(self, size)]
        self.frames = []


def _round_size(n):
    if n < 512:
        return 512
    d = _CFG["roundup"]
    if d > 1 and n > 512 * d:
        p = 1 << (n - 1).bit_length()          # next power of two >= n
        lo = p >> 1
        if n == p:
            return n
        step = lo // d
        return lo + -(-(n - lo) // step) * step if step else p
    return -(-n // 512) * 512


class Allocator:
    def __init__(self):
        self.segs, self.rec, self.cap = [], False, None
        self.trace = collections.deque()
        self.next_addr = 1 << 40
        self.total = 150 * (1 << 30)
        self.pending = []
        self.peak = 0
        self.stats = collections.Counter()

    def t(self, action, addr, size, stream, frames=None, **kw):
        if self.rec:
            e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": int(time.time() * 1e6)}
            if frames is not None:
                e["frames"] = frames
            e.update(kw)
            self.trace.append(e)

    def reserved(self):
        return builtins.sum(s.size for s in self.segs)

    def allocated(self):
        return builtins.sum(b.size for s in self.segs for b in s.blocks if b.state == "active_allocated")

    @staticmethod
    def addr(b):
        a = b.seg.addr
        for x in b.seg.blocks:
            if x is b:
                return a
            a += x.size

    def process_events(self, frames):
        if _synced[0]:
            for b in self.pending:
                b.stream_uses.clear()
                self.free_block(b, frames)
            self.pending = []

    def release_segment(self, s, frames):
        self.t("segment_free", s.addr, s.size, s.stream, frames)
        self.segs.remove(s)
        self.stats["segment_freed"] += 1
        self.stats["num_device_free"] += 1

    def unsplit_cached(self, pool=None):
        return [s for s in self.segs if len(s.blocks) == 1 and s.blocks[0].state == "inactive"
                and (pool is None or s.pool == pool)]

    def get_free_block(self, size, small, stream, pool):
        ms = _CFG["max_split"]
        cands = []
        for s in self.segs:
            if s.small != small or s.stream != stream or s.pool != pool:
                continue
            for b in s.blocks:
                if b.state != "inactive" or b.size < size:
                    continue
                if ms is not None and not small:
                    if size < ms and b.size >= ms:
                        continue                       # small requests never take oversize blocks
                    if size >= ms and b.size >= size + 20 * MiB:
                        continue                       # oversize requests take a near fit only
                cands.append(b)
        return min(cands, key=lambda b: (b.size, self.addr(b))) if cands else None

    def fits_cap(self, alloc):
        return self.cap is None or self.reserved() + alloc <= self.cap

    def malloc(self, n):
        frames = _frames() if self.rec else []
        self.process_events(frames)
        stream = _cur[0].cuda_stream
        pool = _pool[0]
        size = _round_size(n)
        small = size <= MiB
        b = self.get_free_block(size, small, stream, pool)
        if b is None:
            alloc = 2 * MiB if small else (20 * MiB if size < 10 * MiB else -(-size // (2 * MiB)) * 2 * MiB)
            if (self.cap is not None and _CFG["gc"] > 0 and self.reserved() > _CFG["gc"] * self.cap):
                for s in self.unsplit_cached((0, 0)):           # crude garbage collection
                    if self.reserved() <= _CFG["gc"] * self.cap:
                        break
                    self.release_segment(s, frames)
            if not self.fits_cap(alloc) and _CFG["max_split"] is not None:
                ms = _CFG["max_split"]
                over = sorted((s for s in self.unsplit_cached(pool) if s.size >= ms), key=lambda s: -s.size)
                released = 0
                for s in over:                                   # oversize blocks first, largest first
                    if released >= max(size, ms) or self.fits_cap(alloc):
                        break
                    released += s.size
                    self.release_segment(s, frames)
            if not self.fits_cap(alloc):
                for s in self.unsplit_cached():
                    self.release_segment(s, frames)
                self.stats["num_alloc_retries"] += 1
                if not self.fits_cap(alloc):
                    self.stats["num_ooms"] += 1
                    self.t("oom", 0, size, stream, frames, device_free=self.total - self.reserved())
                    for obs in list(_oom_observers):      # as PyTorch: after the oom entry, before raising
                        obs(0, alloc, self.cap if self.cap is not None else self.total, self.total - self.reserved())
                    raise OutOfMemoryError("Out of memory. Tried to allocate %.2f MiB. (fake)" % (alloc / MiB))
            s = Segment(self.next_addr, alloc, stream, small, pool)
            self.next_addr += alloc + 64 * MiB
            s.frames = frames
            self.segs.append(s)
            self.segs.sort(key=lambda s: s.addr)
            self.stats["segment_allocated"] += 1
            self.stats["num_device_alloc"] += 1
            self.stats["segment_peak"] = max(self.stats["segment_peak"], len(self.segs))
            self.stats["reserved_peak"] = max(self.stats["reserved_peak"], self.reserved())
            self.t("segment_alloc", s.addr, alloc, stream, frames)
            b = s.blocks[0]
        rem = b.size - size
        ms = _CFG["max_split"]
        if (small and rem >= 512) or (not small and rem > MiB and (ms is None or size < ms)):
            nb = Block(b.seg, rem)
            i = b.seg.blocks.index(b)
            b.seg.blocks.insert(i + 1, nb)
            b.size = size
        b.state, b.requested, b.frames = "active_allocated", n, frames
        self.t("alloc", self.addr(b), n, stream, frames)
        self.peak = max(self.peak, self.allocated())
        return b

    def free(self, b):
        frames = _frames() if self.rec else []
        self.t("free_requested", self.addr(b), b.requested, b.seg.stream, frames)
        if b.stream_uses:
            b.state = "active_pending_free"
            self.pending.append(b)
            _synced[0] = False
        else:
            self.free_block(b, frames)

    def free_block(self, b, frames):
        self.t("free_completed", self.addr(b), b.requested, b.seg.stream, frames)
        b.state, b.frames = "inactive", []
        bl = b.seg.blocks
        i = bl.index(b)
        if i + 1 < len(bl) and bl[i + 1].state == "inactive":
            b.size += bl.pop(i + 1).size
        if i > 0 and bl[i - 1].state == "inactive":
            bl[i - 1].size += bl.pop(i).size

    def segments(self, pool=None):
        segs = []
        for s in self.segs:
            if pool is not None and s.pool != pool:
                continue
            blocks, a = [], s.addr
            for b in s.blocks:
                blocks.append({"address": a, "size": b.size, "requested_size": b.requested, "state": b.state,
                               "frames": b.frames})
                a += b.size
            act = [b for b in s.blocks if b.state != "inactive"]
            segs.append({"device": 0, "address": s.addr, "total_size": s.size,
                         "allocated_size": builtins.sum(b.size for b in s.blocks if b.state == "active_allocated"),
                         "active_size": builtins.sum(b.size for b in act), "requested_size": builtins.sum(b.requested for b in act),
                         "stream": s.stream, "segment_type": "small" if s.small else "large",
                         "segment_pool_id": s.pool, "is_expandable": False, "frames": s.frames, "blocks": blocks})
        return segs

    def snapshot(self, include_traces=True, pool=None):
        traces = [list(self.trace) if include_traces else []]
        segs = self.segments(pool)
        self.t("snapshot", 0, builtins.sum(s["active_size"] for s in segs), 0)
        rp2 = {str(1 << i): _CFG["roundup"] for i in range(16)}
        out = {"segments": segs, "device_traces": traces,
               "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": _CFG["conf"],
                                      "max_split_size": _CFG["max_split"] if _CFG["max_split"] is not None else -1,
                                      "expandable_segments": False,       # not modelled
                                      "garbage_collection_threshold": _CFG["gc"],
                                      "roundup_power2_divisions": rp2}}
        if _rec["host"]:
            out["host_segments"] = _H.segments()
            out["host_traces"] = list(_H.trace)
        return out

    def memory_stats(self):
        st = self.stats
        res = self.reserved()
        alloc = self.allocated()
        return {
            "allocated_bytes.all.current": alloc, "allocated_bytes.all.peak": self.peak,
            "reserved_bytes.all.current": res, "reserved_bytes.all.peak": max(st["reserved_peak"], res),
            "segment.all.current": len(self.segs), "segment.all.peak": st["segment_peak"],
            "segment.all.allocated": st["segment_allocated"], "segment.all.freed": st["segment_freed"],
            "num_alloc_retries": st["num_alloc_retries"], "num_ooms": st["num_ooms"],
            "num_device_alloc": st["num_device_alloc"], "num_device_free": st["num_device_free"],
            "num_sync_all_streams": 0,
            "max_split_size": _CFG["max_split"] if _CFG["max_split"] is not None else -1,
        }


class HostAllocator:
    """Pinned host memory: power-of-two blocks, cached on free (a toy)."""

    def __init__(self):
        self.blocks, self.trace, self.next_addr = [], [], 0x7F0000000000

    def malloc(self, n):
        size = 1 << max(9, (n - 1).bit_length())
        frames = _frames() if _rec["host"] else None
        for b in self.blocks:
            if b["state"] == "inactive" and b["size"] == size:
                break
        else:
            b = {"address": self.next_addr, "size": size, "requested_size": 0, "state": "inactive", "frames": []}
            self.next_addr += size
            self.blocks.append(b)
            if _rec["host"]:
                self.trace.append({"action": "segment_alloc", "addr": b["address"], "size": size, "frames": frames})
        b.update(state="active_allocated", requested_size=n, frames=frames or [])
        if _rec["host"]:
            self.trace.append({"action": "alloc", "addr": b["address"], "size": n, "frames": frames})
        return b

    def free(self, b):
        if _rec["host"]:
            fr = _frames()
            self.trace.append({"action": "free_requested", "addr": b["address"], "size": b["requested_size"], "frames": fr})
            self.trace.append({"action": "free_completed", "addr": b["address"], "size": b["requested_size"], "frames": fr})
        b.update(state="inactive", frames=[])

    def segments(self):
        return [{"address": b["address"], "total_size": b["size"],
                 "allocated_size": b["size"] if b["state"] != "inactive" else 0,
                 "blocks": [dict(b)]} for b in self.blocks]


_A = Allocator()
_H = HostAllocator()
_synced = [True]


class _Storage:
    def __init__(self, t):
        self._t = t

    def data_ptr(self):
        return self._t.data_ptr()

    def nbytes(self):
        return self._t.numel() * self._t.element_size()


class Tensor:
    def __init__(self, shape, dtype=float32, block=None, base=None, requires_grad=False, dev="cuda", host=None):
        self.shape, self.dtype, self._block, self._base = tuple(shape), dtype, block, base
        self.requires_grad, self.grad, self._node, self._host = requires_grad, None, None, host
        self.device = device(dev)
        self.is_cuda = self.device.type == "cuda"

    @classmethod
    def new(cls, shape, dtype=float32, requires_grad=False):
        n = max(1, math.prod(shape)) * dtype.itemsize
        return cls(shape, dtype, _A.malloc(n), None, requires_grad)

    def __del__(self):
        try:
            if self._base is None:
                if self._block is not None:
                    _A.free(self._block)
                elif self._host is not None:
                    _H.free(self._host)
        except Exception:
            pass

    def _view(self, shape):
        return Tensor(shape, self.dtype, self._block, self._base or self, dev=self.device.type)

    def numel(self):
        return max(1, math.prod(self.shape)) if self.shape else 1

    def element_size(self):
        return self.dtype.itemsize

    def untyped_storage(self):
        return _Storage(self._base or self)

    def data_ptr(self):
        if self._block is not None:
            return Allocator.addr(self._block)
        if self._host is not None:
            return self._host["address"]
        return id(self)

    def split(self, n, dim=1):
        k = self.shape[dim] // n
        return tuple(self._view(self.shape[:dim] + (n,) + self.shape[dim + 1:]) for _ in range(k))

    def unsqueeze(self, d):
        s = list(self.shape); s.insert(d, 1); return self._view(s)

    def squeeze(self, d):
        s = list(self.shape); s.pop(d); return self._view(s)

    def transpose(self, a, b):
        s = list(self.shape); s[a], s[b] = s[b], s[a]; return self._view(s)

    def __getitem__(self, idx):
        return self._view(self.shape[1:])

    def to(self, dev=None, non_blocking=False, **kw):
        if str(dev).startswith("cuda") and not self.is_cuda:
            return Tensor.new(self.shape, self.dtype)
        return self

    def cuda(self, non_blocking=False):
        return self.to("cuda", non_blocking=non_blocking)

    def copy_(self, o, non_blocking=False): return self
    def fill_(self, v): return self
    def zero_(self): return self
    def sub_(self, o, alpha=1): return self
    def add_(self, o, alpha=1): return self
    def mul_(self, o): return self
    def item(self): return 0.5
    def record_stream(self, s):
        if s.cuda_stream != self._block.seg.stream:
            self._block.stream_uses.add(s.cuda_stream)

    def backward(self):
        if self._node is not None:
            _run_backward(self)

    def __iadd__(self, o): return self
    def __mul__(self, o): return Tensor.new(self.shape, self.dtype)
    __add__ = __rmul__ = __radd__ = __mul__


class _Node:
    def __init__(self, inputs):
        self.inputs = [t for t in inputs if t is not None]


def _track(out, inputs):
    if _grad_enabled[0] and builtins.any(t is not None and t.requires_grad for t in inputs):
        out.requires_grad = True
        out._node = _Node(inputs)
    return out


def _run_backward(root):
    order, seen = [], set()

    def visit(t):
        if id(t) in seen or t._node is None:
            return
        seen.add(id(t))
        for i in t._node.inputs:
            visit(i)
        order.append(t)

    visit(root)
    grads = {id(root): Tensor.new(root.shape, root.dtype)}   # the seed: allocated on the caller's thread
    _tls["backward"] = True
    try:
        for t in reversed(order):
            g = grads.pop(id(t), None)
            for inp in t._node.inputs:
                if not inp.requires_grad:
                    continue
                gi = Tensor.new(inp.shape, inp.dtype)
                if inp._node is None:              # leaf: AccumulateGrad steals the buffer
                    if inp.grad is None:
                        inp.grad = gi
                elif id(inp) not in grads:
                    grads[id(inp)] = gi
                del gi
            del g
            t._node = None                         # saved tensors released after backward
    finally:
        _tls["backward"] = False


def _shape(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def empty(*size, dtype=float32, device=None, requires_grad=False, pin_memory=False):
    shape = _shape(size)
    if device is None or not str(device).startswith("cuda"):
        host = _H.malloc(max(1, math.prod(shape)) * dtype.itemsize) if pin_memory else None
        return Tensor(shape, dtype, None, None, requires_grad, dev="cpu", host=host)
    return Tensor.new(shape, dtype, requires_grad)


zeros = randn = ones = empty


def zeros_like(t, memory_format=None, dtype=None):
    return empty(t.shape, dtype=dtype or t.dtype, device=t.device.type)


def tensor(v, dtype=float32, device=None):
    return empty((), dtype=dtype, device=device)


def randint(lo, hi, size, device=None):
    return Tensor.new(size, int64)


def mm(a, b, out=None):
    return out if out is not None else Tensor.new((a.shape[0], b.shape[1]), a.dtype)


def bmm(a, b):
    return Tensor.new((a.shape[0], a.shape[1], b.shape[2]), a.dtype)


def relu(x):
    return _track(Tensor.new(x.shape, x.dtype), [x])


square = relu
def softmax(x, dim=1): return Tensor.new(x.shape, x.dtype)
def sub(a, b): return Tensor.new(a.shape, a.dtype)
add = mul = sub
def mean(x): return Tensor.new((), x.dtype)
def sum(x): return Tensor.new((), x.dtype)
def index_select(w, d, idx): return Tensor.new((idx.shape[0], w.shape[1]), w.dtype)
def argmax(x, dim=1): return Tensor.new((x.shape[0],), int64)
def manual_seed(s): pass


_grad_enabled = [True]


@contextlib.contextmanager
def no_grad():
    old = _grad_enabled[0]
    _grad_enabled[0] = False
    try:
        yield
    finally:
        _grad_enabled[0] = old


inference_mode = no_grad


class _NN:
    class Module:
        def parameters(self):
            for m in getattr(self, "_mods", []):
                yield from m.parameters()
            for p in getattr(self, "_params", []):
                yield p

        def __call__(self, *a):
            return self.forward(*a)

    class Linear(Module):
        def __init__(self, fan_in, fan_out, bias=True, device=None, dtype=None):
            dev = device or "cpu"
            self.weight = empty(fan_out, fan_in, device=dev, requires_grad=True)
            self.bias = empty(fan_out, device=dev, requires_grad=True) if bias else None
            self._params = [p for p in (self.weight, self.bias) if p is not None]

        def forward(self, x):
            return _track(Tensor.new((x.shape[0], self.weight.shape[0]), x.dtype), [x, self.weight, self.bias])

    class ReLU(Module):
        def forward(self, x):
            return relu(x)

    class Sequential(Module):
        def __init__(self, *mods):
            self._mods = list(mods)

        def forward(self, x):
            for m in self._mods:
                x = m(x)
            return x

    class functional:
        @staticmethod
        def mse_loss(a, b):
            return _track(Tensor.new((), a.dtype), [a, b])


nn = _NN


class _Adam:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None,
                 capturable=False, fused=None):
        self.param_groups = [{"params": list(params), "lr": lr}]
        self.defaults = {"lr": lr, "foreach": foreach, "capturable": capturable, "fused": fused}
        self.state = {}

    def zero_grad(self, set_to_none=True):
        for p in self.param_groups[0]["params"]:
            p.grad = None

    def step(self):
        with no_grad():
            ps = [p for p in self.param_groups[0]["params"] if p.grad is not None]
            for p in ps:
                st = self.state.setdefault(p, {})
                if not st:
                    st["step"] = tensor(0.0)
                    st["exp_avg"] = zeros_like(p)
                    st["exp_avg_sq"] = zeros_like(p)
            tmp = [Tensor.new(p.shape, p.dtype) for p in ps]     # foreach temporaries (denominators)
            del tmp


class optim:
    Adam = _Adam


class _Props:
    total_memory = _A.total


def _rmh(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None, clear_history=False,
         compile_context=False, global_record_annotations=False, skip_actions=None,
         record_pinned_host_memory=False, record_cuda=True):
    _A.rec = enabled is not None
    _rec["stacks"] = stacks
    _rec["host"] = bool(record_pinned_host_memory) and enabled is not None
    _A.trace = collections.deque(_A.trace if _A.rec else (), maxlen=max_entries if max_entries < sys.maxsize else None)
    if not _A.rec:
        _H.trace = []


def _rmh_old(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
             clear_history=False, compile_context=False, global_record_annotations=False, skip_actions=None):
    _rmh(enabled, context, stacks, max_entries, device)


def _snapshot_impl(device=None):
    return _A.snapshot()


def _dump_snapshot(filename="dump_snapshot.pickle"):
    s = _A.snapshot()
    with open(filename, "w" if (_JSON_DUMP and filename.endswith(".json")) else "wb") as f:
        if _JSON_DUMP and filename.endswith(".json"):
            json.dump(s, f)
        else:
            pickle.dump(s, f)


_oom_observers = []


class _C:
    """``torch._C``: only the OOM observer hook (observers cannot be detached, as in PyTorch)."""
    if "oom_observer" not in _HIDE:
        @staticmethod
        def _cuda_attach_out_of_memory_observer(observer):
            _oom_observers.append(observer)


class _Memory:
    _record_memory_history = staticmethod(_rmh_old if "host" in _HIDE else _rmh)
    _snapshot = staticmethod(_snapshot_impl)
    _dump_snapshot = staticmethod(_dump_snapshot)


def _memory_snapshot(mempool_id=None, include_traces=True):
    return _A.snapshot(include_traces=include_traces, pool=tuple(mempool_id) if mempool_id else None)["segments"]


def _memory_snapshot_old(mempool_id=None):
    return _A.snapshot(pool=tuple(mempool_id) if mempool_id else None)["segments"]


_pool_ids = itertools.count(1)


class _MemPool:
    def __init__(self, allocator=None, use_on_oom=False, no_split=False):
        self.id = (0, next(_pool_ids))

    def snapshot(self, include_traces=True):
        return _memory_snapshot(self.id, include_traces)


@contextlib.contextmanager
def _use_mem_pool(pool, device=None):
    old = _pool[0]
    _pool[0] = pool.id
    try:
        yield
    finally:
        _pool[0] = old


class _CUDAGraph:
    def __init__(self):
        self.pool_id = None

    def pool(self):
        return self.pool_id

    def replay(self):
        pass


@contextlib.contextmanager
def _graph(g, pool=None, stream=None):
    g.pool_id = (next(_pool_ids), 0)
    old = _pool[0]
    _pool[0] = g.pool_id
    _capturing[0] = True
    try:
        yield
    finally:
        _pool[0] = old
        _capturing[0] = False


_capturing = [False]


class cuda:
    OutOfMemoryError = OutOfMemoryError
    memory = _Memory
    Stream = _Stream
    memory_snapshot = staticmethod(_memory_snapshot_old if "include_traces" in _HIDE else _memory_snapshot)
    if "mempool" not in _HIDE:
        MemPool = _MemPool
        use_mem_pool = staticmethod(_use_mem_pool)
    if "graph" not in _HIDE:
        CUDAGraph = _CUDAGraph
        graph = staticmethod(_graph)

    @staticmethod
    def is_available(): return True
    @staticmethod
    def set_device(d): pass
    @staticmethod
    def get_device_properties(d): return _Props()
    @staticmethod
    def mem_get_info(d=0): return (_A.total - _A.reserved(), _A.total)
    @staticmethod
    def get_allocator_backend(): return "native"
    @staticmethod
    def get_device_name(d=0): return "Fake H200"
    @staticmethod
    def get_device_capability(d=0): return (9, 0)
    @staticmethod
    def device_count(): return 1
    @staticmethod
    def memory_reserved(d=0): return _A.reserved()
    @staticmethod
    def memory_allocated(d=0): return _A.allocated()
    @staticmethod
    def max_memory_allocated(d=0): return _A.peak
    @staticmethod
    def memory_stats(d=0): return _A.memory_stats()
    @staticmethod
    def reset_peak_memory_stats(d=0): _A.peak = _A.allocated()
    @staticmethod
    def synchronize(): _synced[0] = True
    @staticmethod
    def current_stream(): return _cur[0]
    @staticmethod
    def is_current_stream_capturing(): return _capturing[0]
    @staticmethod
    def set_per_process_memory_fraction(f, d=0): _A.cap = int(f * _A.total)

    @staticmethod
    @contextlib.contextmanager
    def stream(s):
        old = _cur[0]; _cur[0] = s
        try:
            yield
        finally:
            _cur[0] = old
