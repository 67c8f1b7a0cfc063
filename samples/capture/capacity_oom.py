#!/usr/bin/env python3
"""Capture 3: a capacity OOM -- a tensor larger than what is left.

The process is capped at 2048 MiB with ``torch.cuda.set_per_process_memory_fraction``
(the OOM is raised by the allocator's fraction limit; ``device_free`` in the ``oom``
trace entry stays large because the H200 itself is nearly empty).

Workload: three 512 MiB "parameter" tensors (1536 MiB live, one segment each), a
1 KiB bookkeeping tensor (one 2 MiB small-pool segment), a 64 MiB scratch tensor
that is freed again (a cached, unsplit segment), then a 1024 MiB request.

Allocator path: no cached block fits; a new 1024 MiB segment would take reserved to
1602 + 1024 > 2048 MiB, so it is refused; the flush releases the unsplit 64 MiB scratch
segment (``segment_free`` just before the ``oom``) and the retry still needs
1538 + 1024 > 2048 MiB -> ``oom``.  Even all free memory (cap headroom 510 MiB plus
~2 MiB free in the small segment) is less than the request: capacity, not fragmentation.

Outputs: ``capacity_oom.pickle`` + ``capacity_oom.truth.json``.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MiB = common.MiB
CAP = 2048 * MiB
PARAM = 512 * MiB
N_PARAMS = 3
SCRATCH = 64 * MiB
REQUEST = 1024 * MiB


def load_params(torch):
    params = []
    for _ in range(N_PARAMS):
        params.append(torch.empty(PARAM, dtype=torch.uint8, device="cuda"))  # @site params
    return params


def bookkeeping(torch):
    return torch.zeros(256, dtype=torch.float32, device="cuda")  # @site bookkeeping


def use_scratch(torch):
    scratch = torch.empty(SCRATCH, dtype=torch.uint8, device="cuda")  # @site scratch
    scratch.zero_()
    del scratch


def request(torch):
    return torch.empty(REQUEST, dtype=torch.uint8, device="cuda")  # @site request


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    args = ap.parse_args()
    torch = common.require_cuda()

    cap = common.Capture(torch, __file__, "capacity_oom", args.out, args.max_entries, args.protocol)
    cap.start(stacks="python")
    reserved0 = int(torch.cuda.memory_reserved(0))
    capinfo = common.set_memory_cap(torch, reserved0 + CAP)

    params = load_params(torch)
    book = bookkeeping(torch)
    use_scratch(torch)
    reserved_before = int(torch.cuda.memory_reserved(0))
    allocated_before = int(torch.cuda.memory_allocated(0))

    oom_message = None
    big = None
    try:
        big = request(torch)
    except common.oom_error_type(torch) as exc:
        oom_message = " ".join(str(exc).split())
    reserved_after = int(torch.cuda.memory_reserved(0))
    snap = cap.snapshot()
    cap.dump(snap)
    cap.stop()
    obs = common.summarize_snapshot(snap)

    trace = snap["device_traces"][0] if isinstance(snap, dict) and snap.get("device_traces") else []
    actions = [e.get("action") for e in trace]
    oom_idx = actions.index("oom") if "oom" in actions else -1
    seg_free_idx = [i for i, a in enumerate(actions) if a == "segment_free"]
    headroom = capinfo["cap_bytes"] - reserved_after

    facts = {
        "story": ("capacity OOM: 1536 MiB of live parameters under a 2048 MiB cap; a 1024 MiB request "
                  "cannot fit even after the 64 MiB cached scratch segment is released"),
        "verdict": "capacity",
        "requested_bytes": REQUEST,
        "oom_trace_size_expected": REQUEST,
        "tried_to_allocate_bytes": REQUEST,
        "memory_cap": capinfo,
        "reserved_bytes_before_request": reserved_before,
        "reserved_bytes_after_flush": reserved_after,
        "allocated_bytes_at_request": allocated_before,
        "cap_headroom_bytes_after_flush": headroom,
        "shortfall_bytes": REQUEST - headroom - obs["inactive_bytes"],
        "live_param_bytes": N_PARAMS * PARAM,
        "released_by_flush_bytes": SCRATCH,
        "expected_segment_free_before_oom": True,
        "oom_site": cap.site("request"),
        "top_live_site": cap.site("params"),
        "top_live_site_bytes": N_PARAMS * PARAM,
        "scratch_site": cap.site("scratch"),
        "oom_message": oom_message,
        "sites": cap.sites,
    }
    oom_events = obs["oom_events"]
    checks = {
        "oom_raised": oom_message is not None,
        "one_oom_event": len(oom_events) == 1,
        "oom_size_is_request": bool(oom_events) and oom_events[0]["size"] == REQUEST,
        "oom_site_is_request_line": bool(oom_events) and oom_events[0]["site"] == cap.site("request"),
        "scratch_segment_freed_just_before_oom": bool(seg_free_idx) and oom_idx > max(seg_free_idx)
        and all(a not in ("alloc", "free_requested") for a in actions[max(seg_free_idx) + 1:oom_idx]),
        "all_free_memory_below_request": headroom + obs["inactive_bytes"] < REQUEST,
        "top_live_site_is_params": (obs["live_by_site"] or [{}])[0].get("site") == cap.site("params"),
        "params_live_bytes": common.live_at_site(obs, cap.site("params"))["bytes"] == N_PARAMS * PARAM,
    }
    del params, book, big
    sys.exit(cap.finish(facts, obs, checks))


if __name__ == "__main__":
    main()
