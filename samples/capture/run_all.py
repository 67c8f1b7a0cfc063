#!/usr/bin/env python3
"""Run every memlens capture script, each in its own subprocess with a timeout.

    python3 samples/capture/run_all.py --out DIR [--tar FILE.tar.gz] [--budget SECONDS]

Writes every snapshot (``*.pickle``) and truth file (``*.truth.json``) into DIR, plus
``DIR/manifest.json`` (torch/CUDA/GPU, per-capture status, seconds, files with sizes
and sha256), ``DIR/README.md`` and ``DIR/logs/<capture>.log``.  It continues past
failures, and after every capture it rewrites the manifest and a single tarball
(default ``DIR/../captured.tar.gz``; arcname ``captured/``) so that one file carries
everything even if the run is cut short.

Optional captures run only when named: ``--only scale_big`` (just that) or ``--with scale_big``
(the default set plus that).  ``scale_big`` writes its ~1M-entry snapshot to ``--big-path``,
outside DIR: it is never packed; the manifest records its size and sha256
(``external_files``).

Statuses: ``ok`` (exit 0), ``story-failed`` (exit 2: files written but a story
check did not hold -- see the truth file's ``checks``), ``refused`` (exit 3: no
torch/CUDA), ``timeout``, ``skipped`` (budget exhausted), ``error`` (other exit codes).

Exit code: 0 all ok; 3 when torch/CUDA is unavailable (one stderr line, nothing run
unless ``--force``); 1 otherwise.
"""

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
import common  # noqa: E402

EXPANDABLE = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
ALLOC_SETTING_TAGS = ("default", "expandable", "max_split_128", "roundup4", "gc06_max_split_128")

# name, script, args, extra env, timeout seconds, expected output files
CAPTURES = [
    ("retained_graph", "retained_graph.py", [], {}, 90, ["retained_graph.pickle"]),
    ("retained_graph_fixed", "retained_graph.py", ["--fixed"], {}, 90, ["retained_graph_fixed.pickle"]),
    ("frag_oom", "frag_oom.py", ["--mode", "native"], {}, 90, ["frag_oom.pickle"]),
    ("frag_oom_expandable", "frag_oom.py", ["--mode", "expandable"], EXPANDABLE, 90,
     ["frag_oom_expandable.pickle"]),
    ("capacity_oom", "capacity_oom.py", [], {}, 90, ["capacity_oom.pickle"]),
    ("kv_cache", "kv_cache.py", [], {}, 90, ["kv_cache.pickle"]),
    ("kv_cache_leak", "kv_cache.py", ["--leak"], {}, 90, ["kv_cache_leak.pickle"]),
    ("diff_base", "diff_pair.py", [], {}, 90, ["diff_base.pickle"]),
    ("diff_extra", "diff_pair.py", ["--extra-buffer"], {}, 90, ["diff_extra.pickle"]),
    ("side_stream", "side_stream.py", [], {}, 90, ["side_stream.pickle", "side_stream_after.pickle"]),
    ("protocols", "protocols.py", [], {}, 90,
     ["protocol4.pickle", "protocol5.pickle", "protocol_default.pickle"]),
    # issue 21: allocator settings (five fresh child processes), recording modes, scale
    ("alloc_settings", "alloc_settings.py", [], {}, 240,
     ["alloc_settings_%s.%s" % (tag, ext) for tag in ALLOC_SETTING_TAGS for ext in ("pickle", "truth.json")]),
    ("recording_modes", "recording_modes.py", [], {}, 120, ["recording_segments_only.pickle"]),
    ("scale", "scale.py", [], {}, 90, ["scale_wrapped.pickle"]),
    # last: C++ symbolization is the one step whose time depends on the machine
    ("stacks_all", "stacks_all.py", ["--symbolize", "fast"], {}, 100, ["stacks_all.pickle"]),
    ("autograd_all", "autograd_all.py", ["--symbolize", "fast"], {}, 150, ["autograd_all.pickle"]),
    # optional (only with --only/--with): ~1M entries, written outside DIR, never packed
    ("scale_big", "scale.py", ["--big", "{big_path}", "--big-entries", "{big_entries}"], {}, 300, []),
]
OPTIONAL = {"scale_big"}
# files a capture writes outside DIR (not packed; the manifest records their size and sha256)
EXTERNAL_OUTPUTS = {"scale_big": "{big_path}"}
# retried once with these args if the first attempt neither succeeded nor told a story
FALLBACK_ARGS = {"stacks_all": ["--symbolize", "dladdr"], "autograd_all": ["--symbolize", "dladdr"]}

STATUS_BY_RC = {0: "ok", 2: "story-failed", 3: "refused"}
WARN_FILE_BYTES = 8 * 1024 * 1024
MAX_RETURN_FILE_BYTES = 16 * 1024 * 1024


def log(msg: str):
    print("[run_all %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def clean_env(extra: dict) -> dict:
    env = dict(os.environ)
    for k in common.ALLOC_CONF_VARS:
        env.pop(k, None)
    env.pop("MEMLENS_CAPTURE_REEXEC", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def probe(python: str, timeout: float):
    """Ask a fresh interpreter for torch/CUDA/GPU facts. Returns (rc, info-or-None, stderr)."""
    try:
        p = subprocess.run([python, os.path.join(HERE, "common.py"), "--probe"], env=clean_env({}),
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 1, None, "probe timed out"
    info = None
    if p.returncode == 0:
        try:
            info = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            info = None
    return p.returncode, info, p.stderr.strip()


def run_capture(python, name, script, args, extra_env, timeout, out_dir, max_entries):
    cmd = [python, os.path.join(HERE, script), "--out", out_dir, "--max-entries", str(max_entries)] + args
    log_path = os.path.join(out_dir, "logs", name + ".log")
    t0 = time.time()
    timed_out = False
    with open(log_path, "ab") as lf:
        lf.write(("$ %s%s\n" % (" ".join("%s=%s" % kv for kv in extra_env.items()) + " " if extra_env else "",
                                " ".join(cmd))).encode())
        lf.flush()
        proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, env=clean_env(extra_env),
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, 9)     # the capture and any child it spawned
            except OSError:
                proc.kill()
            rc = proc.wait()
        lf.write(("\n# exit %s after %.1fs%s\n" % (rc, time.time() - t0, " (timeout)" if timed_out else "")).encode())
    status = "timeout" if timed_out else STATUS_BY_RC.get(rc, "error")
    return {"status": status, "rc": rc, "seconds": round(time.time() - t0, 2),
            "command": " ".join(cmd[1:]), "env": extra_env}


def tail(path: str, n: int = 6) -> list:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [l.rstrip("\n") for l in f.readlines()[-n:]]
    except OSError:
        return []


def file_entry(out_dir: str, fname: str) -> dict:
    path = os.path.join(out_dir, fname)
    if not os.path.exists(path):
        return {"file": fname, "present": False}
    size = os.path.getsize(path)
    e = {"file": fname, "present": True, "bytes": size, "sha256": common.sha256_file(path)}
    if size > WARN_FILE_BYTES:
        e["warning"] = "larger than 8 MiB"
    return e


def capture_files(out_dir: str, name: str, outputs: list) -> list:
    """The expected outputs and the truth file, plus any other file the truth lists in
    ``snapshots`` (variants that exist only on some PyTorch versions)."""
    names = outputs + [name + ".truth.json"]
    try:
        with open(os.path.join(out_dir, name + ".truth.json"), encoding="utf-8") as f:
            truth = json.load(f)
        for snap in truth.get("snapshots", []):
            fn = snap.get("file") if isinstance(snap, dict) else None
            if fn and fn not in names and os.path.basename(fn) == fn:
                names.append(fn)
    except (OSError, ValueError, AttributeError):
        pass
    return [file_entry(out_dir, f) for f in names]


def external_entry(path: str) -> dict:
    e = {"file": os.path.basename(path), "path": path, "packed": False, "present": os.path.exists(path)}
    if e["present"]:
        e["bytes"] = os.path.getsize(path)
        e["sha256"] = common.sha256_file(path)
    return e


def combine_diff(out_dir: str):
    """diff_pair.truth.json: what a diff of diff_base vs diff_extra must show."""
    try:
        with open(os.path.join(out_dir, "diff_base.truth.json")) as f:
            base = json.load(f)
        with open(os.path.join(out_dir, "diff_extra.truth.json")) as f:
            extra = json.load(f)
    except (OSError, ValueError):
        return None
    bf, ef = base["facts"], extra["facts"]
    delta = ef["peak_allocated_bytes"] - bf["peak_allocated_bytes"]
    live_delta = ef["allocated_bytes_at_snapshot"] - bf["allocated_bytes_at_snapshot"]
    facts = {
        "story": "diff of two runs of one training step; the second has one extra 128 MiB buffer",
        "before": "diff_base.pickle",
        "after": "diff_extra.pickle",
        "expected_diff": ef["expected_diff"],
        "observed_peak_delta_bytes": delta,
        "observed_live_delta_bytes": live_delta,
    }
    checks = {
        "peak_delta_is_extra_buffer": delta == ef["extra_buffer_bytes"],
        "live_delta_is_extra_buffer": live_delta == ef["extra_buffer_bytes"],
        "both_runs_held": bool(base.get("story_held")) and bool(extra.get("story_held")),
    }
    truth = common.build_truth("diff_pair", facts, extra.get("env", {}),
                               [{"file": "diff_base.pickle"}, {"file": "diff_extra.pickle"}],
                               {}, checks, script="diff_pair.py")
    common.write_truth(os.path.join(out_dir, "diff_pair.truth.json"), truth)
    return truth


STORIES = {
    "retained_graph": "training loop, `total_loss += val_loss` keeps every eval graph: constant growth per step",
    "retained_graph_fixed": "same loop with `.item()`: flat",
    "frag_oom": "fragmentation OOM under a 2 GiB fraction cap (1800 MiB free in holes, largest 60 MiB < 72 MiB)",
    "frag_oom_expandable": "same workload, expandable_segments:True: holes unmapped, no OOM",
    "capacity_oom": "capacity OOM under a 2 GiB fraction cap (1 GiB request, 510 MiB headroom)",
    "kv_cache": "inference, KV cache allocated once: flat",
    "kv_cache_leak": "inference, logits appended to a list: +2 MiB per step",
    "diff_base": "one training step (diff baseline)",
    "diff_extra": "same step + one 128 MiB buffer (diff target)",
    "side_stream": "record_stream: active_pending_free block; then free_completed after sync",
    "stacks_all": "stacks='all': C++ frames",
    "protocols": "one snapshot pickled with protocols 4 and 5 (+ _dump_snapshot default)",
    "alloc_settings": ("one fragmentation-prone sequence under 5 allocator settings, fresh process each, "
                       "fraction cap so the default run OOMs (ground truth for `memlens whatif`)"),
    "recording_modes": "segments-only snapshot, MemPool/CUDA-graph private pool, pinned host memory, JSON dump "
                       "(each where the installed torch has it)",
    "scale": "longer run with a small ring buffer: the trace wrapped (length = max_entries)",
    "autograd_all": "one Linear+Adam training step, stacks='all': gradients and backward temporaries carry only C++ frames",
    "scale_big": "~1M trace entries; the file is not committed (size and sha256 in manifest.json)",
}


def _truth(out_dir: str, name: str):
    try:
        with open(os.path.join(out_dir, name + ".truth.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def readme_extras(out_dir: str, manifest: dict) -> list:
    """Per-setting outcomes, recording-mode support and the uncommitted big capture."""
    lines = []
    t = _truth(out_dir, "alloc_settings")
    if t:
        lines += ["## Allocator settings (`alloc_settings`)", "",
                  "Each row is a fresh process running the same request sequence under the same fraction cap.", "",
                  "| setting | PYTORCH_CUDA_ALLOC_CONF | OOM | OOM at | peak reserved | num_alloc_retries | num_ooms | segments |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in t["facts"].get("runs", []):
            op = r.get("oom_op") or []
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r.get("setting"), "`%s`" % r["alloc_conf"] if r.get("alloc_conf") else "(unset)", r.get("oomed"),
                "%s %s (%s)" % (r.get("oom_op_index"), op[1] if len(op) > 1 else "", r.get("oom_phase")) if r.get("oomed") else "",
                r.get("peak_reserved_bytes"), r.get("num_alloc_retries"), r.get("num_ooms"), r.get("segments_current")))
        lines.append("")
    t = _truth(out_dir, "recording_modes")
    if t:
        lines += ["## Recording modes (`recording_modes`)", "", "| variant | status | how / why not |", "|---|---|---|"]
        for k, v in sorted(t["facts"].get("variants", {}).items()):
            lines.append("| %s | %s | %s |" % (k, v.get("status"),
                                                v.get("method") or v.get("flag") or v.get("call") if v.get("status") == "captured"
                                                else v.get("reason") or v.get("error")))
        lines.append("")
    for c in manifest["captures"]:
        for e in c.get("external_files", []):
            lines += ["## Not committed: `%s`" % e["file"], "",
                      "`%s` (%s): %s bytes, sha256 `%s`. Regenerate with `python3 samples/capture/scale.py --big PATH`."
                      % (e["file"], c["name"], e.get("bytes"), e.get("sha256")), ""]
    return lines


def write_readme(out_dir: str, manifest: dict):
    env = manifest.get("env") or {}
    lines = [
        "# memlens captured snapshots",
        "",
        "Produced by `samples/capture/run_all.py` on **%s** (%s bytes), PyTorch **%s**, CUDA %s, Python %s, %s UTC."
        % (env.get("gpu_name"), env.get("total_capacity_bytes"), env.get("torch_version"),
           env.get("cuda_version"), env.get("python_version"), manifest.get("finished_utc")),
        "",
        "Each `NAME.pickle` has a `NAME.truth.json` (facts the script knew, reference numbers computed from",
        "the pickled dict in `observed`, and `checks`/`story_held`). Sites are `basename:line:function`;",
        "the recorded filename is the absolute path on the capture machine, so match on the suffix.",
        "",
        "| capture | status | seconds | story |",
        "|---|---|---|---|",
    ]
    for c in manifest["captures"]:
        lines.append("| %s | %s | %s | %s |" % (c["name"], c["status"], c.get("seconds", ""),
                                                STORIES.get(c["name"], "")))
    lines += ["", "See `manifest.json` for files, sizes and sha256, and `logs/` for each script's output.", ""]
    lines += readme_extras(out_dir, manifest)
    lines += [
        '## Tests',
        '',
        '`tests/it/captured.rs` runs memlens on every capture here and checks its answers against the truth',
        'files, read at test time: totals and sites at the peak and at the end (against `observed` and',
        'the oracles of `tests/oracle/`), the leak findings and their steps, both OOM verdicts and their',
        'numbers under the 2 GiB fraction cap, `frag` at the OOM, `explain` on each recorded message,',
        'the diff of the pair and its growth gate, the pending free of `side_stream`, the C++ frames of',
        '`stacks_all`, and identical reports for protocols 4 and 5. Its golden text outputs are in',
        '`tests/golden/captured/` (`MEMLENS_BLESS=1` rewrites them). `tests/it/parallel.rs`,',
        '`tests/it/replay.rs` and `tests/it/oom.rs` include these captures in their all-sample checks.',
        "",
    ]
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def write_manifest(out_dir: str, manifest: dict):
    path = os.path.join(out_dir, "manifest.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, sort_keys=True, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def make_tarball(out_dir: str, tar_path: str, arcname: str = "captured"):
    tmp = tar_path + ".tmp"
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tf:
        for root, dirs, files in os.walk(out_dir):
            dirs.sort()
            for fn in sorted(files):
                if fn.endswith(".tmp"):
                    continue
                full = os.path.join(root, fn)
                if os.path.abspath(full) in (os.path.abspath(tar_path), os.path.abspath(tmp)):
                    continue
                rel = os.path.relpath(full, out_dir)
                tf.add(full, arcname=os.path.join(arcname, rel))
    os.replace(tmp, tar_path)
    return os.path.getsize(tar_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory for all snapshots and truth files")
    ap.add_argument("--tar", default=None,
                    help="tarball path (default: <parent of --out>/captured.tar.gz)")
    ap.add_argument("--budget", type=float, default=480.0,
                    help="overall time budget in seconds (default %(default)s); later captures are skipped")
    ap.add_argument("--max-entries", type=int, default=common.DEFAULT_MAX_ENTRIES)
    ap.add_argument("--only", default="",
                    help="comma-separated capture names to run (default: all except the optional %s)"
                         % ", ".join(sorted(OPTIONAL)))
    ap.add_argument("--with", dest="with_", default="",
                    help="comma-separated optional captures to run as well (%s)" % ", ".join(sorted(OPTIONAL)))
    ap.add_argument("--big-path", default=None,
                    help="where scale_big writes its snapshot, outside --out (default: "
                         "<tmp>/memlens_scale_big/scale_big.pickle); never packed into the tarball")
    ap.add_argument("--big-entries", type=int, default=1000000, help="trace entries of scale_big (default %(default)s)")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the capture scripts")
    ap.add_argument("--force", action="store_true",
                    help="run the scripts even if the torch/CUDA probe fails (for self-tests)")
    args = ap.parse_args()

    out_dir = os.path.abspath(args.out)
    tar_path = os.path.abspath(args.tar or os.path.join(os.path.dirname(out_dir), "captured.tar.gz"))
    big_path = os.path.abspath(args.big_path or os.path.join(tempfile.gettempdir(), "memlens_scale_big",
                                                             "scale_big.pickle"))
    if os.path.commonpath([big_path, out_dir]) == out_dir:
        ap.error("--big-path must lie outside --out (it is never packed)")
    subst = {"big_path": big_path, "big_entries": str(args.big_entries)}
    t_start = time.time()

    rc, info, err = probe(args.python, timeout=min(120.0, args.budget))
    if rc != 0 and not args.force:
        last = err.splitlines()[-1] if err else ""
        if not last.startswith("capture: "):
            last = "capture: torch/CUDA probe failed (exit %s%s)" % (rc, ": " + last if last else "")
        common.refuse(last)

    os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
    manifest = {
        "schema": "memlens-capture-manifest/1",
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)),
        "probe_rc": rc,
        "probe_error": err if rc != 0 else None,
        "env": info or {},
        "torch_version": (info or {}).get("torch_version"),
        "cuda_version": (info or {}).get("cuda_version"),
        "gpu_name": (info or {}).get("gpu_name"),
        "total_capacity_bytes": (info or {}).get("total_capacity_bytes"),
        "budget_s": args.budget,
        "max_entries": args.max_entries,
        "tarball": os.path.basename(tar_path),
        "captures": [],
    }
    if info:
        log("torch %s, CUDA %s, %s (%.1f GiB), python %s" % (
            info.get("torch_version"), info.get("cuda_version"), info.get("gpu_name"),
            (info.get("total_capacity_bytes") or 0) / 2**30, info.get("python_version")))
    else:
        log("probe failed (rc %s): %s -- continuing because of --force" % (rc, err))

    only = {s for s in args.only.split(",") if s}
    extra = {s for s in args.with_.split(",") if s}
    unknown = sorted((only | extra) - {c[0] for c in CAPTURES})
    if unknown:
        ap.error("unknown capture name(s): %s" % ", ".join(unknown))
    selected = [c for c in CAPTURES
                if (c[0] in only if only else c[0] not in OPTIONAL) or c[0] in extra]
    for i, (name, script, cargs, extra_env, timeout, outputs) in enumerate(selected, 1):
        cargs = [a.format(**subst) for a in cargs]
        left = args.budget - (time.time() - t_start)
        entry = {"name": name, "script": script, "outputs": outputs}
        if left < 15:
            entry.update({"status": "skipped", "reason": "budget exhausted (%.0fs left)" % left})
            log("[%d/%d] %s: skipped, budget exhausted" % (i, len(selected), name))
        else:
            log("[%d/%d] %s: %s %s" % (i, len(selected), name, script, " ".join(cargs)))
            res = run_capture(args.python, name, script, cargs, extra_env, min(timeout, left),
                              out_dir, args.max_entries)
            if res["status"] not in ("ok", "story-failed", "refused") and name in FALLBACK_ARGS:
                left = args.budget - (time.time() - t_start)
                if left >= 15:
                    log("    %s %s after %.1fs; retrying with %s" % (name, res["status"], res["seconds"],
                                                                       " ".join(FALLBACK_ARGS[name])))
                    first = res
                    res = run_capture(args.python, name, script, FALLBACK_ARGS[name], extra_env,
                                      min(timeout, left), out_dir, args.max_entries)
                    res["first_attempt"] = first
            entry.update(res)
            entry["log"] = "logs/%s.log" % name
            entry["log_tail"] = tail(os.path.join(out_dir, "logs", name + ".log"))
            log("    -> %s (exit %s, %.1fs)" % (res["status"], res["rc"], res["seconds"]))
        entry["files"] = capture_files(out_dir, name, outputs)
        if name in EXTERNAL_OUTPUTS:
            entry["external_files"] = [external_entry(EXTERNAL_OUTPUTS[name].format(**subst))]
        manifest["captures"].append(entry)
        manifest["elapsed_s"] = round(time.time() - t_start, 2)
        write_manifest(out_dir, manifest)
        make_tarball(out_dir, tar_path)

    diff = combine_diff(out_dir)
    if diff is not None:
        manifest["diff_pair"] = {"truth": "diff_pair.truth.json", "story_held": diff["story_held"]}
    manifest["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    manifest["elapsed_s"] = round(time.time() - t_start, 2)
    counts = {}
    for c in manifest["captures"]:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    manifest["status_counts"] = counts
    write_manifest(out_dir, manifest)
    write_readme(out_dir, manifest)
    size = make_tarball(out_dir, tar_path)
    note = "" if size <= MAX_RETURN_FILE_BYTES else " (WARNING: over 16 MiB, will not come back from the device)"
    log("done in %.1fs: %s; tarball %s (%d bytes)%s" % (
        manifest["elapsed_s"], ", ".join("%s=%d" % kv for kv in sorted(counts.items())), tar_path, size, note))

    statuses = [c["status"] for c in manifest["captures"]]
    if statuses and all(s == "refused" for s in statuses):
        return common.EXIT_REFUSED
    return 0 if all(s == "ok" for s in statuses) else 1


if __name__ == "__main__":
    sys.exit(main())
