#!/usr/bin/env python3
"""Capture 10: the newer recording modes, each where the installed PyTorch offers it.

Ground truth for the snapshot shapes that newer PyTorch writes.  The script probes the
installed torch (``inspect.signature``/``hasattr``), records in the truth file what it used,
and writes one file per variant it could capture:

1. ``segments_only`` -> ``recording_segments_only.pickle``: allocator state without any trace:
   ``torch.cuda.memory_snapshot(include_traces=False)`` when that parameter exists (a bare
   list of segments), else ``_snapshot()`` taken after history recording was turned off
   (a dict whose ``device_traces`` are empty).
2. ``pool`` -> ``recording_pool.pickle``: a private memory pool.  ``torch.cuda.MemPool`` +
   ``use_mem_pool`` when present (plus ``recording_pool_only.pickle``, the pool's own
   ``MemPool.snapshot()``), else a CUDA graph capture, whose allocations go to the graph's
   private pool.  Segments of the pool carry its ``segment_pool_id``.
3. ``host`` -> ``recording_host.pickle``: pinned host memory recorded with
   ``_record_memory_history(record_pinned_host_memory=True)`` (or whichever ``*host*``
   parameter the installed signature has); the snapshot gains ``host_segments`` and
   ``host_traces``.
4. ``json`` -> ``recording_json.json``: a JSON snapshot, where the installed version writes one.
   Probed by behaviour: ``_dump_snapshot("....json")`` (with a ``*json*`` keyword if its
   signature has one); if the file is a pickle, it is deleted and the variant is unsupported.

A variant the installed torch lacks is recorded as ``unsupported`` with the reason, which is
not a failure; a variant that exists but raises, or whose file lacks what it should hold, is.

Outputs: ``recording_segments_only.pickle`` always; ``recording_pool.pickle``,
``recording_pool_only.pickle``, ``recording_host.pickle``, ``recording_json.json`` where
supported; ``recording_modes.truth.json``.
"""

import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MiB = common.MiB
SEG_KEEP = 7 * MiB
POOL_A = 6 * MiB
POOL_TMP = 2 * MiB
POOL_SMALL = 4096
OUTSIDE = 3 * MiB
PINNED_A = 3 * MiB
PINNED_TMP = MiB + 4096
GRAPH_N = 1 << 20           # float32 elements: 4 MiB per graph tensor
JSON_KEEP = 5 * MiB


def err(exc) -> str:
    return " ".join(("%s: %s" % (type(exc).__name__, exc)).split())[:500]


# --------------------------------------------------------------------------- workloads

def segments_workload(torch):
    keep = [torch.empty(SEG_KEEP, dtype=torch.uint8, device="cuda")]  # @site seg_keep
    tmp = torch.empty(MiB, dtype=torch.uint8, device="cuda")  # @site seg_tmp
    del tmp
    return keep


def pool_workload(torch, pool, use_mem_pool):
    keep = []
    with use_mem_pool(pool):
        keep.append(torch.empty(POOL_A, dtype=torch.uint8, device="cuda"))  # @site pool_a
        tmp = torch.empty(POOL_TMP, dtype=torch.uint8, device="cuda")  # @site pool_tmp
        keep.append(torch.empty(POOL_SMALL, dtype=torch.uint8, device="cuda"))  # @site pool_small
        del tmp
    keep.append(torch.empty(OUTSIDE, dtype=torch.uint8, device="cuda"))  # @site outside_pool
    return keep


def graph_body(torch, static_x):
    a = torch.mul(static_x, 2)  # @site graph_a
    b = torch.add(a, 1)  # @site graph_b
    del a
    return b


def graph_workload(torch):
    static_x = torch.zeros(GRAPH_N, device="cuda")  # @site graph_input
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):            # warm-up outside the graph, as the CUDA graph docs do
        for _ in range(2):
            graph_body(torch, static_x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = graph_body(torch, static_x)
    g.replay()
    torch.cuda.synchronize()
    return [static_x, static_y, g]


def pinned_workload(torch):
    keep = [torch.empty(PINNED_A, dtype=torch.uint8, pin_memory=True)]  # @site pinned_a
    tmp = torch.empty(PINNED_TMP, dtype=torch.uint8, pin_memory=True)  # @site pinned_tmp
    keep.append(tmp.to("cuda", non_blocking=True))  # @site pinned_copy
    torch.cuda.synchronize()
    del tmp
    return keep


def json_workload(torch):
    return [torch.empty(JSON_KEEP, dtype=torch.uint8, device="cuda")]  # @site json_keep


# --------------------------------------------------------------------------- helpers

def pool_key(pid) -> str:
    try:
        return "%d_%d" % tuple(int(x) for x in pid)
    except (TypeError, ValueError):
        return str(pid)


def segments_of(snap) -> list:
    return snap if isinstance(snap, list) else snap.get("segments", [])


def by_pool(snap) -> dict:
    out = {}
    for s in segments_of(snap):
        k = pool_key(s.get("segment_pool_id", (0, 0)))
        d = out.setdefault(k, {"segments": 0, "reserved_bytes": 0, "allocated_bytes": 0, "live_requested": []})
        d["segments"] += 1
        d["reserved_bytes"] += int(s.get("total_size", 0))
        d["allocated_bytes"] += int(s.get("allocated_size", 0))
        for b in s.get("blocks", []):
            if b.get("state") == "active_allocated":
                d["live_requested"].append(int(b.get("requested_size", 0)))
    for d in out.values():
        d["live_requested"].sort()
    return dict(sorted(out.items()))


def live_requested(snap) -> list:
    return sorted(int(b.get("requested_size", 0)) for s in segments_of(snap) for b in s.get("blocks", [])
                  if b.get("state") == "active_allocated")


# --------------------------------------------------------------------------- variants

def variant_segments_only(torch, cap, probes):
    v = {"file": "recording_segments_only.pickle"}
    cap.start(stacks="python")
    keep = segments_workload(torch)
    if "include_traces" in probes["memory_snapshot_params"]:
        snap = torch.cuda.memory_snapshot(include_traces=False)
        v["method"] = "torch.cuda.memory_snapshot(include_traces=False)"
        cap.stop()
    else:
        cap.stop()
        snap = torch.cuda.memory._snapshot()
        v["method"] = "torch.cuda.memory._snapshot() after _record_memory_history(enabled=None)"
    cap.dump(snap, v["file"], protocol=4)
    traces = [] if isinstance(snap, list) else snap.get("device_traces", [])
    v.update({
        "status": "captured",
        "top_level": "list" if isinstance(snap, list) else "dict",
        "trace_entries": sum(len(t) for t in traces),
        "blocks_with_frames": sum(1 for s in segments_of(snap) for b in s.get("blocks", []) if b.get("frames")),
        "live_requested": live_requested(snap),
        "seg_keep_bytes": SEG_KEEP,
    })
    v["ok"] = v["trace_entries"] == 0 and SEG_KEEP in v["live_requested"]
    del keep
    return v, common.summarize_snapshot(snap)


def variant_pool(torch, cap, probes):
    v = {"file": "recording_pool.pickle"}
    MemPool = getattr(torch.cuda, "MemPool", None) or getattr(torch.cuda.memory, "MemPool", None)
    use = getattr(torch.cuda, "use_mem_pool", None) or getattr(torch.cuda.memory, "use_mem_pool", None)
    if MemPool is not None and use is not None:
        cap.start(stacks="python")
        try:
            pool = MemPool()
            keep = pool_workload(torch, pool, use)
            snap = cap.snapshot()
            cap.dump(snap, v["file"], protocol=4)
            pid = pool_key(pool.id)
            v.update({"status": "captured", "method": "torch.cuda.MemPool + use_mem_pool", "pool_id": pid})
            if hasattr(pool, "snapshot"):
                only = pool.snapshot()
                v["pool_only_file"] = "recording_pool_only.pickle"
                cap.dump(only, v["pool_only_file"], protocol=4)
                v["pool_only_segments"] = len(segments_of(only))
                v["pool_only_pools"] = sorted(by_pool(only))
            cap.stop()
            pools = by_pool(snap)
            v["by_pool"] = pools
            inside = pools.get(pid, {}).get("live_requested", [])
            outside = pools.get("0_0", {}).get("live_requested", [])
            v["ok"] = POOL_A in inside and POOL_SMALL in inside and OUTSIDE in outside and POOL_A not in outside
            if "pool_only_pools" in v:
                v["pool_only_has_only_this_pool"] = v["pool_only_pools"] == [pid]
            v["expected"] = {"in_pool_live_requested": sorted([POOL_A, POOL_SMALL]), "outside_live_requested": OUTSIDE,
                             "freed_in_pool": POOL_TMP}
            del keep
            return v, common.summarize_snapshot(snap)
        except Exception as exc:            # present but broken: record it, then try a CUDA graph
            cap.stop()
            v["mempool_error"] = err(exc)
    if probes["cuda_graph"]:
        cap.start(stacks="python")
        keep = graph_workload(torch)
        snap = cap.snapshot()
        cap.dump(snap, v["file"], protocol=4)
        cap.stop()
        pools = by_pool(snap)
        private = {k: d for k, d in pools.items() if k != "0_0"}
        v.update({"status": "captured", "method": "CUDA graph capture (torch.cuda.graph): the graph's private pool",
                  "by_pool": pools, "private_pools": sorted(private)})
        v["ok"] = bool(private) and any(GRAPH_N * 4 in d["live_requested"] for d in private.values())
        v["expected"] = {"private_pool_live_requested_includes": GRAPH_N * 4}
        del keep
        return v, common.summarize_snapshot(snap)
    v.update({"status": "unsupported", "ok": True, "file": None,
              "reason": "torch %s has neither torch.cuda.MemPool/use_mem_pool nor torch.cuda.CUDAGraph/graph%s"
                        % (torch.__version__, " (MemPool raised: %s)" % v["mempool_error"] if "mempool_error" in v else "")})
    if "mempool_error" in v:
        v["status"], v["ok"] = "failed", False
    return v, None


def variant_host(torch, cap, probes):
    v = {"file": "recording_host.pickle"}
    params = probes["record_history_params"]
    flag = "record_pinned_host_memory" if "record_pinned_host_memory" in params else next(
        (p for p in params if "host" in p.lower()), None)
    if flag is None:
        v.update({"status": "unsupported", "ok": True, "file": None,
                  "reason": "torch %s: _record_memory_history has no pinned-host flag (parameters: %s)"
                            % (torch.__version__, ", ".join(params) or "not inspectable")})
        return v, None
    v["flag"] = flag
    try:
        cap.start(stacks="python", extra={flag: True})
        keep = pinned_workload(torch)
        snap = cap.snapshot()
        cap.dump(snap, v["file"], protocol=4)
    except Exception as exc:
        v.update({"status": "failed", "ok": False, "error": err(exc)})
        return v, None
    finally:
        cap.stop()
    host_keys = sorted(str(k) for k in snap if "host" in str(k)) if isinstance(snap, dict) else []
    v.update({
        "status": "captured",
        "host_keys": host_keys,
        "host_segments": common.describe_payload(snap.get("host_segments")) if "host_segments" in snap else None,
        "host_traces": common.describe_payload(snap.get("host_traces")) if "host_traces" in snap else None,
        "expected": {"pinned_live_requested": PINNED_A, "pinned_freed_requested": PINNED_TMP,
                     "device_copy_bytes": PINNED_TMP},
    })
    v["ok"] = "host_segments" in host_keys and "host_traces" in host_keys
    del keep
    return v, common.summarize_snapshot(snap)


def variant_json(torch, cap, probes, out_dir):
    v = {"file": "recording_json.json"}
    dparams = probes["dump_snapshot_params"]
    kw_names = [p for p in dparams if "json" in p.lower()]
    kwargs = {kw_names[0]: True} if kw_names else {}
    path = os.path.join(out_dir, v["file"])
    cap.start(stacks="python")
    keep = json_workload(torch)
    try:
        torch.cuda.memory._dump_snapshot(path, **kwargs)
        call_error = None
    except Exception as exc:
        call_error = err(exc)
    cap.stop()
    del keep
    v["call"] = "torch.cuda.memory._dump_snapshot(%r%s)" % (os.path.basename(path),
                                                           "".join(", %s=True" % k for k in kwargs))
    head = b""
    if os.path.exists(path):
        with open(path, "rb") as f:
            head = f.read(64).lstrip()
    if head[:1] in (b"{", b"["):
        try:
            with open(path, encoding="utf-8") as f:
                snap = json.load(f)
        except ValueError as exc:
            v.update({"status": "failed", "ok": False, "error": "not valid JSON: %s" % err(exc)})
            return v, None
        cap.snapshots.append({"file": v["file"], "format": "json", "bytes": os.path.getsize(path)})
        v.update({"status": "captured", "format": "json",
                  "top_level": "list" if isinstance(snap, list) else "dict",
                  "live_requested": live_requested(snap)})
        v["ok"] = JSON_KEEP in v["live_requested"]
        return v, common.summarize_snapshot(snap)
    if os.path.exists(path):
        os.remove(path)
    why = "wrote a pickle (first byte 0x%02x)" % head[0] if head else "wrote nothing"
    v.update({"status": "unsupported", "ok": call_error is None, "file": None,
              "reason": "torch %s: %s %s%s; names with 'json' in torch.cuda.memory: %s"
                        % (torch.__version__, v["call"], why if call_error is None else "raised " + call_error,
                           "" if kw_names else " (no json parameter)", probes["json_names"] or "none")})
    if call_error is not None:
        v["status"] = "failed"
    return v, None


def probe(torch) -> dict:
    mem = torch.cuda.memory
    return {
        "record_history_params": common.record_history_params(torch),
        "memory_snapshot_params": common.signature_params(torch.cuda.memory_snapshot),
        "dump_snapshot_params": common.signature_params(mem._dump_snapshot),
        "mempool": hasattr(torch.cuda, "MemPool") or hasattr(mem, "MemPool"),
        "use_mem_pool": hasattr(torch.cuda, "use_mem_pool") or hasattr(mem, "use_mem_pool"),
        "cuda_graph": hasattr(torch.cuda, "CUDAGraph") and hasattr(torch.cuda, "graph"),
        "json_names": sorted(n for n in dir(mem) if "json" in n.lower()),
    }


def main():
    ap = common.base_parser(__doc__.splitlines()[0])
    args = ap.parse_args()
    torch = common.require_cuda()

    cap = common.Capture(torch, __file__, "recording_modes", args.out, args.max_entries, args.protocol)
    probes = probe(torch)
    variants, observed = {}, {}
    steps = [("segments_only", lambda: variant_segments_only(torch, cap, probes)),
             ("pool", lambda: variant_pool(torch, cap, probes)),
             ("host", lambda: variant_host(torch, cap, probes)),
             ("json", lambda: variant_json(torch, cap, probes, args.out))]
    for name, fn in steps:
        try:
            v, summary = fn()
        except Exception as exc:             # a bug or a broken API: record it, keep going
            try:
                cap.stop()
            except Exception:
                pass
            v, summary = {"status": "failed", "ok": False, "error": err(exc)}, None
        variants[name] = v
        if summary is not None:
            observed[name] = summary
        print("recording_modes: %s %s%s" % (name, v["status"], (": " + v.get("reason", v.get("error", "")))
                                             if v["status"] != "captured" else " -> " + str(v.get("file"))))

    facts = {
        "story": "newer recording modes, each where the installed torch offers it; unsupported ones say why",
        "verdict": "none",
        "probes": probes,
        "variants": variants,
        "supported": sorted(k for k, v in variants.items() if v["status"] == "captured"),
        "unsupported": sorted(k for k, v in variants.items() if v["status"] == "unsupported"),
        "sites": cap.sites,
    }
    checks = {"%s_ok" % k: bool(v.get("ok")) and v["status"] in ("captured", "unsupported")
              for k, v in variants.items()}
    checks["segments_only_captured"] = variants["segments_only"]["status"] == "captured"
    sys.exit(cap.finish(facts, observed, checks))


if __name__ == "__main__":
    main()
