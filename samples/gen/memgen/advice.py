"""Scenario samples for the one advice engine (issue 52 item 2, reading.md §4-5): a hand-written
attention chain whose every B×H×S×S tensor autograd keeps is live at the peak, a vLLM-style
engine whose KV cache is pre-sized up front, and a training job with no optimizer state that
runs out of memory.

Each function returns (snapshot, truth); truths come from the scenario's own bookkeeping (the
Tracker's tally of what it allocated), never from reading the pickle back.
"""

from . import layout
from .allocator import OutOfMemoryError
from .findings import MLPTrainer, oom_state
from .scenarios import ADAM, AUTOGRAD, MOD, OPT, TENSOR, Run
from .stacks import PY, TORCH, USER, module_call, py
from .truth import Tracker

MIB = 1 << 20
GIB = 1 << 30
F32 = 4
F16 = 2
BOOL = 1

LIN = TORCH + "/nn/modules/linear.py"
SPARSE = TORCH + "/nn/modules/sparse.py"
NORM = TORCH + "/nn/modules/normalization.py"
DROP = TORCH + "/nn/modules/dropout.py"
NNF = TORCH + "/nn/functional.py"
SGD = TORCH + "/optim/sgd.py"
GRAPH = TORCH + "/autograd/graph.py"
TRAIN = USER + "/train.py"
MODEL = USER + "/model.py"


# ---------------------------------------------------------------------------
# 1. attention_chain: one training step (forward, backward, AdamW's first step) of a small
#    GPT whose attention is written by hand in the attention module's forward, in model.py
#    (a file and a function, `forward`, not named for attention), recorded with
#    stacks="python" (the backward's allocations are frameless).
#
# model.py:
#   18 class Attention(nn.Module):       def forward(self, x, mask):
#   19   q = self.q(x).view(B, S, H, d).transpose(1, 2)      (20 k, 21 v the same)
#   22   s = q @ k.transpose(-2, -1)                          scores            (freed by 23)
#   23   s = s / math.sqrt(self.d)                            scaled            (freed by 24)
#   24   s = s.masked_fill(self.mask[..., :S, :S] == 0, -inf) masked            (freed by 25)
#   25   a = F.softmax(s, dim=-1)                             softmax           KEPT (SoftmaxBackward: its result)
#   26   a = self.drop(a)                                     dropout out, mask KEPT (bmm saves the output,
#                                                                                  NativeDropoutBackward the mask)
#   27   o = (a @ v).transpose(1, 2).reshape(B, S, H * d)     bmm out (freed by the reshape's copy), copy
#   28   return self.proj(o)
#   33 class Mlp:  34 return self.fc2(F.gelu(self.fc1(x)))
#   41 class Block: 42 x = x + self.attn(self.ln1(x)); 43 x = x + self.mlp(self.ln2(x))
#   51 class GPT:   52 x = self.emb(ids); 54 for b in self.blocks: x = b(x)
#                  55 logits = self.head(self.ln_f(x)); 56 return F.cross_entropy(logits..., targets...)
# train.py:
#   56 def train_step(model, opt, ids, targets):  57 opt.zero_grad(set_to_none=True)
#   58 ids = ids.cuda()  59 targets = targets.cuda()  60 loss = model(ids, targets)
#   61 loss.backward()   62 opt.step()   63 return loss.item()
#
# What autograd keeps of the chain (PyTorch's derivatives.yaml): `/ scalar` and `masked_fill`
# save no input, softmax saves its result, native_dropout its bool mask, and the bmm `a @ v`
# its input (dropout's output). So per layer the softmax, the dropout output (B×H×S×S in the
# element size) and the dropout mask (B×H×S×S bools) are kept until the backward reaches the
# layer; the scores and their scaled and masked copies die within the forward.

class _Gpt:
    def __init__(self, r, tk, layers, B, heads, S, d, V, elem):
        self.r, self.tk = r, tk
        self.L, self.B, self.Hn, self.S, self.d, self.V, self.e = layers, B, heads, S, d, V, elem
        self.C = heads * d
        self.tok = B * S
        self.z = B * heads * S * S * elem       # one B×H×S×S tensor in the element size
        self.mask = B * heads * S * S * BOOL    # dropout's bool mask of it
        self.proj = self.tok * self.C * elem     # one B×S×C activation
        self.params, self.grads, self.state = [], [], []

    # stacks (innermost first)
    def main(self, line=118):
        return [py("main", TRAIN, line), py("<module>", TRAIN, 140)]

    def step(self, line):
        return [py("train_step", TRAIN, line)] + self.main()

    def net(self, line, inner):
        return inner + [py("forward", MODEL, line)] + module_call() + self.step(60)

    def blk(self, line, inner):
        return inner + [py("forward", MODEL, line)] + module_call() + self.net(54, [])

    def att(self, line, inner):
        return inner + [py("forward", MODEL, line)] + module_call() + self.blk(42, [])

    def mlp(self, line, inner):
        return inner + [py("forward", MODEL, line)] + module_call() + self.blk(43, [])

    def build(self):
        C, V = self.C, self.V
        to_cuda = [py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915),
                   py("_apply", MOD, 915), py("cuda", MOD, 1068)] + self.main(104)
        sizes = [V * C * self.e]
        for _ in range(self.L):
            sizes += [C * self.e, C * self.e]                       # ln1
            sizes += [C * C * self.e] * 4                           # q, k, v, proj
            sizes += [C * self.e, C * self.e]                       # ln2
            sizes += [4 * C * C * self.e, 4 * C * C * self.e]       # fc1, fc2
        sizes += [C * self.e, C * self.e, V * C * self.e]           # ln_f, head
        self.params = [self.tk.malloc(n, to_cuda, cat="param", gap=(30, 300)) for n in sizes]
        return sum(sizes)

    def layer_norm(self, stack_of, line):
        inner = [py("layer_norm", NNF, 2910), py("forward", NORM, 217)] + module_call()
        tk = self.tk
        out = tk.malloc(self.proj, stack_of(line, inner), cat="act")
        mean = tk.malloc(self.tok * F32, stack_of(line, inner), cat="act")
        rstd = tk.malloc(self.tok * F32, stack_of(line, inner), cat="act")
        return [out, mean, rstd]

    def attention(self, lay):
        """The hand-written chain of one layer; `lay` gets what autograd keeps."""
        tk, z = self.tk, self.z
        lin = [py("forward", LIN, 125)] + module_call()
        lay["qkv"] = [tk.malloc(self.proj, self.att(line, lin), cat="act") for line in (19, 20, 21)]
        s = tk.malloc(z, self.att(22, []), cat="score_transient")
        s2 = tk.malloc(z, self.att(23, []), cat="score_transient")
        tk.free(s, self.att(23, []))
        keep = tk.malloc(self.S * self.S * BOOL, self.att(24, []), cat="temp")  # mask == 0
        s3 = tk.malloc(z, self.att(24, []), cat="score_transient")
        tk.free(keep, self.att(24, []))
        tk.free(s2, self.att(24, []))
        lay["softmax"] = tk.malloc(z, self.att(25, [py("softmax", NNF, 2140)]), cat="score_softmax")
        tk.free(s3, self.att(25, []))
        dropout = [py("dropout", NNF, 1425), py("forward", DROP, 70)] + module_call()
        lay["dropout"] = tk.malloc(z, self.att(26, dropout), cat="score_dropout")
        lay["mask"] = tk.malloc(self.mask, self.att(26, dropout), cat="score_mask")
        av = tk.malloc(self.proj, self.att(27, []), cat="temp")
        lay["o"] = tk.malloc(self.proj, self.att(27, []), cat="act")  # reshape of a transpose: a copy
        tk.free(av, self.att(27, []))
        return tk.malloc(self.proj, self.att(28, lin), cat="temp")

    def forward(self):
        tk = self.tk
        ids = tk.malloc(self.tok * 8, self.step(58), cat="input")
        targets = tk.malloc(self.tok * 8, self.step(59), cat="input")
        x = tk.malloc(self.proj, self.net(52, [py("forward", SPARSE, 190)] + module_call()), cat="act")
        first = x
        lin = [py("forward", LIN, 125)] + module_call()
        layers = []
        for _ in range(self.L):
            lay = {"x": x}                                     # saved by ln1
            lay["ln1"] = self.layer_norm(self.blk, 42)
            attn_out = self.attention(lay)
            x = tk.malloc(self.proj, self.blk(42, []), cat="act")
            tk.free(attn_out, self.blk(42, []))                # add saves neither input
            lay["x2"] = x                                      # saved by ln2
            lay["ln2"] = self.layer_norm(self.blk, 43)
            lay["mlp"] = [tk.malloc(4 * self.proj, self.mlp(34, lin), cat="act"),
                          tk.malloc(4 * self.proj, self.mlp(34, [py("gelu", NNF, 1700)]), cat="act")]
            f2 = tk.malloc(self.proj, self.mlp(34, lin), cat="temp")
            x = tk.malloc(self.proj, self.blk(43, []), cat="act")
            tk.free(f2, self.blk(43, []))
            layers.append(lay)
        head = [x] + self.layer_norm(self.net, 55)
        logits = tk.malloc(self.tok * self.V * F32, self.net(55, lin), cat="act")
        ce = [py("cross_entropy", NNF, 3479)] + self.net(56, [])
        logsm = tk.malloc(self.tok * self.V * F32, ce, cat="act")
        loss = tk.malloc(4, ce, cat="loss")
        del first
        return {"ids": ids, "targets": targets, "layers": layers, "head": head,
                "logits": logits, "logsm": logsm, "loss": loss}

    def backward(self, s):
        """Frameless (the engine's thread): each node frees what it saved once it has run;
        a layer's weight gradients are made as its nodes run."""
        tk, z, tok, C, V = self.tk, self.z, self.tok, self.C, self.V
        self.r.clock.advance(50, 200)
        seed = tk.malloc(4, [py("_make_grads", AUTOGRAD, 220), py("backward", AUTOGRAD, 340),
                             py("backward", TENSOR, 581)] + self.step(61), cat="act_grad")
        bw = []
        g_logsm = tk.malloc(tok * V * F32, bw, cat="act_grad")
        tk.free(seed, bw)
        tk.free(s["logsm"], bw)
        g = tk.malloc(tok * V * F32, bw, cat="act_grad")
        tk.free(g_logsm, bw)
        n = len(self.params)
        grads = {n - 1: tk.malloc(V * C * self.e, bw, cat="grad")}
        g_x = tk.malloc(self.proj, bw, cat="act_grad")
        tk.free(g, bw)
        tk.free(s["logits"], bw)
        for t in s["head"][1:]:
            tk.free(t, bw)
        grads[n - 3] = tk.malloc(self.params[n - 3].requested_size, bw, cat="grad")
        grads[n - 2] = tk.malloc(self.params[n - 2].requested_size, bw, cat="grad")
        tk.free(s["head"][0], bw)
        for i in reversed(range(self.L)):
            lay, base = s["layers"][i], 1 + 10 * i
            # the MLP: fc2, gelu, fc1, ln2
            g_h = tk.malloc(4 * self.proj, bw, cat="act_grad")
            grads[base + 9] = tk.malloc(self.params[base + 9].requested_size, bw, cat="grad")
            for t in reversed(lay["mlp"]):
                tk.free(t, bw)
            grads[base + 8] = tk.malloc(self.params[base + 8].requested_size, bw, cat="grad")
            g_ln = tk.malloc(self.proj, bw, cat="act_grad")
            tk.free(g_h, bw)
            for t in lay["ln2"]:
                tk.free(t, bw)
            grads[base + 6] = tk.malloc(self.params[base + 6].requested_size, bw, cat="grad")
            grads[base + 7] = tk.malloc(self.params[base + 7].requested_size, bw, cat="grad")
            tk.free(lay["x2"], bw)
            tk.free(g_ln, bw)
            # the attention: proj, a @ v, dropout, softmax, masked_fill and / sqrt(d), q @ k^T
            grads[base + 5] = tk.malloc(self.params[base + 5].requested_size, bw, cat="grad")
            g_o = tk.malloc(self.proj, bw, cat="act_grad")
            tk.free(lay["o"], bw)
            g_a = tk.malloc(z, bw, cat="act_grad")
            tk.free(lay["dropout"], bw)
            g_d = tk.malloc(z, bw, cat="act_grad")
            tk.free(g_a, bw)
            tk.free(lay["mask"], bw)
            g_s = tk.malloc(z, bw, cat="act_grad")
            tk.free(g_d, bw)
            tk.free(lay["softmax"], bw)
            g_sc = tk.malloc(z, bw, cat="act_grad")
            tk.free(g_s, bw)
            tk.free(g_o, bw)
            for j in (2, 3, 4):
                grads[base + j] = tk.malloc(self.params[base + j].requested_size, bw, cat="grad")
            tk.free(g_sc, bw)
            for t in lay["qkv"]:
                tk.free(t, bw)
            for t in lay["ln1"]:
                tk.free(t, bw)
            grads[base] = tk.malloc(self.params[base].requested_size, bw, cat="grad")
            grads[base + 1] = tk.malloc(self.params[base + 1].requested_size, bw, cat="grad")
            tk.free(lay["x"], bw)
        grads[0] = tk.malloc(self.params[0].requested_size, bw, cat="grad")
        tk.free(g_x, bw)
        self.grads = [grads[k] for k in sorted(grads)]
        assert len(self.grads) == n

    def adamw_step(self):
        r, tk = self.r, self.tk
        r.clock.advance(100, 400)
        r.annotate("START", "Optimizer.step#AdamW.step")
        opt = lambda inner: inner + [py("_use_grad", OPT, 79), py("wrapper", OPT, 487)] + self.step(62)
        init = opt([py("_init_group", ADAM, 135), py("step", ADAM, 226)])
        for p in self.params:
            self.state.append(tk.malloc(p.requested_size, init, cat="opt_state", gap=(2, 20)))
            self.state.append(tk.malloc(p.requested_size, init, cat="opt_state", gap=(2, 20)))
        r.annotate("END", "Optimizer.step#AdamW.step")


def attention_chain(seed=71, layers=4, B=2, heads=8, S=512, d=64, V=6144):
    assert S >= 8 * d, "projections (B×S×H×d) stay far below a score tensor"
    r = Run(seed)
    tk = Tracker(r)
    m = _Gpt(r, tk, layers, B, heads, S, d, V, F32)
    P = m.build()
    r.clock.advance(20000, 60000)
    r.annotate("START", "ProfilerStep#1")
    s = m.forward()
    m.backward(s)
    m.adamw_step()
    ret = m.step(63)
    for t in (s["ids"], s["targets"], s["loss"]):
        tk.free(t, ret, gap=(1, 5))
    r.annotate("END", "ProfilerStep#1")
    r.clock.advance(1000, 3000)
    pc = tk.peak_cats
    per_kind = {k: pc.get("score_" + k, 0) for k in ("softmax", "dropout", "mask")}
    # every score-shaped tensor autograd keeps is live at the peak, none of the transient ones
    assert per_kind == {"softmax": layers * m.z, "dropout": layers * m.z, "mask": layers * m.mask}, per_kind
    assert pc.get("score_transient", 0) == 0
    # the backward's frameless tensors alive at the peak are not a score size (or half or
    # twice it): only the chain's own tensors are score-shaped there
    assert all(x not in (m.z, 2 * m.z, m.z // 2) for x in (m.tok * V * F32, V * m.C * F32))
    score_bytes = sum(per_kind.values())
    pf = tk.peak_facts()
    truth = {
        "sample": "attention_chain.pickle",
        "scenario": "one training step (forward, backward, AdamW's first step) of a %d-layer GPT (B=%d, %d heads, "
                    "S=%d, head dim %d, fp32, vocab %d) whose attention is written by hand in the attention "
                    "module's forward (model.py:forward, not named for attention): scores = q @ k^T, scaled, "
                    "masked_fill, F.softmax, nn.Dropout, @ v; autograd keeps the softmax, the dropout output "
                    "and the dropout's bool mask of every layer (B x H x S x S each) until the backward reaches "
                    "it, the scores and their scaled and masked copies die in the forward; the peak is the "
                    "backward's first gradient of the logits, every kept score tensor alive; stacks=\"python\" "
                    "(the backward frameless)" % (layers, B, heads, S, d, V),
        "layers": layers, "B": B, "heads": heads, "S": S, "head_dim": d,
        "score_tensor_bytes": m.z,
        "dropout_mask_bytes": m.mask,
        "projection_bytes": m.proj,
        "parameter_bytes": P,
        "attention_function": "model.py:forward",
        "score_tensors_per_layer": {"softmax": 1, "dropout_output": 1, "dropout_mask": 1},
        "score_bytes_at_peak_by_kind": {"softmax": per_kind["softmax"], "dropout_output": per_kind["dropout"],
                                        "dropout_mask": per_kind["mask"]},
        "score_tensors_at_peak": 3 * layers,
        "score_bytes_at_peak": score_bytes,
        "fused_attention_saves_bytes": score_bytes,
        "peak": pf,
    }
    return layout.modern_snapshot(r.alloc, r.ft), truth


# ---------------------------------------------------------------------------
# 2. vllm_kv: a vLLM engine (0.6-style V0 worker) in an RL rollout script: the weights (made on
#    the GPU under `torch.device`, vllm/model_executor/layers), the profile run (a dummy batch
#    at the longest sequences, freed), then the KV cache pre-sized as one tensor per layer in
#    `vllm/worker/cache_engine.py:_allocate_kv_cache` (what gpu_memory_utilization leaves after
#    the weights and the profile's peak), then a few decode steps whose temporaries die in the
#    step. No backward anywhere; stacks="python".
#
# rollout.py: 30 def build_engine(): 34 llm = LLM(model=..., gpu_memory_utilization=0.9)
#             60 def generate(llm, prompts): 63 outs = llm.generate(prompts, params)
#             90 def main(): 92 llm = build_engine()  95 generate(llm, prompts)   120 main()

VLLM = PY + "/site-packages/vllm"
ROLLOUT = USER + "/rollout.py"


def _engine_init(line_in_llm_engine):
    return [py("__init__", VLLM + "/engine/llm_engine.py", line_in_llm_engine),
            py("from_engine_args", VLLM + "/engine/llm_engine.py", 583),
            py("__init__", VLLM + "/entrypoints/llm.py", 214),
            py("build_engine", ROLLOUT, 34), py("main", ROLLOUT, 92), py("<module>", ROLLOUT, 120)]


def _executor(fn, line, llm_engine):
    return [py(fn, VLLM + "/executor/gpu_executor.py", line)] + llm_engine


def vllm_kv(seed=72, layers=6, H=2048, F=5632, V=32000, kv_heads=16, head_dim=128,
            num_blocks=2048, block_size=16, decode_steps=3, batch=16):
    r = Run(seed)
    tk = Tracker(r)
    # weights: created on the GPU under `with torch.device("cuda")` by each layer's
    # create_weights, then loaded in place (no allocation)
    init = _executor("_init_executor", 47, [py("__init__", VLLM + "/executor/executor_base.py", 46)]
                     + _engine_init(335))
    load = ([py("load_model", VLLM + "/worker/worker.py", 183),
             py("load_model", VLLM + "/worker/model_runner.py", 1051)])
    create = lambda layer_file, line: ([py("__torch_function__", TORCH + "/utils/_device.py", 106),
                                        py("create_weights", VLLM + "/model_executor/layers/" + layer_file, line),
                                        py("__init__", VLLM + "/model_executor/layers/" + layer_file, 295),
                                        py("__init__", VLLM + "/model_executor/models/llama.py", 80),
                                        py("_initialize_model", VLLM + "/model_executor/model_loader/loader.py", 174),
                                        py("load_model", VLLM + "/model_executor/model_loader/loader.py", 399)]
                                       + load + init)
    sizes = [(V * H * F16, "vocab_parallel_embedding.py", 395)]
    for _ in range(layers):
        sizes += [(H * F16, "layernorm.py", 0), (3 * H * H * F16, "linear.py", 364), (H * H * F16, "linear.py", 364),
                  (H * F16, "layernorm.py", 0), (2 * F * H * F16, "linear.py", 364), (H * F * F16, "linear.py", 364)]
    sizes += [(H * F16, "layernorm.py", 0), (V * H * F16, "vocab_parallel_embedding.py", 395)]
    weights = []
    for n, f, line in sizes:
        if f == "layernorm.py":
            stack = ([py("__torch_function__", TORCH + "/utils/_device.py", 106),
                      py("__init__", VLLM + "/model_executor/layers/layernorm.py", 30),
                      py("__init__", VLLM + "/model_executor/models/llama.py", 240),
                      py("_initialize_model", VLLM + "/model_executor/model_loader/loader.py", 174),
                      py("load_model", VLLM + "/model_executor/model_loader/loader.py", 399)] + load + init)
        else:
            stack = create(f, line)
        weights.append(tk.malloc(n, stack, cat="param", gap=(20, 200)))
    W = sum(w.requested_size for w in weights)
    r.clock.advance(20000, 60000)

    # the model runner's forward (the profile run, a prefill or a decode), under
    # torch.inference_mode: every tensor dies within the call
    llama = VLLM + "/model_executor/models/llama.py"
    layers_py = VLLM + "/model_executor/layers"

    def fwd(run, tokens):
        top = lambda line: [py("forward", llama, line)] + module_call() + run  # LlamaForCausalLM
        model = lambda line: [py("forward", llama, line)] + module_call() + top(521)  # LlamaModel
        layer = lambda line, inner: inner + [py("forward", llama, line)] + module_call() + model(348)
        lin = [py("forward", layers_py + "/linear.py", 382)] + module_call()
        h = tk.malloc(tokens * H * F16, [py("forward", layers_py + "/vocab_parallel_embedding.py", 406)]
                      + module_call() + model(330), cat="act")
        res = None
        for _ in range(layers):
            qkv = tk.malloc(tokens * 3 * H * F16, layer(163, lin), cat="act")
            att = tk.malloc(tokens * H * F16, layer(170, [py("forward", VLLM + "/attention/backends/flash_attn.py", 690),
                                                          py("forward", VLLM + "/attention/layer.py", 99)]
                                                    + module_call()), cat="act")
            tk.free(qkv, layer(170, []))
            o = tk.malloc(tokens * H * F16, layer(171, lin), cat="act")
            tk.free(att, layer(171, []))
            gu = tk.malloc(tokens * 2 * F * F16, layer(93, lin), cat="act")
            a = tk.malloc(tokens * F * F16, layer(94, [py("forward", layers_py + "/activation.py", 37)]
                                                  + module_call()), cat="act")
            tk.free(gu, layer(94, []))
            d = tk.malloc(tokens * H * F16, layer(95, lin), cat="act")
            tk.free(a, layer(95, []))
            tk.free(o, layer(95, []))
            if res is not None:
                tk.free(res, model(348))
            res = d
        logits = tk.malloc(tokens * V * F32, [py("_get_logits", layers_py + "/logits_processor.py", 90),
                                              py("forward", layers_py + "/logits_processor.py", 66)]
                           + module_call() + run, cat="act")
        tk.free(h, run)
        tk.free(res, run)
        ids = tk.malloc(batch * 8, [py("forward", layers_py + "/sampler.py", 280)] + module_call() + run,
                        cat="output")
        tk.free(logits, run)
        tk.free(ids, run)

    runner = VLLM + "/worker/model_runner.py"
    # the profile run: the longest batch the engine schedules, to find the activations' peak
    kv_init = [py("_initialize_kv_caches", VLLM + "/engine/llm_engine.py", 476)] + _engine_init(349)
    fwd([py("execute_model", runner, 1563), py("profile_run", runner, 1340),
         py("determine_num_available_blocks", VLLM + "/worker/worker.py", 220)]
        + _executor("determine_num_available_blocks", 66, kv_init), tokens=8192)
    r.clock.advance(5000, 20000)
    # the KV cache: one (2, num_blocks, block_size * kv_heads * head_dim) tensor per layer
    kv_stack = ([py("_allocate_kv_cache", VLLM + "/worker/cache_engine.py", 85),
                 py("__init__", VLLM + "/worker/cache_engine.py", 62),
                 py("<listcomp>", VLLM + "/worker/worker.py", 272),
                 py("_init_cache_engine", VLLM + "/worker/worker.py", 271),
                 py("initialize_cache", VLLM + "/worker/worker.py", 255)]
                + _executor("initialize_cache", 78, [py("_initialize_kv_caches", VLLM + "/engine/llm_engine.py", 492)]
                            + _engine_init(349)))
    per_layer = 2 * num_blocks * block_size * kv_heads * head_dim * F16
    kv = [tk.malloc(per_layer, kv_stack, cat="kv_cache", gap=(5, 30)) for _ in range(layers)]
    KV = sum(b.requested_size for b in kv)
    r.clock.advance(20000, 60000)
    # the engine steps of one generate() call
    gen = [py("_run_engine", VLLM + "/entrypoints/llm.py", 880), py("generate", VLLM + "/entrypoints/llm.py", 353),
           py("generate", ROLLOUT, 63), py("main", ROLLOUT, 95), py("<module>", ROLLOUT, 120)]
    step = ([py("execute_model", runner, 1563),
             py("execute_model", VLLM + "/worker/worker_base.py", 327),
             py("execute_model", VLLM + "/executor/gpu_executor.py", 130),
             py("step", VLLM + "/engine/llm_engine.py", 1386)] + gen)
    for k in range(1, decode_steps + 1):
        r.clock.advance(2000, 6000)
        r.annotate("START", "ProfilerStep#%d" % k)
        fwd(step, tokens=batch if k > 1 else batch * 64)   # the first step: the prefill
        r.annotate("END", "ProfilerStep#%d" % k)
    r.clock.advance(1000, 3000)
    pc = tk.peak_cats
    assert pc.get("kv_cache", 0) == KV, "the peak is in a decode step, the KV cache live"
    pf = tk.peak_facts()
    truth = {
        "sample": "vllm_kv.pickle",
        "scenario": "an RL rollout script (rollout.py) builds a vLLM engine (V0 worker): %d-layer Llama-style fp16 "
                    "weights made on the GPU by vllm/model_executor/layers, a profile run at 8192 tokens (freed), "
                    "then the KV cache pre-sized as one tensor per layer in "
                    "vllm/worker/cache_engine.py:_allocate_kv_cache, then %d engine steps (a prefill, then decodes) "
                    "whose temporaries die in the step; no backward; the peak is in the prefill step, the KV cache "
                    "live" % (layers, decode_steps),
        "layers": layers,
        "weight_bytes": W,
        "kv_cache_bytes": KV,
        "kv_cache_tensors": layers,
        "kv_cache_tensor_bytes": per_layer,
        "kv_cache_function": "vllm/worker/cache_engine.py:_allocate_kv_cache",
        "first_fix": "vllm_gpu_memory_utilization",
        "first_fix_saves_bytes": KV,
        "peak": pf,
    }
    return layout.modern_snapshot(r.alloc, r.ft), truth


# ---------------------------------------------------------------------------
# 3. no_optimizer_state: a residual MLP trained with plain SGD (no momentum: no optimizer
#    state; weight decay's foreach temporaries die within the step) for two steps on short
#    batches; the third batch is 4x longer and its forward runs out of memory on a 15 GiB (a T4)
#    device (a capacity OOM). zero_grad(set_to_none=True) runs first in each step, so no
#    gradient is alive at the OOM either; stacks="python" (the backward frameless).
#
# train.py as in findings.MLPTrainer; 64 opt.step() is SGD(lr, weight_decay=0.01, foreach=True)

class _SgdTrainer(MLPTrainer):
    def zero_grad(self):
        r = self.r
        r.annotate("START", "Optimizer.zero_grad#SGD.zero_grad", self.dev)
        zg = [py("zero_grad", OPT, 1002), py("_fn", TORCH + "/_dynamo/eval_frame.py", 632)] + self.step(57)
        for i in sorted(self.grads):
            self.tk.free(self.grads.pop(i), zg, gap=(1, 6))
        r.annotate("END", "Optimizer.zero_grad#SGD.zero_grad", self.dev)

    def adam_step(self, first):
        """SGD without momentum: weight decay's `torch._foreach_add(grads, params)` makes one
        temporary per parameter, freed as the step returns; nothing outlives it."""
        del first
        r, tk = self.r, self.tk
        r.clock.advance(100, 400)
        r.annotate("START", "Optimizer.step#SGD.step", self.dev)
        sgd = self.opt_stack([py("_multi_tensor_sgd", SGD, 398), py("sgd", SGD, 267), py("step", SGD, 125)])
        tmp = [tk.malloc(p.requested_size, sgd, cat="opt_temp", gap=(2, 12)) for p in self.params]
        end = [py("_multi_tensor_sgd", SGD, 425)] + sgd[1:]
        for t in tmp:
            tk.free(t, end, gap=(1, 4))
        r.annotate("END", "Optimizer.step#SGD.step", self.dev)


class _Oom(Exception):
    def __init__(self, req, n_before, err):
        super().__init__("oom")
        self.req, self.n_before, self.err = req, n_before, err


class _Guarded:
    """A Tracker whose malloc turns the simulator's OOM into _Oom with what oom_state needs."""

    def __init__(self, tk):
        self.tk = tk

    def __getattr__(self, name):
        return getattr(self.tk, name)

    def malloc(self, nbytes, specs, **kw):
        n_before = len(self.tk.run.dev(self.tk.dev).trace.buf)
        try:
            return self.tk.malloc(nbytes, specs, **kw)
        except OutOfMemoryError as e:
            raise _Oom(nbytes, n_before, e)


def no_optimizer_state(seed=73, steps=2, tokens=8192, long_tokens=32768, blocks=4):
    r = Run(seed, per_device={0: {"capacity": 15 * GIB}})  # a T4
    tk = Tracker(r)
    m = _SgdTrainer(r, tk, n_blocks=blocks, H=2048, F=8192, V=32768, tokens=tokens, foreach_temps=False)
    P = m.build()
    r.clock.advance(20000, 60000)
    for k in range(1, steps + 1):
        m.train_step(k)
    G = sum(g.requested_size for g in m.grads.values())
    assert G == P and not m.state
    # the long batch: its forward runs out of memory
    r.clock.advance(25000, 60000)
    r.annotate("START", "ProfilerStep#%d" % (steps + 1))
    m.zero_grad()
    m.T = long_tokens
    m.tk = _Guarded(tk)
    oom = None
    try:
        m.forward()
    except _Oom as e:
        oom = e
    m.tk = tk
    assert oom is not None, "the long batch's forward must run out of memory"
    facts = oom_state(r, 0, oom.req, oom.n_before, oom.err)
    assert facts["cached_free_bytes"] + facts["device_free_bytes"] < facts["round_size"], facts
    pc = tk.cat_bytes
    assert pc.get("grad", 0) == 0 and pc.get("opt_state", 0) == 0 and pc.get("opt_temp", 0) == 0
    pf = tk.peak_facts()
    truth = {
        "sample": "no_optimizer_state.pickle", "verdict": "capacity",
        "scenario": "a residual MLP (2 blocks, fp32) trained with SGD without momentum (no optimizer state; "
                    "weight decay's foreach temporaries die within each step) for %d steps at %d tokens; the "
                    "next batch has %d tokens and its forward runs out of memory on a 15 GiB device (a T4): "
                    "parameters and that forward's activations live, no gradient (zero_grad(set_to_none=True) "
                    "ran first), no optimizer state" % (steps, tokens, long_tokens),
        "steps_completed": steps,
        "parameter_bytes": P,
        "optimizer_state_bytes": 0,
        "gradient_bytes_at_oom": 0,
        "activation_bytes_at_oom": pc.get("act", 0),
        "input_bytes_at_oom": pc.get("input", 0),
        "live_bytes_at_oom": tk.bytes,
        "phase_at_oom": "forward",
        "trains": True,
        "fixes_never_offered": ["offload_optimizer_state", "eight_bit_optimizer", "inference_mode"],
        "peak": pf,
    }
    truth.update(facts)
    return layout.modern_snapshot(r.alloc, r.ft), truth


FINDING_SAMPLES = [
    ("attention_chain", "attention_chain.pickle", attention_chain),
    ("vllm_kv", "vllm_kv.pickle", vllm_kv),
    ("no_optimizer_state", "no_optimizer_state.pickle", no_optimizer_state),
]
