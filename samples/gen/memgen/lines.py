"""A sample for `memlens lines` (memory per user source line) with known per-line figures.

nested_lines: train.py's `main` loads a model (model.py `__init__`), then runs one step whose
forward (train.py:20 -> model.py `forward`) calls `block` in blocks.py twice and the recursive
`tree` in model.py, with torch's module-call frames between the user's; some memory has no
user frame (an empty stack, a C++-only stack). Each allocation's lines are the user frames of
its stack, so the truth (samples/truth/lines.json) is computed here from the construction:
per line the self bytes (innermost user line) and the total bytes (every distinct line of the
stack, once), at the peak, at the end, and allocated over the trace.
"""

from . import layout
from .scenarios import FUN, MOD, Run
from .stacks import CPP_MALLOC_HEAD, USER, module_call, py

TRAIN = USER + "/train.py"
MODEL = USER + "/model.py"
BLOCKS = USER + "/blocks.py"
KIB = 1 << 10
MIB = 1 << 20


def _main(line):
    return [py("main", TRAIN, line), py("<module>", TRAIN, 50)]


def _forward(line):
    """model.py forward at `line`, called from train.py:20 through nn.Module's call frames."""
    return [py("forward", MODEL, line)] + module_call() + _main(20)


def _user_lines(specs):
    """The distinct user lines (file, line) of a stack, innermost first (what `lines` counts)."""
    out = []
    for _k, _name, f, line in specs:
        if f.startswith(USER) and (f, line) not in out:
            out.append((f, line))
    return out


def nested_lines(seed=71):
    r = Run(seed)
    live = {}  # id(block) -> (block, specs, bytes)
    made = []  # every allocation: (specs, bytes)

    def alloc(nbytes, specs):
        b = r.malloc(nbytes, specs)
        live[id(b)] = (b, specs, nbytes)
        made.append((specs, nbytes))
        return b

    def free(b):
        r.free(b, _main(24))
        del live[id(b)]

    # model = Model().cuda(): two parameters made in model.py's __init__
    alloc(4 * MIB, [py("__init__", MODEL, 8)] + _main(12))
    alloc(2 * MIB, [py("__init__", MODEL, 9)] + _main(12))
    # memory without a user frame: no stack recorded, and a C++-only stack
    alloc(3 * MIB, [])
    alloc(1 * MIB, list(CPP_MALLOC_HEAD))
    # x = batch.cuda()
    x = alloc(1 * MIB, _main(19))
    # out = model(x): block() twice (blocks.py:16 keeps its output, blocks.py:17's temporary
    # is freed), the recursive tree(), and the forward's own output
    for call in (31, 32):
        inner = _forward(call)
        alloc(8 * MIB, [py("block", BLOCKS, 16)] + inner)
        t = alloc(1 * MIB, [py("block", BLOCKS, 17)] + inner)
        free(t)
    tree = _forward(33)
    alloc(256 * KIB, [py("tree", MODEL, 41), py("tree", MODEL, 42)] + tree)
    alloc(512 * KIB, [py("tree", MODEL, 41), py("tree", MODEL, 42), py("tree", MODEL, 42)] + tree)
    alloc(2 * MIB, _forward(34))
    # loss = F.cross_entropy(out, y): made inside torch, under train.py:22
    loss = alloc(128 * KIB, [py("cross_entropy", FUN, 3104)] + _main(22))
    peak = _tally(live.values())
    free(x)
    free(loss)
    end = _tally(live.values())
    allocated = _tally((None, s, n) for s, n in made)
    snap = layout.modern_snapshot(r.alloc, r.ft)
    return snap, {"live_peak": peak, "live_end": end, "allocated": allocated}


def _tally(items):
    """Per line `file:line` its self and total bytes; the framed and unattributed bytes."""
    lines = {}
    framed = unattributed = 0
    for _b, specs, nbytes in items:
        ls = _user_lines(specs)
        if not ls:
            unattributed += nbytes
            continue
        framed += nbytes
        for i, (f, line) in enumerate(ls):
            e = lines.setdefault("%s:%d" % (f, line), {"self_bytes": 0, "total_bytes": 0})
            if i == 0:
                e["self_bytes"] += nbytes
            e["total_bytes"] += nbytes
    return {"lines": dict(sorted(lines.items())), "framed_bytes": framed,
            "unattributed_bytes": unattributed}


# name, writer, scenario
LINES_SAMPLES = [
    ("lines/nested_lines.pickle", "py4", nested_lines),
]
