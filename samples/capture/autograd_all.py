#!/usr/bin/env python3
"""Capture 9: one training step (Linear layers + Adam) recorded with ``stacks="all"``.

Ground truth for C++-only allocation sites.  A 3-layer MLP (``nn.Linear`` 512 -> 2048 -> 2048
-> 512, ReLU, float32) does one forward, ``mse_loss``, ``backward()`` and ``Adam.step()``
under ``_record_memory_history(stacks="all")``.  The backward pass runs on the autograd
engine's device thread, which runs no Python: the gradients and every backward temporary
carry *only* C++ frames (with ``stacks="python"`` they would carry ``frames: []``).  The
parameters (allocated in ``nn.Linear.__init__``) and the Adam state (``exp_avg``,
``exp_avg_sq``, allocated lazily in the first ``step()``) carry C++ frames with this
script's Python frames spliced in.

The truth holds the byte counts computed from the tensors themselves
(sum of ``numel() * element_size()``): parameters, gradients, and optimizer state split by
state key and device (Adam keeps ``step`` as a CPU scalar unless capturable/fused), plus
where each of them lies in the snapshot (matched by storage address).

C++ symbolization happens inside ``_snapshot()``; ``--symbolize`` sets
``TORCH_SYMBOLIZE_MODE`` before torch is imported (default ``fast``; run_all.py falls back
to ``dladdr``), as in ``stacks_all.py``.

Outputs: ``autograd_all.pickle`` + ``autograd_all.truth.json``.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MiB = common.MiB
BATCH = 256
DIMS = (512, 2048, 2048, 512)
LR = 1e-3


def build_model(torch):
    layers = []
    for i in range(len(DIMS) - 1):
        layers.append(torch.nn.Linear(DIMS[i], DIMS[i + 1], device="cuda"))  # @site linear
        if i < len(DIMS) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def make_batch(torch):
    x = torch.randn(BATCH, DIMS[0], device="cuda")  # @site batch_x
    y = torch.randn(BATCH, DIMS[-1], device="cuda")  # @site batch_y
    return x, y


def train_step(torch, model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    out = model(x)  # @site forward
    loss = torch.nn.functional.mse_loss(out, y)  # @site loss
    loss.backward()  # @site backward
    opt.step()  # @site opt_step
    return loss


def nbytes(t) -> int:
    return int(t.numel()) * int(t.element_size())


def storage_ptr(t) -> int:
    try:
        return int(t.untyped_storage().data_ptr())
    except AttributeError:           # very old torch
        return int(t.data_ptr())


def blocks_by_address(snap) -> dict:
    out = {}
    for seg in snap.get("segments", []):
        for blk in seg.get("blocks", []):
            if blk.get("state") == "active_allocated":
                out[int(blk["address"])] = blk
    return out


def describe_blocks(tensors, blocks) -> dict:
    """Where the tensors lie: blocks found, their bytes, and the frame kinds of their stacks."""
    found, frames = [], []
    for t in tensors:
        blk = blocks.get(storage_ptr(t))
        if blk is not None:
            found.append(blk)
            frames.append(common._frames(blk))
    return {
        "tensors": len(tensors),
        "blocks_found": len(found),
        "block_bytes": sum(int(b["size"]) for b in found),
        "requested_bytes": sum(int(b.get("requested_size", 0)) for b in found),
        "with_python_frames": sum(1 for fr in frames if any(common.is_python_frame(f) for f in fr)),
        "with_cpp_frames": sum(1 for fr in frames if any(not common.is_python_frame(f) for f in fr)),
        "empty_stacks": sum(1 for fr in frames if not fr),
        "_frames": frames,
    }


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    ap.add_argument("--symbolize", default="fast", choices=("fast", "dladdr", "addr2line", "env"),
                    help="TORCH_SYMBOLIZE_MODE to set before importing torch ('env': leave as is)")
    args = ap.parse_args()
    if args.symbolize != "env":
        os.environ["TORCH_SYMBOLIZE_MODE"] = args.symbolize
        if args.symbolize == "dladdr":
            os.environ["TORCH_DISABLE_ADDR2LINE"] = "1"
    torch = common.require_cuda()

    cap = common.Capture(torch, __file__, "autograd_all", args.out, args.max_entries, args.protocol)
    cap.env["TORCH_SYMBOLIZE_MODE"] = os.environ.get("TORCH_SYMBOLIZE_MODE")
    cap.start(stacks="all")
    torch.manual_seed(0)
    model = build_model(torch)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    x, y = make_batch(torch)
    loss = train_step(torch, model, opt, x, y)
    torch.cuda.synchronize()
    snap = cap.snapshot()
    cap.dump(snap)
    cap.stop()
    obs = common.summarize_snapshot(snap)

    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    state_bytes, state_tensors = {}, []
    for st in opt.state.values():
        for key, v in st.items():
            if hasattr(v, "numel") and hasattr(v, "element_size"):
                dev = "cuda" if getattr(v, "is_cuda", False) else "cpu"
                per = state_bytes.setdefault(key, {})
                per[dev] = per.get(dev, 0) + nbytes(v)
                if dev == "cuda":
                    state_tensors.append(v)
    state_bytes = {k: dict(sorted(v.items())) for k, v in sorted(state_bytes.items())}

    blocks = blocks_by_address(snap)
    pb = describe_blocks(params, blocks)
    gb = describe_blocks(grads, blocks)
    sb = describe_blocks(state_tensors, blocks)
    linear_site, step_site = cap.site("linear"), cap.site("opt_step")
    params_in_script = all(linear_site in common.sites_in_stack(fr) for fr in pb.pop("_frames"))
    state_in_script = all(step_site in common.sites_in_stack(fr) for fr in sb.pop("_frames"))
    grad_frames = gb.pop("_frames")

    # backward temporaries: allocations with C++ frames only, freed before the snapshot
    trace = snap.get("device_traces", [[]])[0] if snap.get("device_traces") else []
    opened, cpp_only_allocs, cpp_only_freed, cpp_only_bytes = {}, 0, 0, 0
    for e in trace:
        fr = common._frames(e)
        if e.get("action") == "alloc":
            only_cpp = bool(fr) and not any(common.is_python_frame(f) for f in fr)
            opened[e.get("addr")] = only_cpp
            if only_cpp:
                cpp_only_allocs += 1
        elif e.get("action") == "free_completed" and opened.pop(e.get("addr"), False):
            cpp_only_freed += 1
            cpp_only_bytes += int(e.get("size", 0))

    param_bytes = sum(nbytes(p) for p in params)
    grad_bytes = sum(nbytes(g) for g in grads)
    facts = {
        "story": ("one training step, stacks='all': gradients and backward temporaries carry only C++ frames; "
                  "parameters and Adam state carry C++ frames with this script's Python frames"),
        "verdict": "none",
        "stacks": "all",
        "model": {"kind": "nn.Sequential of nn.Linear + ReLU", "dims": list(DIMS), "batch": BATCH,
                  "dtype": "float32", "optimizer": "torch.optim.Adam", "lr": LR,
                  "optimizer_defaults": {k: v for k, v in sorted(getattr(opt, "defaults", {}).items())
                                         if isinstance(v, (bool, int, float, str, type(None)))}},
        "parameters": len(params),
        "param_bytes": param_bytes,
        "param_bytes_analytic": sum((DIMS[i] * DIMS[i + 1] + DIMS[i + 1]) * 4 for i in range(len(DIMS) - 1)),
        "grad_bytes": grad_bytes,
        "gradients": len(grads),
        "optimizer_state_bytes": state_bytes,
        "optimizer_state_bytes_cuda": sum(v.get("cuda", 0) for v in state_bytes.values()),
        "optimizer_state_bytes_cpu": sum(v.get("cpu", 0) for v in state_bytes.values()),
        "param_site": linear_site,
        "optimizer_state_site": step_site,
        "backward_site": cap.site("backward"),
        "grad_frames": "cpp_only",
        "symbolize_mode": os.environ.get("TORCH_SYMBOLIZE_MODE"),
        "sites": cap.sites,
        "notes": ("bytes are numel*element_size of the live tensors; blocks are matched by "
                  "untyped_storage().data_ptr() == block address. Sites: match the innermost frame whose "
                  "filename ends in .py; parameters and Adam state are allocated inside torch "
                  "(nn/modules/linear.py, optim/adam.py), so this script's line is further out in the stack"),
    }
    observed = dict(obs)
    observed.update({
        "param_blocks": pb, "grad_blocks": gb, "optimizer_state_blocks": sb,
        "grad_blocks_cpp_only": sum(1 for fr in grad_frames
                                    if fr and not any(common.is_python_frame(f) for f in fr)),
        "cpp_only_alloc_events": cpp_only_allocs,
        "cpp_only_freed_events": cpp_only_freed,
        "cpp_only_freed_bytes": cpp_only_bytes,
    })
    checks = {
        "cpp_frames_present": obs["cpp_frames"] > 0,
        "param_blocks_found": pb["blocks_found"] == len(params) > 0,
        "param_requested_bytes_match": pb["requested_bytes"] == param_bytes,
        "param_stacks_reach_script": params_in_script and pb["with_cpp_frames"] == len(params),
        "grad_blocks_found": gb["blocks_found"] == len(grads) == len(params),
        "grad_blocks_cpp_only": observed["grad_blocks_cpp_only"] == len(grads) and gb["with_python_frames"] == 0,
        "optimizer_state_blocks_found": sb["blocks_found"] == len(state_tensors) > 0,
        "optimizer_state_requested_bytes_match": sb["requested_bytes"] == facts["optimizer_state_bytes_cuda"],
        "optimizer_state_stacks_reach_script": state_in_script,
        "backward_temporaries_cpp_only": cpp_only_freed > 0,
    }
    del loss, x, y
    sys.exit(cap.finish(facts, observed, checks))


if __name__ == "__main__":
    main()
