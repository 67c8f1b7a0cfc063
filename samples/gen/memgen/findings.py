"""Scenario samples with known answers: each function drives the allocator simulator through a
Tracker (memgen/truth.py) and returns the snapshot object graph(s) plus a truth dict computed from
the scenario's own bookkeeping (never by reading the pickle back).

FINDING_SAMPLES lists (truth name, sample path or None, function); the function returns (snapshot, truth) or
({path relative to samples/: snapshot}, truth); the truth goes to samples/truth/<name>.json.
"""

from . import layout
from .allocator import OutOfMemoryError, get_allocation_size, round_size
from .scenarios import ADAM, AUTOGRAD, EVAL_FRAME_PY, FUN, LIN, MOD, OPT, TENSOR, Run
from .stacks import TORCH, USER, module_call, py
from .truth import Tracker, site_of_specs

MIB = 1 << 20
GIB = 1 << 30
F32 = 4
F16 = 2

TRAIN = USER + "/train.py"
MODEL = USER + "/model.py"
SERVE = USER + "/serve.py"
ACT = TORCH + "/nn/modules/activation.py"
NORM = TORCH + "/nn/modules/normalization.py"
SEQ = TORCH + "/nn/modules/container.py"
GRAPH = TORCH + "/autograd/graph.py"
CUDA_MEM = TORCH + "/cuda/memory.py"


# ---------------------------------------------------------------------------
# A residual MLP trained with Adam, model and loop in /home/user/proj/train.py:
#
#  22 class Block(nn.Module):            36 class Net(nn.Module):
#  23   def forward(self, x):            37   def forward(self, x):
#  24     h = self.act(self.fc1(x))       38     for blk in self.blocks: x = blk(x)
#  25     return x + self.fc2(h)          39     return self.head(self.norm(x))
#
#  56 def train_step(model, opt, x, y):  104   model = Net(...).cuda()
#  57   opt.zero_grad(set_to_none=True)  118   loss = train_step(model, opt, x, y)
#  59   x = x.cuda(); 60 y = y.cuda()    140 main()
#  61   logits = model(x)
#  62   loss = F.cross_entropy(logits, y)
#  63   loss.backward()
#  64   opt.step()
#  65   return loss.item()

class MLPTrainer:
    def __init__(self, r, tk, n_blocks=3, H=1024, F=4096, V=8192, tokens=8192, script=TRAIN,
                 grad_frames=False, foreach_temps=True, dev=0):
        self.r, self.tk, self.S = r, tk, script
        self.n, self.H, self.F, self.V, self.T = n_blocks, H, F, V, tokens
        self.grad_frames = grad_frames
        self.foreach_temps = foreach_temps
        self.dev = dev
        self.params = []
        self.grads = {}
        self.state = []

    # stacks (innermost first)
    def main(self, line=118):
        return [py("main", self.S, line), py("<module>", self.S, 140)]

    def step(self, line):
        return [py("train_step", self.S, line)] + self.main()

    def blk(self, line, inner):
        return (inner + [py("forward", self.S, line)] + module_call()
                + [py("forward", self.S, 38)] + module_call() + self.step(61))

    def net(self, line, inner):
        return inner + [py("forward", self.S, line)] + module_call() + self.step(61)

    def bw(self):
        if not self.grad_frames:
            return []  # autograd device thread: no Python frames with stacks="python"
        return [py("_engine_run_backward", GRAPH, 825), py("backward", AUTOGRAD, 347),
                py("backward", TENSOR, 581)] + self.step(63)

    def opt_stack(self, inner):
        return inner + [py("_use_grad", OPT, 79), py("wrapper", OPT, 487)] + self.step(64)

    # model.cuda()
    def build(self):
        H, F, V = self.H, self.F, self.V
        to_cuda = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915),
                   py("_apply", MOD, 915), py("cuda", MOD, 1068)] + self.main(104)
        sizes = []
        for _ in range(self.n):
            sizes += [F * H * F32, H * F * F32]  # fc1.weight, fc2.weight (bias=False)
        sizes += [H * F32, H * F32, V * H * F32]  # norm.weight, norm.bias, head.weight
        self.params = [self.tk.malloc(n, to_cuda, cat="param", gap=(30, 400)) for n in sizes]
        return sum(sizes)

    def param_bytes(self):
        return sum(p.requested_size for p in self.params)

    def zero_grad(self):
        r = self.r
        r.annotate("START", "Optimizer.zero_grad#Adam.zero_grad", self.dev)
        zg = [py("zero_grad", OPT, 1002), py("_fn", EVAL_FRAME_PY, 632)] + self.step(57)
        for i in sorted(self.grads):
            self.tk.free(self.grads.pop(i), zg, gap=(1, 6))
        r.annotate("END", "Optimizer.zero_grad#Adam.zero_grad", self.dev)

    def forward(self, hooks=None):
        """Returns the saved state for backward; hooks(kind, block index, tracker) may add allocations."""
        tk, H, F, V, T = self.tk, self.H, self.F, self.V, self.T
        x = tk.malloc(T * H * F32, self.step(59), cat="input")
        y = tk.malloc(T * 8, self.step(60), cat="input")
        h = x
        blocks = []
        for i in range(self.n):
            a = tk.malloc(T * F * F32, self.blk(24, [py("forward", LIN, 125)] + module_call()), cat="act")
            g = tk.malloc(T * F * F32, self.blk(24, [py("forward", ACT, 734)] + module_call()), cat="act")
            o = tk.malloc(T * H * F32, self.blk(25, [py("forward", LIN, 125)] + module_call()), cat="act")
            nxt = tk.malloc(T * H * F32, self.blk(25, []), cat="act")
            tk.free(o, self.blk(25, []))
            blocks.append((h, a, g))
            h = nxt
            if hooks:
                hooks("block", i, tk)
        ln_inner = [py("layer_norm", FUN, 2910), py("forward", NORM, 217)] + module_call()
        ln = tk.malloc(T * H * F32, self.net(39, ln_inner), cat="act")
        mean = tk.malloc(T * F32, self.net(39, ln_inner), cat="act")
        rstd = tk.malloc(T * F32, self.net(39, ln_inner), cat="act")
        logits = tk.malloc(T * V * F32, self.net(39, [py("forward", LIN, 125)] + module_call()), cat="act")
        ce = [py("cross_entropy", FUN, 3479)] + self.step(62)
        logsm = tk.malloc(T * V * F32, ce, cat="act")
        loss = tk.malloc(4, ce, cat="loss")
        return {"x": x, "y": y, "blocks": blocks, "h": h, "ln": (ln, mean, rstd), "logits": logits,
                "logsm": logsm, "loss": loss}

    def backward(self, s):
        tk, r, H, F, V, T = self.tk, self.r, self.H, self.F, self.V, self.T
        r.clock.advance(50, 200)
        seed = tk.malloc(4, [py("_make_grads", AUTOGRAD, 220), py("backward", AUTOGRAD, 340),
                             py("backward", TENSOR, 581)] + self.step(63), cat="act_grad")
        bw = self.bw
        np_ = len(self.params)
        g_logsm = tk.malloc(T * V * F32, bw(), cat="act_grad")
        tk.free(seed, bw())
        g_logits = tk.malloc(T * V * F32, bw(), cat="act_grad")
        tk.free(g_logsm, bw())
        tk.free(s["logsm"], bw())
        self.grads[np_ - 1] = tk.malloc(V * H * F32, bw(), cat="grad")
        g_ln = tk.malloc(T * H * F32, bw(), cat="act_grad")
        tk.free(g_logits, bw())
        tk.free(s["logits"], bw())
        g_h = tk.malloc(T * H * F32, bw(), cat="act_grad")
        self.grads[np_ - 3] = tk.malloc(H * F32, bw(), cat="grad")
        self.grads[np_ - 2] = tk.malloc(H * F32, bw(), cat="grad")
        tk.free(g_ln, bw())
        for t in s["ln"]:
            tk.free(t, bw())
        tk.free(s["h"], bw())
        for i in reversed(range(self.n)):
            h_in, a, g = s["blocks"][i]
            g_g = tk.malloc(T * F * F32, bw(), cat="act_grad")
            self.grads[2 * i + 1] = tk.malloc(H * F * F32, bw(), cat="grad")
            tk.free(g, bw())
            g_a = tk.malloc(T * F * F32, bw(), cat="act_grad")
            tk.free(g_g, bw())
            tk.free(a, bw())
            g_x = tk.malloc(T * H * F32, bw(), cat="act_grad")
            self.grads[2 * i] = tk.malloc(F * H * F32, bw(), cat="grad")
            tk.free(g_a, bw())
            g_sum = tk.malloc(T * H * F32, bw(), cat="act_grad")
            tk.free(g_x, bw())
            tk.free(g_h, bw())
            g_h = g_sum
            if h_in is not s["x"]:
                tk.free(h_in, bw())
        tk.free(g_h, bw())

    def adam_step(self, first):
        r, tk = self.r, self.tk
        r.clock.advance(100, 400)
        r.annotate("START", "Optimizer.step#Adam.step", self.dev)
        if first:
            init = self.opt_stack([py("_init_group", ADAM, 135), py("step", ADAM, 226)])
            for p in self.params:
                self.state.append(tk.malloc(p.requested_size, init, cat="opt_state", gap=(2, 20)))
                self.state.append(tk.malloc(p.requested_size, init, cat="opt_state", gap=(2, 20)))
        if self.foreach_temps:
            mta = self.opt_stack([py("_multi_tensor_adam", ADAM, 612), py("adam", ADAM, 782),
                                  py("maybe_fallback", OPT, 154), py("step", ADAM, 247)])
            tmp = [tk.malloc(p.requested_size, mta, cat="opt_temp", gap=(2, 12)) for p in self.params]
            end = [py("_multi_tensor_adam", ADAM, 625)] + mta[1:]
            for t in tmp:
                tk.free(t, end, gap=(1, 4))
        r.annotate("END", "Optimizer.step#Adam.step", self.dev)

    def finish(self, s, keep_loss=False):
        ret = self.step(65)
        self.tk.free(s["x"], ret, gap=(1, 5))
        self.tk.free(s["y"], ret, gap=(1, 5))
        if not keep_loss:
            self.tk.free(s["loss"], ret, gap=(1, 5))

    def train_step(self, k, hooks=None, after_backward=None, keep_loss=False):
        r = self.r
        r.clock.advance(25000, 60000)
        r.annotate("START", "ProfilerStep#%d" % k, self.dev)
        self.zero_grad()
        s = self.forward(hooks)
        self.backward(s)
        if after_backward:
            after_backward(s)
        self.adam_step(first=not self.state)
        self.finish(s, keep_loss)
        r.annotate("END", "ProfilerStep#%d" % k, self.dev)
        return s


def _boundaries(tk, prefix):
    return [b for (label, b, _s) in tk.marks if label.startswith(prefix)]


def _annotate_check(r, steps):
    names = [a[1] for a in r.alloc.annotations if a[0] == "START" and a[1].startswith("ProfilerStep#")]
    assert names == ["ProfilerStep#%d" % k for k in range(1, steps + 1)], names


# ---------------------------------------------------------------------------
# 1. loop_freed: 5-step training loop, activations freed by backward, no growth

def loop_freed(seed=21, steps=5):
    r = Run(seed)
    tk = Tracker(r)
    m = MLPTrainer(r, tk, n_blocks=3, foreach_temps=False)
    m.build()
    r.clock.advance(20000, 60000)
    starts = []
    for k in range(1, steps + 1):
        starts.append(tk.bytes)
        m.train_step(k)
        tk.mark("end#%d" % k)
    r.clock.advance(1000, 3000)
    _annotate_check(r, steps)
    ends = _boundaries(tk, "end#")
    assert len(set(ends)) == 1
    P = m.param_bytes()
    pf = tk.peak_facts()
    assert pf["top_site"] == TRAIN + ":24:forward"
    truth = {
        "sample": "loop_freed.pickle",
        "scenario": "residual MLP (3 blocks, H=1024, F=4096, 8192 tokens, vocab 8192, fp32) trained 5 steps "
                    "with Adam; zero_grad(set_to_none) frees grads, backward frees every activation",
        "steps": steps,
        "step_annotations": ["ProfilerStep#%d" % k for k in range(1, steps + 1)],
        "step_start_bytes": starts,
        "step_end_bytes": ends,
        "step_end_bytes_equal": True,
        "parameter_bytes": P,
        "gradient_bytes": P,
        "optimizer_state_bytes": 2 * P,
        "leak": False,
        "finding": None,
        "peak": pf,
    }
    return layout.modern_snapshot(r.alloc, r.ft), truth


# ---------------------------------------------------------------------------
# 2. dominant_stack: one call site holds ~70% of the peak
#
# embed.py: 22 weights = load_model(); 57 feats.append(model.encode(batch)) in encode_corpus()

def dominant_stack(seed=22):
    r = Run(seed)
    tk = Tracker(r)
    EMB = USER + "/embed.py"
    main = [py("main", EMB, 80), py("<module>", EMB, 95)]
    load = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915), py("to", MOD, 1340),
            py("load_model", EMB, 22), py("main", EMB, 74), py("<module>", EMB, 95)]
    for n in (120 * MIB, 90 * MIB, 60 * MIB, 30 * MIB, 4 * MIB, 4 * MIB):
        tk.malloc(n, load, cat="param", gap=(30, 300))
    r.clock.advance(10000, 30000)
    enc = [py("encode_corpus", EMB, 57)] + main
    enc_inner = lambda inner: inner + [py("encode", USER + "/encoder.py", 31)] + module_call() + enc
    feats = []
    chunk = 50 * MIB
    for i in range(16):
        tok = tk.malloc(512 * 1024 * 8, [py("encode_corpus", EMB, 55)] + main, cat="input")
        hid = tk.malloc(40 * MIB, enc_inner([py("forward", LIN, 125)] + module_call()), cat="temp")
        act = tk.malloc(40 * MIB, enc_inner([py("gelu", FUN, 1706)]), cat="temp")
        tk.free(hid, enc_inner([]))
        # torch.nn.functional.normalize(...) result is what encode_corpus keeps
        feats.append(tk.malloc(chunk, [py("normalize", FUN, 5200)] + enc, cat="feature"))
        tk.free(act, enc)
        tk.free(tok, enc)
    r.clock.advance(500, 2000)
    pf = tk.peak_facts()
    site = EMB + ":57:encode_corpus"
    assert pf["top_site"] == site and pf["top_site_count"] == 16
    share = pf["top_site_bytes"] / pf["peak_bytes"]
    assert 0.68 < share < 0.72, share
    truth = {
        "sample": "dominant_stack.pickle",
        "scenario": "embedding job: 308 MiB of weights, then 16 chunks each leaving a 50 MiB feature tensor "
                    "(kept in a list) at one call site",
        "dominant_site": site,
        "dominant_site_bytes": pf["top_site_bytes"],
        "dominant_site_count": pf["top_site_count"],
        "dominant_site_share": round(share, 6),
        "peak": pf,
    }
    return layout.modern_snapshot(r.alloc, r.ft), truth


# ---------------------------------------------------------------------------
# OOM scenarios: shared helper that records the allocator state at the OOM

def _oom_facts(r, dev, req, specs, stream=0):
    d = r.dev(dev)
    n_before = len(d.trace.buf)
    try:
        r.malloc(req, specs, dev=dev, stream=stream)
        raise AssertionError("expected an OOM")
    except OutOfMemoryError as e:
        err = e
    return oom_state(r, dev, req, n_before, err)


def oom_state(r, dev, req, n_before, err):
    """The facts of the OOM `err` that a request of `req` bytes raised on device `dev`, whose
    trace held `n_before` entries before the request."""
    d = r.dev(dev)
    te = d.trace.buf[-1]
    assert te.action == "oom"
    flushed = [x for x in d.trace.buf[n_before:] if x.action == "segment_free"]
    rs = round_size(req, d.config)
    assert err.size == rs == te.size
    free_blocks = [b.size for pool in d.all_pools() for b in pool.blocks.blocks()]
    allocated = d.memory_allocated()
    reserved = d.memory_reserved()
    return {
        "capacity_bytes": d.capacity,
        "requested_bytes": req,
        "round_size": rs,
        "oom_size": te.size,
        "tried_to_allocate_bytes": get_allocation_size(rs),
        "device_free_bytes": te.addr,
        "allocated_bytes": allocated,
        "reserved_bytes": reserved,
        "reserved_unallocated_bytes": reserved - allocated,
        "cached_free_bytes": sum(free_blocks),
        "largest_free_block_bytes": max(free_blocks) if free_blocks else 0,
        "segment_free_before_oom": len(flushed),
        "segment_free_bytes_before_oom": sum(x.size for x in flushed),
        "oom_event_index": len(d.trace.buf) - 1,
        "oom_time_us": te.time_us,
        "expandable_segments": bool(d.config.expandable_segments),
        "device": dev,
    }


# 3. frag_oom: 16 GiB device, cached free blocks fragmented by long-lived tensors

def frag_oom(seed=23):
    r = Run(seed, per_device={0: {"capacity": 16 * GIB}})
    tk = Tracker(r)
    INF = USER + "/batch_infer.py"
    main = [py("main", INF, 140), py("<module>", INF, 162)]
    load = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915), py("to", MOD, 1340),
            py("main", INF, 121), py("<module>", INF, 162)]
    weights = [tk.malloc(n, load, cat="param", gap=(40, 400)) for n in (1024 * MIB, 512 * MIB, 512 * MIB)]
    small_w = [tk.malloc(n, load, cat="param") for n in (8192, 8192, 65536)]
    r.clock.advance(5000, 20000)
    run_batch = lambda line: [py("run_batch", INF, line)] + main
    fwd = lambda line, inner: inner + [py("forward", USER + "/model.py", line)] + module_call() + run_batch(88)
    # warm-up batch at the longest sequence length: four 3 GiB activations, then freed (cached)
    warm = [tk.malloc(3 * GIB, fwd(40 + i, [py("forward", LIN, 125)] + module_call()), cat="act")
            for i in range(4)]
    logits = tk.malloc(96 * MIB, fwd(52, [py("forward", LIN, 125)] + module_call()), cat="act")
    for b in warm:
        tk.free(b, run_batch(90))
    tk.free(logits, run_batch(91))
    # variable-length batches: interleaved long-lived results (kept for the next stage) and
    # short-lived temporaries carve the cached 3 GiB blocks
    results = []
    shorts = []
    pattern = [(700, True, 60), (500, False, 61), (600, True, 62), (800, False, 63), (400, True, 64)]
    for seg in range(4):
        for mib, keep, line in pattern:
            sz = mib * MIB - 4096 * seg
            b = tk.malloc(sz, fwd(line, [py("forward", LIN, 125)] + module_call()),
                          cat="result" if keep else "temp")
            (results if keep else shorts).append(b)
    for b in shorts:
        tk.free(b, run_batch(97))
    # the merge step needs one 2 GiB tensor
    req = 2 * GIB
    facts = _oom_facts(r, 0, req, [py("cat", INF, 104)] + [py("merge_results", INF, 104)] + main)
    assert facts["largest_free_block_bytes"] < req < facts["cached_free_bytes"]
    assert facts["device_free_bytes"] < facts["tried_to_allocate_bytes"]
    assert facts["segment_free_before_oom"] >= 1
    pf = tk.peak_facts()
    truth = {"sample": "frag_oom.pickle", "verdict": "fragmentation",
             "scenario": "16 GiB device: 2 GiB weights, 4 x 3 GiB warm-up activations cached, then interleaved "
                         "kept/temporary tensors of 400-800 MiB split those blocks; a 2 GiB request finds no "
                         "free block large enough although more than 2 GiB is cached free; the flush frees only "
                         "the unsplit 96 MiB segment",
             "peak": pf}
    truth.update(facts)
    return layout.modern_snapshot(r.alloc, r.ft), truth


# 4. capacity_oom: live set near capacity, little cached free

def capacity_oom(seed=24):
    r = Run(seed, per_device={0: {"capacity": 24 * GIB}})
    tk = Tracker(r)
    FT = USER + "/finetune.py"
    main = [py("main", FT, 210), py("<module>", FT, 240)]
    load = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915), py("to", MOD, 1340),
            py("main", FT, 180), py("<module>", FT, 240)]
    # 7B-ish bf16 shard: 32 layer groups of 400 MiB + embeddings
    for i in range(32):
        tk.malloc(400 * MIB, load, cat="param", gap=(20, 200))
    tk.malloc(1000 * MIB, load, cat="param")
    tk.malloc(1000 * MIB, load, cat="param")
    r.clock.advance(10000, 40000)
    step = lambda line: [py("train_step", FT, line)] + main
    fwd = lambda line: ([py("forward", LIN, 125)] + module_call() + [py("forward", USER + "/llama.py", line)]
                        + module_call() + step(150))
    acts = []
    for i in range(32):
        acts.append(tk.malloc(240 * MIB, fwd(300 + i % 4), cat="act", gap=(10, 60)))
    tmp = tk.malloc(64 * MIB, fwd(310), cat="temp")
    tk.free(tmp, step(150))
    # logits for a 32k vocab: does not fit
    facts = _oom_facts(r, 0, 4 * GIB, [py("forward", LIN, 125)] + module_call()
                       + [py("forward", USER + "/llama.py", 420)] + module_call() + step(150))
    assert facts["cached_free_bytes"] + facts["device_free_bytes"] < facts["round_size"]
    assert facts["reserved_unallocated_bytes"] < 100 * MIB
    pf = tk.peak_facts()
    truth = {"sample": "capacity_oom.pickle", "verdict": "capacity",
             "scenario": "24 GiB device: 14.5 GiB of bf16 weights + 7.5 GiB of activations live; a 4 GiB logits "
                         "request exceeds what the device has left; almost nothing cached",
             "peak": pf}
    truth.update(facts)
    return layout.modern_snapshot(r.alloc, r.ft), truth


# 5. outside_oom: PyTorch reserves ~2 GiB of 24 GiB, another process holds the rest

def outside_oom(seed=25):
    cap = 24 * GIB
    r = Run(seed, per_device={0: {"capacity": cap, "driver_overhead": 21 * GIB + 1100 * MIB}})
    tk = Tracker(r)
    SV = USER + "/serve.py"
    main = [py("serve_forever", SV, 120), py("<module>", SV, 151)]
    load = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("to", MOD, 1340), py("load_model", SV, 40),
            py("<module>", SV, 148)]
    for n in (512 * MIB, 512 * MIB, 256 * MIB, 256 * MIB, 128 * MIB, 2 * MIB):
        tk.malloc(n, load, cat="param", gap=(30, 300))
    handle = lambda line: [py("handle", SV, line)] + main
    for k in range(3):
        x = tk.malloc(16 * 4096 * F16, handle(70), cat="input")
        h = tk.malloc(96 * MIB, [py("forward", LIN, 125)] + module_call() + handle(73), cat="temp")
        o = tk.malloc(16 * MIB, [py("forward", LIN, 125)] + module_call() + handle(74), cat="temp")
        tk.free(h, handle(75))
        tk.free(x, handle(76))
        tk.free(o, handle(77))
    facts = _oom_facts(r, 0, 1 * GIB, [py("forward", LIN, 125)] + module_call() + handle(73))
    assert facts["reserved_bytes"] < 2 * GIB and facts["device_free_bytes"] < 300 * MIB
    facts["other_process_bytes"] = r.dev().driver_overhead
    pf = tk.peak_facts()
    truth = {"sample": "outside_oom.pickle", "verdict": "outside_pytorch",
             "scenario": "24 GiB device shared with another process: PyTorch reserves under 2 GiB, the device "
                         "has under 300 MiB free when a 1 GiB request arrives",
             "peak": pf}
    truth.update(facts)
    return layout.modern_snapshot(r.alloc, r.ft), truth


# ---------------------------------------------------------------------------
# 6. retained_graph / retained_graph_fixed
#
# model.py: 48  aux_loss = self.aux_act(self.aux_proj(h)).pow(2).mean()   (inside Net.forward)
# train.py: total_loss += aux_loss        (bug: aux_loss is never backpropagated, its graph with the
#                                          saved aux activations stays alive)
#           total_loss += aux_loss.item() (fixed)

def _retained(seed, fixed, steps=6):
    r = Run(seed)
    tk = Tracker(r)
    m = MLPTrainer(r, tk, n_blocks=1, H=1024, F=2048, V=4096, tokens=4096, foreach_temps=False)
    m.build()
    r.clock.advance(20000, 60000)
    aux_site = MODEL + ":48:forward"
    kept = []

    def aux_stack(inner):
        return (inner + [py("forward", MODEL, 48)] + module_call() + [py("forward", m.S, 38)]
                + module_call() + m.step(61))

    def hooks(kind, i, tk_):
        if kind == "block" and i == m.n - 1:
            a = tk_.malloc(4096 * 2048 * F32, aux_stack([py("forward", LIN, 125)] + module_call()), cat="aux")
            g = tk_.malloc(4096 * 2048 * F32, aux_stack([py("forward", ACT, 734)] + module_call()), cat="aux")
            p2 = tk_.malloc(4096 * 2048 * F32, aux_stack([]), cat="aux")
            mean = tk_.malloc(4, aux_stack([]), cat="aux")
            tk_.free(p2, aux_stack([]))
            kept.append((a, g, mean))

    def after_backward(s):
        if fixed:
            # aux_loss.item(): the graph and its saved tensors die with the step
            a, g, mean = kept.pop()
            for t in (a, g, mean):
                tk.free(t, m.step(66))

    for k in range(1, steps + 1):
        m.train_step(k, hooks=hooks, after_backward=after_backward)
        tk.mark("end#%d" % k)
    r.clock.advance(1000, 3000)
    _annotate_check(r, steps)
    ends = _boundaries(tk, "end#")
    per_step = 2 * 4096 * 2048 * F32 + 4
    site_by_step = [sites.get(aux_site, (0, 0))[0] for (label, _b, sites) in tk.marks]
    if fixed:
        assert len(set(ends)) == 1 and site_by_step == [0] * steps
        finding = None
    else:
        diffs = [b - a for a, b in zip(ends, ends[1:])]
        assert diffs == [per_step] * (steps - 1), diffs
        assert site_by_step == [per_step * k for k in range(1, steps + 1)]
        finding = {"kind": "retained_graph", "site": aux_site, "bytes_per_step": per_step, "steps": steps,
                   "allocations_per_step": 3, "retained_bytes_at_end": per_step * steps}
    pf = tk.peak_facts()
    truth = {
        "sample": "retained_graph_fixed.pickle" if fixed else "retained_graph.pickle",
        "scenario": ("residual MLP trained 6 steps; an auxiliary loss computed in Net.forward (model.py:48) "
                     + ("is logged with .item(), so its activations are freed every step"
                        if fixed else "is accumulated with `total_loss += aux_loss` and never backpropagated: "
                                      "its two 32 MiB saved activations and the 4-byte loss survive every step")),
        "steps": steps,
        "step_annotations": ["ProfilerStep#%d" % k for k in range(1, steps + 1)],
        "step_end_bytes": ends,
        "site_bytes_at_step_end": {aux_site: site_by_step},
        "finding": finding,
        "peak": pf,
    }
    return layout.modern_snapshot(r.alloc, r.ft), truth


def retained_graph(seed=26):
    return _retained(seed, fixed=False)


def retained_graph_fixed(seed=26):
    return _retained(seed, fixed=True)


# ---------------------------------------------------------------------------
# 7. list_leak / kv_cache: 8-step inference loops in serve.py
#
# serve.py: 30 model = load(); 41 logits = model(x); 42 outputs.append(logits.softmax(-1))  (leak)

def _serve_prelude(r, tk):
    load = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915), py("to", MOD, 1340),
            py("load", SERVE, 30), py("<module>", SERVE, 160)]
    for n in (196 * MIB, 64 * MIB, 64 * MIB, 64 * MIB, 64 * MIB, 196 * MIB, 8192, 8192):
        tk.malloc(n, load, cat="param", gap=(30, 300))
    r.clock.advance(20000, 40000)


def list_leak(seed=27, steps=8):
    r = Run(seed)
    tk = Tracker(r)
    _serve_prelude(r, tk)
    loop = lambda line: [py("infer_loop", SERVE, line), py("<module>", SERVE, 162)]
    fwd = lambda inner: (inner + module_call() + [py("forward", SEQ, 250)] + module_call() + loop(41))
    outputs = []
    per_step = 64 * 50257 * F16
    for k in range(1, steps + 1):
        r.clock.advance(5000, 15000)
        r.annotate("START", "ProfilerStep#%d" % k)
        x = tk.malloc(64 * 512 * 8, loop(39), cat="input")
        e = tk.malloc(64 * 512 * 1024 * F16, fwd([py("forward", TORCH + "/nn/modules/sparse.py", 190)]), cat="temp")
        h = tk.malloc(64 * 512 * 4096 * F16, fwd([py("forward", LIN, 125)]), cat="temp")
        tk.free(e, loop(41))
        h2 = tk.malloc(64 * 512 * 1024 * F16, fwd([py("forward", LIN, 125)]), cat="temp")
        tk.free(h, loop(41))
        logits = tk.malloc(per_step, fwd([py("forward", LIN, 125)]), cat="temp")
        tk.free(h2, loop(41))
        outputs.append(tk.malloc(per_step, loop(42), cat="output"))  # outputs.append(logits.softmax(-1))
        tk.free(logits, loop(42))
        tk.free(x, loop(42))
        r.annotate("END", "ProfilerStep#%d" % k)
        tk.mark("end#%d" % k)
    r.clock.advance(1000, 3000)
    _annotate_check(r, steps)
    ends = _boundaries(tk, "end#")
    assert [b - a for a, b in zip(ends, ends[1:])] == [per_step] * (steps - 1)
    site = SERVE + ":42:infer_loop"
    pf = tk.peak_facts()
    truth = {"sample": "list_leak.pickle",
             "scenario": "inference loop appending each step's fp16 softmax output (64 x 50257) to a Python list",
             "steps": steps, "step_end_bytes": ends,
             "finding": {"kind": "leak", "site": site, "bytes_per_step": per_step, "steps": steps,
                         "allocations_per_step": 1, "leaked_bytes_at_end": per_step * steps},
             "peak": pf}
    return layout.modern_snapshot(r.alloc, r.ft), truth


def kv_cache(seed=28, steps=8):
    r = Run(seed)
    tk = Tracker(r)
    _serve_prelude(r, tk)
    loop = lambda line: [py("generate", SERVE, line), py("<module>", SERVE, 162)]
    alloc_cache = [py("allocate", USER + "/kv.py", 18), py("__init__", USER + "/kv.py", 12)] + loop(51)
    layer = lambda i, inner: (inner + [py("forward", USER + "/llm.py", 70 + i)] + module_call()
                              + [py("forward", USER + "/llm.py", 120)] + module_call() + loop(55))
    cache_one = 8 * 16 * 2048 * 64 * F16  # batch 8, 16 heads, 2048 positions, head dim 64
    cache = []
    for k in range(1, steps + 1):
        r.clock.advance(5000, 15000)
        r.annotate("START", "ProfilerStep#%d" % k)
        if k == 1:
            for _ in range(12):
                cache.append(tk.malloc(cache_one, alloc_cache, cat="kv_cache", gap=(5, 30)))
                cache.append(tk.malloc(cache_one, alloc_cache, cat="kv_cache", gap=(5, 30)))
        x = tk.malloc(8 * 128 * 8, loop(53), cat="input")
        for i in range(3):
            q = tk.malloc(8 * 128 * 1024 * F16, layer(i, [py("forward", LIN, 125)] + module_call()), cat="temp")
            att = tk.malloc(8 * 16 * 128 * 2048 * F16, layer(i, [py("scaled_dot_product_attention", FUN, 5500)]),
                            cat="temp")
            tk.free(q, layer(i, []))
            o = tk.malloc(8 * 128 * 1024 * F16, layer(i, [py("forward", LIN, 125)] + module_call()), cat="temp")
            tk.free(att, layer(i, []))
            tk.free(o, layer(i, []))
        tk.free(x, loop(57))
        r.annotate("END", "ProfilerStep#%d" % k)
        tk.mark("end#%d" % k)
    r.clock.advance(1000, 3000)
    _annotate_check(r, steps)
    ends = _boundaries(tk, "end#")
    assert len(set(ends)) == 1
    pf = tk.peak_facts()
    truth = {"sample": "kv_cache.pickle",
             "scenario": "generation loop: a 768 MiB KV cache (24 x 32 MiB) allocated and filled in step 1, "
                         "then stable for 8 steps; per-step temporaries freed",
             "steps": steps, "step_end_bytes": ends, "kv_cache_bytes": cache_one * 24,
             "kv_cache_site": USER + "/kv.py:18:allocate", "finding": None, "peak": pf}
    return layout.modern_snapshot(r.alloc, r.ft), truth


# ---------------------------------------------------------------------------
# 8. adam_loop: Adam state 2P created in step 1, grads under autograd backward frames

def adam_loop(seed=29, steps=3):
    r = Run(seed)
    tk = Tracker(r)
    m = MLPTrainer(r, tk, n_blocks=2, H=1024, F=4096, V=8192, tokens=4096, grad_frames=True,
                   foreach_temps=True)
    P = m.build()
    r.clock.advance(20000, 60000)
    for k in range(1, steps + 1):
        m.train_step(k)
        tk.mark("end#%d" % k)
    r.clock.advance(1000, 3000)
    _annotate_check(r, steps)
    assert tk.cat_bytes["param"] == P and tk.cat_bytes["opt_state"] == 2 * P and tk.cat_bytes["grad"] == P
    pf = tk.peak_facts()
    truth = {"sample": "adam_loop.pickle",
             "scenario": "residual MLP (2 blocks, fp32) trained 3 steps with Adam (foreach): exp_avg/exp_avg_sq "
                         "created in step 1 under torch/optim/adam.py:_init_group and kept; grads allocated "
                         "under torch/autograd frames called from train.py:63",
             "steps": steps,
             "parameter_bytes": P, "parameter_count": len(m.params),
             "parameter_site": TRAIN + ":104:main",
             "optimizer_state_bytes": 2 * P, "optimizer_state_count": 2 * len(m.params),
             "optimizer_state_site": TRAIN + ":64:train_step",
             "gradient_bytes": P, "gradient_count": len(m.params), "gradient_site": TRAIN + ":63:train_step",
             "activation_peak_bytes": tk.cat_max["act"],
             "activation_grad_peak_bytes": tk.cat_max["act_grad"],
             "optimizer_temp_peak_bytes": tk.cat_max["opt_temp"],
             "step_end_bytes": _boundaries(tk, "end#"),
             "categories_at_peak": tk.peak_cats,
             "peak": pf}
    return layout.modern_snapshot(r.alloc, r.ft), truth


# ---------------------------------------------------------------------------
# 9. diff_base / diff_cand: one training step; cand adds a 256 MiB buffer at a new site and
#    grows the rope-cache site by 64 MiB
#
# train.py: 44 build_rope_cache: return torch.empty(...)   47 setup_prefetch: self.pinned = torch.empty(...)
#           96 rope = build_rope_cache(...)                 100 pf = setup_prefetch(...)

def _diff_run(seed, cand):
    r = Run(seed)
    tk = Tracker(r)
    m = MLPTrainer(r, tk, n_blocks=2, H=1024, F=4096, V=8192, tokens=4096, foreach_temps=False)
    m.build()
    rope = [py("build_rope_cache", TRAIN, 44), py("main", TRAIN, 96), py("<module>", TRAIN, 140)]
    tk.malloc((128 if cand else 64) * MIB, rope, cat="buffer")
    if cand:
        tk.malloc(256 * MIB, [py("setup_prefetch", TRAIN, 47), py("main", TRAIN, 100), py("<module>", TRAIN, 140)],
                  cat="buffer")
    r.clock.advance(20000, 60000)
    m.train_step(1)
    r.clock.advance(1000, 3000)
    return r, tk


def diff_pair(seed=30):
    rb, tb = _diff_run(seed, False)
    rc, tc = _diff_run(seed, True)
    pb, pc = tb.peak_facts(), tc.peak_facts()
    sb, sc = tb.peak_sites, tc.peak_sites
    deltas = []
    for s in sorted(set(sb) | set(sc)):
        b0, c0 = sb.get(s, (0, 0))
        b1, c1 = sc.get(s, (0, 0))
        if b0 != b1 or c0 != c1:
            deltas.append({"site": s, "base_bytes": b0, "cand_bytes": b1, "delta_bytes": b1 - b0,
                           "base_count": c0, "cand_count": c1})
    deltas.sort(key=lambda d: (-abs(d["delta_bytes"]), d["site"]))
    new_site = TRAIN + ":47:setup_prefetch"
    grown = TRAIN + ":44:build_rope_cache"
    assert [d["site"] for d in deltas] == [new_site, grown]
    assert pc["peak_bytes"] - pb["peak_bytes"] == 320 * MIB
    truth = {
        "samples": ["diff_base.pickle", "diff_cand.pickle"],
        "scenario": "one Adam training step of a residual MLP; the candidate allocates a 256 MiB buffer at a new "
                    "site (setup_prefetch) and a rope cache 64 MiB larger than the base (same site)",
        "new_site": {"site": new_site, "bytes": 256 * MIB, "count": 1},
        "grown_site": {"site": grown, "base_bytes": 64 * MIB, "cand_bytes": 128 * MIB, "delta_bytes": 64 * MIB},
        "site_deltas_at_peak": deltas,
        "peak_base": pb, "peak_cand": pc,
        "peak_delta_bytes": pc["peak_bytes"] - pb["peak_bytes"],
        "end_delta_bytes": pc["end_bytes"] - pb["end_bytes"],
    }
    base = layout.modern_snapshot(rb.alloc, rb.ft)
    truth["shifted"] = {"sample": "diff_shifted.pickle", "file": TRAIN, "shift": SHIFT,
                        "changes": 0}
    return ({"diff_base.pickle": base,
             "diff_cand.pickle": layout.modern_snapshot(rc.alloc, rc.ft),
             "diff_shifted.pickle": _shift_lines(base, TRAIN, SHIFT)}, truth)


SHIFT = 7  # lines a commit added at the top of train.py, where every site of this run is


def _shift_lines(snap, filename, shift):
    """A copy of `snap` whose frames in `filename` are `shift` lines lower: the same run after
    a commit that added lines above every function of that file."""
    import copy
    out = copy.deepcopy(snap)

    def fix(frames):
        return [dict(f, line=f["line"] + shift) if f.get("filename") == filename else f
                for f in frames or []]

    for seg in out.get("segments", []):
        seg["frames"] = fix(seg.get("frames"))
        for b in seg.get("blocks", []):
            if "frames" in b:
                b["frames"] = fix(b["frames"])
            for h in b.get("history", []) or []:
                if "frames" in h:
                    h["frames"] = fix(h["frames"])
    for trace in out.get("device_traces", []):
        for e in trace:
            if "frames" in e:
                e["frames"] = fix(e["frames"])
    return out


# ---------------------------------------------------------------------------
# 10. ranks: 4 DDP ranks (torchrun, 4 visible GPUs, rank r on cuda:r), rank 2 gathers 1 GiB of
#     eval predictions at its own site

def ranks(seed=31, n_ranks=4, steps=2):
    snaps = {}
    per_rank = []
    outlier_site = USER + "/eval.py:31:gather_predictions"
    for rank in range(n_ranks):
        r = Run(seed + rank, n_devices=n_ranks)
        tk = Tracker(r, dev=rank)
        m = MLPTrainer(r, tk, n_blocks=2, H=1024, F=2048, V=4096, tokens=4096, foreach_temps=False, dev=rank)
        m.build()
        if rank == 2:
            # only rank 2 runs the evaluator, which preallocates its prediction buffer
            tk.malloc(1 * GIB, [py("gather_predictions", USER + "/eval.py", 31),
                                py("__init__", USER + "/eval.py", 12), py("main", TRAIN, 110),
                                py("<module>", TRAIN, 140)], cat="eval")
        r.clock.advance(20000, 60000)
        for k in range(1, steps + 1):
            m.train_step(k)
        r.clock.advance(1000, 3000)
        pf = tk.peak_facts()
        per_rank.append({"file": "ranks/rank%d.pickle" % rank, "rank": rank, "device": rank, "peak": pf,
                         "end_bytes": tk.bytes})
        snaps["ranks/rank%d.pickle" % rank] = layout.modern_snapshot(r.alloc, r.ft)
    ends = [p["end_bytes"] for p in per_rank]
    peaks = [p["peak"]["peak_bytes"] for p in per_rank]
    assert ends[2] - ends[0] == GIB and ends[0] == ends[1] == ends[3]
    assert peaks[2] - peaks[0] == GIB and peaks[0] == peaks[1] == peaks[3]
    truth = {
        "samples": sorted(snaps),
        "scenario": "same 2-step training workload on 4 ranks; each file has 4 device_traces lists and only "
                    "list `rank` (cuda:rank) is used; rank 2 additionally allocates a 1 GiB buffer at its own site before training and keeps it",
        "outlier_rank": 2,
        "outlier_site": outlier_site,
        "outlier_extra_bytes": GIB,
        "peak_bytes_by_rank": peaks,
        "end_bytes_by_rank": ends,
        "ranks": per_rank,
    }
    return snaps, truth


# ---------------------------------------------------------------------------
# 11. retained_val: a validation loop run with grad enabled whose loss is summed as a tensor,
#     so every step's autograd graph -- and every tensor its forward pass saved -- stays alive.
#
# model.py (a 2-block encoder; every line keeps a tensor for backward):
#  24 q = self.q(x)        25 k = self.k(x)        26 v = self.v(x)
#  27 a = (q @ k.mT).softmax(-1)   (scores freed, softmax output kept)
#  28 o = self.o(a @ v)    (a @ v kept as o's input, o's output freed by 29)
#  29 x = x + o            30 h = self.act(self.fc1(x))   (fc1 output freed, relu output kept)
#  31 return x + self.fc2(h)       (fc2 output freed, the block output kept)
#  38 for blk in self.blocks: x = blk(x)       39 return self.head(x)  (logits kept by mse_loss)
# val.py:
#  43 xb, yb = xb.cuda(), yb.cuda()   (xb saved by q/k/v, yb by mse_loss)
#  44 out = model(xb)
#  45 val_loss = F.mse_loss(out, yb)
#  46 total_val += val_loss           (bug: the sum holds every step's graph; `.item()` fixes it)
#  60 val = validate(model, batches)  70 main()

def retained_val(seed=32, steps=6):
    r = Run(seed)
    tk = Tracker(r)
    VAL = USER + "/val.py"
    T, H, F, V = 256, 256, 1024, 512
    outer = [py("main", VAL, 60), py("<module>", VAL, 70)]
    loop = lambda line: [py("validate", VAL, line)] + outer
    to_cuda = ([py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915), py("cuda", MOD, 1068),
                py("main", VAL, 55), py("<module>", VAL, 70)])
    for _ in range(2):
        for n in (H * H, H * H, H * H, H * H, F * H, H * F):  # q, k, v, o, fc1, fc2 weights
            tk.malloc(n * F32, to_cuda, cat="param", gap=(30, 300))
    tk.malloc(V * H * F32, to_cuda, cat="param", gap=(30, 300))  # head
    r.clock.advance(20000, 40000)

    def blk(line, inner):
        return (inner + [py("forward", MODEL, line)] + module_call() + [py("forward", MODEL, 38)] + module_call()
                + loop(44))

    lin = [py("forward", LIN, 125)] + module_call()
    act = [py("forward", ACT, 734)] + module_call()
    ce = [py("mse_loss", FUN, 3365)] + loop(45)
    kept_sites = {}
    per_step = 0
    total_val = None
    for k in range(1, steps + 1):
        r.clock.advance(5000, 15000)
        r.annotate("START", "ProfilerStep#%d" % k)
        kept = []

        def keep(n, stack, cat="act"):
            b = tk.malloc(n, stack, cat=cat)
            kept.append((n, stack))
            return b

        keep(T * H * F32, loop(43), cat="input")  # xb
        keep(T * V * F32, loop(43), cat="input")  # yb
        for _ in range(2):
            keep(T * H * F32, blk(24, lin))
            keep(T * H * F32, blk(25, lin))
            keep(T * H * F32, blk(26, lin))
            scores = tk.malloc(T * T * F32, blk(27, []), cat="temp")
            keep(T * T * F32, blk(27, []))
            tk.free(scores, blk(27, []))
            keep(T * H * F32, blk(28, []))
            o = tk.malloc(T * H * F32, blk(28, lin), cat="temp")
            keep(T * H * F32, blk(29, []))
            tk.free(o, blk(29, []))
            h1 = tk.malloc(T * F * F32, blk(30, lin), cat="temp")
            keep(T * F * F32, blk(30, act))
            tk.free(h1, blk(30, []))
            h2 = tk.malloc(T * H * F32, blk(31, lin), cat="temp")
            keep(T * H * F32, blk(31, []))
            tk.free(h2, blk(31, []))
        keep(T * V * F32, (lin + [py("forward", MODEL, 39)] + module_call() + loop(44)))  # logits
        diff = tk.malloc(T * V * F32, ce, cat="temp")
        loss = tk.malloc(4, ce, cat="loss")
        tk.free(diff, ce)
        new_total = tk.malloc(4, loop(46), cat="loss")
        if total_val is not None:
            tk.free(total_val, loop(46))
        total_val = new_total
        tk.free(loss, loop(42))
        r.annotate("END", "ProfilerStep#%d" % k)
        tk.mark("end#%d" % k)
        if k == 1:
            per_step = sum(n for n, _ in kept)
            for n, stack in kept:
                s = site_of_specs(stack)
                b, c = kept_sites.get(s, (0, 0))
                kept_sites[s] = (b + n, c + 1)
    r.clock.advance(1000, 3000)
    _annotate_check(r, steps)
    ends = _boundaries(tk, "end#")
    assert [b - a for a, b in zip(ends, ends[1:])] == [per_step] * (steps - 1)
    tensors = sum(c for _b, c in kept_sites.values())
    members = [{"site": s, "bytes_per_step": b, "tensors_per_step": c}
               for s, (b, c) in sorted(kept_sites.items(), key=lambda kv: (-kv[1][0], kv[0]))]
    pf = tk.peak_facts()
    truth = {
        "sample": "retained_val.pickle",
        "scenario": ("validation loop run with grad enabled (2-block encoder in model.py, 6 ProfilerSteps): "
                     "`total_val += val_loss` keeps every step's graph, with the inputs and the %d tensors the "
                     "forward pass saved; all of it is one cause, the forward pass at val.py:44" % (tensors - 2)),
        "steps": steps,
        "step_end_bytes": ends,
        "finding": {"kind": "retained_graph", "site": VAL + ":44:validate", "bytes_per_step": per_step,
                    "tensors_per_step": tensors, "steps": steps, "retained_bytes_at_end": per_step * steps,
                    "sites": members, "input_site": VAL + ":43:validate"},
        "findings_before_grouping": len(kept_sites),
        "peak": pf,
    }
    return layout.modern_snapshot(r.alloc, r.ft), truth



# ---------------------------------------------------------------------------
# 12. retained_loss: a validation loop run with grad enabled whose loss comes from
#     F.cross_entropy called in the script (outside any module's forward) and is summed as a
#     tensor: the graph every step keeps holds the forward pass's saved tensors *and* what the
#     loss computation saved under torch/nn/functional.py (issue 37).
#
# model.py (a small classifier):
#  21 h = self.act(self.fc1(x))   (fc1 output freed, relu output kept: the head saves it)
#  22 return self.head(h)         (the logits, returned and kept)
# val.py:
#  43 xb, yb = xb.cuda(), yb.cuda()   (xb saved by fc1, yb (int64 targets) by cross_entropy)
#  44 logits = model(xb)
#  45 loss = F.cross_entropy(logits, yb)  (functional.py:cross_entropy: the log_softmax output,
#                                          saved for backward, and the loss scalar)
#  46 total += loss                    (bug: keeps every step's graph; `.item()` fixes it; the
#                                       running total is made once, in step 1, then added in place)
#  55 model = Net().cuda()   60 val = validate(model, batches)   70 main()

def retained_loss(seed=33, steps=6):
    r = Run(seed)
    tk = Tracker(r)
    VAL = USER + "/val.py"
    T, H, F, V = 64, 256, 320, 200  # batch, features, hidden, classes (float32)
    outer = [py("main", VAL, 60), py("<module>", VAL, 70)]
    loop = lambda line: [py("validate", VAL, line)] + outer
    to_cuda = ([py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915), py("cuda", MOD, 1068),
                py("main", VAL, 55), py("<module>", VAL, 70)])
    for n in (F * H, F, V * F, V):  # fc1 weight and bias, head weight and bias
        tk.malloc(n * F32, to_cuda, cat="param", gap=(30, 300))
    r.clock.advance(20000, 40000)

    def fwd(line, inner):
        return inner + [py("forward", MODEL, line)] + module_call() + loop(44)

    lin = [py("forward", LIN, 125)] + module_call()
    act = [py("forward", ACT, 734)] + module_call()
    ce = [py("cross_entropy", FUN, 3479)] + loop(45)
    roles = {}
    kept_sites = {}
    per_step = 0
    total = None
    for k in range(1, steps + 1):
        r.clock.advance(5000, 15000)
        r.annotate("START", "ProfilerStep#%d" % k)
        kept = []

        def keep(n, stack, role, cat="act"):
            b = tk.malloc(n, stack, cat=cat)
            kept.append((n, stack))
            roles[site_of_specs(stack)] = role
            return b

        keep(T * H * F32, loop(43), "input", cat="input")  # xb
        keep(T * 8, loop(43), "input", cat="input")  # yb
        h1 = tk.malloc(T * F * F32, fwd(21, lin), cat="temp")  # fc1 output
        keep(T * F * F32, fwd(21, act), "saved")  # relu output, saved by the head
        tk.free(h1, fwd(21, []))
        keep(T * V * F32, fwd(22, lin), "saved")  # logits
        keep(T * V * F32, ce, "loss")  # log_softmax output, saved by nll_loss
        keep(4, ce, "loss", cat="loss")  # the loss
        if total is None:
            total = tk.malloc(4, loop(46), cat="loss")  # 0.0 + loss: the running total, then in place
        r.annotate("END", "ProfilerStep#%d" % k)
        tk.mark("end#%d" % k)
        if k == 1:
            per_step = sum(n for n, _ in kept)
            for n, stack in kept:
                s = site_of_specs(stack)
                b, c = kept_sites.get(s, (0, 0))
                kept_sites[s] = (b + n, c + 1)
    r.clock.advance(1000, 3000)
    _annotate_check(r, steps)
    ends = _boundaries(tk, "end#")
    assert [b - a for a, b in zip(ends, ends[1:])] == [per_step] * (steps - 1)
    tensors = sum(c for _b, c in kept_sites.values())
    members = [{"site": s, "role": roles[s], "bytes_per_step": b, "tensors_per_step": c}
               for s, (b, c) in sorted(kept_sites.items(), key=lambda kv: (-kv[1][0], kv[0]))]
    loss_bytes = sum(m["bytes_per_step"] for m in members if m["role"] == "loss")
    pf = tk.peak_facts()
    truth = {
        "sample": "retained_loss.pickle",
        "scenario": ("validation loop run with grad enabled (6 ProfilerSteps): `logits = model(xb)` at val.py:44, "
                     "`loss = F.cross_entropy(logits, yb)` at val.py:45 and `total += loss` at val.py:46 keep every "
                     "step's graph: the inputs, the relu output and logits of the forward pass, and the log_softmax "
                     "output and loss that cross_entropy made (torch/nn/functional.py, outside any module's forward); "
                     "all of it is one cause, the forward pass at val.py:44"),
        "steps": steps,
        "step_end_bytes": ends,
        "finding": {"kind": "retained_graph", "site": VAL + ":44:validate", "bytes_per_step": per_step,
                    "tensors_per_step": tensors, "steps": steps, "retained_bytes_at_end": per_step * steps,
                    "sites": members, "input_site": VAL + ":43:validate", "loss_site": VAL + ":45:validate"},
        # what the loss computation keeps per step: the part a finding without it misses (issue 37)
        "loss_bytes_per_step": loss_bytes,
        "peak": pf,
    }
    return layout.modern_snapshot(r.alloc, r.ft), truth

# name -> function returning (snapshot | {path: snapshot}, truth); truth goes to samples/truth/<name>.json
FINDING_SAMPLES = [
    ("loop_freed", "loop_freed.pickle", loop_freed),
    ("dominant_stack", "dominant_stack.pickle", dominant_stack),
    ("frag_oom", "frag_oom.pickle", frag_oom),
    ("capacity_oom", "capacity_oom.pickle", capacity_oom),
    ("outside_oom", "outside_oom.pickle", outside_oom),
    ("retained_graph", "retained_graph.pickle", retained_graph),
    ("retained_graph_fixed", "retained_graph_fixed.pickle", retained_graph_fixed),
    ("list_leak", "list_leak.pickle", list_leak),
    ("kv_cache", "kv_cache.pickle", kv_cache),
    ("adam_loop", "adam_loop.pickle", adam_loop),
    ("diff", None, diff_pair),
    ("ranks", None, ranks),
    ("retained_val", "retained_val.pickle", retained_val),
    ("retained_loss", "retained_loss.pickle", retained_loss),
]

# sites and categories (issue 19): memgen/frames_categories.py
from . import frames_categories as _fc  # noqa: E402

FINDING_SAMPLES += _fc.FINDING_SAMPLES

# forward-only traces for `fit` (issue 37): memgen/fit_forward.py
from . import fit_forward as _ff  # noqa: E402

FINDING_SAMPLES += _ff.FINDING_SAMPLES

# two runs whose peaks sit in different phases (issue 52 item 6): memgen/diff_phase.py
from . import diff_phase as _dp  # noqa: E402

FINDING_SAMPLES += _dp.FINDING_SAMPLES

# the one advice engine (issue 52 item 2): memgen/advice.py
from . import advice as _adv  # noqa: E402

FINDING_SAMPLES += _adv.FINDING_SAMPLES

# steps against layers (issue 52): memgen/layers.py
from . import layers as _ly  # noqa: E402

FINDING_SAMPLES += _ly.FINDING_SAMPLES

# known pinners of stranded bytes (issue 56): memgen/pinners.py
from . import pinners as _pn  # noqa: E402

FINDING_SAMPLES += _pn.FINDING_SAMPLES
