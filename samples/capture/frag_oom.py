#!/usr/bin/env python3
"""Capture 2: a fragmentation OOM, and the same workload with expandable segments (no OOM).

The process is capped with ``torch.cuda.set_per_process_memory_fraction`` at
``N_ARENAS * 100 MiB + 48 MiB`` (2048 MiB) so the OOM is quick and deterministic
on a 141 GB H200.  Workload (identical in both modes):

1. allocate 20 "arena" tensors of 100 MiB, then free them.  Native allocator:
   20 cached, unsplit 100 MiB segments; reserved = 2000 MiB = cap - 48 MiB.
2. interleave long- and short-lived tensors of mixed sizes that exactly tile each
   arena: even arenas [L 4][S 40][L 6][S 50] MiB, odd arenas [L 8][S 30][L 2][S 60] MiB.
   Best fit always picks the remainder of the arena being carved (it is the
   smallest free block that fits), and large-pool blocks split when the remainder
   is > 1 MiB, so every segment ends up split around its long-lived tensors.
3. free the short-lived tensors: 1800 MiB free inside the segments, in 40 holes
   of 30..60 MiB, each pinned between live long-lived tensors (holes do not merge).
4. request 72 MiB.

Why this is fragmentation and not capacity (native mode): no free block is
>= 72 MiB (largest hole 60 MiB), so the allocator needs a new 72 MiB segment;
reserved 2000 + 72 > 2048 MiB cap, so cudaMalloc is refused by the fraction limit;
the cache flush (``release_cached_blocks``) can only return *unsplit* free
segments and every segment is split, so nothing is released (no ``segment_free``)
and the retry fails -> ``oom``.  Yet 1800 MiB -- 25x the request -- sits free in
the reserved segments: the memory exists, just not contiguously.

Expandable mode (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` in the
environment before torch starts; this script re-executes itself in a subprocess
with that environment): all blocks live in one growable virtual range mapped in
20 MiB pages.  On the same miss the flush *unmaps* the whole pages inside the
holes (``segment_unmap``, ~1200 MiB), which drops mapped memory well under the
cap, and the 72 MiB request is mapped at the end of the range (``segment_map``):
no OOM.

Outputs: ``frag_oom.pickle``/``.truth.json`` and ``frag_oom_expandable.*``.
"""

import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MiB = common.MiB
ARENA = 100 * MiB
N_ARENAS = 20
PATTERNS = (((4, 40), (6, 50)), ((8, 30), (2, 60)))   # per arena: (long MiB, short MiB) pairs
SLACK = 48 * MiB
REQUEST = 72 * MiB
EXPANDABLE_CONF = "expandable_segments:True"
CHILD_MARK = "MEMLENS_CAPTURE_REEXEC"


def make_arenas(torch):
    arenas = []
    for _ in range(N_ARENAS):
        arenas.append(torch.empty(ARENA, dtype=torch.uint8, device="cuda"))  # @site arena
    return arenas


def carve(torch):
    long_lived, short_lived = [], []
    for i in range(N_ARENAS):
        for long_mib, short_mib in PATTERNS[i % 2]:
            long_lived.append(torch.empty(long_mib * MiB, dtype=torch.uint8, device="cuda"))  # @site long_lived
            short_lived.append(torch.empty(short_mib * MiB, dtype=torch.uint8, device="cuda"))  # @site short_lived
    return long_lived, short_lived


def big_request(torch):
    return torch.empty(REQUEST, dtype=torch.uint8, device="cuda")  # @site request


def env_matches(mode: str) -> bool:
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    alt = os.environ.get("PYTORCH_ALLOC_CONF")
    if mode == "expandable":
        return conf == EXPANDABLE_CONF and not alt
    return not conf and not alt


def reexec(mode: str, argv: list) -> int:
    """Run this script again in a subprocess whose environment is set before torch starts."""
    env = dict(os.environ)
    for k in common.ALLOC_CONF_VARS:
        env.pop(k, None)
    if mode == "expandable":
        env["PYTORCH_CUDA_ALLOC_CONF"] = EXPANDABLE_CONF
    env[CHILD_MARK] = "1"
    return subprocess.call([sys.executable, os.path.abspath(__file__)] + argv, env=env)


def run_one(args, expandable: bool) -> int:
    torch = common.require_cuda()
    name = "frag_oom_expandable" if expandable else "frag_oom"
    cap = common.Capture(torch, __file__, name, args.out, args.max_entries, args.protocol)
    cap.start(stacks="python")

    reserved0 = int(torch.cuda.memory_reserved(0))
    capinfo = common.set_memory_cap(torch, reserved0 + N_ARENAS * ARENA + SLACK)

    arenas = make_arenas(torch)
    del arenas
    long_lived, short_lived = carve(torch)
    del short_lived
    reserved_before = int(torch.cuda.memory_reserved(0))
    allocated_before = int(torch.cuda.memory_allocated(0))

    oom_type = common.oom_error_type(torch)
    oom_message = None
    big = None
    try:
        big = big_request(torch)
    except oom_type as exc:          # the trace now ends with the `oom` event
        oom_message = " ".join(str(exc).split())
    snap = cap.snapshot()
    cap.dump(snap)
    cap.stop()
    obs = common.summarize_snapshot(snap)

    long_bytes = sum(l * MiB for p in PATTERNS for l, _ in p) * (N_ARENAS // 2)
    short_holes = sorted(s * MiB for p in PATTERNS for _, s in p)
    free_bytes = sum(short_holes) * (N_ARENAS // 2)
    settings = obs.get("allocator_settings", {})
    facts = {
        "story": ("fragmentation OOM: 1800 MiB free in 40 holes of 30-60 MiB, largest 60 MiB < 72 MiB "
                  "request; cap headroom 48 MiB < 72 MiB; no unsplit segment to release"
                  if not expandable else
                  "same workload with expandable_segments:True: flush unmaps whole free pages inside the "
                  "holes and the 72 MiB request is mapped at the end of the range; no OOM"),
        "verdict": "none" if expandable else "fragmentation",
        "expandable_segments": expandable,
        "requested_bytes": REQUEST,
        "oom_trace_size_expected": None if expandable else REQUEST,   # round_size(72 MiB) == 72 MiB
        "tried_to_allocate_bytes": None if expandable else REQUEST,   # get_allocation_size(72 MiB)
        "memory_cap": capinfo,
        "cap_headroom_bytes_at_request": capinfo["cap_bytes"] - reserved_before,
        "reserved_bytes_at_request": reserved_before,
        "allocated_bytes_at_request": allocated_before,
        "expected_reserved_bytes_native": N_ARENAS * ARENA,
        "expected_allocated_bytes": long_bytes,
        "expected_free_in_segments_bytes_native": free_bytes,
        "expected_largest_free_block_bytes_native": max(short_holes),
        "expected_free_holes_native": 2 * N_ARENAS,
        "arena_bytes": ARENA,
        "arenas": N_ARENAS,
        "patterns_mib": [[list(pair) for pair in p] for p in PATTERNS],
        "oom_site": None if expandable else cap.site("request"),
        "request_site": cap.site("request"),
        "long_lived_site": cap.site("long_lived"),
        "short_lived_site": cap.site("short_lived"),
        "arena_site": cap.site("arena"),
        "top_live_site": cap.site("long_lived") if not expandable else None,
        "oom_message": oom_message,
        "sites": cap.sites,
    }
    oom_events = obs["oom_events"]
    if expandable:
        checks = {
            "no_oom": oom_message is None and not oom_events,
            "request_is_live": common.live_at_site(obs, cap.site("request"))["count"] == 1,
            "segments_are_expandable": obs["expandable_segments"] > 0,
            "settings_say_expandable": settings.get("expandable_segments", True) is True,
        }
        facts["expected_segment_unmap_present"] = True
        facts["observed_segment_unmap"] = obs["trace_actions"].get("segment_unmap", 0)
    else:
        checks = {
            "oom_raised": oom_message is not None,
            "one_oom_event": len(oom_events) == 1,
            "oom_size_is_request": bool(oom_events) and oom_events[0]["size"] == REQUEST,
            "oom_site_is_request_line": bool(oom_events) and oom_events[0]["site"] == cap.site("request"),
            "largest_free_block_below_request": obs["largest_inactive_block"] < REQUEST,
            "largest_free_block_is_60MiB": obs["largest_inactive_block"] == max(short_holes),
            "free_in_segments_covers_request": obs["inactive_bytes"] >= REQUEST,
            "free_in_segments_is_1800MiB": obs["inactive_bytes"] == free_bytes,
            "reserved_is_2000MiB": obs["reserved_bytes"] == N_ARENAS * ARENA,
            "cap_blocks_new_segment": obs["reserved_bytes"] + REQUEST > capinfo["cap_bytes"],
            "nothing_released_by_flush": obs["trace_actions"].get("segment_free", 0) == 0,
            "not_expandable": obs["expandable_segments"] == 0,
        }
    del long_lived, big
    return cap.finish(facts, obs, checks)


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("native", "expandable", "both"), default="both",
                    help="native allocator, expandable segments (re-executed in a subprocess with "
                         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), or both (default)")
    args = ap.parse_args()
    argv = sys.argv[1:]

    if args.mode == "both":
        common.require_cuda()               # refuse once, with one line, before spawning anything
        base = ["--out", args.out, "--max-entries", str(args.max_entries), "--protocol", str(args.protocol)]
        rcs = [reexec("native", base + ["--mode", "native"]),
               reexec("expandable", base + ["--mode", "expandable"])]
        sys.exit(max(rcs))
    if not env_matches(args.mode):
        if os.environ.get(CHILD_MARK):
            common.refuse("capture: could not set the allocator environment for mode %s" % args.mode)
        sys.exit(reexec(args.mode, argv))
    sys.exit(run_one(args, expandable=(args.mode == "expandable")))


if __name__ == "__main__":
    main()
