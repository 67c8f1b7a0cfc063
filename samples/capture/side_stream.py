#!/usr/bin/env python3
"""Capture 6a: side streams and ``record_stream`` -> a pending free in the snapshot.

A 64 MiB buffer is allocated and filled on the default stream, then consumed on a
side stream *behind* ~100 back-to-back 4096x4096 fp32 matmuls (a few hundred ms of
GPU work).  ``buf.record_stream(side)`` tells the allocator the side stream uses it;
``del buf`` then logs ``free_requested`` but cannot reuse the block until the side
stream's work is done: the allocator records an event on the side stream and keeps
the block as ``active_pending_free``.  The snapshot is taken immediately, without
any synchronization or new allocation in between (pending events are only
processed by a later ``malloc``/``empty_cache``), so the block is pending in
``side_stream.pickle`` regardless of GPU timing.

Then the script synchronizes and makes one tiny allocation (``poke``); that malloc
processes the completed event, which logs ``free_completed`` for the buffer with
the *poke's* stack.  ``side_stream_after.pickle`` shows no pending block.

The side stream's own allocations (the matmul outputs' cuBLAS workspace, the
``sum`` result) live in segments whose ``stream`` is the side stream handle.

Outputs: ``side_stream.pickle``, ``side_stream_after.pickle``, ``side_stream.truth.json``.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MiB = common.MiB
N = 4096
ITERS = 100
BUF_BYTES = 64 * MiB


def make_operands(torch):
    a = torch.randn(N, N, device="cuda")  # @site mat_a
    b = torch.randn(N, N, device="cuda")  # @site mat_b
    c = torch.empty(N, N, device="cuda")  # @site mat_c
    return a, b, c


def make_shared_buffer(torch):
    buf = torch.empty(BUF_BYTES // 4, dtype=torch.float32, device="cuda")  # @site shared_buf
    buf.fill_(1.0)
    return buf


def launch_side_work(torch, side, a, b, c, buf):
    with torch.cuda.stream(side):
        for _ in range(ITERS):
            torch.mm(a, b, out=c)
        partial = torch.sum(buf)  # @site side_sum
    return partial


def poke(torch):
    return torch.empty(256, device="cuda")  # @site poke


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    args = ap.parse_args()
    torch = common.require_cuda()

    cap = common.Capture(torch, __file__, "side_stream", args.out, args.max_entries, args.protocol)
    cap.start(stacks="python")
    torch.manual_seed(0)
    main_stream = torch.cuda.current_stream()
    side = torch.cuda.Stream()

    a, b, c = make_operands(torch)
    buf = make_shared_buffer(torch)
    side.wait_stream(main_stream)
    partial = launch_side_work(torch, side, a, b, c, buf)
    buf.record_stream(side)
    buf_addr = int(buf.data_ptr())
    del buf                                   # free_requested; block now active_pending_free
    snap = cap.snapshot()                     # immediately: no sync, no malloc in between
    cap.dump(snap, "side_stream.pickle")
    side_done_at_snapshot = bool(side.query())

    torch.cuda.synchronize()
    p = poke(torch)                           # malloc -> process_events -> free_completed
    snap2 = cap.snapshot()
    cap.dump(snap2, "side_stream_after.pickle")
    cap.stop()

    obs = common.summarize_snapshot(snap)
    obs2 = common.summarize_snapshot(snap2)
    pend = obs["blocks_by_state"].get("active_pending_free", {"count": 0, "bytes": 0})
    pend2 = obs2["blocks_by_state"].get("active_pending_free", {"count": 0, "bytes": 0})
    buf_site = cap.site("shared_buf")
    pending_rows = obs["pending_free_by_site"]

    def pending_block(s):
        for seg in s.get("segments", []):
            for blk in seg.get("blocks", []):
                if blk.get("state") == "active_pending_free" and blk.get("address") == buf_addr:
                    return blk, seg
        return None, None

    blk, seg = pending_block(snap)
    trace = snap["device_traces"][0]
    trace2 = snap2["device_traces"][0]
    freq = [i for i, e in enumerate(trace) if e.get("action") == "free_requested" and e.get("addr") == buf_addr]
    fcomp = [i for i, e in enumerate(trace) if e.get("action") == "free_completed" and e.get("addr") == buf_addr]
    fcomp2 = [e for e in trace2 if e.get("action") == "free_completed" and e.get("addr") == buf_addr]
    fcomp2_site = common.innermost_python_site(common._frames(fcomp2[-1])) if fcomp2 else None

    facts = {
        "story": ("record_stream: the 64 MiB buffer is freed on the host while a side stream still uses it; "
                  "the snapshot shows it active_pending_free (free_requested logged, no free_completed yet)"),
        "verdict": "none",
        "pending_free_present": True,
        "pending_free_bytes": BUF_BYTES,
        "pending_free_address": buf_addr,
        "pending_free_site": buf_site,
        "main_stream_handle": int(main_stream.cuda_stream),
        "side_stream_handle": int(side.cuda_stream),
        "side_stream_segments_expected": True,
        "side_work_finished_at_snapshot_time": side_done_at_snapshot,
        "after": {
            "snapshot": "side_stream_after.pickle",
            "pending_free_present": False,
            "free_completed_logged_for_buffer": True,
            "free_completed_site": cap.site("poke"),
            "notes": "free_completed carries the stack of the malloc that processed the event (poke)",
        },
        "sites": cap.sites,
    }
    checks = {
        "pending_block_present": blk is not None,
        "pending_block_is_64MiB": blk is not None and int(blk.get("size", 0)) == BUF_BYTES,
        "pending_block_site": bool(pending_rows) and pending_rows[0]["site"] == buf_site,
        "pending_counted_once": pend["count"] == 1 and pend["bytes"] == BUF_BYTES,
        "free_requested_without_completed": len(freq) == 1 and not fcomp,
        "side_stream_segment_present": int(side.cuda_stream) in obs["segment_streams"],
        "after_no_pending": pend2["count"] == 0,
        "after_free_completed_logged": len(fcomp2) >= 1,
        "after_free_completed_site_is_poke": fcomp2_site == cap.site("poke"),
    }
    observed = {"at_snapshot": obs, "after": obs2}
    del a, b, c, partial, p
    sys.exit(cap.finish(facts, observed, checks))


if __name__ == "__main__":
    main()
