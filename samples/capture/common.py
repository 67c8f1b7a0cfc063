"""Shared helpers for the memlens capture scripts.

Everything in this module except the functions that take a ``torch`` argument
is plain CPython standard library, so it can be imported (and self-tested) on a
machine without PyTorch or a GPU.

Conventions shared by every capture script:

* exit 0  -- snapshot(s) and truth written, the memory story held;
* exit 2  -- files written, but a story check failed (``story_held: false``);
* exit 3  -- refused: torch not importable or CUDA not available (one stderr line);
* exit 1  -- anything else (a real bug; a traceback is expected then).

Allocation sites are marked in the scripts with a trailing ``# @site LABEL``
comment on a single-line statement.  :func:`find_sites` resolves each label to
``basename:line:function`` (the function name is the enclosing ``def``, i.e. the
``co_name`` PyTorch records), so the truth files name exactly the frame memlens
should print.  PyTorch records ``co_filename`` (the absolute path of the script
on the capture machine); tests should match on the ``basename:line:function``
suffix.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import os
import pickle
import platform
import re
import sys
import time
from typing import NoReturn

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_STORY_FAILED = 2
EXIT_REFUSED = 3

MSG_NO_CUDA = ("capture: CUDA is not available (torch.cuda.is_available() is False); "
               "run on a GPU machine")
TRUTH_SCHEMA = "memlens-capture-truth/1"
DEFAULT_MAX_ENTRIES = 20000
MiB = 1 << 20
GiB = 1 << 30

SITE_MARKER = re.compile(r"#\s*@site\s+([A-Za-z0-9_]+)\s*$")
SITE_FORMAT = re.compile(r"^[^:/\\]+\.py:[0-9]+:[A-Za-z_<][A-Za-z0-9_<>]*$")
ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


# --------------------------------------------------------------------------- refusal

def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def refuse(message: str) -> NoReturn:
    """Print exactly one line to stderr and exit 3."""
    sys.stdout.flush()
    sys.stderr.write(_one_line(message) + "\n")
    sys.stderr.flush()
    sys.exit(EXIT_REFUSED)


def require_cuda():
    """Import torch and make sure CUDA works; otherwise refuse cleanly (exit 3)."""
    try:
        import torch  # noqa: F401
    except BaseException as exc:  # ImportError, OSError from broken CUDA libs, ...
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        refuse("capture: torch is not importable (%s: %s); run on a GPU machine with PyTorch"
               % (type(exc).__name__, exc))
    try:
        available = bool(torch.cuda.is_available())
    except Exception:  # a broken driver counts as "not available"
        available = False
    if not available:
        refuse(MSG_NO_CUDA)
    return torch


# --------------------------------------------------------------------------- argument parsing

def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", default="captured",
                   help="output directory for snapshots and truth files (default: ./captured)")
    p.add_argument("--max-entries", type=int, default=DEFAULT_MAX_ENTRIES,
                   help="ring-buffer size passed to _record_memory_history (default %(default)s)")
    p.add_argument("--protocol", type=int, default=4,
                   help="pickle protocol for the snapshot file (default 4, like Python 3.8-3.13)")
    return p


# --------------------------------------------------------------------------- sites

def find_sites(script_path: str) -> dict:
    """Resolve every ``# @site LABEL`` marker in *script_path*.

    Returns ``{label: {"basename", "line", "function", "site"}}``.  Raises
    ValueError for duplicate labels, markers on multi-line statements, markers
    inside comprehensions/lambdas (those get their own code object name), or
    markers on lines without a call.
    """
    with open(script_path, encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source, filename=script_path)
    basename = os.path.basename(script_path)

    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    stmts = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    scoped = [n for n in ast.walk(tree)
              if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda))]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]

    sites = {}
    for lineno, text in enumerate(source.splitlines(), start=1):
        m = SITE_MARKER.search(text)
        if not m:
            continue
        label = m.group(1)
        if label in sites:
            raise ValueError("%s: duplicate site label %r (line %d)" % (basename, label, lineno))
        # innermost simple statement that starts on this line
        here = [s for s in stmts if s.lineno == lineno and not isinstance(
            s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.While,
                ast.If, ast.With, ast.Try))]
        if not here:
            raise ValueError("%s:%d: site %r is not on a simple statement" % (basename, lineno, label))
        for s in here:
            if getattr(s, "end_lineno", lineno) != lineno:
                raise ValueError("%s:%d: site %r statement spans several lines" % (basename, lineno, label))
        if not any(c.lineno == lineno for c in calls):
            raise ValueError("%s:%d: site %r has no call on its line" % (basename, lineno, label))
        for n in scoped:
            if n.lineno <= lineno <= getattr(n, "end_lineno", n.lineno):
                raise ValueError("%s:%d: site %r is inside a comprehension/lambda" % (basename, lineno, label))
        enclosing = [fn for fn in funcs if fn.lineno <= lineno <= fn.end_lineno]
        function = max(enclosing, key=lambda fn: fn.lineno).name if enclosing else "<module>"
        sites[label] = {
            "basename": basename,
            "line": lineno,
            "function": function,
            "site": "%s:%d:%s" % (basename, lineno, function),
        }
    return sites


def site_labels_used(script_path: str) -> set:
    """Labels passed as string literals to ``<anything>.site("label")`` in a script."""
    with open(script_path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=script_path)
    used = set()
    for n in ast.walk(tree):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "site"
                and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)):
            used.add(n.args[0].value)
    return used


# --------------------------------------------------------------------------- snapshot summary (pure Python)

def _frames(holder) -> list:
    fr = holder.get("frames")
    if fr is None and holder.get("history"):
        fr = holder["history"][0].get("frames")
    return fr or []


def is_python_frame(frame) -> bool:
    fn = frame.get("filename", "")
    return isinstance(fn, str) and fn.endswith(".py")


def frame_site(frame) -> str:
    fn = frame.get("filename", "")
    return "%s:%s:%s" % (os.path.basename(fn), frame.get("line", ""), frame.get("name", ""))


def innermost_python_site(frames):
    """``basename:line:function`` of the innermost Python frame, or None."""
    for fr in frames:
        if is_python_frame(fr):
            return frame_site(fr)
    return None


def sites_in_stack(frames) -> list:
    return [frame_site(fr) for fr in frames if is_python_frame(fr)]


def _top(table: dict, n: int = 20) -> list:
    rows = [{"site": k if k is not None else "<no python frame>", "count": v[0], "bytes": v[1]}
            for k, v in table.items()]
    rows.sort(key=lambda r: (-r["bytes"], r["site"]))
    return rows[:n]


def replay_peak(trace: list) -> dict:
    """Replay one device trace (``alloc`` opens, ``free_completed`` closes, sizes = requested
    bytes, like MemoryViz's Active Memory Timeline) and report the peak and who held it."""
    live = {}
    cur = peak = 0
    peak_index = -1
    peak_live = {}
    orphan_frees = 0
    for i, e in enumerate(trace):
        act = e.get("action")
        if act == "alloc":
            size = int(e.get("size", 0))
            live[e.get("addr")] = (size, innermost_python_site(_frames(e)))
            cur += size
            if cur > peak:
                peak, peak_index = cur, i
                peak_live = dict(live)
        elif act in ("free_completed", "free"):
            old = live.pop(e.get("addr"), None)
            if old is None:
                orphan_frees += 1
            else:
                cur -= old[0]
    by_site = {}
    for size, site in peak_live.values():
        c, b = by_site.get(site, (0, 0))
        by_site[site] = (c + 1, b + size)
    return {
        "method": "replay alloc/free_completed of device_traces[dev], requested bytes",
        "peak_requested_bytes": peak,
        "peak_trace_index": peak_index,
        "end_requested_bytes": cur,
        "orphan_frees": orphan_frees,
        "top_sites_at_peak": _top(by_site, 10),
    }


def summarize_snapshot(snap, device: int = 0) -> dict:
    """Independent reference numbers computed straight from the pickled dict."""
    if isinstance(snap, list):
        segments, traces, top_level = snap, [], "list"
    else:
        segments = snap.get("segments", [])
        traces = snap.get("device_traces", [])
        top_level = "dict"
    segs = [s for s in segments if s.get("device", 0) == device]
    trace = traces[device] if device < len(traces) else []

    states = {}
    live, pending = {}, {}
    largest_inactive = 0
    inactive_bytes = 0
    streams = set()
    py_frames = cpp_frames = 0
    seen_lists = set()

    def count_frames(frames):
        nonlocal py_frames, cpp_frames
        if id(frames) in seen_lists:
            return
        seen_lists.add(id(frames))
        for fr in frames:
            if is_python_frame(fr):
                py_frames += 1
            else:
                cpp_frames += 1

    for s in segs:
        streams.add(int(s.get("stream", 0)))
        for b in s.get("blocks", []):
            st = b.get("state", "?")
            size = int(b.get("size", 0))
            c, n = states.get(st, (0, 0))
            states[st] = (c + 1, n + size)
            frames = _frames(b)
            count_frames(frames)
            site = innermost_python_site(frames)
            if st == "inactive":
                inactive_bytes += size
                largest_inactive = max(largest_inactive, size)
            elif st == "active_allocated":
                c, n = live.get(site, (0, 0))
                live[site] = (c + 1, n + size)
            elif st == "active_pending_free":
                c, n = pending.get(site, (0, 0))
                pending[site] = (c + 1, n + size)

    actions = {}
    ooms = []
    for e in trace:
        act = e.get("action", "?")
        actions[act] = actions.get(act, 0) + 1
        frames = _frames(e)
        count_frames(frames)
        if act == "oom":
            ooms.append({
                "size": int(e.get("size", 0)),
                "device_free": int(e.get("device_free", e.get("addr", 0))),
                "stream": int(e.get("stream", 0)),
                "site": innermost_python_site(frames),
            })

    out = {
        "top_level": top_level,
        "segments": len(segs),
        "expandable_segments": sum(1 for s in segs if s.get("is_expandable")),
        "reserved_bytes": sum(int(s.get("total_size", 0)) for s in segs),
        "allocated_bytes": sum(int(s.get("allocated_size", 0)) for s in segs),
        "active_bytes": sum(int(s.get("active_size", 0)) for s in segs),
        "blocks_by_state": {k: {"count": v[0], "bytes": v[1]} for k, v in sorted(states.items())},
        "inactive_bytes": inactive_bytes,
        "largest_inactive_block": largest_inactive,
        "segment_streams": sorted(streams),
        "trace_entries": len(trace),
        "trace_actions": dict(sorted(actions.items())),
        "oom_events": ooms,
        "live_by_site": _top(live),
        "pending_free_by_site": _top(pending),
        "python_frames": py_frames,
        "cpp_frames": cpp_frames,
        "peak": replay_peak(trace),
    }
    if isinstance(snap, dict):
        out["top_level_keys"] = sorted(str(k) for k in snap)
    if isinstance(snap, dict) and isinstance(snap.get("allocator_settings"), dict):
        out["allocator_settings"] = json.loads(json.dumps(snap["allocator_settings"], default=repr))
    return out


def live_at_site(summary: dict, site: str) -> dict:
    for row in summary["live_by_site"]:
        if row["site"] == site:
            return row
    return {"site": site, "count": 0, "bytes": 0}


# --------------------------------------------------------------------------- truth files

def _json_safe(x):
    """Reject NaN/inf and non-JSON types early, with a clear error."""
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError("truth facts must not contain NaN/inf")
    if isinstance(x, dict):
        for k, v in x.items():
            if not isinstance(k, str):
                raise TypeError("truth keys must be strings, got %r" % (k,))
            _json_safe(v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _json_safe(v)
    elif not (x is None or isinstance(x, (str, int, float, bool))):
        raise TypeError("truth value of type %s is not JSON" % type(x).__name__)


def build_truth(capture: str, facts: dict, env: dict, snapshots: list,
                observed: dict = None, checks: dict = None, script: str = "") -> dict:
    checks = dict(checks or {})
    truth = {
        "schema": TRUTH_SCHEMA,
        "capture": capture,
        "script": script,
        "snapshots": list(snapshots),
        "torch_version": env.get("torch_version"),
        "cuda_version": env.get("cuda_version"),
        "gpu_name": env.get("gpu_name"),
        "total_capacity_bytes": env.get("total_capacity_bytes"),
        "env": env,
        "facts": facts,
        "observed": observed or {},
        "checks": checks,
        "story_held": all(bool(v) for v in checks.values()) if checks else True,
    }
    _json_safe(truth)
    return truth


def truth_text(truth: dict) -> str:
    return json.dumps(truth, sort_keys=True, indent=2, allow_nan=False) + "\n"


def write_truth(path: str, truth: dict) -> str:
    text = truth_text(truth)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------- torch-side helpers

def env_info(torch) -> dict:
    props = torch.cuda.get_device_properties(0)
    free, total = torch.cuda.mem_get_info(0)
    try:
        backend = torch.cuda.get_allocator_backend()
    except Exception:
        backend = "unknown"
    return {
        "torch_version": str(torch.__version__),
        "cuda_version": str(torch.version.cuda),
        "gpu_name": torch.cuda.get_device_name(0),
        "gpu_capability": list(torch.cuda.get_device_capability(0)),
        "device_count": torch.cuda.device_count(),
        "total_capacity_bytes": int(props.total_memory),
        "mem_get_info_total_bytes": int(total),
        "mem_get_info_free_bytes_at_start": int(free),
        "allocator_backend": backend,
        "alloc_conf": {k: os.environ.get(k) for k in ALLOC_CONF_VARS},
        "python_version": platform.python_version(),
        "pickle_default_protocol": pickle.DEFAULT_PROTOCOL,
        "platform": platform.platform(),
    }


def signature_params(fn) -> list:
    """Parameter names of *fn* (``inspect.signature``), or [] when it cannot be inspected."""
    import inspect
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


def record_history_params(torch) -> list:
    """What the installed ``_record_memory_history`` accepts (PyTorch sets its ``__signature__``
    to that of ``_record_memory_history_impl``)."""
    return signature_params(torch.cuda.memory._record_memory_history)


def start_recording(torch, max_entries: int, stacks: str = "python", context: str = "all", extra: dict = None):
    """Start ``_record_memory_history``.  ``extra`` keyword arguments are passed only when the
    installed signature names them (callers probe with :func:`record_history_params` first)."""
    rec = torch.cuda.memory._record_memory_history
    params = record_history_params(torch)
    if "stacks" in params or "max_entries" in params:
        kw = {k: v for k, v in (extra or {}).items() if k in params}
        rec(enabled="all", context=context, stacks=stacks, max_entries=max_entries, **kw)
        return "all/%s/%s%s" % (context, stacks, "".join("/%s=%s" % kv for kv in sorted(kw.items())))
    # torch 2.0 legacy API
    rec(True, trace_alloc_max_entries=max_entries, trace_alloc_record_context=True,
        record_context_cpp=(stacks == "all"))
    return "legacy"


def stop_recording(torch):
    try:
        torch.cuda.memory._record_memory_history(enabled=None)
    except TypeError:
        torch.cuda.memory._record_memory_history(False)


STAT_KEY = re.compile(r"^(num_[a-z_]+|max_split_size|(reserved_bytes|allocated_bytes|requested_bytes|active_bytes|"
                      r"inactive_split_bytes|segment|inactive_split|oversize_segments|oversize_allocations|allocation|active)"
                      r"\.(all\.)?(current|peak|allocated|freed))$")
WANTED_STATS = ("reserved_bytes.all.peak", "reserved_bytes.all.current", "allocated_bytes.all.peak",
                "num_alloc_retries", "num_ooms", "segment.all.current", "segment.all.peak")


def allocator_stats(torch, device: int = 0) -> dict:
    """The ``torch.cuda.memory_stats()`` counters the truth files record: every ``num_*`` event
    counter, ``max_split_size``, and the ``all``-pool current/peak/allocated/freed values of the
    byte, segment and block statistics.  ``missing`` lists the wanted keys this version lacks."""
    try:
        stats = dict(torch.cuda.memory_stats(device))
    except Exception as exc:  # an allocator backend without stats
        return {"values": {}, "missing": list(WANTED_STATS), "error": "%s: %s" % (type(exc).__name__, exc)}
    values = {}
    for k, v in stats.items():
        if isinstance(k, str) and STAT_KEY.match(k) and isinstance(v, (int, float)) and not isinstance(v, bool):
            values[k] = int(v) if float(v).is_integer() else float(v)
    return {"values": dict(sorted(values.items())), "missing": [k for k in WANTED_STATS if k not in values]}


def describe_payload(x, depth: int = 0):
    """A small, JSON-clean description of an unknown snapshot payload (``host_segments``...):
    its type, length, the keys of dict elements and the counts of their ``action``/``state``."""
    d = {"type": type(x).__name__}
    if isinstance(x, dict):
        d["keys"] = sorted(str(k) for k in x)[:40]
        if depth < 2:
            d["values"] = {str(k): describe_payload(v, depth + 1) for k, v in list(x.items())[:12]
                           if isinstance(v, (list, dict))}
    elif isinstance(x, (list, tuple)):
        d["len"] = len(x)
        dicts = [e for e in x if isinstance(e, dict)]
        if dicts:
            keys = set()
            for e in dicts:
                keys.update(str(k) for k in e)
            d["element_keys"] = sorted(keys)[:40]
            for field in ("action", "state"):
                counts = {}
                for e in dicts:
                    if field in e:
                        counts[str(e[field])] = counts.get(str(e[field]), 0) + 1
                if counts:
                    d[field + "_counts"] = dict(sorted(counts.items()))
            sizes = [e.get("total_size", e.get("size")) for e in dicts]
            sizes = [int(v) for v in sizes if isinstance(v, int) and not isinstance(v, bool)]
            if sizes:
                d["size_sum"] = sum(sizes)
        lists = [e for e in x if isinstance(e, (list, tuple))]
        if lists and depth < 2:
            d["elements"] = [describe_payload(e, depth + 1) for e in lists[:8]]
    return d


def oom_error_type(torch):
    return getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def set_memory_cap(torch, cap_bytes: int) -> dict:
    """Cap this process's caching allocator at ``cap_bytes`` via
    ``set_per_process_memory_fraction``.  The allocator computes
    ``allowed = (size_t)(fraction * total)`` with ``total`` from cudaMemGetInfo,
    and refuses any cudaMalloc/map that would push reserved memory above it.
    """
    _, total = torch.cuda.mem_get_info(0)
    fraction = cap_bytes / float(total)
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    return {
        "fraction_cap_used": True,
        "fraction": fraction,
        "cap_bytes": int(fraction * total),
        "cap_bytes_requested": int(cap_bytes),
        "mem_get_info_total_bytes": int(total),
        "note": ("the OOM is raised by the allocator's per-process fraction limit, not by the "
                 "device running out: the oom trace entry's device_free (cudaMemGetInfo) stays "
                 "large; compare against cap_bytes instead"),
    }


class Capture:
    """One capture run: recording, dumping snapshots, and writing the truth file."""

    def __init__(self, torch, script_file: str, name: str, out_dir: str,
                 max_entries: int = DEFAULT_MAX_ENTRIES, protocol: int = 4):
        self.torch = torch
        self.script_file = os.path.abspath(script_file)
        self.name = name
        self.out_dir = out_dir
        self.max_entries = max_entries
        self.protocol = protocol
        self.sites = find_sites(self.script_file)
        self.snapshots = []
        self.t0 = time.time()
        os.makedirs(out_dir, exist_ok=True)
        torch.cuda.set_device(0)
        self.env = env_info(torch)
        self.recording = None

    def site(self, label: str) -> str:
        return self.sites[label]["site"]

    def site_info(self, label: str) -> dict:
        return dict(self.sites[label])

    def start(self, stacks: str = "python", max_entries: int = None, extra: dict = None):
        if max_entries is not None:
            self.max_entries = max_entries
        self.recording = start_recording(self.torch, self.max_entries, stacks=stacks, extra=extra)
        self.env["recording"] = {"mode": self.recording, "stacks": stacks, "context": "all",
                                 "max_entries": self.max_entries}

    def stop(self):
        stop_recording(self.torch)

    def snapshot(self):
        return self.torch.cuda.memory._snapshot()

    def dump(self, snap, filename: str = None, protocol: int = None) -> str:
        filename = filename or (self.name + ".pickle")
        protocol = self.protocol if protocol is None else protocol
        path = os.path.join(self.out_dir, filename)
        with open(path, "wb") as f:
            pickle.dump(snap, f, protocol=protocol)
        self.snapshots.append({"file": filename, "protocol": protocol,
                               "bytes": os.path.getsize(path)})
        return path

    def finish(self, facts: dict, observed: dict, checks: dict, truth_name: str = None) -> int:
        self.env["seconds"] = round(time.time() - self.t0, 3)
        truth = build_truth(self.name, facts, self.env, self.snapshots, observed, checks,
                            script=os.path.basename(self.script_file))
        path = os.path.join(self.out_dir, (truth_name or self.name) + ".truth.json")
        write_truth(path, truth)
        failed = sorted(k for k, v in checks.items() if not v)
        sizes = ", ".join("%s %d B" % (s["file"], s["bytes"]) for s in self.snapshots)
        print("%s: wrote %s%s; story_held=%s%s" % (
            self.name, sizes + " + " if sizes else "", os.path.basename(path), truth["story_held"],
            (" (failed: %s)" % ", ".join(failed)) if failed else ""))
        return EXIT_OK if truth["story_held"] else EXIT_STORY_FAILED


# --------------------------------------------------------------------------- probe (used by run_all)

def _probe() -> int:
    torch = require_cuda()
    info = env_info(torch)
    print(json.dumps(info, sort_keys=True))
    return EXIT_OK


if __name__ == "__main__":
    if sys.argv[1:] == ["--probe"]:
        sys.exit(_probe())
    print("usage: common.py --probe   (prints torch/GPU info as JSON; exit 3 without CUDA)")
    sys.exit(EXIT_ERROR)
