#!/usr/bin/env python3
"""Capture 11: longer runs -- a wrapped ring buffer, and a ~1M-entry generator (not committed).

Ground truth for real trace layouts at scale.  The workload is a training-like loop: each
step allocates three activations of step-dependent sizes (``act_a``/``act_b``/``act_c``) and
frees them in reverse order; every ``KEEP_EVERY`` steps it keeps a 64 KiB tensor (``keep``).
One ``anchor`` tensor is allocated before the loop and stays live to the end.

Default mode -> ``scale_wrapped.pickle``: recorded with a SMALL ring buffer
(``max_entries = --ring``, default 4096; the shared ``--max-entries`` is not used here) over
``--steps`` steps (default 2000, about 18,000 trace events), so the ring wraps: the trace
holds exactly ``max_entries`` entries, the anchor's ``alloc`` entry is gone while its block is
still live in the segments, and the trace starts mid-history.

``--big PATH`` -> a ~1M-entry capture written to PATH (outside the capture folder; it is
NOT committed and not packed into the tarball): ``max_entries = --big-entries`` (default
1,000,000) and enough steps to fill the ring.  It prints the file's size and sha256 and
writes ``scale_big.truth.json`` (size, sha256, entry counts, seconds) into ``--out``, which
records no snapshot file of its own, since the file stays on the capture machine.
``run_all.py`` runs it only when asked (``--only scale_big`` or ``--with scale_big``).

Outputs: ``scale_wrapped.pickle`` + ``scale.truth.json``; with ``--big``: PATH +
``scale_big.truth.json``.
"""

import os
import pickle
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

KiB = 1024
MiB = common.MiB
SIZES_A = (1 * MiB, 2 * MiB, 3 * MiB, 4 * MiB)
SIZES_B = (256 * KiB, 512 * KiB, 768 * KiB)
SIZES_C = (6 * MiB, 12 * MiB)
KEEP_EVERY = 50
KEEP_BYTES = 64 * KiB
ANCHOR_BYTES = 5 * MiB
EVENTS_PER_STEP = 9          # 3 x (alloc, free_requested, free_completed)


def make_anchor(torch):
    return torch.empty(ANCHOR_BYTES, dtype=torch.uint8, device="cuda")  # @site anchor


def step(torch, i, keep):
    a = torch.empty(SIZES_A[i % len(SIZES_A)], dtype=torch.uint8, device="cuda")  # @site act_a
    b = torch.empty(SIZES_B[i % len(SIZES_B)], dtype=torch.uint8, device="cuda")  # @site act_b
    c = torch.empty(SIZES_C[i % len(SIZES_C)], dtype=torch.uint8, device="cuda")  # @site act_c
    del c
    del b
    del a
    if i % KEEP_EVERY == 0:
        keep.append(torch.empty(KEEP_BYTES, dtype=torch.uint8, device="cuda"))  # @site keep


def run_loop(torch, steps):
    anchor = make_anchor(torch)
    keep = []
    for i in range(steps):
        step(torch, i, keep)
    torch.cuda.synchronize()
    allocs = 1 + 3 * steps + len(keep)
    frees = 3 * steps
    return anchor, keep, {"steps": steps, "script_allocs": allocs, "script_frees": frees,
                          "events_lower_bound": allocs + 2 * frees, "kept": len(keep)}


def anchor_facts(snap, anchor_site):
    live = [b for s in snap.get("segments", []) for b in s.get("blocks", [])
            if b.get("state") == "active_allocated"
            and common.innermost_python_site(common._frames(b)) == anchor_site]
    trace = snap.get("device_traces", [[]])[0] if snap.get("device_traces") else []
    seen = sum(1 for e in trace if e.get("action") == "alloc"
               and common.innermost_python_site(common._frames(e)) == anchor_site)
    return len(live), seen, trace


def wrapped(args) -> int:
    torch = common.require_cuda()
    cap = common.Capture(torch, __file__, "scale", args.out, args.ring, args.protocol)
    cap.start(stacks="python", max_entries=args.ring)
    anchor, keep, counts = run_loop(torch, args.steps)
    snap = cap.snapshot()
    cap.dump(snap, "scale_wrapped.pickle")
    cap.stop()
    obs = common.summarize_snapshot(snap)
    anchor_site = cap.site("anchor")
    live_anchor, seen_anchor, trace = anchor_facts(snap, anchor_site)
    first = trace[0] if trace else {}
    facts = {
        "story": "a longer run recorded with a small ring buffer: the trace wrapped and starts mid-history",
        "verdict": "none",
        "max_entries": args.ring,
        "trace_length_expected": args.ring,
        "wrapped": True,
        "anchor_site": anchor_site,
        "anchor_bytes": ANCHOR_BYTES,
        "keep_site": cap.site("keep"),
        "keep_bytes": KEEP_BYTES,
        "keep_every": KEEP_EVERY,
        "sizes": {"act_a": list(SIZES_A), "act_b": list(SIZES_B), "act_c": list(SIZES_C)},
        "sites": cap.sites,
        "notes": ("the ring keeps the newest max_entries events (per device); frees whose alloc was overwritten "
                  "are orphans, and live blocks allocated before the ring's first entry have no alloc event"),
    }
    facts.update(counts)
    observed = dict(obs)
    observed.update({"anchor_live_blocks": live_anchor, "anchor_alloc_events": seen_anchor,
                     "first_entry_action": first.get("action")})
    checks = {
        "ring_really_wrapped": counts["events_lower_bound"] > args.ring,
        "trace_length_is_max_entries": obs["trace_entries"] == args.ring,
        "anchor_block_live": live_anchor == 1,
        "anchor_alloc_overwritten": seen_anchor == 0,
        "keeps_live": common.live_at_site(obs, cap.site("keep"))["count"] == counts["kept"],
    }
    del anchor, keep
    return cap.finish(facts, observed, checks)


def big(args) -> int:
    torch = common.require_cuda()
    path = os.path.abspath(args.big)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    cap = common.Capture(torch, __file__, "scale_big", args.out, args.big_entries, args.protocol)
    cap.start(stacks="python", max_entries=args.big_entries)
    steps = -(-(args.big_entries + 1000) // EVENTS_PER_STEP)      # enough to fill (and just wrap) the ring
    t0 = time.time()
    anchor, keep, counts = run_loop(torch, steps)
    t1 = time.time()
    snap = cap.snapshot()
    t2 = time.time()
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=args.protocol)
    t3 = time.time()
    cap.stop()
    size = os.path.getsize(path)
    digest = common.sha256_file(path)
    trace = snap.get("device_traces", [[]])[0] if snap.get("device_traces") else []
    obs = {"trace_entries": len(trace), "segments": len(snap.get("segments", [])),
           "trace_actions": {}}
    for e in trace:
        a = e.get("action", "?")
        obs["trace_actions"][a] = obs["trace_actions"].get(a, 0) + 1
    obs["trace_actions"] = dict(sorted(obs["trace_actions"].items()))
    print("scale_big: wrote %s (%d bytes, sha256 %s, %d trace entries)" % (path, size, digest, len(trace)))
    facts = {
        "story": "a ~1M-entry capture for benchmarks of real layouts; the file is NOT committed",
        "verdict": "none",
        "committed": False,
        "external_snapshot": {"file": os.path.basename(path), "bytes": size, "sha256": digest,
                              "protocol": args.protocol},
        "max_entries": args.big_entries,
        "seconds": {"workload": round(t1 - t0, 2), "snapshot": round(t2 - t1, 2), "pickle_dump": round(t3 - t2, 2)},
        "sites": cap.sites,
    }
    facts.update(counts)
    checks = {
        "trace_length_is_max_entries": len(trace) == args.big_entries,
        "file_written": size > 0,
    }
    del anchor, keep, snap, trace
    return cap.finish(facts, obs, checks)


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    ap.add_argument("--ring", type=int, default=4096, help="max_entries of the wrapped capture (default %(default)s)")
    ap.add_argument("--steps", type=int, default=2000, help="loop steps of the wrapped capture (default %(default)s)")
    ap.add_argument("--big", metavar="PATH", default=None,
                    help="write the ~1M-entry capture to PATH (not committed) instead of the wrapped one")
    ap.add_argument("--big-entries", type=int, default=1000000,
                    help="max_entries (= trace length) of the --big capture (default %(default)s)")
    args = ap.parse_args()
    sys.exit(big(args) if args.big else wrapped(args))


if __name__ == "__main__":
    main()
