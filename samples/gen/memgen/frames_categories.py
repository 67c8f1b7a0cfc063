"""Scenario samples for sites and categories (issue 19, items 1 and 8): stacks recorded with
C++ frames the way PyTorch 2.11 on Python 3.12 writes them, autograd-thread stacks without
Python frames, a library between the user's line and the allocation, a custom optimizer that
rebuilds its state out of place, a KV cache in a library's cache code, inference outputs, a
loop only its lines reveal, and gradients older than the trace.

Each function returns (snapshot, truth); truths come from the scenario's own bookkeeping.
"""

from . import layout
from .allocator import ALL
from .scenarios import AUTOGRAD, MOD, OPT, TENSOR, Run
from .stacks import (CPP_INTERP_TAIL, CPP_MALLOC_HEAD, EVAL_FRAME, PY, TORCH, USER, cpp,
                     module_call, py)
from .truth import Tracker

MIB = 1 << 20
F32 = 4

TRAIN = USER + "/train.py"
MODEL = USER + "/model.py"
OPTIM = USER + "/optimizer.py"
SERVE = USER + "/serve.py"
EINOPS = PY + "/site-packages/einops/einops.py"
EINOPS_BE = PY + "/site-packages/einops/_backends.py"
TFUNC = TORCH + "/functional.py"
NNF = TORCH + "/nn/functional.py"
HF = PY + "/site-packages/transformers"
LLAMA = HF + "/models/llama/modeling_llama.py"
CACHE = HF + "/cache_utils.py"
SGD = TORCH + "/optim/sgd.py"
WORKSPACE = 32 * MIB  # cuBLAS workspace on Hopper (CUBLAS_WORKSPACE_CONFIG :4096:8)

# The autograd engine's thread: C++ frames only (innermost first, after the node).
ENGINE_TAIL = [
    cpp("torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", ""),
    cpp("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, "
        "torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)"),
    cpp("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
    cpp("torch::autograd::Engine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)"),
    cpp("torch::autograd::python::PythonEngine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)", ""),
    cpp("??"),
    cpp("start_thread"),
    cpp("__clone"),
]


def all312(py_frames, op_frames):
    """stacks="all" under Python 3.12 (innermost first): the allocator's C++ frames, the
    operator's, the innermost Python frame spliced in before its evaluation loop, the rest of
    the interpreter's C frames down to `_start`, then the other Python frames, which PyTorch
    appends after the C++ stack (one evaluation loop runs them all)."""
    return (list(CPP_MALLOC_HEAD) + list(op_frames) + [py_frames[0], EVAL_FRAME]
            + list(CPP_INTERP_TAIL) + list(py_frames[1:]))


def node(name):
    return cpp("torch::autograd::generated::%s::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)" % name)


def engine(node_frame, op_frames):
    """A backward-thread stack: allocator, operator, the node, the engine's thread."""
    return list(CPP_MALLOC_HEAD) + list(op_frames) + [node_frame] + ENGINE_TAIL


def op(name, args="at::Tensor const&"):
    return cpp("at::_ops::%s::call(%s)" % (name, args))


WORKSPACE_OPS = [
    cpp("at::cuda::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream)"),
    cpp("at::cuda::getCurrentCUDABlasHandle()"),
    cpp("void at::cuda::blas::gemm_internal_cublas<float, float>(char, char, long, long, long, float, float const*, long, float const*, long, float, float*, long)"),
    cpp("at::native::structured_mm_out_cuda::impl(at::Tensor const&, at::Tensor const&, at::Tensor const&)"),
    op("mm", "at::Tensor const&, at::Tensor const&"),
]


# ---------------------------------------------------------------------------
# 1. train_stacks_all: two training steps recorded with stacks="all" (Python 3.12)
#
# model.py:  38 class Layer(nn.Module):             48 class Net(nn.Module):
#            39   h = einops.einsum(x, self.w1, ..)  49   x = self.emb[ids]
#            40   a = torch.relu(h)                  50   for l in self.layers: x = l(x)
#            41   return einops.einsum(a, self.w2)   52   return einops.einsum(x, self.emb, ..)
# optimizer.py (class Lion-ish(torch.optim.Optimizer)): 70 m = zeros_like(p); 73 m = b1*m + (1-b1)*g
#            74 v = b2*v + (1-b2)*g*g (both out of place); 76 p -= lr * m / (v.sqrt() + eps)
# train.py:  59 ids = batch.cuda(); 61 logits = model(ids); 62 loss = F.cross_entropy(...);
#            63 loss.backward(); 64 opt.step(); 57 opt.zero_grad(set_to_none=True)

def train_stacks_all(seed=41, steps=2, layers=2, H=512, F=2048, V=4096, T=2048):
    r = Run(seed)
    tk = Tracker(r)
    main = lambda line: [py("main", TRAIN, line), py("<module>", TRAIN, 140)]
    step = lambda line: [py("train_step", TRAIN, line)] + main(118)

    def fwd(model_line, inner, layer_line=None):
        chain = inner + [py("forward", MODEL, model_line)] + module_call()
        if layer_line is not None:
            chain += [py("forward", MODEL, layer_line)] + module_call()
        return chain + step(61)

    einsum_py = [py("einsum", TFUNC, 373), py("einsum", EINOPS_BE, 291), py("einsum", EINOPS, 907)]
    einsum_ops = [cpp("at::native::sumproduct_pair(at::Tensor const&, at::Tensor const&, c10::ArrayRef<long>, long)"),
                  cpp("at::native::einsum(std::basic_string_view<char>, c10::ArrayRef<at::Tensor>)"),
                  op("einsum", "std::basic_string_view<char>, c10::ArrayRef<at::Tensor>"),
                  cpp("torch::autograd::THPVariable_einsum(_object*, _object*, _object*)", "python_torch_functions_0.cpp")]

    # model.cuda(): parameters (module set-up frames)
    to_cuda = all312([py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915),
                      py("cuda", MOD, 1068)] + main(104),
                     [cpp("at::native::_to_copy(at::Tensor const&, std::optional<c10::ScalarType>)"),
                      op("_to_copy"), cpp("torch::autograd::THPVariable_cuda(_object*, _object*, _object*)")])
    sizes = [V * H * F32] + [H * F * F32, F * H * F32] * layers
    params = [tk.malloc(n, to_cuda, cat="param", gap=(30, 300)) for n in sizes]
    P = sum(sizes)
    r.clock.advance(20000, 60000)

    grads = {}
    state = {}
    workspaces = []
    truth_grad_by_node = {}
    for k in range(1, steps + 1):
        r.clock.advance(20000, 50000)
        r.annotate("START", "ProfilerStep#%d" % k)
        zg = all312([py("zero_grad", OPT, 1002)] + step(57), [])
        for i in sorted(grads):
            tk.free(grads.pop(i), zg, gap=(1, 5))
        ids = tk.malloc(T * 8, all312(step(59), [cpp("at::native::_to_copy(at::Tensor const&)"), op("_to_copy")]),
                        cat="input")
        emb_out = tk.malloc(T * H * F32, all312(fwd(49, []), [cpp("at::native::index(at::Tensor const&)"),
                                                              op("index_Tensor")]), cat="act")
        x = emb_out
        saved = []
        for li in range(layers):
            if k == 1 and li == 0:
                # the first matmul of the main thread's cuBLAS handle
                workspaces.append(tk.malloc(WORKSPACE, all312(fwd(39, einsum_py, 50), WORKSPACE_OPS + einsum_ops),
                                            cat="workspace"))
            h = tk.malloc(T * F * F32, all312(fwd(39, einsum_py, 50), einsum_ops), cat="act")
            a = tk.malloc(T * F * F32, all312(fwd(40, [], 50), [cpp("at::native::relu(at::Tensor const&)"), op("relu")]),
                          cat="act")
            o = tk.malloc(T * H * F32, all312(fwd(41, einsum_py, 50), einsum_ops), cat="act")
            saved.append((x, h, a))
            x = o
        logits = tk.malloc(T * V * F32, all312(fwd(52, einsum_py), einsum_ops), cat="act")
        ce = [py("cross_entropy", NNF, 3479)] + step(62)
        logsm = tk.malloc(T * V * F32, all312(ce, [cpp("at::native::log_softmax(at::Tensor const&, long)"),
                                                   op("_log_softmax")]), cat="act")
        loss = tk.malloc(4, all312(ce, [cpp("at::native::nll_loss(at::Tensor const&)"), op("nll_loss")]), cat="loss")

        # loss.backward(): the seed on the main thread, everything else on the engine's thread
        r.clock.advance(50, 200)
        seed_ = tk.malloc(4, all312([py("_make_grads", AUTOGRAD, 220), py("backward", AUTOGRAD, 340),
                                     py("backward", TENSOR, 581)] + step(63),
                                    [cpp("at::native::ones_like(at::Tensor const&)"), op("ones_like")]),
                          cat="act_grad")
        g_logsm = tk.malloc(T * V * F32, engine(node("NllLossBackward0"),
                                                [cpp("at::native::nll_loss_backward(at::Tensor const&)"),
                                                 op("nll_loss_backward")]), cat="act_grad")
        tk.free(seed_, engine(node("NllLossBackward0"), []))
        g_logits = tk.malloc(T * V * F32, engine(node("LogSoftmaxBackward0"),
                                                 [cpp("at::native::_log_softmax_backward_data(at::Tensor const&)"),
                                                  op("_log_softmax_backward_data")]), cat="act_grad")
        tk.free(g_logsm, engine(node("LogSoftmaxBackward0"), []))
        tk.free(logsm, engine(node("LogSoftmaxBackward0"), []))
        mm2 = [cpp("torch::autograd::generated::details::mm_mat2_backward(at::Tensor const&, at::Tensor const&)"),
               op("mm", "at::Tensor const&, at::Tensor const&")]
        mm1 = [cpp("torch::autograd::generated::details::mm_mat1_backward(at::Tensor const&, at::Tensor const&)"),
               op("mm", "at::Tensor const&, at::Tensor const&")]
        if k == 1:
            # the engine thread's own cuBLAS handle: a second workspace
            workspaces.append(tk.malloc(WORKSPACE, engine(node("MmBackward0"), WORKSPACE_OPS + mm2), cat="workspace"))
        g_emb_head = tk.malloc(V * H * F32, engine(node("MmBackward0"), mm2), cat="act_grad")
        g_x = tk.malloc(T * H * F32, engine(node("MmBackward0"), mm1), cat="act_grad")
        tk.free(g_logits, engine(node("MmBackward0"), []))
        tk.free(logits, engine(node("MmBackward0"), []))
        for li in reversed(range(layers)):
            xin, h, a = saved[li]
            pi = 1 + 2 * li
            # w2's gradient: mm_mat2_backward's result, stolen by AccumulateGrad
            grads[pi + 1] = tk.malloc(F * H * F32, engine(node("MmBackward0"), mm2), cat="grad")
            truth_grad_by_node["MmBackward0"] = truth_grad_by_node.get("MmBackward0", 0) + F * H * F32
            g_a = tk.malloc(T * F * F32, engine(node("MmBackward0"), mm1), cat="act_grad")
            tk.free(x if li == layers - 1 else saved[li + 1][0], engine(node("MmBackward0"), []))
            g_h = tk.malloc(T * F * F32, engine(node("ReluBackward0"),
                                                [cpp("at::native::threshold_backward(at::Tensor const&)"),
                                                 op("threshold_backward")]), cat="act_grad")
            tk.free(g_a, engine(node("ReluBackward0"), []))
            tk.free(a, engine(node("ReluBackward0"), []))
            # w1's gradient: a non-contiguous einsum result that AccumulateGrad clones
            tmp = tk.malloc(H * F * F32, engine(node("MmBackward0"), mm2), cat="act_grad")
            grads[pi] = tk.malloc(H * F * F32, engine(
                cpp("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
                [cpp("torch::autograd::utils::clone_obey_contract(at::Tensor const&, at::Tensor const&)"),
                 op("clone")]), cat="grad")
            truth_grad_by_node["AccumulateGrad"] = truth_grad_by_node.get("AccumulateGrad", 0) + H * F * F32
            tk.free(tmp, engine(node("MmBackward0"), []))
            g_in = tk.malloc(T * H * F32, engine(node("MmBackward0"), mm1), cat="act_grad")
            tk.free(g_h, engine(node("MmBackward0"), []))
            tk.free(h, engine(node("MmBackward0"), []))
            tk.free(g_x, engine(node("MmBackward0"), []))
            g_x = g_in
        tk.free(saved[0][0], engine(node("EmbeddingBackward0"), []))
        # the embedding's gradient: the head's part summed with the lookup's
        grads[0] = tk.malloc(V * H * F32, engine(node("EmbeddingBackward0"),
                                                  [cpp("at::native::embedding_dense_backward_cuda(at::Tensor const&)"),
                                                   op("embedding_dense_backward")]), cat="grad")
        truth_grad_by_node["EmbeddingBackward0"] = truth_grad_by_node.get("EmbeddingBackward0", 0) + V * H * F32
        tk.free(g_x, engine(node("EmbeddingBackward0"), []))
        tk.free(g_emb_head, engine(cpp("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)"), []))

        # opt.step(): a custom optimizer subclassing torch.optim.Optimizer
        r.clock.advance(100, 400)
        ostep = lambda line: [py("step", OPTIM, line), py("_use_grad", OPT, 79), py("wrapper", OPT, 487)] + step(64)
        arith = lambda name: [cpp("at::native::%s(at::Tensor const&, at::Tensor const&)" % name), op(name)]
        for i, p in enumerate(params):
            n = p.requested_size
            if i not in state:
                state[i] = [tk.malloc(n, all312(ostep(70), [cpp("at::native::zeros_like(at::Tensor const&)"),
                                                            op("zeros_like")]), cat="opt_state", gap=(1, 4)),
                            tk.malloc(n, all312(ostep(71), [cpp("at::native::zeros_like(at::Tensor const&)"),
                                                            op("zeros_like")]), cat="opt_state", gap=(1, 4))]
            m_new = tk.malloc(n, all312(ostep(73), arith("add")), cat="opt_state", gap=(1, 4))
            tk.free(state[i][0], all312(ostep(73), []), gap=(1, 3))
            v_new = tk.malloc(n, all312(ostep(74), arith("add")), cat="opt_state", gap=(1, 4))
            tk.free(state[i][1], all312(ostep(74), []), gap=(1, 3))
            state[i] = [m_new, v_new]
            upd = tk.malloc(n, all312(ostep(76), arith("div")), cat="opt_temp", gap=(1, 4))
            tk.free(upd, all312(ostep(76), []), gap=(1, 3))
        ret = step(65)
        tk.free(ids, all312(ret, []), gap=(1, 4))
        tk.free(loss, all312(ret, []), gap=(1, 4))
        r.annotate("END", "ProfilerStep#%d" % k)
        tk.mark("end#%d" % k)
    r.clock.advance(1000, 3000)
    assert tk.cat_bytes["param"] == P and tk.cat_bytes["grad"] == P and tk.cat_bytes["opt_state"] == 2 * P
    assert tk.cat_bytes["workspace"] == 2 * WORKSPACE
    assert sum(truth_grad_by_node.values()) == steps * P
    by_node_end = {"AccumulateGrad": H * F * F32 * layers, "MmBackward0": F * H * F32 * layers,
                   "EmbeddingBackward0": V * H * F32}
    truth = {
        "sample": "train_stacks_all.pickle",
        "scenario": "2 training steps of an einops model (embedding, %d layers, tied head) with a custom "
                    "optimizer rebuilding its two moments out of place each step, recorded with stacks=\"all\" "
                    "under Python 3.12: Python frames after the innermost are appended after `_start`; "
                    "backward allocations carry only the autograd engine's C++ frames" % layers,
        "steps": steps,
        "parameter_bytes": P, "parameter_count": len(params),
        "gradient_bytes_at_end": P,
        "gradient_bytes_by_node_at_end": by_node_end,
        "optimizer_state_bytes_at_end": 2 * P,
        "optimizer_state_sites": [OPTIM + ":73:step", OPTIM + ":74:step"],
        "workspace_bytes": 2 * WORKSPACE,
        "workspace_sites": {"forward": MODEL + ":39:forward", "backward": "autograd: MmBackward0"},
        "einsum_site": MODEL + ":39:forward",
        "einsum_context": EINOPS_BE + ":291:einsum",
        "categories_at_end": dict((k, v) for k, v in tk.cat_bytes.items() if v),
        "categories_at_peak": dict((k, v) for k, v in tk.peak_cats.items() if v),
        "peak": tk.peak_facts(),
    }
    return layout.modern_snapshot(r.alloc, r.ft), truth


# ---------------------------------------------------------------------------
# 2. serve_kv: two requests served by a transformers model, no annotations, history started
#    after the weights were loaded (their blocks carry no frames)
#
# serve.py: 55 def handle_requests(model, batches):   80 main(); 90 <module>
#           57   for ids in batches:
#           58     ids = ids.cuda()
#           60     cache = DynamicCache()
#           61     out = model(ids, past_key_values=cache)
#           62     results.append(out.logits.argmax(-1))

def serve_kv(seed=42, requests=2, layers=2, H=1024, V=16384, B=4, T=256):
    r = Run(seed)
    dev = r.dev(0)
    dev.set_history(enabled=False)
    loader = [py("load_model", SERVE, 20), py("main", SERVE, 78), py("<module>", SERVE, 90)]
    weights = [r.malloc(n, loader, gap=(20, 200)) for n in [V * H * F32] + [4 * H * H * F32] * layers + [V * H * F32]]
    P = sum(w.requested_size for w in weights)
    r.clock.advance(20000, 60000)
    dev.set_history(enabled=True, record_context=ALL)
    tk = Tracker(r)
    tk.initial = P  # live before the trace: check_truth offsets the oracle's timeline by it
    loop = lambda line: [py("handle_requests", SERVE, line), py("main", SERVE, 80), py("<module>", SERVE, 90)]
    top = lambda inner, line: (inner + [py("forward", LLAMA, line)] + module_call() + loop(61))
    lyr = lambda inner, line: top(inner + [py("forward", LLAMA, line)] + module_call(), 560)
    kv_one = B * T * H * F32
    starts = []
    results = []
    out_logits = None
    cache = []
    for q in range(requests):
        r.clock.advance(5000, 15000)
        ids = tk.malloc(B * T * 8, loop(58), cat="input")
        starts.append(tk.events() - 1)
        for c in cache:
            tk.free(c, loop(60))
        cache = []
        if out_logits is not None:
            tk.free(out_logits, loop(61))
        x = tk.malloc(B * T * H * F32, top([py("forward", TORCH + "/nn/modules/sparse.py", 190)] + module_call(), 548),
                      cat="act")
        for li in range(layers):
            qkv = tk.malloc(3 * B * T * H * F32, lyr([py("forward", TORCH + "/nn/modules/linear.py", 125)] + module_call(), 296),
                            cat="act")
            upd = [py("update", CACHE, 430)]
            cache.append(tk.malloc(kv_one, lyr(upd, 301), cat="kv_cache"))
            cache.append(tk.malloc(kv_one, lyr(upd, 301), cat="kv_cache"))
            att = tk.malloc(B * T * H * F32, lyr([py("scaled_dot_product_attention", NNF, 5500)], 310), cat="act")
            tk.free(qkv, lyr([], 310))
            o = tk.malloc(B * T * H * F32, lyr([py("forward", TORCH + "/nn/modules/linear.py", 125)] + module_call(), 312),
                          cat="act")
            tk.free(att, lyr([], 312))
            tk.free(x, lyr([], 312))
            x = o
        out_logits = tk.malloc(B * T * V * F32, top([py("forward", TORCH + "/nn/modules/linear.py", 125)] + module_call(), 1190),
                               cat="output")
        tk.free(x, top([], 1190))
        results.append(tk.malloc(B * T * 8, loop(62), cat="output"))
        tk.free(ids, loop(62))
        tk.mark("end#%d" % (q + 1))
    r.clock.advance(1000, 3000)
    kv_end = tk.cat_bytes["kv_cache"]
    assert kv_end == 2 * layers * kv_one
    truth = {
        "sample": "serve_kv.pickle",
        "scenario": "%d requests through a transformers Llama (%d layers) with a DynamicCache; weights loaded "
                    "before history recording (no frames, no trace); no annotations: the steps are the request "
                    "loop's iterations (serve.py:58 .. :62)" % (requests, layers),
        "requests": requests,
        "step_source": "loop",
        "step_starts": starts,
        "parameter_bytes": P,
        "kv_cache_bytes_at_end": kv_end,
        "kv_cache_context": CACHE + ":430:update",
        "outputs_bytes_at_end": tk.cat_bytes["output"],
        "site": SERVE + ":61:handle_requests",
        "peak_traced": tk.peak_facts(),
    }
    return layout.modern_snapshot(r.alloc, r.ft), truth


# ---------------------------------------------------------------------------
# 3. late_grads: SGD with momentum, zero_grad(set_to_none=False), stacks="python", a ring buffer
#    that kept the last step only: the parameters' blocks keep their set-up frames, the
#    gradients' (made on the engine's thread) carry none, and the momentum buffers theirs

def _late_grads_run(seed, steps, layers, H, F, T, max_entries):
    r = Run(seed, max_entries=max_entries)
    main = lambda line: [py("main", TRAIN, line), py("<module>", TRAIN, 140)]
    step = lambda line: [py("train_step", TRAIN, line)] + main(118)
    to_cuda = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("cuda", MOD, 1068)] + main(104)
    sizes = [H * F * F32, F * H * F32] * layers + [H * F32]
    params = [r.malloc(n, to_cuda, gap=(30, 300)) for n in sizes]
    P = sum(sizes)
    grads = {}
    momentum = {}
    fwd = lambda line: [py("forward", MODEL, line)] + module_call() + step(61)
    for k in range(1, steps + 1):
        r.clock.advance(20000, 50000)
        x = r.malloc(T * H * F32, step(59))
        acts = [r.malloc(T * F * F32, fwd(40)) for _ in range(layers)]
        loss = r.malloc(4, [py("mse_loss", NNF, 3800)] + step(62))
        seed_ = r.malloc(4, [py("_make_grads", AUTOGRAD, 220), py("backward", AUTOGRAD, 340),
                             py("backward", TENSOR, 581)] + step(63))
        g = r.malloc(T * F * F32, [])
        r.free(seed_, [])
        for i, p in enumerate(params):
            if i not in grads:
                grads[i] = r.malloc(p.requested_size, [])  # first backward: .grad made, kept
        for a in acts:
            r.free(a, [])
        r.free(g, [])
        sgd = [py("_multi_tensor_sgd", SGD, 400), py("sgd", SGD, 300), py("step", SGD, 120),
               py("_use_grad", OPT, 79), py("wrapper", OPT, 487)] + step(64)
        for i, p in enumerate(params):
            if i not in momentum:
                momentum[i] = r.malloc(p.requested_size, sgd)
        r.clock.advance(10, 50)  # zero_grad(set_to_none=False): in place, nothing freed
        r.free(loss, step(65))
        r.free(x, step(65))
    r.clock.advance(1000, 3000)
    return r, P


def late_grads(seed=43, steps=3, layers=3, H=1024, F=4096, T=1024):
    # The smallest ring buffer over 30 entries whose oldest kept entry is a free: what a
    # wrapped buffer looks like (its allocation was overwritten).
    for max_entries in range(30, 80):
        r, P = _late_grads_run(seed, steps, layers, H, F, T, max_entries)
        t = r.dev(0).trace.entries()
        if len(t) == max_entries and t[0].action == "free_requested":
            break
    else:
        raise AssertionError("no ring buffer size starts at a free")
    truth = {
        "sample": "late_grads.pickle",
        "scenario": "%d SGD-with-momentum steps of a %d-layer MLP recorded with stacks=\"python\" into a ring "
                    "buffer of %d entries: the trace keeps the last step and a little of the one before; parameters (set-up frames), "
                    "their gradients (made on the autograd thread: no frames, kept by "
                    "zero_grad(set_to_none=False)) and momentum buffers (torch/optim frames) are all older "
                    "than the trace" % (steps, layers, max_entries),
        "parameter_bytes": P,
        "gradient_bytes": P,
        "optimizer_state_bytes": P,
        "max_entries": max_entries,
        "sites": {"parameters": TRAIN + ":104:main"},
    }
    return layout.modern_snapshot(r.alloc, r.ft), truth


FINDING_SAMPLES = [
    ("train_stacks_all", "train_stacks_all.pickle", train_stacks_all),
    ("serve_kv", "serve_kv.pickle", serve_kv),
    ("late_grads", "late_grads.pickle", late_grads),
]
