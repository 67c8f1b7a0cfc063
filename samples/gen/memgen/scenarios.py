"""Scenario functions: each drives the allocator simulator like a small PyTorch program
and returns the snapshot object graph (plus, for the C++ path, the held containers)."""

import random

from . import layout
from .allocator import STATE, Allocator, AllocatorConfig, Clock, OutOfMemoryError
from .stacks import (LINE_NONE_CPP, LINE_NONE_PY, TORCH, USER, FrameTable, cpp, interleave_cpp,
                     module_call, py)

MIB = 1 << 20
GIB = 1 << 30

LIN = TORCH + "/nn/modules/linear.py"
CONV = TORCH + "/nn/modules/conv.py"
MOD = TORCH + "/nn/modules/module.py"
FUN = TORCH + "/nn/functional.py"
ADAM = TORCH + "/optim/adam.py"
OPT = TORCH + "/optim/optimizer.py"
AUTOGRAD = TORCH + "/autograd/__init__.py"
TENSOR = TORCH + "/_tensor.py"
EVAL_FRAME_PY = TORCH + "/_dynamo/eval_frame.py"

SIDE_STREAM = 94363686825984
CAPTURE_STREAM = 94363687350272


class Run:
    """Drives one simulated process: allocator + clock + frame table."""

    def __init__(self, seed, n_devices=1, config=None, frame_keys=("name", "filename", "line"),
                 share_frames=True, **kw):
        self.rng = random.Random(seed)
        self.clock = Clock(self.rng)
        self.config = config or AllocatorConfig()
        self.alloc = Allocator(n_devices, self.config, self.clock, **kw)
        self.ft = FrameTable(key_order=frame_keys, share=share_frames)

    def dev(self, d=0):
        return self.alloc[d]

    def malloc(self, nbytes, specs, dev=0, stream=0, gap=(4, 90)):
        self.clock.advance(*gap)
        return self.alloc[dev].malloc(nbytes, stream, self.ft.stack(specs))

    def free(self, block, specs, gap=(2, 40)):
        self.clock.advance(*gap)
        self.alloc[block.device].free(block, self.ft.stack(specs))

    def empty_cache(self, specs, dev=0, gap=(20, 200)):
        self.clock.advance(*gap)
        self.alloc[dev].empty_cache(self.ft.stack(specs))

    def annotate(self, stage, name, dev=0):
        self.clock.advance(1, 5)
        self.alloc.annotate(stage, name, dev)


# ---------------------------------------------------------------------------
# 1. train_small: 4-step training loop of a tiny MLP with Adam (PyTorch 2.5+ Python path)

TRAIN = USER + "/train.py"
MODEL = USER + "/model.py"


def _main(line=97):
    return [py("main", TRAIN, line), py("<module>", TRAIN, 131)]


def _step(line):
    return [py("train_step", TRAIN, line)] + _main()


def _fwd(model_line, inner):
    return inner + [py("forward", MODEL, model_line)] + module_call() + _step(55)


def train_small(seed=1, steps=4):
    IN, H, OUT, B = 512, 2560, 10, 128
    r = Run(seed)
    f32 = 4
    cuda_stack = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915),
                  py("cuda", MOD, 1068), py("main", TRAIN, 88), py("<module>", TRAIN, 131)]
    shapes = [("fc1.weight", H * IN), ("fc1.bias", H), ("fc2.weight", H * H), ("fc2.bias", H),
              ("fc3.weight", OUT * H), ("fc3.bias", OUT)]
    params = [r.malloc(n * f32, cuda_stack, gap=(30, 400)) for _, n in shapes]
    r.clock.advance(20000, 60000)  # building the optimizer, data loader start-up

    grads = [None] * len(params)
    exp_avg = []
    exp_avg_sq = []
    prev_loss = None
    opt_step = [py("_use_grad", OPT, 79), py("wrapper", OPT, 487)] + _step(58)
    for step in range(steps):
        r.clock.advance(25000, 60000)
        r.annotate("START", "ProfilerStep#%d" % step)
        # opt.zero_grad(): set_to_none frees last step's gradients
        r.annotate("START", "Optimizer.zero_grad#Adam.zero_grad")
        zg = [py("zero_grad", OPT, 1002), py("_fn", EVAL_FRAME_PY, 632)] + _step(52)
        for i, g in enumerate(grads):
            if g is not None:
                r.free(g, zg, gap=(1, 6))
                grads[i] = None
        r.annotate("END", "Optimizer.zero_grad#Adam.zero_grad")
        # x, y = batch.cuda()
        x = r.malloc(B * IN * f32, _step(53))
        y = r.malloc(B * 8, _step(54))
        # out = model(x)
        h1 = r.malloc(B * H * f32, _fwd(25, [py("forward", LIN, 125)] + module_call()))
        a1 = r.malloc(B * H * f32, _fwd(25, [py("relu", FUN, 1704)]))
        r.free(h1, _fwd(25, []))
        h2 = r.malloc(B * H * f32, _fwd(26, [py("forward", LIN, 125)] + module_call()))
        a2 = r.malloc(B * H * f32, _fwd(26, [py("relu", FUN, 1704)]))
        r.free(h2, _fwd(26, []))
        out = r.malloc(B * OUT * f32, _fwd(27, [py("forward", LIN, 125)] + module_call()))
        # loss = F.cross_entropy(out, y)
        ce = [py("cross_entropy", FUN, 3479)] + _step(56)
        logsm = r.malloc(B * OUT * f32, ce)
        loss = r.malloc(4, ce)
        total_weight = r.malloc(4, ce)
        # loss.backward(): grad seed on the main thread, the rest on the autograd device thread
        r.clock.advance(50, 200)
        seed_stack = [py("_make_grads", AUTOGRAD, 220), py("backward", AUTOGRAD, 340),
                      py("backward", TENSOR, 581)] + _step(57)
        g_loss = r.malloc(4, seed_stack)
        bw = []  # backward thread: no Python frames with stacks="python"
        g_logsm = r.malloc(B * OUT * f32, bw)
        r.free(g_loss, bw)
        r.free(total_weight, bw)
        g_out = r.malloc(B * OUT * f32, bw)
        r.free(g_logsm, bw)
        r.free(logsm, bw)
        g_a2 = r.malloc(B * H * f32, bw)
        grads[4] = r.malloc(OUT * H * f32, bw)
        grads[5] = r.malloc(OUT * f32, bw)
        r.free(g_out, bw)
        g_h2 = r.malloc(B * H * f32, bw)
        r.free(g_a2, bw)
        r.free(a2, bw)
        g_a1 = r.malloc(B * H * f32, bw)
        grads[2] = r.malloc(H * H * f32, bw)
        grads[3] = r.malloc(H * f32, bw)
        r.free(g_h2, bw)
        g_h1 = r.malloc(B * H * f32, bw)
        r.free(g_a1, bw)
        r.free(a1, bw)
        grads[0] = r.malloc(H * IN * f32, bw)
        grads[1] = r.malloc(H * f32, bw)
        r.free(g_h1, bw)
        # opt.step()
        r.clock.advance(100, 400)
        r.annotate("START", "Optimizer.step#Adam.step")
        if step == 0:
            init = [py("_init_group", ADAM, 135), py("step", ADAM, 226)] + opt_step
            for p in params:
                exp_avg.append(r.malloc(p.requested_size, init, gap=(2, 20)))
                exp_avg_sq.append(r.malloc(p.requested_size, init, gap=(2, 20)))
        mta = [py("_multi_tensor_adam", ADAM, 612), py("adam", ADAM, 782), py("maybe_fallback", OPT, 154),
               py("step", ADAM, 247)] + opt_step
        tmp = [r.malloc(p.requested_size, mta, gap=(2, 12)) for p in params]
        mta_end = [py("_multi_tensor_adam", ADAM, 625)] + mta[1:]
        for t in tmp:
            r.free(t, mta_end, gap=(1, 4))
        r.annotate("END", "Optimizer.step#Adam.step")
        # return loss.detach(): x, y, out die with the frame
        ret = _step(59)
        r.free(x, ret, gap=(1, 5))
        r.free(y, ret, gap=(1, 5))
        r.free(out, ret, gap=(1, 5))
        if prev_loss is not None:
            r.free(prev_loss, _main(97))
        prev_loss = loss
        r.annotate("END", "ProfilerStep#%d" % step)
    r.clock.advance(1000, 3000)
    return layout.modern_snapshot(r.alloc, r.ft)


# ---------------------------------------------------------------------------
# 2. legacy_2_0: PyTorch 2.0 file (history on blocks, 1-entry trace with a snapshot marker)

FLEX = "/home/user/flexgen"
TORCH20 = "/home/user/.conda/envs/flexgen/lib/python3.9/site-packages/torch"


def legacy_2_0(seed=2):
    r = Run(seed, frame_keys=("filename", "name", "line"), share_frames=False,
            record_context=STATE, max_entries=1, legacy_history=True)
    f16 = 2
    hidden, ffn, layers, batch, seq = 2048, 8192, 3, 2, 512

    def st(fn, line, *outer):
        return ([py(fn, FLEX + "/pytorch_backend.py", line)] + list(outer)
                + [py("generate", FLEX + "/flex_opt.py", 877), py("run_flexgen", FLEX + "/flex_opt.py", 1187),
                   py("main", FLEX + "/flex_opt.py", 1313), py("<module>", FLEX + "/flex_opt.py", 1340)])

    load = lambda line: st("init_weight_list", 140, py("init_weight", FLEX + "/flex_opt.py", line),
                           py("__init__", FLEX + "/flex_opt.py", 640))
    weights = []
    for layer in range(layers):
        for name_line in (101, 102, 103, 104):  # q, k, v, out projections 8 MiB each
            weights.append(r.malloc(hidden * hidden * f16, load(name_line)))
        weights.append(r.malloc(hidden * f16, load(105)))  # layer norm weight (small pool)
        weights.append(r.malloc(hidden * ffn * f16, load(106)))  # fc1 32 MiB
        weights.append(r.malloc(ffn * hidden * f16, load(107)))  # fc2 32 MiB
    cache = []
    for layer in range(layers):
        for line in (300, 301):  # k and v cache: batch*seq*hidden fp16 = 4 MiB
            cache.append(r.malloc(batch * seq * hidden * f16,
                                  st("allocate", 195, py("init_cache_one_gpu_batch", FLEX + "/pytorch_backend.py", line),
                                     py("init_cache", FLEX + "/flex_opt.py", 555))))
    # prefill: per layer temporaries of activation size, freed when the layer is done
    act = batch * seq * hidden * f16  # 4 MiB
    hidden_state = r.malloc(act, st("opt_input_embed", 240, py("forward", FLEX + "/flex_opt.py", 310)))
    for layer in range(layers):
        mha = lambda line: st("mha", line, py("forward", FLEX + "/flex_opt.py", 472))
        ln = r.malloc(act, [py("layer_norm", TORCH20 + "/nn/functional.py", 2515)] + mha(318))
        q = r.malloc(act, mha(323))
        k = r.malloc(act, mha(324))
        v = r.malloc(act, mha(325))
        r.free(ln, [])
        scores = r.malloc(batch * 32 * seq * seq * f16 // 8, mha(332))  # 4 MiB
        r.free(q, [])
        probs = r.malloc(batch * 32 * seq * seq * f16 // 8, [py("softmax", TORCH20 + "/nn/functional.py", 1843)] + mha(334))
        r.free(scores, [])
        attn = r.malloc(act, mha(336))
        r.free(probs, [])
        r.free(k, [])
        r.free(v, [])
        out = r.malloc(act, mha(340))
        r.free(attn, [])
        r.free(hidden_state, [])
        hidden_state = out
        mlp = lambda line: st("mlp", line, py("forward", FLEX + "/flex_opt.py", 559))
        ln2 = r.malloc(act, [py("layer_norm", TORCH20 + "/nn/functional.py", 2515)] + mlp(580))
        inter = r.malloc(batch * seq * ffn * f16, mlp(586))  # 16 MiB
        r.free(ln2, [])
        gelu = r.malloc(batch * seq * ffn * f16, [py("gelu", TORCH20 + "/nn/functional.py", 1608)] + mlp(587))
        r.free(inter, [])
        out2 = r.malloc(act, mlp(588))
        r.free(gelu, [])
        r.free(hidden_state, [])
        hidden_state = out2
    # decode step outputs (small pool)
    logits = r.malloc(batch * 50272 * f16 // 64, st("opt_output_embed", 279, py("forward", FLEX + "/flex_opt.py", 620)))
    r.malloc(batch * 8, st("generate_token", 290, py("forward", FLEX + "/flex_opt.py", 625)))  # next tokens, kept
    r.free(logits, [])
    # torch.cuda.memory_snapshot() (its snapshot marker stays in the 1-entry trace) ...
    r.dev().snapshot()
    # ... then torch.cuda.memory._dump_snapshot()
    return layout.legacy_snapshot(r.alloc)


# ---------------------------------------------------------------------------
# 3. bare_list: pickle of torch.cuda.memory_snapshot() (list of segments, 2.1+ keys)

def bare_list(seed=3):
    r = Run(seed)
    INFER = USER + "/infer.py"
    main = [py("main", INFER, 44), py("<module>", INFER, 61)]
    to_cuda = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915), py("_apply", MOD, 915),
               py("to", MOD, 1340), py("main", INFER, 30), py("<module>", INFER, 61)]
    f32 = 4
    params = []
    for cin, cout in ((3, 64), (64, 128), (128, 256), (256, 512)):
        params.append(r.malloc(cout * cin * 9 * f32, to_cuda))
        params.append(r.malloc(cout * f32, to_cuda))
    params.append(r.malloc(1000 * 512 * f32, to_cuda))
    params.append(r.malloc(1000 * f32, to_cuda))
    x = r.malloc(32 * 3 * 224 * 224 * f32, [py("main", INFER, 40), py("<module>", INFER, 61)])
    conv = lambda i: ([py("_conv_forward", CONV, 549), py("forward", CONV, 554)] + module_call()
                      + [py("forward", USER + "/net.py", 20 + i)] + module_call() + main)
    cur = x
    hw = 224
    for i, c in enumerate((64, 128, 256, 512)):
        y = r.malloc(32 * c * hw * hw * f32, conv(i))
        if cur is not x:
            r.free(cur, [py("forward", USER + "/net.py", 20 + i)] + module_call() + main)
        hw //= 2
        pooled = r.malloc(32 * c * hw * hw * f32, [py("max_pool2d", FUN, 830), py("forward", USER + "/net.py", 20 + i)]
                          + module_call() + main)
        r.free(y, [py("forward", USER + "/net.py", 20 + i)] + module_call() + main)
        cur = pooled
    logits = r.malloc(32 * 1000 * f32, [py("forward", LIN, 125)] + module_call()
                      + [py("forward", USER + "/net.py", 25)] + module_call() + main)
    r.free(cur, [py("forward", USER + "/net.py", 25)] + module_call() + main)
    probs = r.malloc(32 * 1000 * f32, [py("softmax", FUN, 2140)] + main)
    assert logits.allocated and probs.allocated and all(p.allocated for p in params)  # all still referenced
    segments = layout.modern_snapshot(r.alloc, r.ft)["segments"]
    return segments


# ---------------------------------------------------------------------------
# 4. expandable_multi: expandable segments, two busy devices (+1 idle), side stream with a
#    record_stream pending free, a CUDA-graph private pool, an OOM after an unmap flush.

def expandable_multi(seed=4):
    cfg = AllocatorConfig(expandable_segments=True)
    r = Run(seed, n_devices=3, config=cfg,
            per_device={0: {"capacity": 80 * GIB}, 1: {"capacity": 24 * GIB, "driver_overhead": 540 * MIB},
                        2: {"capacity": 80 * GIB}})
    PRE = USER + "/pretrain.py"
    main0 = [py("main", PRE, 210), py("<module>", PRE, 260)]
    f16 = 2

    def st(fn, line, outer=None):
        return [py(fn, PRE, line)] + (outer or main0)

    # device 0: model on the default stream
    to_cuda = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915), py("to", MOD, 1340)] + main0
    params = [r.malloc(n, to_cuda, dev=0) for n in (50257 * 1024 * f16, 1024 * f16, 4096 * 1024 * f16, 4096 * f16,
                                                      1024 * 4096 * f16, 1024 * f16, 3 * 1024 * 1024 * f16, 3072 * f16)]
    # data prefetch on a side stream; record_stream on the default stream's consumer buffers
    pf = [py("_prefetch", USER + "/data.py", 77), py("__next__", USER + "/data.py", 90)] + st("train", 180)
    side_batches = []
    for i in range(3):
        b = r.malloc(8 * 1024 * 8, pf, dev=0, stream=SIDE_STREAM)  # token ids on the side stream
        side_batches.append(b)
    # activations on the default stream, consumed by the side stream (record_stream)
    acts = []
    fwd = lambda line: [py("forward", USER + "/gpt.py", line)] + module_call() + st("train", 184)
    for i in range(4):
        acts.append(r.malloc(8 * 1024 * 1024 * f16 + 4096 * i, fwd(60 + i), dev=0))
    small_tmp = [r.malloc(4096 * (i + 1), fwd(70), dev=0) for i in range(6)]
    for b in small_tmp[::2]:
        r.free(b, fwd(71))
    # first activation copied to host on the side stream: record_stream, then freed -> pending
    r.dev(0).record_stream(acts[0], SIDE_STREAM)
    r.free(acts[0], st("train", 188))
    r.dev(0).stream_work_done(SIDE_STREAM)  # that copy finished ...
    logits = r.malloc(8 * 1024 * 50257 * f16 // 16, fwd(80), dev=0)  # ... so this malloc completes the free
    # second one is still in flight at snapshot time -> active_pending_free
    r.dev(0).record_stream(acts[1], SIDE_STREAM)
    r.free(acts[1], st("train", 190))
    r.free(side_batches[0], st("train", 191))
    # CUDA graph capture into a private pool (0, 1) on the capture stream
    r.dev(0).begin_allocate_to_pool((0, 1), CAPTURE_STREAM)
    g_static = [r.malloc(n, [py("forward", USER + "/gpt.py", 66)] + module_call() + st("capture_decode", 142),
                         dev=0, stream=CAPTURE_STREAM) for n in (3 * 1024 * 1024 * f16, 1024 * 1024 * f16, 64 * 1024)]
    r.free(g_static[1], st("capture_decode", 143))
    r.dev(0).end_allocate_to_pool()
    r.free(logits, st("train", 195))

    # device 1: a second model replica until an allocation does not fit (24 GiB device)
    main1 = [py("worker", USER + "/pretrain.py", 230), py("run", "/opt/conda/lib/python3.11/multiprocessing/process.py", 108)]
    big = lambda line: [py("forward", USER + "/gpt.py", line)] + module_call() + [py("step", PRE, 200)] + main1
    kept = []
    for i in range(5):
        kept.append(r.malloc(3 * GIB + 123 * MIB * i, big(90 + i), dev=1))
    small1 = [r.malloc(300 * 1024 + 512 * i, big(99), dev=1) for i in range(4)]
    r.free(kept[1], big(100))
    r.free(kept[3], big(101))
    r.free(small1[1], big(102))
    try:
        r.malloc(15 * GIB + 7 * MIB + 100, big(110), dev=1)
        raise AssertionError("expected an OOM on device 1")
    except OutOfMemoryError:
        pass
    r.clock.advance(500, 2000)
    return layout.modern_snapshot(r.alloc, r.ft)


# ---------------------------------------------------------------------------
# 5. cpp_proto2: torch::cuda::_memory_snapshot_pickled() (C++ Pickler, protocol 2)

def cpp_proto2(seed=5):
    r = Run(seed)
    SERVE = USER + "/serve.py"
    main = [py("handle", SERVE, 73), py("serve_forever", SERVE, 120), py("<module>", SERVE, 151)]

    def allst(py_frames, op):
        return interleave_cpp(py_frames, op)

    addmm = [cpp("at::native::structured_addmm_out_cuda::impl(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&, at::Tensor const&)"),
             cpp("at::_ops::addmm::call(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&)"),
             cpp("at::native::linear(at::Tensor const&, at::Tensor const&, std::optional<at::Tensor> const&)"),
             cpp("torch::autograd::THPVariable_linear(_object*, _object*, _object*)", "python_nn_functions.cpp")]
    copy = [cpp("at::native::_to_copy(at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, std::optional<c10::MemoryFormat>)"),
            cpp("torch::autograd::THPVariable_to(_object*, _object*, _object*)", "python_variable_methods.cpp")]
    load = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("to", MOD, 1340),
            py("load_model", SERVE, 40), py("<module>", SERVE, 148)]
    params = [r.malloc(n, allst(load, copy)) for n in (4096 * 4096 * 2, 4096 * 2, 4096 * 11008 * 2, 11008 * 2)]
    for step in range(3):
        x = r.malloc(16 * 4096 * 2, allst([py("handle", SERVE, 70)] + main[1:], copy))
        # a frame without line information (-1 in the C++ pickler)
        jit = [py("<eval_with_key>.%d" % step, "<eval_with_key>.%d" % step, LINE_NONE_CPP)]
        h = r.malloc(512 * 11008 * 2, allst([py("forward", LIN, 125)] + module_call() + jit + main, addmm))
        o = r.malloc(16 * 4096 * 2, allst([py("forward", LIN, 125)] + module_call() + jit + main, addmm))
        r.free(h, allst(main, []))
        r.free(x, allst(main, []))
        r.free(o, allst(main, []))
    r.empty_cache(allst([py("empty_cache", TORCH + "/cuda/memory.py", 192), py("handle", SERVE, 80)] + main[1:], []))
    assert all(p.allocated for p in params)
    return layout.cpp_snapshot(r.alloc, r.ft)


# ---------------------------------------------------------------------------
# 6. wrapped_ring: trace ring buffer overflowed (max_entries), starts mid-history

def _wrapped_run(seed, max_entries):
    r = Run(seed, max_entries=max_entries)
    FT = USER + "/finetune.py"
    main = [py("main", FT, 150), py("<module>", FT, 170)]
    f16 = 2
    layer = lambda i, line: [py("forward", USER + "/lora.py", line)] + module_call() + [
        py("forward", USER + "/lora.py", 90 + i)] + module_call() + [py("train_step", FT, 120)] + main
    base = [r.malloc(n, [py("load", FT, 60)] + main) for n in (64 * MIB, 16 * MIB, 16 * MIB, 512 * 1024, 300 * 1024)]
    live = []
    for step in range(6):
        r.clock.advance(2000, 6000)
        for b in live:
            r.free(b, [py("train_step", FT, 131)] + main)
        live = []
        acts = []
        for i in range(4):
            acts.append(r.malloc((3 + step % 3) * MIB + 4096 * i, layer(i, 40)))
            acts.append(r.malloc(200 * 1024 + 1024 * step, layer(i, 41)))
        for i, a in enumerate(acts):
            if i % 3 != 2:
                r.free(a, [])
            else:
                live.append(a)
        if step == 2:
            # torch.cuda.memory_snapshot() called mid-run leaves a `snapshot` marker
            r.clock.advance(100, 300)
            r.dev().snapshot()
        if step == 3:
            # torch.cuda.empty_cache(): segment_free of segments allocated long before
            r.empty_cache([py("empty_cache", TORCH + "/cuda/memory.py", 192), py("train_step", FT, 135)] + main)
    r.free(base[3], [py("main", FT, 160)] + main[1:])
    return r


def wrapped_ring(seed=6):
    full = _wrapped_run(seed, max_entries=1 << 62)
    entries = full.dev().trace.entries()
    # choose the window: start on a free_requested whose alloc is older, >= 45% of the trace dropped
    seen_alloc = {}
    for i, te in enumerate(entries):
        if te.action == "alloc":
            seen_alloc[te.addr] = i
    start = None
    for i in range(int(len(entries) * 0.45), len(entries)):
        te = entries[i]
        if te.action == "free_requested" and entries[i + 1].action == "free_completed":
            # its alloc must be before the window
            last_alloc = max((j for j in range(i) if entries[j].action == "alloc" and entries[j].addr == te.addr),
                             default=-1)
            if last_alloc < i:
                start = i
                break
    max_entries = len(entries) - start
    r = _wrapped_run(seed, max_entries=max_entries)
    snap = layout.modern_snapshot(r.alloc, r.ft)
    assert snap["device_traces"][0][0]["action"] == "free_requested"
    return snap


# ---------------------------------------------------------------------------
# 7. line_max: frames whose line is 2**64-1 (Python path "no line"), one stacks="all" stack,
#    forward_frames on a trace entry, a non-empty user_metadata.

def line_max(seed=7):
    r = Run(seed)
    COMP = USER + "/compiled.py"
    main = [py("main", COMP, 33), py("<module>", COMP, 40)]
    fake = TORCH + "/_subclasses/fake_tensor.py"
    dyn = [py("_fn", EVAL_FRAME_PY, 632), py("__call__", TORCH + "/_dynamo/convert_frame.py", 1400)]
    noline = [py("init_gpu_context", fake, LINE_NONE_PY), py("__init__", fake, 1202)]
    w = r.malloc(1024 * 1024 * 4, [py("convert", MOD, 1326), py("_apply", MOD, 942), py("to", MOD, 1340)] + main)
    outs = []
    for i in range(3):
        gen = [py("call", "/tmp/torchinductor_user/xy/cxyzabcdefgh%d.py" % i, LINE_NONE_PY),
               py("run", TORCH + "/_inductor/output_code.py", 460)] + dyn
        outs.append(r.malloc(256 * 1024 * (i + 1), gen + [py("forward", USER + "/net.py", 12)] + main))
    tmp = r.malloc(2048, noline + dyn + main)
    r.free(tmp, noline + dyn + main)
    r.free(outs[0], main)
    # backward-thread alloc carrying the autograd forward traceback
    gw = r.malloc(1024 * 1024 * 4, [])
    te_fw = r.dev().trace.buf[-1]
    te_fw.extra = {"forward_frames": [
        '  File "%s", line 40, in <module>\n    main()\n' % COMP,
        '  File "%s", line 33, in main\n    loss = model(x).sum()\n' % COMP,
        '  File "%s", line 12, in forward\n    return self.fc(x)\n' % (USER + "/net.py"),
    ]}
    # torch.cuda.memory._set_memory_metadata("phase=eval step=3")
    m = r.malloc(4096, [py("evaluate", COMP, 25)] + main)
    r.dev().trace.buf[-1].extra = {"user_metadata": "phase=eval step=3"}
    # _record_memory_history(stacks="all") for the last allocation
    cstack = interleave_cpp([py("forward", LIN, 125)] + module_call() + [py("forward", USER + "/net.py", 12)] + main,
                            [cpp("at::native::structured_mm_out_cuda::impl(at::Tensor const&, at::Tensor const&, at::Tensor const&)"),
                             cpp("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)")])
    r.malloc(64 * 1024, cstack)
    assert w.allocated and gw.allocated and m.allocated
    return layout.modern_snapshot(r.alloc, r.ft)


# ---------------------------------------------------------------------------
# 8. state_only: `_dump_snapshot()` of a process that never called `_record_memory_history`:
#    segments and blocks, no trace, no frames anywhere (the bare_list inference workload).

def state_only(seed=8):
    r = Run(seed, record_history=False)
    f32 = 4
    params = [r.malloc(n * f32, []) for n in (64 * 27, 64, 128 * 576, 128, 256 * 1152, 256, 512 * 2304, 512,
                                             1000 * 512, 1000)]
    x = r.malloc(32 * 3 * 224 * 224 * f32, [])
    feats = r.malloc(32 * 512 * 7 * 7 * f32, [])
    tmp = r.malloc(32 * 256 * 14 * 14 * f32, [])
    r.free(tmp, [])
    logits = r.malloc(32 * 1000 * f32, [])
    assert all(p.allocated for p in params) and x.allocated and feats.allocated and logits.allocated
    return layout.modern_snapshot(r.alloc, r.ft, annotations=False)


SMALL_SAMPLES = [
    ("train_small.pickle", "py4", train_small),
    ("legacy_2_0.pickle", "py4", legacy_2_0),
    ("bare_list.pickle", "py4", bare_list),
    ("expandable_multi.pickle", "py4", expandable_multi),
    ("cpp_proto2.pickle", "cpp", cpp_proto2),
    ("wrapped_ring.pickle", "py4", wrapped_ring),
    ("line_max.pickle", "py4", line_max),
    ("state_only.pickle", "py4", state_only),
]
