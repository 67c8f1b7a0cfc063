"""Scenario samples for `memlens fit` on forward-only traces (issue 37): a training step's
forward recorded with the previous step's gradients still alive, a forward with a hand-written
attention that materialises the B×H×S×S scores, and an evaluation forward with autograd on
(with its no_grad control).

Each function returns (snapshot | {path: snapshot}, truth); truths come from the scenario's
own bookkeeping.
"""

from . import layout
from .allocator import ALL
from .frames_categories import F32, MODEL, NNF, TRAIN, all312, cpp, engine, node, op
from .scenarios import ADAM, MOD, OPT, Run
from .stacks import TORCH, USER, module_call, py
from .truth import Tracker, site_of_specs

MIB = 1 << 20
LIN = TORCH + "/nn/modules/linear.py"
ACT = TORCH + "/nn/modules/activation.py"
SPARSE = TORCH + "/nn/modules/sparse.py"
ATTN = USER + "/attention.py"
EVAL = USER + "/eval.py"


def _drop_before_trace(tk, block, specs, cat):
    """Free, inside the trace, a block allocated before it: the tally starts at the bytes live
    before the trace (tk.initial), so the free takes its size below zero."""
    tk.live[block.serial] = (block.requested_size, site_of_specs(specs), cat)
    tk.cat_bytes[cat] = tk.cat_bytes.get(cat, 0) + block.requested_size


# ---------------------------------------------------------------------------
# 1. fwd_stale_grads: one forward pass of a training step, recorded after history was
#    switched off and on again (the trace cleared, the blocks keeping their frames), with the
#    gradients of the previous backward still alive (zero_grad(set_to_none=True) is called
#    after the forward, before backward), stacks="all" (Python 3.12)
#
# model.py: 30 class Layer:  31 h = self.fc1(x); 32 a = F.gelu(h); 33 return x + self.fc2(a)
#           45 class Net:    46 x = self.emb(ids); 47 for l in self.layers: x = l(x); 48 return self.head(x)
# train.py: 55 for ids in loader:  58 ids = ids.cuda()  61 logits = model(ids)
#           62 opt.zero_grad()  63 loss = ...; loss.backward(); 64 opt.step()

def fwd_stale_grads(seed=61, layers=4, H=1024, F=4096, V=8192, T=2048):
    r = Run(seed)
    dev = r.dev(0)
    main = lambda line: [py("main", TRAIN, line), py("<module>", TRAIN, 140)]
    step = lambda line: [py("train_step", TRAIN, line)] + main(118)
    to_cuda = all312([py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915),
                      py("cuda", MOD, 1068)] + main(104),
                     [cpp("at::native::_to_copy(at::Tensor const&, std::optional<c10::ScalarType>)"),
                      op("_to_copy"), cpp("torch::autograd::THPVariable_cuda(_object*, _object*, _object*)")])
    sizes = [V * H * F32] + [H * F * F32, F * H * F32] * layers + [V * H * F32]
    params = [r.malloc(n, to_cuda, gap=(30, 300)) for n in sizes]
    P = sum(sizes)
    r.clock.advance(20000, 60000)
    # the previous step: its input, its backward's gradients (the engine's thread) and Adam's
    # state (made by the first step, kept)
    copy = [cpp("at::native::_to_copy(at::Tensor const&)"), op("_to_copy")]
    prev_ids = r.malloc(T * 8, all312(step(58), copy))
    mm2 = [cpp("torch::autograd::generated::details::mm_mat2_backward(at::Tensor const&, at::Tensor const&)"),
           op("mm", "at::Tensor const&, at::Tensor const&")]
    grads = []
    for i, n in reversed(list(enumerate(sizes))):
        ops = ([cpp("at::native::embedding_dense_backward_cuda(at::Tensor const&)"), op("embedding_dense_backward")]
               if i == 0 else mm2)
        grads.append(r.malloc(n, engine(node("EmbeddingBackward0" if i == 0 else "MmBackward0"), ops), gap=(5, 40)))
    G = sum(sizes)
    init = all312([py("_init_group", ADAM, 135), py("step", ADAM, 226), py("_use_grad", OPT, 79),
                   py("wrapper", OPT, 487)] + step(64),
                  [cpp("at::native::zeros_like(at::Tensor const&)"), op("zeros_like")])
    state = []
    for n in sizes:
        state.append(r.malloc(n, init, gap=(2, 20)))
        state.append(r.malloc(n, init, gap=(2, 20)))
    S = 2 * P
    # history off and on again: the trace starts empty, the blocks keep their frames
    dev.set_history(enabled=False)
    dev.set_history(enabled=True, record_context=ALL)
    tk = Tracker(r)
    tk.initial = P + G + S + T * 8
    r.clock.advance(5000, 15000)
    # the loop rebinds `ids`: the previous step's input goes first
    _drop_before_trace(tk, prev_ids, all312(step(58), copy), "input")
    tk.free(prev_ids, all312(main(117), []))
    ids = tk.malloc(T * 8, all312(step(58), copy), cat="input")

    def fwd(line, inner, layer_line=None):
        chain = inner + [py("forward", MODEL, line)] + module_call()
        if layer_line is not None:
            chain += [py("forward", MODEL, layer_line)] + module_call()
        return chain + step(61)

    lin = [py("forward", LIN, 125)] + module_call()
    mm = [cpp("at::native::structured_mm_out_cuda::impl(at::Tensor const&, at::Tensor const&, at::Tensor const&)"),
          op("mm", "at::Tensor const&, at::Tensor const&")]
    x = tk.malloc(T * H * F32, all312(fwd(46, [py("forward", SPARSE, 190)] + module_call()),
                                      [cpp("at::native::embedding(at::Tensor const&, at::Tensor const&)"),
                                       op("embedding")]), cat="act")
    for _ in range(layers):
        tk.malloc(T * F * F32, all312(fwd(31, lin, 47), mm), cat="act")
        tk.malloc(T * F * F32, all312(fwd(32, [py("gelu", NNF, 1700)], 47),
                                      [cpp("at::native::gelu(at::Tensor const&)"), op("gelu")]), cat="act")
        tk.malloc(T * H * F32, all312(fwd(33, lin, 47), mm), cat="act")  # fc2's output
        x = tk.malloc(T * H * F32, all312(fwd(33, [], 47), [cpp("at::native::add(at::Tensor const&)"), op("add")]),
                      cat="act")
    tk.malloc(T * V * F32, all312(fwd(48, lin), mm), cat="act")
    # the profiler window closes as the forward returns: the trace ends here
    r.clock.advance(1000, 3000)
    assert tk.cat_bytes.get("input", 0) == T * 8
    acts = tk.cat_bytes["act"]
    truth = {
        "sample": "fwd_stale_grads.pickle",
        "scenario": "one forward pass of a training step of a %d-layer MLP-style model (embedding, "
                    "fc1/gelu/fc2 + residual per layer, untied head) recorded with stacks=\"all\" after history "
                    "was switched off and on again: parameters (set-up frames), the previous backward's "
                    "gradients (autograd engine C++ frames) and Adam's two moments (torch/optim/adam.py, "
                    "kept) are older than the trace; zero_grad runs after the forward, so the gradients are "
                    "alive in it; the trace ends as the forward returns (its last allocation is the peak)"
                    % layers,
        "layers": layers,
        "parameter_bytes": P,
        "gradient_bytes": G,
        "optimizer_state_bytes": S,
        "activation_bytes_at_peak": acts,
        "input_bytes_at_peak": T * 8,
        "initial_bytes": tk.initial,
        "peak_bytes": tk.initial + tk.peak_bytes,
        "peak_event_index": tk.peak_index,
        "first_fix": "zero_grad_set_to_none",
        "first_fix_saves_bytes": G,
    }
    assert tk.peak_bytes == tk.bytes and tk.initial + tk.bytes == P + G + S + T * 8 + acts
    del params, grads, state
    return layout.modern_snapshot(r.alloc, r.ft), truth


# ---------------------------------------------------------------------------
# 2. fwd_attention: the first training step's forward (no gradients yet) of a transformer whose
#    attention is hand-written in attention.py as `scaled_dot_product_attention`: the scores,
#    their scaled copy (the scores freed), the softmax (saved for backward, the scaled copy
#    freed), dropout's mask (bool: a quarter of the scores) and its output (saved by p @ v)
#
# attention.py: 10 def scaled_dot_product_attention(q, k, v, p):
#               11   s = q @ k.transpose(-2, -1); 12 s = s / math.sqrt(q.size(-1))
#               13   a = F.softmax(s, dim=-1);     14 a = F.dropout(a, p); 15 return a @ v
# model.py:     20 class Block:  21 q = self.q(x)..; 22 k; 23 v; 24 o = sdpa(q, k, v, 0.1)
#               25 o = self.proj(o.transpose(1, 2).reshape(..)); 26 x = x + o
#               27 h = self.fc1(x); 28 h = F.gelu(h); 29 x = x + self.fc2(h)
#               45 x = self.emb(ids); 47 for b in self.blocks: x = b(x); 48 return self.head(x)

def fwd_attention(seed=62, layers=4, B=2, heads=8, S=512, d=64, V=4096):
    assert S >= 4 * d
    r = Run(seed)
    dev = r.dev(0)
    dev.set_history(enabled=False)
    Hd = heads * d
    main = lambda line: [py("main", TRAIN, line), py("<module>", TRAIN, 140)]
    step = lambda line: [py("train_step", TRAIN, line)] + main(118)
    loader = [py("cuda", MOD, 1068)] + main(104)
    sizes = [V * Hd * F32] + [Hd * Hd * F32] * 4 * layers + [Hd * 4 * Hd * F32, 4 * Hd * Hd * F32] * layers \
        + [V * Hd * F32]
    params = [r.malloc(n, loader, gap=(30, 300)) for n in sizes]
    P = sum(sizes)
    r.clock.advance(20000, 60000)
    dev.set_history(enabled=True, record_context=ALL)
    tk = Tracker(r)
    tk.initial = P
    blk = lambda line, inner: (inner + [py("forward", MODEL, line)] + module_call()
                               + [py("forward", MODEL, 47)] + module_call() + step(61))
    att = lambda line, inner: blk(24, inner + [py("scaled_dot_product_attention", ATTN, line)])
    net = lambda line, inner: inner + [py("forward", MODEL, line)] + module_call() + step(61)
    lin = [py("forward", LIN, 125)] + module_call()
    tok = B * S
    z = B * heads * S * S * F32       # one score matrix
    proj = B * S * Hd * F32           # one projection (B×S×H×d)
    ids = tk.malloc(tok * 8, step(58), cat="input")
    x = tk.malloc(proj, net(45, [py("forward", SPARSE, 190)] + module_call()), cat="act")
    for _ in range(layers):
        for line in (21, 22, 23):
            tk.malloc(proj, blk(line, lin), cat="act")
        s = tk.malloc(z, att(11, []), cat="score")
        s2 = tk.malloc(z, att(12, []), cat="score")
        tk.free(s, att(12, []))
        a = tk.malloc(z, att(13, [py("softmax", NNF, 2140)]), cat="score")
        tk.free(s2, att(13, []))
        # the bool mask: fused attention keeps none (it regenerates it), so it counts as score
        tk.malloc(z // 4, att(14, [py("dropout", NNF, 1425)]), cat="score")
        tk.malloc(z, att(14, [py("dropout", NNF, 1425)]), cat="score")
        del a
        tk.malloc(proj, att(15, []), cat="act")
        tk.malloc(proj, blk(25, lin), cat="act")
        x = tk.malloc(proj, blk(26, []), cat="act")
        tk.malloc(4 * proj, blk(27, lin), cat="act")
        tk.malloc(4 * proj, blk(28, [py("gelu", NNF, 1700)]), cat="act")
        tk.malloc(proj, blk(29, lin), cat="act")
        x = tk.malloc(proj, blk(29, []), cat="act")
    tk.malloc(tok * V * F32, net(48, lin), cat="act")
    r.clock.advance(1000, 3000)
    pc = tk.peak_cats
    truth = {
        "sample": "fwd_attention.pickle",
        "scenario": "the first training step's forward (no gradients or optimizer state yet; weights loaded "
                    "before history recording, frameless) of a %d-layer transformer with B=%d, %d heads, S=%d, "
                    "head dim %d: attention hand-written in attention.py:scaled_dot_product_attention (scores, "
                    "scaled copy, softmax, dropout mask and output); the softmax, the dropout mask and output are "
                    "saved for backward, the scores and their scaled copy freed within the call; the trace "
                    "ends as the forward returns" % (layers, B, heads, S, d),
        "layers": layers, "B": B, "heads": heads, "S": S, "head_dim": d,
        "score_tensor_bytes": z,
        "projection_bytes": proj,
        "parameter_bytes": P,
        "attention_score_bytes_at_peak": pc.get("score", 0),
        "attention_score_tensors_at_peak": 3 * layers,
        "activation_bytes_at_peak": pc.get("score", 0) + pc.get("act", 0),
        "attention_function": "attention.py:scaled_dot_product_attention",
        "initial_bytes": P,
        "peak_bytes": P + tk.peak_bytes,
        "peak_event_index": tk.peak_index,
    }
    assert pc["score"] == 2 * layers * z + layers * (z // 4)
    del params, ids
    return layout.modern_snapshot(r.alloc, r.ft), truth


# ---------------------------------------------------------------------------
# 3. eval_autograd / eval_no_grad: an evaluation forward of an inference job (weights loaded
#    before history recording) with autograd on: each layer's four tensors are saved by the
#    graph until the forward returns (argmax ids, not differentiable: the graph dies with it);
#    the control runs the same forward under torch.no_grad(): each tensor freed as the next
#    one is made
#
# model.py: 31 h = self.fc1(x); 32 a = F.gelu(h); 33 o = self.fc2(a); 34 return x + o
#           46 x = self.emb(ids); 47 for l in self.layers: x = l(x); 48 logits = self.head(x)
#           49 return logits.argmax(-1)
# eval.py:  40 def evaluate(model, loader): 42 ids = ids.cuda(); 43 preds = model(ids)
#           44 correct += (preds == labels).sum().item()

def _eval_run(seed, grad, layers, H, F, V, T):
    r = Run(seed)
    dev = r.dev(0)
    dev.set_history(enabled=False)
    main = lambda line: [py("main", EVAL, line), py("<module>", EVAL, 90)]
    ev = lambda line: [py("evaluate", EVAL, line)] + main(80)
    sizes = [V * H * F32] + [H * F * F32, F * H * F32] * layers + [V * H * F32]
    params = [r.malloc(n, [py("cuda", MOD, 1068)] + main(70), gap=(30, 300)) for n in sizes]
    P = sum(sizes)
    r.clock.advance(20000, 60000)
    dev.set_history(enabled=True, record_context=ALL)
    tk = Tracker(r)
    tk.initial = P
    lyr = lambda line, inner: (inner + [py("forward", MODEL, line)] + module_call()
                               + [py("forward", MODEL, 47)] + module_call() + ev(43))
    net = lambda line, inner: inner + [py("forward", MODEL, line)] + module_call() + ev(43)
    lin = [py("forward", LIN, 125)] + module_call()
    ids = tk.malloc(T * 8, ev(42), cat="input")
    x = tk.malloc(T * H * F32, net(46, [py("forward", SPARSE, 190)] + module_call()), cat="act")
    kept = [x]
    per_layer = [T * F * F32, T * F * F32, T * H * F32, T * H * F32]
    for _ in range(layers):
        h = tk.malloc(per_layer[0], lyr(31, lin), cat="act")
        a = tk.malloc(per_layer[1], lyr(32, [py("gelu", NNF, 1700)]), cat="act")
        if not grad:
            tk.free(h, lyr(32, []))
        o = tk.malloc(per_layer[2], lyr(33, lin), cat="act")
        if not grad:
            tk.free(a, lyr(33, []))
        nx = tk.malloc(per_layer[3], lyr(34, []), cat="act")
        if grad:
            kept += [h, a, o, nx]
        else:
            tk.free(o, lyr(34, []))
            tk.free(x, lyr(34, []))
        x = nx
    if not grad:
        kept = [x]
    logits = tk.malloc(T * V * F32, net(48, lin), cat="act")
    preds = tk.malloc(T * 8, net(49, []), cat="output")
    # the forward returns: the graph (autograd on) or the last tensors go with its locals
    for t in kept + [logits]:
        tk.free(t, net(49, []), gap=(1, 5))
    hits = tk.malloc(T, ev(44), cat="temp")  # preds == labels, outside the model
    tk.free(hits, ev(44))
    tk.free(preds, ev(44))
    tk.free(ids, ev(44))
    r.clock.advance(1000, 3000)
    del params
    return r, tk, P, per_layer


def eval_autograd(seed=63, layers=4, H=1024, F=4096, V=8192, T=2048):
    ra, tka, P, per_layer = _eval_run(seed, True, layers, H, F, V, T)
    rn, tkn, _P, _ = _eval_run(seed, False, layers, H, F, V, T)
    emb, logits = T * H * F32, T * V * F32
    acts = tka.peak_cats["act"]
    assert acts == emb + layers * sum(per_layer) + logits
    sizes = sorted(per_layer * layers)
    truth = {
        "sample": "eval_autograd.pickle",
        "control": "eval_no_grad.pickle",
        "scenario": "one evaluation forward (eval.py:evaluate, weights loaded before history recording) of a "
                    "%d-layer MLP-style model, autograd on: each layer's four tensors (model.py:31..34) are "
                    "kept by the graph until the forward returns argmax ids (the peak is the ids' allocation, "
                    "inside the forward); eval_no_grad.pickle: the same forward under torch.no_grad(), each "
                    "tensor freed as the next is made" % layers,
        "layers": layers,
        "layer_sites": 4,
        "per_layer_tensor_bytes": per_layer,
        "per_layer_bytes": sum(per_layer),
        "embedding_bytes": emb,
        "logits_bytes": logits,
        "median_layer_tensor_bytes": sizes[len(sizes) // 2],
        "activation_bytes_at_peak": acts,
        "outputs_bytes_at_peak": tka.peak_cats.get("output", 0),
        "parameter_bytes": P,
        "initial_bytes": P,
        "peak_bytes": P + tka.peak_bytes,
        "peak_event_index": tka.peak_index,
        "control_activation_bytes_at_peak": tkn.peak_cats["act"],
        "control_peak_bytes": P + tkn.peak_bytes,
        "control_peak_event_index": tkn.peak_index,
    }
    return {"eval_autograd.pickle": layout.modern_snapshot(ra.alloc, ra.ft),
            "eval_no_grad.pickle": layout.modern_snapshot(rn.alloc, rn.ft)}, truth


FINDING_SAMPLES = [
    ("fwd_stale_grads", "fwd_stale_grads.pickle", fwd_stale_grads),
    ("fwd_attention", "fwd_attention.pickle", fwd_attention),
    ("eval_autograd", None, eval_autograd),
]
