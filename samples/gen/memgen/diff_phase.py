"""Two runs of one model whose peaks sit in different phases (issue 52 item 6, reading.md §2):
the same residual MLP and Adam step at 64 tokens (diff_phase_base.pickle: the first optimizer
step, with parameters, gradients, Adam's state and foreach temporaries, is the peak) and at 4096
tokens (diff_phase_cand.pickle: the activations make the forward pass the peak).

The model computes its loss inside its forward (model.py:40), and its backward frees each
layer's activations before it makes that layer's gradients, so the backward never rises above
the forward's height in the long run.

The truth (samples/truth/diff_phase.json) holds the phase of each run's peak and each phase's
peak, from the scenario's own bookkeeping: a phase runs from its first allocation to the first
allocation of the next phase (frees in between belong to it), as the scenario knows where it
begins each one; its peak is the first trace entry where the tracker's live bytes are highest.
"""

from . import layout
from .findings import TRAIN, MLPTrainer
from .scenarios import LIN, Run
from .stacks import module_call, py
from .truth import Tracker

F32 = 4
PHASES = ("forward", "backward", "optimizer")


class PhaseTrainer(MLPTrainer):
    """MLPTrainer whose model returns its loss (computed under its forward) and whose backward
    frees a layer's activations before it allocates that layer's gradients; it records the
    trace entry each phase begins at."""

    def __init__(self, r, tk, **kw):
        super().__init__(r, tk, **kw)
        self.starts = {}

    def _mark(self, phase):
        self.starts.setdefault(phase, self.tk.changes[-1][0])

    def forward(self, hooks=None):
        tk, H, F, V, T = self.tk, self.H, self.F, self.V, self.T
        x = tk.malloc(T * H * F32, self.step(59), cat="input")
        y = tk.malloc(T * 8, self.step(60), cat="input")
        blocks = []
        for i in range(self.n):
            a = tk.malloc(T * F * F32, self.blk(24, [py("forward", LIN, 125)] + module_call()), cat="act")
            self._mark("forward")
            t = tk.malloc(T * F * F32, self.blk(24, []), cat="temp")
            tk.free(t, self.blk(24, []))
            o = tk.malloc(T * H * F32, self.blk(25, [py("forward", LIN, 125)] + module_call()), cat="act")
            blocks.append((a, o))
        ln = tk.malloc(T * H * F32, self.net(39, []), cat="act")
        logits = tk.malloc(T * V * F32, self.net(39, [py("forward", LIN, 125)] + module_call()), cat="act")
        logsm = tk.malloc(T * V * F32, self.net(40, []), cat="temp")
        loss = tk.malloc(4, self.net(40, []), cat="loss")
        tk.free(logsm, self.net(40, []))
        return {"x": x, "y": y, "blocks": blocks, "ln": ln, "logits": logits, "loss": loss}

    def backward(self, s):
        from .scenarios import AUTOGRAD, TENSOR
        tk, H, F, T = self.tk, self.H, self.F, self.T
        self.r.clock.advance(50, 200)
        seed = tk.malloc(4, [py("_make_grads", AUTOGRAD, 220), py("backward", AUTOGRAD, 340),
                             py("backward", TENSOR, 581)] + self.step(63), cat="act_grad")
        bw = self.bw
        np_ = len(self.params)
        tk.free(seed, bw())
        # reading.md §1: until the backward frees anything every activation is alive, so the
        # moment is still the end of the forward pass; the backward begins at its first free
        # (the free's request: its bytes stay live until the free completes).
        trace = self.r.alloc[tk.dev].trace.buf
        self.starts.setdefault("backward", max(i for i, e in enumerate(trace) if e.action == "free_requested"))
        tk.free(s["logits"], bw())
        self.grads[np_ - 1] = tk.malloc(self.params[np_ - 1].requested_size, bw(), cat="grad")
        tk.free(s["ln"], bw())
        self.grads[np_ - 3] = tk.malloc(H * F32, bw(), cat="grad")
        self.grads[np_ - 2] = tk.malloc(H * F32, bw(), cat="grad")
        for i in reversed(range(self.n)):
            a, o = s["blocks"][i]
            tk.free(o, bw())
            self.grads[2 * i + 1] = tk.malloc(H * F * F32, bw(), cat="grad")
            g = tk.malloc(T * H * F32, bw(), cat="act_grad")
            tk.free(a, bw())
            self.grads[2 * i] = tk.malloc(F * H * F32, bw(), cat="grad")
            tk.free(g, bw())

    def adam_step(self, first):
        n = len(self.tk.changes)
        super().adam_step(first)
        self.starts.setdefault("optimizer", self.tk.changes[n][0])


def _run(seed, tokens):
    r = Run(seed)
    tk = Tracker(r)
    m = PhaseTrainer(r, tk, n_blocks=2, H=256, F=1024, V=2048, tokens=tokens, foreach_temps=True)
    m.build()
    r.clock.advance(20000, 60000)
    m.train_step(1)
    r.clock.advance(1000, 3000)
    return r, tk, m


def _phase_peaks(tk, starts):
    """Each phase's highest live bytes and the first entry reaching them: a phase covers the
    entries from its start to the next phase's start (the last one to the end)."""
    tl = tk.timeline()
    bounds = [starts[p] for p in PHASES] + [len(tl)]
    out = {}
    for k, p in enumerate(PHASES):
        lo, hi = bounds[k], bounds[k + 1]
        best = max(range(lo, hi), key=lambda i: (tl[i], -i))
        out[p] = {"peak_bytes": tl[best], "event": best}
    return out


def _phase_of(i, starts):
    return [p for p in PHASES if starts[p] <= i][-1]


def diff_phase(seed=52):
    sides = {}
    for side, tokens in (("base", 64), ("cand", 4096)):  # trackers in the order of their file names
        r, tk, m = _run(seed, tokens)
        sides[side] = (r, tk, m, _phase_peaks(tk, m.starts))
    facts = {}
    for side, (r, tk, m, peaks) in sides.items():
        pf = tk.peak_facts()
        facts[side] = {"peak_bytes": pf["peak_bytes"], "peak_event_index": pf["peak_event_index"],
                       "peak_phase": _phase_of(pf["peak_event_index"], m.starts),
                       "phase_starts": m.starts, "phase_peaks": peaks,
                       "categories_at_peak": sorted(c for c, b in tk.peak_cats.items() if b > 0)}
    assert facts["base"]["peak_phase"] == "optimizer", facts["base"]
    assert facts["cand"]["peak_phase"] == "forward", facts["cand"]
    by_phase = []
    for p in PHASES:
        b, c = facts["base"]["phase_peaks"][p], facts["cand"]["phase_peaks"][p]
        by_phase.append({"phase": p, "base_peak_bytes": b["peak_bytes"], "cand_peak_bytes": c["peak_bytes"],
                         "delta_bytes": c["peak_bytes"] - b["peak_bytes"],
                         "base_event": b["event"], "cand_event": c["event"]})
    truth = {
        "samples": ["diff_phase_base.pickle", "diff_phase_cand.pickle"],
        "scenario": "one Adam step (foreach) of a 2-block residual MLP whose forward returns the loss; at 64 tokens "
                    "the first optimizer step (parameters, gradients, Adam state, temporaries) is the peak, at 4096 "
                    "tokens the forward pass's activations are; the backward frees each layer's activations before "
                    "its gradients",
        "base": facts["base"], "cand": facts["cand"],
        "peak_moved": {"from": "optimizer", "to": "forward"},
        "by_phase": by_phase,
        # gradients, Adam's state and its temporaries exist only after the forward: absent at the
        # candidate's peak because it sits in another phase, not gone
        "scenario_categories_only_at_base_peak": sorted(set(facts["base"]["categories_at_peak"])
                                                        - set(facts["cand"]["categories_at_peak"])),
    }
    objs = {"diff_phase_%s.pickle" % side: layout.modern_snapshot(r.alloc, r.ft)
            for side, (r, _tk, _m, _p) in sides.items()}
    return objs, truth


FINDING_SAMPLES = [("diff_phase", None, diff_phase)]
