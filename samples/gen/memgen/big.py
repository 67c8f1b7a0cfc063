"""Large benchmark snapshots: a long training-style trace driven through the allocator
simulator, so the final segment list is consistent with the trace.

Layout "shared" (what the Python path produces): one dict per distinct frame shared by all
tracebacks, one new list per traceback (20-60 frames), a live block's frames is its alloc
entry's list, free_requested/free_completed share a list.
Layout "fresh": the same, but every frame dict (and its strings) is a distinct object.
Layout "torch": PyTorch's own `_dump_snapshot` memo layout as `py_symbolize` builds it (one
dict per unique frame, one frames list per captured context shared by the alloc entry, the
block and the segment, fresh compile_context strings), with the stack depths of a real
training capture: 12-52 frames per context (calibrated with scripts/opmix against a real
`_dump_snapshot` file: the same opcodes per trace entry within 10%).
Layout "memo": every entry carries its own frame dicts whose name and filename are single
string objects (memo references after their first use): what a script that loads a
snapshot, rewrites its frames and dumps it again with pickle.dump writes.
Layout "cpp": the shared layout's graph written by the C++ pickler's byte layout
(`torch::cuda::_memory_snapshot_pickled`, writers.CppPickler: protocol 2, strings memoized
by value, a container memoized after it is complete and only when shared).

The object graph is built in memory and written with pickle.dump, so the bytes are exactly
what CPython's pickler writes (protocol 4: FRAME, MEMOIZE, batched APPENDS/SETITEMS;
protocol 2: BINPUT/LONG_BINPUT). The number of training steps is calibrated by pickling
the partial graph early on, so the file lands within a few percent of the target size.
"""

import os
import pickle
import random
import sys

from . import layout
from .allocator import ALL, Allocator, AllocatorConfig, Clock, RingBuffer
from .stacks import CPY, PY, USER, fresh

MIB = 1 << 20
GIB = 1 << 30


class DictRing(RingBuffer):
    """Unbounded trace buffer that converts each TraceEntry to its final dict on insert."""

    def insert(self, te):
        d = {"action": te.action, "addr": te.addr, "size": te.size, "stream": te.stream,
             "time_us": te.time_us, "compile_context": fresh("N/A"), "user_metadata": ""}
        if te.ctx is not None:
            d["frames"] = te.ctx
        self.buf.append(d)

    def entries(self):
        return self.buf


def _frame_pool(rng, n_frames=3000):
    """A few thousand distinct frames: Python (user, torch, libraries) and C++ symbols."""
    pkgs = ["torch/nn/modules", "torch/nn", "torch/autograd", "torch/optim", "torch/_dynamo",
            "torch/distributed/fsdp", "torch/utils/checkpoint", "torch/cuda", "torch/_tensor",
            "transformers/models/llama", "transformers/modeling_utils", "accelerate", "peft/tuners/lora",
            "torch/distributed/algorithms", "torch/amp", "torch/_functorch", "torch/_inductor"]
    words = ["forward", "backward", "_call_impl", "_wrapped_call_impl", "apply", "step", "zero_grad",
             "_multi_tensor_adamw", "adamw", "checkpoint", "_checkpoint_without_reentrant", "recompute_fn",
             "attention", "rotary_emb", "apply_rotary_pos_emb", "rms_norm", "mlp", "gate_proj", "silu",
             "scaled_dot_product_attention", "cross_entropy", "log_softmax", "embedding", "linear",
             "all_reduce", "_pre_forward", "_post_backward_hook", "unshard", "reshard", "_lazy_init",
             "wrapper", "_use_grad", "maybe_fallback", "_fn", "__call__", "run_backward", "_engine_run_backward",
             "train_step", "train_epoch", "main", "<module>", "collate", "__next__", "to", "cuda", "_apply",
             "convert", "clip_grad_norm_", "_foreach_norm", "_get_total_norm", "autocast_forward"]
    cpp_ns = ["at::native", "at::_ops", "c10::impl", "torch::autograd", "at::cuda", "c10d", "torch::autograd::generated",
              "at::(anonymous namespace)", "c10::cuda::CUDACachingAllocator::Native"]
    cpp_ops = ["addmm", "mm", "bmm", "empty_strided", "empty", "_to_copy", "silu", "mul", "add", "softmax",
               "_softmax_backward_data", "embedding_dense_backward", "nll_loss_forward", "_fused_adamw_",
               "copy_", "cat", "_scaled_dot_product_flash_attention", "native_layer_norm", "_foreach_mul_",
               "threshold_backward", "sum", "allreduce", "index_select", "reshape", "contiguous"]
    frames = []
    seen = set()
    while len(frames) < n_frames:
        r = rng.random()
        if r < 0.55:
            pkg = rng.choice(pkgs)
            fname = "%s/site-packages/%s/%s.py" % (PY, pkg, rng.choice(["__init__", "module", "functional", "graph",
                                                                       "function", "utils", "modeling", "core"]))
            f = (rng.choice(words), fname, rng.randint(20, 3200))
        elif r < 0.7:
            fname = "%s/%s.py" % (USER, rng.choice(["train", "model", "data", "loss", "optim", "utils", "lora", "attn"]))
            f = (rng.choice(words), fname, rng.randint(5, 600))
        else:
            op = rng.choice(cpp_ops)
            ns = rng.choice(cpp_ns)
            variant = rng.randint(0, 30)
            name = "%s::%s%s(at::Tensor const&, c10::ArrayRef<long>, std::optional<c10::ScalarType>)" % (
                ns, op, "" if variant == 0 else "_impl_%d" % variant)
            f = (name, rng.choice(["??", "", "RegisterCUDA.cpp", "VariableType_%d.cpp" % rng.randint(0, 4),
                                   "Operators_%d.cpp" % rng.randint(0, 4), CPY + "/Python/ceval.c"]),
                 0 if rng.random() < 0.9 else rng.randint(100, 6000))
        if f not in seen:
            seen.add(f)
            frames.append(f)
    return frames


def _paths(rng, pool, n_paths=300, shortest=20, longest=60):
    """A few hundred call paths (innermost first), 20-60 frames each, sharing roots."""
    n = len(pool)
    roots = [[rng.randrange(n) for _ in range(rng.randint(4, 8))] for _ in range(6)]
    mids = [[rng.randrange(n) for _ in range(rng.randint(6, 20))] for _ in range(40)]
    paths = []
    for _ in range(n_paths):
        leaf = [rng.randrange(n) for _ in range(rng.randint(4, 30))]
        p = leaf + rng.choice(mids) + rng.choice(roots)
        if longest < 60:
            # Shorter stacks (the torch layout): a leaf, then part of a middle and a root.
            p = p[:rng.randint(shortest, longest)]
        while len(p) < shortest:
            p.insert(0, rng.randrange(n))
        paths.append(p[:longest])
    return paths


class BigRun:
    def __init__(self, seed, layout_kind, layers=16):
        self.rng = random.Random(seed)
        self.clock = Clock(self.rng)
        self.config = AllocatorConfig()
        self.alloc = Allocator(1, self.config, self.clock, capacity=80 * GIB, record_context=ALL)
        self.dev = self.alloc[0]
        self.dev.trace = DictRing()
        self.layout = layout_kind
        self.layers = layers
        pool = _frame_pool(self.rng)
        self.pool_specs = pool
        if layout_kind == "torch":
            self.paths = _paths(self.rng, pool, shortest=12, longest=52)
        else:
            self.paths = _paths(self.rng, pool)
        if layout_kind in ("shared", "torch", "cpp"):
            dicts = [{"name": fresh(n), "filename": fresh(f), "line": l} for (n, f, l) in pool]
            self.path_frames = [tuple(dicts[i] for i in p) for p in self.paths]
        elif layout_kind == "memo":
            # One string object per distinct name and filename: memo references after the first.
            strs = {}
            one = lambda t: strs.setdefault(t, fresh(t))
            self.path_specs = [[(one(pool[i][0]), one(pool[i][1]), pool[i][2]) for i in p]
                               for p in self.paths]
        else:
            self.path_specs = [[pool[i] for i in p] for p in self.paths]
        self.empty = []
        self.steps_done = 0

    def stack(self, path):
        if self.layout in ("shared", "torch", "cpp"):
            return list(self.path_frames[path])
        if self.layout == "memo":
            return [{"name": n, "filename": f, "line": l} for (n, f, l) in self.path_specs[path]]
        return [{"name": fresh(n), "filename": fresh(f), "line": l} for (n, f, l) in self.path_specs[path]]

    def malloc(self, size, path):
        self.clock.advance(3, 60)
        return self.dev.malloc(size, 0, self.stack(path))

    def free(self, block, path):
        self.clock.advance(2, 30)
        self.dev.free(block, self.stack(path))

    def setup(self):
        rng = self.rng
        self.n_layers = self.layers
        self.params = []
        for i in range(self.n_layers * 7 + 2):
            size = rng.choice([4096 * 4096 * 2, 4096 * 11008 * 2, 4096 * 2, 4096 * 1024 * 2, 32000 * 4096 * 2 // 8])
            self.params.append(self.malloc(size, rng.randrange(len(self.paths))))
        # per-layer op template: (size class, path) for forward, backward, optimizer
        self.fwd = [[(rng.choice([1, 1, 2, 4, 8, 11]), rng.randrange(len(self.paths))) for _ in range(rng.randint(5, 9))]
                    for _ in range(self.n_layers)]
        self.bwd_paths = [rng.randrange(len(self.paths)) for _ in range(24)]
        self.free_paths = [rng.randrange(len(self.paths)) for _ in range(24)]
        self.opt_paths = [rng.randrange(len(self.paths)) for _ in range(4)]

    def step(self):
        rng = self.rng
        step = self.steps_done
        self.clock.advance(20000, 60000)
        self.alloc.annotate("START", "ProfilerStep#%d" % step)
        seq = rng.choice([1024, 1536, 2048])  # dynamic sequence length bucket
        unit = 4 * seq * 1024  # bytes per size class unit (batch 4 x seq x 1024 bf16-ish)
        saved = []
        for layer in range(self.n_layers):
            tmp = []
            for k, (cls, path) in enumerate(self.fwd[layer]):
                b = self.malloc(unit * cls + 512 * k, path)
                if k % 3 == 1:
                    tmp.append(b)
                else:
                    saved.append(b)
            for b in tmp:
                self.free(b, self.free_paths[(layer + len(saved)) % len(self.free_paths)])
        # small bookkeeping tensors
        smalls = [self.malloc(rng.choice([4, 512, 4096, 65536, 262144]), self.bwd_paths[i]) for i in range(6)]
        # backward: walk the saved activations in reverse, allocate gradients, free saved
        grads = []
        for i, b in enumerate(reversed(saved)):
            g = self.malloc(b.requested_size, self.bwd_paths[i % len(self.bwd_paths)])
            self.free(b, self.free_paths[i % len(self.free_paths)])
            if i % 4 == 0 and grads:
                self.free(grads.pop(0), self.free_paths[(i + 1) % len(self.free_paths)])
            grads.append(g)
        for g in grads:
            self.free(g, self.free_paths[0])
        for s in smalls:
            self.free(s, self.free_paths[1])
        # optimizer: temporaries the size of a few parameters
        self.alloc.annotate("START", "Optimizer.step#AdamW.step")
        for i in range(0, len(self.params), 9):
            t = self.malloc(self.params[i].requested_size, self.opt_paths[i % 4])
            self.free(t, self.opt_paths[(i + 1) % 4])
        self.alloc.annotate("END", "Optimizer.step#AdamW.step")
        self.alloc.annotate("END", "ProfilerStep#%d" % step)
        self.steps_done += 1

    def graph(self):
        snap_segments = [layout.segment_dict(si, self.empty) for si in self.dev.snapshot(record=False)]
        result = {}
        result["segments"] = snap_segments
        result["device_traces"] = [self.dev.trace.entries()]
        result["allocator_settings"] = layout.allocator_settings(self.config)
        result["external_annotations"] = [layout.annotation_dict(a) for a in self.alloc.annotations]
        return result


class _Counter:
    def __init__(self):
        self.n = 0

    def write(self, b):
        self.n += len(b)


def _pickled_size(obj, protocol):
    c = _Counter()
    pickle.Pickler(c, protocol=protocol).dump(obj)
    return c.n


def write_big(path, size_mb, layout="shared", protocol=4, seed=11, log=sys.stderr, entries=None,
              layers=16):
    """Writes a snapshot of about `size_mb` MiB, or of about `entries` trace entries, of a
    model of `layers` layers (7 parameters each)."""
    target = int(size_mb * MIB)
    run = BigRun(seed, layout, layers)
    run.setup()
    run.step()
    if entries:
        # Steps until the trace holds `entries` entries (a step adds the same number each time
        # but for the sequence-length bucket; stop at the first step past the count).
        while len(run.dev.trace.buf) < entries:
            run.step()
            if run.steps_done % 200 == 0:
                print("  step %d, %d trace entries" % (run.steps_done, len(run.dev.trace.buf)), file=log)
        return _write(path, run.graph(), layout, protocol)
    b0 = _pickled_size(run.graph(), protocol)
    n0 = run.steps_done
    # calibrate: pickle the partial graph every 4 steps until it reaches ~2% of the target
    while True:
        run.step()
        if run.steps_done % 4 == 0 and run.steps_done >= n0 + 3:
            b1 = _pickled_size(run.graph(), protocol)
            if b1 >= target * 0.02:
                break
    n1 = run.steps_done
    per_step = (b1 - b0) / float(n1 - n0)
    total_steps = max(n1, int(round(n1 + (target - b1) / per_step)))
    print("calibration: %d steps -> %d bytes, %.0f bytes/step, running %d steps"
          % (n1, b1, per_step, total_steps), file=log)
    while run.steps_done < total_steps:
        run.step()
        if run.steps_done % 200 == 0:
            print("  step %d/%d, %d trace entries" % (run.steps_done, total_steps, len(run.dev.trace.buf)), file=log)
    return _write(path, run.graph(), layout, protocol)


def _write(path, obj, layout, protocol):
    if layout == "cpp":
        # Calibrated on pickle's size above (within a few percent of the C++ layout's).
        from .writers import write_cpp_pickle
        write_cpp_pickle(obj, path)
        return os.path.getsize(path)
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
    return size
