#!/usr/bin/env python3
"""Capture 6b: ``_record_memory_history(stacks="all")`` -- C++ frames in every stack.

A tiny forward/backward (raw ``torch.mm``) plus one 8 MiB buffer, recorded with
``stacks="all"``: each stack is the unwound C++ stack with the Python frames
spliced in where the interpreter was running, innermost first.  The innermost
*Python* frame of the buffer's block is still ``stacks_all.py:<line>:make_buffer``,
but the innermost frame overall is a C++ one.  Backward-thread allocations get
C++ frames only.

C++ symbolization happens inside ``_snapshot()``; its cost depends on
``TORCH_SYMBOLIZE_MODE`` (addr2line can take minutes on big libraries), so this
script sets it from ``--symbolize`` (default ``fast``; run_all.py falls back to
``dladdr``) before torch is imported.  The workload is kept tiny (a few dozen
unique stacks) to bound both time and file size.

Outputs: ``stacks_all.pickle`` + ``stacks_all.truth.json``.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MiB = common.MiB
N = 256
BUF_BYTES = 8 * MiB


def forward_backward(torch):
    x = torch.randn(N, N, device="cuda", requires_grad=True)  # @site x
    w = torch.randn(N, N, device="cuda")  # @site w
    y = torch.mm(x, w)  # @site mm
    loss = torch.sum(torch.relu(y))  # @site loss
    loss.backward()
    return x


def make_buffer(torch):
    return torch.empty(BUF_BYTES, dtype=torch.uint8, device="cuda")  # @site buffer


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    ap.add_argument("--symbolize", default="fast", choices=("fast", "dladdr", "addr2line", "env"),
                    help="TORCH_SYMBOLIZE_MODE to set before importing torch ('env': leave as is)")
    args = ap.parse_args()
    if args.symbolize != "env":
        os.environ["TORCH_SYMBOLIZE_MODE"] = args.symbolize
        if args.symbolize == "dladdr":
            os.environ["TORCH_DISABLE_ADDR2LINE"] = "1"   # the pre-TORCH_SYMBOLIZE_MODE switch
    torch = common.require_cuda()

    cap = common.Capture(torch, __file__, "stacks_all", args.out, args.max_entries, args.protocol)
    cap.env["TORCH_SYMBOLIZE_MODE"] = os.environ.get("TORCH_SYMBOLIZE_MODE")
    cap.start(stacks="all")
    torch.manual_seed(0)
    x = forward_backward(torch)
    buf = make_buffer(torch)
    torch.cuda.synchronize()
    snap = cap.snapshot()
    cap.dump(snap)
    cap.stop()
    obs = common.summarize_snapshot(snap)

    buf_site = cap.site("buffer")
    buf_block = None
    for seg in snap.get("segments", []):
        for blk in seg.get("blocks", []):
            if blk.get("state") == "active_allocated" and int(blk.get("size", 0)) == BUF_BYTES:
                if common.innermost_python_site(common._frames(blk)) == buf_site:
                    buf_block = blk
    frames = common._frames(buf_block) if buf_block else []
    first_py = next((i for i, f in enumerate(frames) if common.is_python_frame(f)), -1)
    cpp_examples = [common.frame_site(f) for f in frames if not common.is_python_frame(f)][:5]

    facts = {
        "story": "stacks='all': C++ frames interleaved with Python frames, innermost first",
        "verdict": "none",
        "stacks": "all",
        "cpp_frames_present": True,
        "buffer_bytes": BUF_BYTES,
        "buffer_site": buf_site,
        "buffer_innermost_frame_is_cpp": True,
        "symbolize_mode": os.environ.get("TORCH_SYMBOLIZE_MODE"),
        "sites": cap.sites,
        "notes": ("match sites on the innermost frame whose filename ends in .py; C++ frames may have "
                  "filename '??', '' or a library/source path and line 0"),
    }
    observed = dict(obs)
    observed["buffer_stack_depth"] = len(frames)
    observed["buffer_first_python_frame_index"] = first_py
    observed["buffer_cpp_frame_examples"] = cpp_examples
    checks = {
        "cpp_frames_present": obs["cpp_frames"] > 0,
        "python_frames_present": obs["python_frames"] > 0,
        "buffer_block_found": buf_block is not None,
        "buffer_innermost_frame_is_cpp": bool(frames) and not common.is_python_frame(frames[0]),
        "buffer_stack_has_python_site": first_py > 0,
    }
    del x, buf
    sys.exit(cap.finish(facts, observed, checks))


if __name__ == "__main__":
    main()
