#!/usr/bin/env python3
"""Capture 1: a training loop with ``total_loss += loss`` that retains autograd graphs,
and (``--fixed``) the same loop with ``total_loss += loss.item()``.

Each step trains on a fresh batch (forward, backward, SGD update: transient memory
only), then evaluates a fresh held-out batch *with grad enabled* and accumulates
``total_loss += val_loss``.  That ``val_loss`` is never backwarded, so every step's
graph -- and the tensors it saved for backward (the eval input ``xv``, the ReLU
output ``a`` and the residual ``d``) -- stays reachable from ``total_loss``: GPU
memory grows by a constant number of bytes per step.

Why not the plain FAQ loop (``loss.backward(); total_loss += loss``)?  There,
``backward()`` already released the saved tensors, so only CPU-side graph nodes
pile up and GPU memory does not grow.  The leak needs a loss whose graph was never
backwarded; a validation loss computed without ``torch.no_grad()`` is the classic.

The model is written with raw ``torch.mm``/``torch.relu`` calls (no nn.Module),
so the innermost Python frame of every allocation is a line of this script.
The snapshot is dumped at the end of the loop, while ``total_loss`` is alive.

Outputs: ``retained_graph.pickle`` + ``.truth.json`` (leak) or
``retained_graph_fixed.*`` (``--fixed``).
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

B, D, H = 256, 512, 8192          # batch, model dim, hidden dim (float32): relu output 8 MiB/step
STEPS = 20
LR = 1e-3


def init_weights(torch):
    w1 = torch.randn(D, H, device="cuda", requires_grad=True)  # @site w1
    w2 = torch.randn(H, D, device="cuda", requires_grad=True)  # @site w2
    return w1, w2


def train_step(torch, w1, w2):
    x = torch.randn(B, D, device="cuda")  # @site train_x
    y = torch.randn(B, D, device="cuda")  # @site train_y
    h = torch.mm(x, w1)  # @site train_h
    a = torch.relu(h)  # @site train_relu
    out = torch.mm(a, w2)  # @site train_out
    loss = torch.mean(torch.square(torch.sub(out, y)))  # @site train_loss
    loss.backward()
    with torch.no_grad():
        w1.sub_(w1.grad, alpha=LR)
        w2.sub_(w2.grad, alpha=LR)
        w1.grad = None
        w2.grad = None


def eval_step(torch, w1, w2):
    xv = torch.randn(B, D, device="cuda")  # @site eval_x
    yv = torch.randn(B, D, device="cuda")  # @site eval_y
    h = torch.mm(xv, w1)  # @site eval_h
    a = torch.relu(h)  # @site eval_relu
    out = torch.mm(a, w2)  # @site eval_out
    d = torch.sub(out, yv)  # @site eval_sub
    val_loss = torch.mean(torch.square(d))  # @site eval_loss
    return val_loss


def run(torch, fixed: bool):
    w1, w2 = init_weights(torch)
    total_loss = torch.zeros((), device="cuda")  # @site total_loss
    allocated_after_step = []
    for step in range(STEPS):
        train_step(torch, w1, w2)
        val_loss = eval_step(torch, w1, w2)
        if fixed:
            total_loss += val_loss.item()  # FIX: a Python float, no graph kept
        else:
            total_loss += val_loss  # BUG: keeps this step's graph and saved tensors
        del val_loss
        torch.cuda.synchronize()
        allocated_after_step.append(int(torch.cuda.memory_allocated(0)))
    return w1, w2, total_loss, allocated_after_step


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    ap.add_argument("--fixed", action="store_true", help="accumulate loss.item() instead")
    args = ap.parse_args()
    torch = common.require_cuda()

    name = "retained_graph_fixed" if args.fixed else "retained_graph"
    cap = common.Capture(torch, __file__, name, args.out, args.max_entries, args.protocol)
    cap.start(stacks="python")
    torch.manual_seed(0)
    w1, w2, total_loss, allocated = run(torch, args.fixed)
    snap = cap.snapshot()          # total_loss (and, in the bug, every graph) still alive
    cap.dump(snap)
    cap.stop()

    obs = common.summarize_snapshot(snap)
    deltas = [b - a for a, b in zip(allocated[1:], allocated[2:])]   # skip warm-up step 0->1
    per_step = deltas[0] if deltas and all(d == deltas[0] for d in deltas) else None
    f32 = 4
    analytic = (B * D + B * H + B * D) * f32      # xv + relu(a) + d per step
    relu_site = cap.site("eval_relu")
    relu_live = common.live_at_site(obs, relu_site)

    facts = {
        "story": ("fixed: total_loss += val_loss.item(); live memory flat after step 1" if args.fixed else
                  "leak: total_loss += val_loss keeps every eval graph and its saved tensors"),
        "variant": "fixed" if args.fixed else "leak",
        "verdict": "none" if args.fixed else "leak",
        "steps": STEPS,
        "bytes_retained_per_step": 0 if args.fixed else per_step,
        "bytes_retained_per_step_analytic": 0 if args.fixed else analytic,
        "analytic_matches_measured": True if args.fixed else per_step == analytic,
        "retained_total_bytes_at_snapshot": 0 if args.fixed else (per_step or 0) * STEPS,
        "allocated_bytes_after_each_step": allocated,
        "leak_site": None if args.fixed else relu_site,
        "leak_sites_expected": [] if args.fixed else [
            {"site": cap.site("eval_x"), "bytes_per_step": B * D * f32},
            {"site": cap.site("eval_relu"), "bytes_per_step": B * H * f32},
            {"site": cap.site("eval_sub"), "bytes_per_step": B * D * f32},
        ],
        "top_peak_site": None if args.fixed else relu_site,
        "snapshot_taken": "after the loop, total_loss alive",
        "sites": cap.sites,
        "notes": ("backward runs on the autograd thread: its allocations (grads, its cuBLAS workspace) "
                  "have frames [] with stacks='python'. cuBLAS workspaces (32 MiB per handle/stream on "
                  "sm90) are allocated through the caching allocator at the first mm of each thread and "
                  "stay live; the leak (8 MiB/step at eval_relu, 160 MiB at the end) dominates them."),
    }
    if args.fixed:
        checks = {
            "allocated_flat_after_step1": bool(deltas) and all(d == 0 for d in deltas),
            "eval_relu_not_retained": relu_live["count"] <= 1,
        }
    else:
        checks = {
            "constant_positive_growth": per_step is not None and per_step > 0,
            "eval_relu_live_blocks_equal_steps": relu_live["count"] == STEPS,
            "top_peak_site_is_eval_relu": (obs["peak"]["top_sites_at_peak"] or [{}])[0].get("site") == relu_site,
            "top_live_site_is_eval_relu": (obs["live_by_site"] or [{}])[0].get("site") == relu_site,
        }
    sys.exit(cap.finish(facts, obs, checks))


if __name__ == "__main__":
    main()
