#!/usr/bin/env python3
"""Capture 8: one fragmentation-prone request sequence under five allocator settings.

Ground truth for ``memlens whatif``: what each ``PYTORCH_CUDA_ALLOC_CONF`` setting really does
to the same workload, to be predicted from the default run alone.  Each setting runs in a
FRESH child process whose environment carries the setting before torch is imported:

  default                 (no PYTORCH_CUDA_ALLOC_CONF)
  expandable              expandable_segments:True
  max_split_128           max_split_size_mb:128
  roundup4                roundup_power2_divisions:4
  gc06_max_split_128      garbage_collection_threshold:0.6,max_split_size_mb:128

The request sequence (identical in every child; ``facts.sequence.ops`` lists every op):

1. ``arenas``: allocate 8 tensors of 256 MiB, then free them in allocation order.  Default
   allocator: 8 cached, unsplit 256 MiB segments (2048 MiB reserved).
2. ``carve``: per arena, long- and short-lived tensors that exactly tile it: even arenas
   [L 16][S 100][L 24][S 116] MiB, odd arenas [L 8][S 120][L 32][S 96] MiB.
3. ``free_short``: free the short-lived tensors in allocation order (1728 MiB in 16 holes of
   96..120 MiB, each between live long-lived tensors).
4. ``request``: one 160 MiB tensor.

The cap.  Every child calls ``torch.cuda.set_per_process_memory_fraction(f)`` with
``f = (reserved_at_start + 8 x 256 MiB + 64 MiB) / total`` where ``total`` is
``cudaMemGetInfo``'s total (the allocator's own base for the fraction), i.e. a cap of
2112 MiB when nothing is reserved at the start (about 0.0147 of a 141 GB H200).  Why the
default run OOMs: at step 4 no free block is >= 160 MiB (largest hole 120 MiB), a new
160 MiB segment would take reserved memory to 2048 + 160 > 2112 MiB, and the cache flush
can only release unsplit segments, of which there are none.  1728 MiB are free, just not
contiguous.  (Predictions for the other settings are in ``facts.runs[].script_expectation``;
they are the script author's reading of CUDACachingAllocator.cpp, not checks.)

Each child records history (stacks="python"), runs the sequence (stopping at the first OOM,
wherever it happens), reads ``torch.cuda.memory_stats()`` (``reserved_bytes.all.peak``,
``num_alloc_retries``, ``num_ooms``, ``segment.all.*``...), dumps
``alloc_settings_<tag>.pickle`` (protocol 4) and writes ``alloc_settings_<tag>.truth.json``.
The parent then writes ``alloc_settings.truth.json`` listing every run.

Outputs: ``alloc_settings_<tag>.pickle`` + ``alloc_settings_<tag>.truth.json`` for the five
tags, and ``alloc_settings.truth.json``.
"""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MiB = common.MiB
ARENA = 256 * MiB
N_ARENAS = 8
PATTERNS = (((16, 100), (24, 116)), ((8, 120), (32, 96)))   # per arena: (long MiB, short MiB) pairs
SLACK = 64 * MiB
REQUEST = 160 * MiB
CHILD_MARK = "MEMLENS_CAPTURE_REEXEC"
CHILD_TIMEOUT = 90

# tag, PYTORCH_CUDA_ALLOC_CONF (None: unset), the script author's expectation (informational)
SETTINGS = [
    ("default", None,
     {"oomed": True, "oom_phase": "request",
      "why": "no free block >= 160 MiB, new segment over the cap, nothing unsplit to release"}),
    ("expandable", "expandable_segments:True",
     {"oomed": False,
      "why": "the flush unmaps the whole 20 MiB pages inside the holes; the request is then mapped under the cap"}),
    ("max_split_128", "max_split_size_mb:128",
     {"oomed": False,
      "why": ("the 256 MiB arenas are oversize: carve requests (< 128 MiB) do not split them but get their own "
              "segments, evicting the cached arenas; the freed short tensors are unsplit segments that the "
              "flush releases for the request (one retry)")}),
    ("roundup4", "roundup_power2_divisions:4",
     {"oomed": True, "oom_phase": "carve",
      "why": ("rounding to quarter steps between powers of two (100 -> 112, 116 -> 128, 120 -> 128 MiB) makes "
              "the carved tensors need 2176 MiB > 2048 MiB of arenas; the extra segments hit the cap")}),
    ("gc06_max_split_128", "garbage_collection_threshold:0.6,max_split_size_mb:128",
     {"oomed": False,
      "why": "as max_split_128; above 60% of the cap the garbage collector also releases cached segments early"}),
]
TAGS = [s[0] for s in SETTINGS]


# --------------------------------------------------------------------------- the sequence

def sequence_ops() -> list:
    """Every op of the sequence, in order: ``[op, name, bytes]`` (``bytes`` is null for a free)."""
    ops = [["alloc", "arena%d" % i, ARENA] for i in range(N_ARENAS)]
    ops += [["free", "arena%d" % i, None] for i in range(N_ARENAS)]
    longs, shorts = [], []
    for i in range(N_ARENAS):
        for j, (long_mib, short_mib) in enumerate(PATTERNS[i % 2]):
            ops.append(["alloc", "long%d_%d" % (i, j), long_mib * MiB])
            ops.append(["alloc", "short%d_%d" % (i, j), short_mib * MiB])
            shorts.append("short%d_%d" % (i, j))
    ops += [["free", n, None] for n in shorts]
    ops.append(["alloc", "request", REQUEST])
    return ops


def phase_of(index: int) -> str:
    if index < N_ARENAS:
        return "arenas"
    if index < 2 * N_ARENAS:
        return "free_arenas"
    if index < 2 * N_ARENAS + 4 * N_ARENAS:
        return "carve"
    if index < 2 * N_ARENAS + 6 * N_ARENAS:
        return "free_short"
    return "request"


def make_arenas(torch, prog, arenas):
    for _ in range(N_ARENAS):
        arenas.append(torch.empty(ARENA, dtype=torch.uint8, device="cuda"))  # @site arena
        prog["op"] += 1


def free_in_order(tensors, prog):
    for i in range(len(tensors)):
        tensors[i] = None
        prog["op"] += 1


def carve(torch, prog, long_lived, short_lived):
    for i in range(N_ARENAS):
        for long_mib, short_mib in PATTERNS[i % 2]:
            long_lived.append(torch.empty(long_mib * MiB, dtype=torch.uint8, device="cuda"))  # @site long_lived
            prog["op"] += 1
            short_lived.append(torch.empty(short_mib * MiB, dtype=torch.uint8, device="cuda"))  # @site short_lived
            prog["op"] += 1


def big_request(torch, prog, keep):
    keep.append(torch.empty(REQUEST, dtype=torch.uint8, device="cuda"))  # @site request
    prog["op"] += 1


def run_sequence(torch, live):
    """Run the ops; stop at the first OOM.  Returns (op index that raised or None, message)."""
    prog = {"op": 0}
    oom_type = common.oom_error_type(torch)
    try:
        make_arenas(torch, prog, live["arenas"])
        free_in_order(live["arenas"], prog)
        carve(torch, prog, live["long"], live["short"])
        free_in_order(live["short"], prog)
        big_request(torch, prog, live["request"])
    except oom_type as exc:
        return prog["op"], " ".join(str(exc).split())
    return None, None


# --------------------------------------------------------------------------- one child

def settings_check(tag: str, settings: dict):
    """Does the snapshot's ``allocator_settings`` show the setting?  (True, note) when absent."""
    if not settings:
        return True, "snapshot has no allocator_settings (older PyTorch); not checked"
    ms = settings.get("max_split_size")
    exp = settings.get("expandable_segments")
    gc = settings.get("garbage_collection_threshold")
    rp2 = settings.get("roundup_power2_divisions")
    unlimited = ms is None or ms == -1 or (isinstance(ms, int) and ms >= 1 << 62)
    rp2_vals = list(rp2.values()) if isinstance(rp2, dict) else ([rp2] if isinstance(rp2, int) else [])
    if tag == "default":
        ok = unlimited and exp in (None, False) and gc in (None, 0, 0.0)
    elif tag == "expandable":
        ok = exp is True
    elif tag == "max_split_128":
        ok = ms == 128 * MiB
    elif tag == "roundup4":
        ok = bool(rp2_vals) and all(v == 4 for v in rp2_vals)
    else:
        ok = ms == 128 * MiB and isinstance(gc, (int, float)) and abs(gc - 0.6) < 1e-9
    return bool(ok), "max_split_size=%r expandable_segments=%r garbage_collection_threshold=%r " \
                     "roundup_power2_divisions=%r" % (ms, exp, gc, sorted(set(rp2_vals)))


def run_one(args, tag: str) -> int:
    torch = common.require_cuda()
    conf = dict((s[0], s[1]) for s in SETTINGS)[tag]
    expectation = dict((s[0], s[2]) for s in SETTINGS)[tag]
    name = "alloc_settings_" + tag
    cap = common.Capture(torch, __file__, name, args.out, args.max_entries, args.protocol)
    cap.start(stacks="python")

    reserved0 = int(torch.cuda.memory_reserved(0))
    capinfo = common.set_memory_cap(torch, reserved0 + N_ARENAS * ARENA + SLACK)
    capinfo["formula"] = "reserved_at_start + N_ARENAS * ARENA + SLACK = %d + %d * %d + %d" % (
        reserved0, N_ARENAS, ARENA, SLACK)

    live = {"arenas": [], "long": [], "short": [], "request": []}
    ops = sequence_ops()
    oom_index, oom_message = run_sequence(torch, live)
    torch.cuda.synchronize()
    stats = common.allocator_stats(torch)
    snap = cap.snapshot()
    cap.dump(snap)
    cap.stop()
    obs = common.summarize_snapshot(snap)
    sv = stats["values"]
    settings = obs.get("allocator_settings", {})
    applied, settings_note = settings_check(tag, settings)
    oomed = oom_index is not None

    facts = {
        "story": "allocator setting %r on the alloc_settings request sequence" % (conf or "default"),
        "verdict": "fragmentation" if tag == "default" else (None if oom_index is not None else "none"),
        "setting": tag,
        "alloc_conf": conf,
        "alloc_conf_env": "PYTORCH_CUDA_ALLOC_CONF",
        "memory_cap": capinfo,
        "sequence": {"description": __doc__.split("The request sequence")[1].split("The cap.")[0].strip(),
                     "ops": ops, "arena_bytes": ARENA, "arenas": N_ARENAS,
                     "patterns_mib": [[list(p) for p in pat] for pat in PATTERNS],
                     "request_bytes": REQUEST, "slack_bytes": SLACK},
        "oomed": oomed,
        "oom_op_index": oom_index,
        "oom_op": ops[oom_index] if oomed else None,
        "oom_phase": phase_of(oom_index) if oomed else None,
        "oom_message": oom_message,
        "ops_executed": oom_index if oomed else len(ops),
        "peak_reserved_bytes": sv.get("reserved_bytes.all.peak"),
        "num_alloc_retries": sv.get("num_alloc_retries"),
        "num_ooms": sv.get("num_ooms"),
        "segments_current": sv.get("segment.all.current"),
        "segments_peak": sv.get("segment.all.peak"),
        "memory_stats": sv,
        "memory_stats_missing": stats["missing"],
        "settings_note": settings_note,
        "script_expectation": expectation,
        "sites": cap.sites,
    }
    checks = {
        "settings_applied": applied,
        "stats_reserved_matches_snapshot": sv.get("reserved_bytes.all.current") in (None, obs["reserved_bytes"]),
        "oom_event_iff_oomed": (len(obs["oom_events"]) >= 1) == oomed,
    }
    if tag == "default":
        checks["default_run_oomed"] = oomed
    del live
    return cap.finish(facts, obs, checks)


# --------------------------------------------------------------------------- the parent

def env_matches(tag: str) -> bool:
    conf = dict((s[0], s[1]) for s in SETTINGS)[tag]
    return os.environ.get("PYTORCH_CUDA_ALLOC_CONF") == conf and not os.environ.get("PYTORCH_ALLOC_CONF")


def child_env(tag: str) -> dict:
    env = dict(os.environ)
    for k in common.ALLOC_CONF_VARS:
        env.pop(k, None)
    conf = dict((s[0], s[1]) for s in SETTINGS)[tag]
    if conf is not None:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    env[CHILD_MARK] = "1"
    return env


def spawn(tag: str, base: list) -> dict:
    t0 = time.time()
    cmd = [sys.executable, os.path.abspath(__file__)] + base + ["--setting", tag]
    try:
        rc = subprocess.run(cmd, env=child_env(tag), timeout=CHILD_TIMEOUT).returncode
        status = {0: "ok", 2: "story-failed", 3: "refused"}.get(rc, "error")
    except subprocess.TimeoutExpired:
        rc, status = None, "timeout"
    return {"rc": rc, "status": status, "seconds": round(time.time() - t0, 2)}


def combine(args, results: dict) -> int:
    runs, snapshots, env = [], [], None
    for tag, conf, expectation in SETTINGS:
        res = results.get(tag, {"status": "not-run"})
        path = os.path.join(args.out, "alloc_settings_%s.truth.json" % tag)
        try:
            with open(path, encoding="utf-8") as f:
                t = json.load(f)
        except (OSError, ValueError):
            t = None
        run = {"setting": tag, "alloc_conf": conf, "child_status": res.get("status"),
               "child_seconds": res.get("seconds"), "truth": os.path.basename(path) if t else None,
               "script_expectation": expectation}
        if t:
            f = t["facts"]
            env = env or t.get("env")
            snapshots += t.get("snapshots", [])
            run.update({
                "snapshot": t["snapshots"][0]["file"] if t.get("snapshots") else None,
                "story_held": t.get("story_held"),
                "settings_applied": t["checks"].get("settings_applied"),
                "oomed": f["oomed"], "oom_op_index": f["oom_op_index"], "oom_op": f["oom_op"],
                "oom_phase": f["oom_phase"], "ops_executed": f["ops_executed"],
                "peak_reserved_bytes": f["peak_reserved_bytes"], "num_alloc_retries": f["num_alloc_retries"],
                "num_ooms": f["num_ooms"], "segments_current": f["segments_current"],
                "segments_peak": f["segments_peak"], "memory_stats": f["memory_stats"],
                "snapshot_reserved_bytes": t["observed"]["reserved_bytes"],
                "snapshot_segments": t["observed"]["segments"],
                "snapshot_largest_free_block": t["observed"]["largest_inactive_block"],
                "matches_script_expectation": f["oomed"] == expectation["oomed"] and (
                    not f["oomed"] or f["oom_phase"] == expectation.get("oom_phase")),
            })
        runs.append(run)
    by_tag = {r["setting"]: r for r in runs}
    env = dict(env or {})
    env["alloc_conf"] = "set per run in a fresh child process; see facts.runs[].alloc_conf"
    facts = {
        "story": "one fragmentation-prone request sequence under five allocator settings, one fresh process each",
        "whatif_question": ("from alloc_settings_default.pickle alone, predict for each other setting whether the "
                            "sequence OOMs (and at which op), the peak reserved bytes, num_alloc_retries and "
                            "the segment counts; facts.runs holds what PyTorch did"),
        "baseline": "alloc_settings_default.pickle",
        "settings": [{"setting": t, "alloc_conf": c} for t, c, _ in SETTINGS],
        "sequence": {"ops": sequence_ops(), "arena_bytes": ARENA, "arenas": N_ARENAS,
                     "patterns_mib": [[list(p) for p in pat] for pat in PATTERNS],
                     "request_bytes": REQUEST, "slack_bytes": SLACK},
        "memory_cap_formula": ("fraction = (reserved_at_start + N_ARENAS * ARENA + SLACK) / cudaMemGetInfo total; "
                               "each run's truth has memory_cap"),
        "runs": runs,
    }
    checks = {
        "every_run_wrote_truth": all(r.get("truth") for r in runs),
        "every_child_held": all(r.get("child_status") == "ok" for r in runs),
        "default_run_oomed": bool(by_tag.get("default", {}).get("oomed")),
        "settings_applied_in_every_run": all(r.get("settings_applied") for r in runs),
    }
    truth = common.build_truth("alloc_settings", facts, env, snapshots, {}, checks, script="alloc_settings.py")
    common.write_truth(os.path.join(args.out, "alloc_settings.truth.json"), truth)
    failed = sorted(k for k, v in checks.items() if not v)
    print("alloc_settings: wrote alloc_settings.truth.json over %d runs; story_held=%s%s" % (
        sum(1 for r in runs if r.get("truth")), truth["story_held"],
        (" (failed: %s)" % ", ".join(failed)) if failed else ""))
    if any(r.get("child_status") not in ("ok", "story-failed") for r in runs):
        return common.EXIT_ERROR
    return common.EXIT_OK if truth["story_held"] else common.EXIT_STORY_FAILED


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    ap.add_argument("--setting", choices=TAGS, default=None,
                    help="run one setting in this process (re-executed with its PYTORCH_CUDA_ALLOC_CONF); "
                         "default: every setting, each in a fresh child process, then the combined truth")
    args = ap.parse_args()

    if args.setting is None:
        common.require_cuda()               # refuse once, with one line, before spawning anything
        os.makedirs(args.out, exist_ok=True)
        base = ["--out", args.out, "--max-entries", str(args.max_entries), "--protocol", str(args.protocol)]
        results = {}
        for tag in TAGS:
            sys.stdout.flush()
            results[tag] = spawn(tag, base)
        sys.exit(combine(args, results))
    if not env_matches(args.setting):
        if os.environ.get(CHILD_MARK):
            common.refuse("capture: could not set the allocator environment for setting %s" % args.setting)
        sys.exit(subprocess.call([sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                                 env=child_env(args.setting)))
    sys.exit(run_one(args, args.setting))


if __name__ == "__main__":
    main()
