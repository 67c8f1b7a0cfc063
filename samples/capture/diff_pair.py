#!/usr/bin/env python3
"""Capture 5: two runs of one training step that differ by one extra large buffer.

Both runs execute the same seeded training step (raw ``torch.mm`` MLP, forward,
backward, SGD update) in a fresh process.  With ``--extra-buffer`` the step first
allocates one 128 MiB buffer (``allocate_extra_buffer``) that stays alive until the
snapshot is taken, so it is live at the peak.  A diff of ``diff_base`` against
``diff_extra`` must show exactly that one block/site (+128 MiB at the peak and in
the live set) and nothing else.

Outputs: ``diff_base.pickle``/``.truth.json`` or ``diff_extra.*``; run_all.py also
writes ``diff_pair.truth.json`` combining both runs.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MiB = common.MiB
B, D, H = 512, 1024, 4096
EXTRA_BYTES = 128 * MiB
LR = 1e-3


def init_weights(torch):
    w1 = torch.randn(D, H, device="cuda", requires_grad=True)  # @site w1
    w2 = torch.randn(H, D, device="cuda", requires_grad=True)  # @site w2
    return w1, w2


def allocate_extra_buffer(torch):
    return torch.empty(EXTRA_BYTES, dtype=torch.uint8, device="cuda")  # @site extra_buffer


def train_step(torch, w1, w2, extra: bool):
    buf = allocate_extra_buffer(torch) if extra else None
    x = torch.randn(B, D, device="cuda")  # @site x
    y = torch.randn(B, D, device="cuda")  # @site y
    h = torch.mm(x, w1)  # @site h
    a = torch.relu(h)  # @site relu
    out = torch.mm(a, w2)  # @site out
    loss = torch.mean(torch.square(torch.sub(out, y)))  # @site loss
    loss.backward()
    with torch.no_grad():
        w1.sub_(w1.grad, alpha=LR)
        w2.sub_(w2.grad, alpha=LR)
    return buf


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    ap.add_argument("--extra-buffer", action="store_true", help="allocate one extra 128 MiB buffer")
    args = ap.parse_args()
    torch = common.require_cuda()

    name = "diff_extra" if args.extra_buffer else "diff_base"
    cap = common.Capture(torch, __file__, name, args.out, args.max_entries, args.protocol)
    cap.start(stacks="python")
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats(0)
    w1, w2 = init_weights(torch)
    buf = train_step(torch, w1, w2, args.extra_buffer)
    torch.cuda.synchronize()
    peak = int(torch.cuda.max_memory_allocated(0))
    allocated = int(torch.cuda.memory_allocated(0))
    snap = cap.snapshot()            # buf (if any) is still alive here
    cap.dump(snap)
    cap.stop()
    obs = common.summarize_snapshot(snap)

    extra_site = cap.site("extra_buffer")
    extra_live = common.live_at_site(obs, extra_site)
    facts = {
        "story": "one training step" + (" plus one extra 128 MiB buffer alive through the step"
                                        if args.extra_buffer else " (baseline)"),
        "variant": "extra" if args.extra_buffer else "base",
        "verdict": "none",
        "extra_buffer": args.extra_buffer,
        "extra_buffer_bytes": EXTRA_BYTES,
        "extra_buffer_site": extra_site,
        "expected_diff": {"site": extra_site, "bytes": EXTRA_BYTES, "blocks": 1,
                          "peak_delta_bytes": EXTRA_BYTES, "live_delta_bytes": EXTRA_BYTES},
        "peak_allocated_bytes": peak,
        "allocated_bytes_at_snapshot": allocated,
        "top_live_site": extra_site if args.extra_buffer else None,
        "sites": cap.sites,
        "notes": ("the pair differs only by the extra buffer; everything else (sizes, order, sites) is "
                  "the same seeded step. Addresses may differ between the two processes."),
    }
    checks = {
        "extra_buffer_live_as_expected": extra_live["count"] == (1 if args.extra_buffer else 0)
        and extra_live["bytes"] == (EXTRA_BYTES if args.extra_buffer else 0),
    }
    if args.extra_buffer:
        checks["extra_buffer_tops_live_set"] = (obs["live_by_site"] or [{}])[0].get("site") == extra_site
        checks["extra_buffer_tops_peak"] = (obs["peak"]["top_sites_at_peak"] or [{}])[0].get("site") == extra_site
    del buf, w1, w2
    sys.exit(cap.finish(facts, obs, checks))


if __name__ == "__main__":
    main()
