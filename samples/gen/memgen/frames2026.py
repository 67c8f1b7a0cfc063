"""Samples of the stacks PyTorch 2.13+ writes beside `frames`: `forward_frames` on the
entries of the backward pass, and the FX keys `_snapshot(augment_with_fx_traces=True)` adds to
the frames of compiled-graph code.

Shapes (sources cited in docs/format-2026.md):

* `forward_frames` (process_alloc_data.js reads it as a list of strings): on an entry made while
  the autograd engine runs a node's backward, the forward traceback autograd recorded for that
  node, one formatted `  File "…", line N, in NAME\\n    source\\n` string per frame,
  outermost first (`traceback.format_stack`). The backward thread runs no Python, so with
  `stacks="python"` its entries' own `frames` are the shared empty list.
* `augment_with_fx_traces=True` (PR #166450): a frame of generated graph code (aot_eager's
  `fx_generated_<hash>.py`, Inductor's `torchinductor_<user>/…/<hash>.py`) gains
  `fx_node_op`, `fx_node_name`, `fx_node_target` and `fx_original_trace`, the node's
  `stack_trace`: model-code frames as traceback text, outermost first.

The truth (samples/truth/frames2026.json) is what the scenario did: per (site, context) the
live requested bytes at the end of the trace, the site being the innermost user frame of the
forward traceback (context `backward pass`) or of the FX node's original trace (context
`fx: TARGET (NAME)`), else the innermost user frame of `frames`.
"""

from . import layout
from .scenarios import MOD, Run
from .stacks import TORCH, USER, py

MODEL = USER + "/model.py"
TRAIN = USER + "/train.py"
F32 = 4


def _train(line):
    return [py("train_step", TRAIN, line), py("<module>", TRAIN, 90)]


def _fwd(line, layer_line):
    """A frame list of an op in the model's forward (innermost first)."""
    return [py("forward", MODEL, line), py("_call_impl", MOD, 1747), py("_wrapped_call_impl", MOD, 1736),
            py("forward", MODEL, layer_line), py("_call_impl", MOD, 1747),
            py("_wrapped_call_impl", MOD, 1736)] + _train(61)


def _traceback(specs):
    """`traceback.format_stack` of the Python frames `specs` (innermost first): one string a
    frame, outermost first."""
    return ['  File "%s", line %d, in %s\n    %s\n' % (f, line, name, "pass")
            for (_k, name, f, line) in reversed(specs)]


def _live_by_site(live):
    out = {}
    for site, context, nbytes in live:
        key = site if context is None else "%s [%s]" % (site, context)
        d = out.setdefault(key, {"bytes": 0, "count": 0})
        d["bytes"] += nbytes
        d["count"] += 1
    return dict(sorted(out.items()))


def forward_frames(seed=61):
    """Two training steps of a 2-layer model: the forward's activations under `frames`, the
    backward's gradients made on the engine's thread with empty `frames` and the forward
    traceback of their node in `forward_frames`; the weight gradients stay (no zero_grad)."""
    r = Run(seed)
    dev = r.dev(0)
    live = {}  # block id -> (site, context, bytes)
    layers = [(46, 120), (52, 121)]  # (op line in Linear-like forward, layer call line)
    weights = []
    for i, (op, call) in enumerate(layers):
        w = r.malloc(1024 * 1024 * F32, [py("__init__", MODEL, 20 + i)] + _train(12))
        weights.append(w)
        live[id(w)] = (w, "%s:%d:__init__" % (MODEL, 20 + i), None, 1024 * 1024 * F32)
    grads = [None, None]
    for step in range(2):
        acts = []
        for op, call in layers:
            a = r.malloc(64 * 1024 * F32, _fwd(op, call))
            acts.append((a, op, call))
            live[id(a)] = (a, "%s:%d:forward" % (MODEL, op), None, 64 * 1024 * F32)
        for i, (a, op, call) in reversed(list(enumerate(acts))):
            # the engine thread: no Python frames; the node's forward traceback beside them
            g = r.malloc(64 * 1024 * F32, [])
            dev.trace.buf[-1].extra = {"forward_frames": _traceback(_fwd(op, call))}
            live[id(g)] = (g, "%s:%d:forward" % (MODEL, op), "backward pass", 64 * 1024 * F32)
            if grads[i] is None:
                wg = r.malloc(1024 * 1024 * F32, [])
                dev.trace.buf[-1].extra = {"forward_frames": _traceback(_fwd(op, call))}
                grads[i] = wg
                live[id(wg)] = (wg, "%s:%d:forward" % (MODEL, op), "backward pass", 1024 * 1024 * F32)
            r.free(a, [])
            del live[id(a)]
            r.free(g, [])
            del live[id(g)]
    snap = layout.modern_snapshot(r.alloc, r.ft)
    facts = {"live_end_by_site": _live_by_site([v[1:] for v in live.values()]),
             "live_end_bytes": sum(v[3] for v in live.values()),
             "entries_with_forward_frames": sum(
                 1 for te in dev.trace.entries() if te.extra and "forward_frames" in te.extra),
             "entries_with_frames": sum(1 for te in dev.trace.entries() if te.ctx)}
    return snap, facts


FX_FILE = USER + "/.cache/fx_generated_3a4b5c6d7e8f9a0.py"
GRAPH_MODULE = TORCH + "/fx/graph_module.py"
EVAL_FRAME = TORCH + "/_dynamo/eval_frame.py"

# generated line -> (op, node name, target, original traceback specs innermost first)
FX_NODES = {
    9: ("call_function", "mm", "aten.mm.default",
        [py("forward", MODEL, 46), py("forward", MODEL, 120)]),
    11: ("call_function", "gelu", "aten.gelu.default",
         [py("forward", MODEL, 47), py("forward", MODEL, 120)]),
    14: ("call_function", "mm_1", "aten.mm.default",
         [py("forward", MODEL, 52), py("forward", MODEL, 121)]),
}


def _compiled(line):
    """Frames of an op run by the generated graph (innermost first)."""
    return [py("forward", FX_FILE, line), py("__call__", GRAPH_MODULE, 824),
            py("_fn", EVAL_FRAME, 655), py("forward", MODEL, 118)] + [
        py("_call_impl", MOD, 1747), py("_wrapped_call_impl", MOD, 1736)] + _train(61)


def fx_frames(seed=62):
    """A model compiled with aot_eager and dumped with augment_with_fx_traces=True: its ops run
    in `fx_generated_….py`, whose frames carry the node and its original model-code trace; one
    eager op after the graph keeps an ordinary site."""
    r = Run(seed)
    live = {}
    w = r.malloc(2048 * 2048 * F32, [py("__init__", MODEL, 20)] + _train(12))
    live[id(w)] = (w, "%s:20:__init__" % MODEL, None, 2048 * 2048 * F32)
    outs = []
    for step in range(2):
        for line in sorted(FX_NODES):
            op, name, target, orig = FX_NODES[line]
            nbytes = 256 * 2048 * F32 * (1 + line % 3)
            b = r.malloc(nbytes, _compiled(line))
            live[id(b)] = (b, "%s:%d:%s" % (orig[0][2], orig[0][3], orig[0][1]),
                           "fx: %s (%s)" % (target, name), nbytes)
            outs.append(b)
        e = r.malloc(256 * 1024 * F32, [py("loss_fn", TRAIN, 70)] + _train(62))
        live[id(e)] = (e, "%s:70:loss_fn" % TRAIN, None, 256 * 1024 * F32)
        # the step frees the first half of the graph's buffers
        for b in outs[:2]:
            r.free(b, _train(64))
            del live[id(b)]
        outs = outs[2:]
    snap = layout.modern_snapshot(r.alloc, r.ft)
    # augment_with_fx_traces: every frame dict of the generated file gains its node's keys
    for d in r.ft.cache.values():
        if d["filename"] == FX_FILE and d["line"] in FX_NODES:
            op, name, target, orig = FX_NODES[d["line"]]
            d["fx_node_op"] = op
            d["fx_node_name"] = name
            d["fx_node_target"] = target
            d["fx_original_trace"] = "".join(_traceback(orig))
    facts = {"live_end_by_site": _live_by_site([v[1:] for v in live.values()]),
             "live_end_bytes": sum(v[3] for v in live.values())}
    return snap, facts


# name, writer, scenario
FRAMES_SAMPLES = [
    ("forward_frames.pickle", "py4", forward_frames),
    ("fx_frames.pickle", "py4", fx_frames),
]
