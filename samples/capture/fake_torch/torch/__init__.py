"""A toy stand-in for ``torch``, used only by ``selftest.py`` (dry run on CPU).

It is NOT PyTorch.  It models the *native* CUDA caching allocator rules the capture
scripts rely on (round_size, small/large pools, get_allocation_size, best fit on the
same stream, split thresholds, merge on free, the per-process fraction cap with a flush
of unsplit cached segments before ``oom``, record_stream pending frees processed on the
next malloc after a sync) and emits the snapshot dict format, with just enough tensor
API to run every capture script end to end.  It has no autograd (nothing is saved for
backward), no expandable segments and no C++ frames, so ``retained_graph``,
``frag_oom_expandable`` and ``stacks_all`` are expected to report story-failed here.
"""
import builtins, contextlib, math, os, pickle, sys, time, itertools

__version__ = "0.0-fake"
MiB = 1 << 20
_THIS = os.path.dirname(os.path.abspath(__file__))


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


def _frames():
    out = []
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not os.path.abspath(fn).startswith(_THIS):
            out.append({"name": f.f_code.co_name, "filename": fn, "line": f.f_lineno})
        f = f.f_back
    return out


class _Stream:
    _ids = itertools.count(0x55550000, 0x1000)

    def __init__(self, handle=None):
        self.cuda_stream = next(_Stream._ids) if handle is None else handle

    def wait_stream(self, other):
        pass

    def query(self):
        return False


_default_stream = _Stream(0)
_cur = [_default_stream]


class Block:
    def __init__(self, seg, size):
        self.seg, self.size, self.requested, self.state, self.frames = seg, size, 0, "inactive", []
        self.stream_uses = set()


class Segment:
    def __init__(self, addr, size, stream, small):
        self.addr, self.size, self.stream, self.small = addr, size, stream, small
        self.blocks = [Block(self, size)]
        self.frames = []


class Allocator:
    def __init__(self):
        self.segs, self.trace, self.rec, self.cap = [], [], False, None
        self.next_addr = 1 << 40
        self.total = 150 * (1 << 30)
        self.pending = []
        self.max_entries = 1 << 62
        self.peak = 0

    def t(self, action, addr, size, stream, frames=None, **kw):
        if self.rec:
            e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": int(time.time() * 1e6)}
            if frames is not None:
                e["frames"] = frames
            e.update(kw)
            self.trace.append(e)
            del self.trace[:-self.max_entries]

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

    def malloc(self, n):
        frames = _frames() if self.rec else []
        self.process_events(frames)
        stream = _cur[0].cuda_stream
        size = max(512, -(-n // 512) * 512)
        small = size <= MiB
        cands = [b for s in self.segs if s.small == small and s.stream == stream for b in s.blocks
                 if b.state == "inactive" and b.size >= size]
        if cands:
            b = min(cands, key=lambda b: (b.size, self.addr(b)))
        else:
            alloc = 2 * MiB if small else (20 * MiB if size < 10 * MiB else -(-size // (2 * MiB)) * 2 * MiB)
            if self.cap is not None and self.reserved() + alloc > self.cap:
                for s in list(self.segs):
                    if len(s.blocks) == 1 and s.blocks[0].state == "inactive":
                        self.t("segment_free", s.addr, s.size, s.stream, frames)
                        self.segs.remove(s)
                if self.reserved() + alloc > self.cap:
                    self.t("oom", 0, size, stream, frames, device_free=self.total - self.reserved())
                    raise OutOfMemoryError("Out of memory. Tried to allocate %.2f MiB. (fake)" % (alloc / MiB))
            s = Segment(self.next_addr, alloc, stream, small)
            self.next_addr += alloc + 64 * MiB
            s.frames = frames
            self.segs.append(s)
            self.segs.sort(key=lambda s: s.addr)
            self.t("segment_alloc", s.addr, alloc, stream, frames)
            b = s.blocks[0]
        rem = b.size - size
        if (small and rem >= 512) or (not small and rem > MiB):
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

    def snapshot(self):
        traces = [list(self.trace)]
        segs = []
        for s in self.segs:
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
                         "segment_pool_id": (0, 0), "is_expandable": False, "frames": s.frames, "blocks": blocks})
        self.t("snapshot", 0, builtins.sum(s["active_size"] for s in segs), 0)
        return {"segments": segs, "device_traces": traces,
                "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                                       "max_split_size": -1, "expandable_segments": False,
                                       "garbage_collection_threshold": 0.0,
                                       "roundup_power2_divisions": {"1": 0}}}


_A = Allocator()
_synced = [True]


class Tensor:
    def __init__(self, shape, dtype=float32, block=None, base=None, requires_grad=False):
        self.shape, self.dtype, self._block, self._base = tuple(shape), dtype, block, base
        self.requires_grad, self.grad = requires_grad, None

    @classmethod
    def new(cls, shape, dtype=float32, requires_grad=False):
        n = max(1, math.prod(shape)) * dtype.itemsize
        return cls(shape, dtype, _A.malloc(n), None, requires_grad)

    def __del__(self):
        if self._block is not None and self._base is None:
            try:
                _A.free(self._block)
            except Exception:
                pass

    def _view(self, shape):
        return Tensor(shape, self.dtype, self._block, self._base or self)

    def data_ptr(self):
        return Allocator.addr(self._block)

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

    def copy_(self, o): return self
    def fill_(self, v): return self
    def zero_(self): return self
    def sub_(self, o, alpha=1): return self
    def item(self): return 0.5
    def record_stream(self, s):
        if s.cuda_stream != self._block.seg.stream:
            self._block.stream_uses.add(s.cuda_stream)
    def backward(self): pass
    def __iadd__(self, o): return self
    def __mul__(self, o): return Tensor.new(self.shape, self.dtype)


def _shape(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def empty(*size, dtype=float32, device=None, requires_grad=False):
    return Tensor.new(_shape(size), dtype, requires_grad)


zeros = randn = empty


def randint(lo, hi, size, device=None):
    return Tensor.new(size, int64)


def mm(a, b, out=None):
    return out if out is not None else Tensor.new((a.shape[0], b.shape[1]), a.dtype)


def bmm(a, b):
    return Tensor.new((a.shape[0], a.shape[1], b.shape[2]), a.dtype)


def relu(x): return Tensor.new(x.shape, x.dtype)
square = relu
def softmax(x, dim=1): return Tensor.new(x.shape, x.dtype)
def sub(a, b): return Tensor.new(a.shape, a.dtype)
add = sub
def mean(x): return Tensor.new((), x.dtype)
def sum(x): return Tensor.new((), x.dtype)
def index_select(w, d, idx): return Tensor.new((idx.shape[0], w.shape[1]), w.dtype)
def argmax(x, dim=1): return Tensor.new((x.shape[0],), int64)
def manual_seed(s): pass
no_grad = inference_mode = contextlib.nullcontext


class _Props:
    total_memory = _A.total


class _Memory:
    @staticmethod
    def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None):
        _A.rec = enabled is not None
        _A.max_entries = max_entries
        if not _A.rec:
            _A.trace = []

    @staticmethod
    def _snapshot(device=None):
        return _A.snapshot()

    @staticmethod
    def _dump_snapshot(filename="dump_snapshot.pickle"):
        with open(filename, "wb") as f:
            pickle.dump(_A.snapshot(), f)


class cuda:
    OutOfMemoryError = OutOfMemoryError
    memory = _Memory
    Stream = _Stream

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
    def reset_peak_memory_stats(d=0): _A.peak = _A.allocated()
    @staticmethod
    def synchronize(): _synced[0] = True
    @staticmethod
    def current_stream(): return _cur[0]
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
