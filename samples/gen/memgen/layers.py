"""Scenario samples for steps against layers (issue 52): a repeat inside one backward pass is a
layer, not a step (shared/docs/reading.md §3).

Each function returns (snapshot, truth); truths come from the scenario's own bookkeeping.
"""

from . import layout
from .frames_categories import F32, MODEL, NNF, TRAIN, all312, cpp, engine, node, op
from .scenarios import AUTOGRAD, MOD, TENSOR, Run
from .stacks import TORCH, module_call, py
from .truth import Tracker

LIN = TORCH + "/nn/modules/linear.py"


# ---------------------------------------------------------------------------
# backward_layers: one training step of a 12-layer MLP (identical Linear + ReLU blocks),
# recorded with stacks="all" (Python 3.12) from model.cuda() to the end of loss.backward(): no
# annotation, no optimizer step in the trace. The backward pass walks the layers in reverse,
# and each layer's backward is the same sequence of the autograd engine's allocations (its
# ReluBackward0 temporary, its MmBackward0 weight gradient, kept, and input gradient): the same
# site repeats once per layer at regular intervals, with frees in between, and the kept
# gradients add one tensor per layer. Those are layers of one backward, not steps: leaks cannot
# judge (one step), and reports no finding. Before issue 52 the repeat passed for 12 steps and
# the gradients for a leak of `autograd: MmBackward0` (what `cranberrii__ftcourse` showed).
#
# model.py: 30 class Block:  31 h = self.fc(x); 32 return torch.relu(h)
#           45 class Net:    47 for b in self.blocks: x = b(x); 48 return x
# train.py: 59 x = batch.cuda(); 61 out = model(x); 62 loss = F.mse_loss(out, y)
#           63 loss.backward()

def backward_layers(seed=52, layers=12, H=512, T=1024):
    r = Run(seed)
    tk = Tracker(r)
    main = lambda line: [py("main", TRAIN, line), py("<module>", TRAIN, 140)]
    step = lambda line: [py("train_step", TRAIN, line)] + main(118)
    to_cuda = all312([py("convert", MOD, 1326), py("_apply", MOD, 942), py("_apply", MOD, 915),
                      py("cuda", MOD, 1068)] + main(104),
                     [cpp("at::native::_to_copy(at::Tensor const&, std::optional<c10::ScalarType>)"),
                      op("_to_copy"), cpp("torch::autograd::THPVariable_cuda(_object*, _object*, _object*)")])
    W = H * H * F32
    params = [tk.malloc(W, to_cuda, cat="param", gap=(30, 300)) for _ in range(layers)]
    r.clock.advance(20000, 60000)

    def fwd(line, inner):
        return inner + [py("forward", MODEL, line)] + module_call() + [py("forward", MODEL, 47)] + module_call() + step(61)

    lin = [py("forward", LIN, 125)] + module_call()
    mm = [cpp("at::native::structured_mm_out_cuda::impl(at::Tensor const&, at::Tensor const&, at::Tensor const&)"),
          op("mm", "at::Tensor const&, at::Tensor const&")]
    A = T * H * F32
    x = tk.malloc(A, all312(step(59), [cpp("at::native::_to_copy(at::Tensor const&)"), op("_to_copy")]), cat="input")
    saved = []
    for _ in range(layers):
        h = tk.malloc(A, all312(fwd(31, lin), mm), cat="act")
        a = tk.malloc(A, all312(fwd(32, []), [cpp("at::native::relu(at::Tensor const&)"), op("relu")]), cat="act")
        saved.append((h, a))
    mse = [py("mse_loss", NNF, 3884)] + step(62)
    diff = tk.malloc(A, all312(mse, [cpp("at::native::sub(at::Tensor const&, at::Tensor const&)"), op("sub")]),
                     cat="act")
    loss = tk.malloc(4, all312(mse, [cpp("at::native::mean(at::Tensor const&)"), op("mean")]), cat="loss")

    # loss.backward(): the seed on the main thread, every other allocation on the engine's thread
    r.clock.advance(50, 200)
    seed_ = tk.malloc(4, all312([py("_make_grads", AUTOGRAD, 220), py("backward", AUTOGRAD, 340),
                                 py("backward", TENSOR, 581)] + step(63),
                                [cpp("at::native::ones_like(at::Tensor const&)"), op("ones_like")]), cat="act_grad")
    g = tk.malloc(A, engine(node("MseLossBackward0"), [cpp("at::native::mse_loss_backward(at::Tensor const&)"),
                                                        op("mse_loss_backward")]), cat="act_grad")
    tk.free(seed_, engine(node("MseLossBackward0"), []))
    tk.free(diff, engine(node("MseLossBackward0"), []))
    mm1 = [cpp("torch::autograd::generated::details::mm_mat1_backward(at::Tensor const&, at::Tensor const&)"),
           op("mm", "at::Tensor const&, at::Tensor const&")]
    mm2 = [cpp("torch::autograd::generated::details::mm_mat2_backward(at::Tensor const&, at::Tensor const&)"),
           op("mm", "at::Tensor const&, at::Tensor const&")]
    layer_starts = []
    for li in reversed(range(layers)):
        h, a = saved[li]
        g_h = tk.malloc(A, engine(node("ReluBackward0"), [cpp("at::native::threshold_backward(at::Tensor const&)"),
                                                          op("threshold_backward")]), cat="act_grad", gap=(3, 9))
        layer_starts.append(tk.events() - 1)
        tk.free(g, engine(node("ReluBackward0"), []), gap=(3, 9))
        tk.free(a, engine(node("ReluBackward0"), []), gap=(3, 9))
        # the weight's gradient: mm_mat2_backward's result, kept by AccumulateGrad
        tk.malloc(W, engine(node("MmBackward0"), mm2), cat="grad", gap=(3, 9))
        g = tk.malloc(A, engine(node("MmBackward0"), mm1), cat="act_grad", gap=(3, 9))
        tk.free(g_h, engine(node("MmBackward0"), []), gap=(3, 9))
        tk.free(h, engine(node("MmBackward0"), []), gap=(3, 9))
    tk.free(g, engine(node("MmBackward0"), []))
    tk.free(x, all312(step(63), []))
    r.clock.advance(1000, 3000)
    assert tk.cat_bytes["grad"] == layers * W and tk.cat_bytes["act"] == 0
    truth = {
        "sample": "backward_layers.pickle",
        "scenario": "one training step of a %d-layer MLP (identical Linear + ReLU blocks) recorded with "
                    "stacks=\"all\" through loss.backward(), no annotation and no optimizer step: each layer's "
                    "backward repeats the same autograd-engine sites at regular intervals (ReluBackward0, "
                    "MmBackward0), keeping one weight gradient per layer. Layers of one backward, not steps"
                    % layers,
        "layers": layers,
        "backward_passes": 1,
        "steps": 0,
        "findings": 0,
        "judgement": "cannot_judge",
        "judgement_why": "the trace holds one backward pass and no repeated step",
        "layer_starts": layer_starts,
        "parameter_bytes": layers * W,
        "gradient_bytes_at_end": tk.cat_bytes["grad"],
        "gradient_site": "autograd: MmBackward0",
        "gradient_bytes_per_layer": W,
        "peak": tk.peak_facts(),
    }
    del params, loss
    return layout.modern_snapshot(r.alloc, r.ft), truth


FINDING_SAMPLES = [
    ("backward_layers", "backward_layers.pickle", backward_layers),
]
