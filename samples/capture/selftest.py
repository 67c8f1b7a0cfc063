#!/usr/bin/env python3
"""CPU-side self-test of the capture scripts (no GPU, no torch needed).

    python3 samples/capture/selftest.py

Checks:
1. every script compiles (py_compile, into a temp dir: no __pycache__ left behind);
2. every script answers ``--help`` without torch;
3. every script (and run_all.py) refuses cleanly -- exit 3, nothing on stdout, exactly one
   stderr line, no traceback -- when torch is not importable, and with the exact
   ``capture: CUDA is not available ...`` line when torch imports but CUDA is unavailable
   (simulated with a fake ``torch`` package put first on PYTHONPATH);
4. ``run_all.py --force`` under the fake no-CUDA torch still writes manifest.json,
   README.md, logs and the tarball, marks every capture ``refused`` and exits 3;
5. the truth-JSON writer on a fake fact dict (sorted keys, required fields, story_held,
   NaN / non-string keys / non-JSON values rejected);
6. site markers: every ``cap.site("x")`` label used by a script resolves to
   ``basename:line:function`` on a single-line statement with a call, and bad markers are rejected;
7. the pure-Python snapshot summary on a fake snapshot dict;
8. a dry run of ``run_all.py`` against ``fake_torch/`` (a toy native caching allocator, NOT
   PyTorch): every script runs end to end and writes its snapshot + truth; the stories that
   depend only on native allocator rules (fragmentation OOM, capacity OOM, KV cache flat/leak,
   diff pair, pending free, protocols, the allocator settings it models, the wrapped ring,
   nn-only autograd with synthetic C++ frames) hold, and the truth files of the issue-21
   captures hold the expected numbers; the ones the toy cannot model (autograd-retained graph
   of raw ops, expandable segments) report story-failed;
9. ``recording_modes.py`` against stand-ins that lack the host flag, ``MemPool``,
   ``include_traces`` or CUDA graphs (or that write JSON): each missing feature is recorded as
   ``unsupported`` with a reason, the fallbacks are taken, and the story holds;
10. ``run_all.py --only scale_big``: the big snapshot is written outside ``--out``, recorded in
   the manifest with its size and sha256, and not packed; bad ``--big-path``/names are rejected.
"""

import importlib.util
import json
import math
import os
import py_compile
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
import common  # noqa: E402

SCRIPTS = ["retained_graph.py", "frag_oom.py", "capacity_oom.py", "kv_cache.py", "diff_pair.py",
           "side_stream.py", "stacks_all.py", "protocols.py",
           "alloc_settings.py", "autograd_all.py", "recording_modes.py", "scale.py"]
# extra argument sets that take a different path before the CUDA check
VARIANTS = {
    "retained_graph.py": [[], ["--fixed"]],
    "frag_oom.py": [[], ["--mode", "native"], ["--mode", "expandable"]],
    "kv_cache.py": [[], ["--leak"]],
    "diff_pair.py": [[], ["--extra-buffer"]],
    "stacks_all.py": [[], ["--symbolize", "dladdr"]],
    "alloc_settings.py": [[], ["--setting", "default"], ["--setting", "roundup4"]],
    "autograd_all.py": [[], ["--symbolize", "dladdr"]],
    "scale.py": [[], ["--big", "{tmp}/refusal_big/scale_big.pickle"]],
}
# captures run_all.py runs by default (scale_big is optional: --only/--with)
DEFAULT_CAPTURES = 16
ALL_PY = SCRIPTS + ["common.py", "run_all.py", "selftest.py"]

passed = 0


def ok(msg):
    global passed
    passed += 1
    print("ok   %s" % msg)


def fail(msg):
    print("FAIL %s" % msg)
    sys.exit(1)


def check(cond, msg):
    ok(msg) if cond else fail(msg)


def make_fake_torch(root, kind):
    pkg = os.path.join(root, kind, "torch")
    os.makedirs(pkg)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        if kind == "noimport":
            f.write("raise ImportError(\"No module named 'torch' (selftest stand-in)\")\n")
        else:
            f.write("__version__ = '0.0-selftest'\n"
                    "class cuda:\n"
                    "    @staticmethod\n"
                    "    def is_available():\n"
                    "        return False\n")
    return os.path.join(root, kind)


def run(cmd, pythonpath=None, cwd=None, timeout=120, extra_env=None):
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for k in common.ALLOC_CONF_VARS + ("MEMLENS_CAPTURE_REEXEC", "MEMLENS_FAKE_TORCH_HIDE",
                                       "MEMLENS_FAKE_TORCH_JSON_DUMP"):
        env.pop(k, None)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    env.update(extra_env or {})
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def assert_refusal(p, what, expect_prefix, expect_exact=None):
    lines = p.stderr.splitlines()
    good = (p.returncode == 3 and p.stdout == "" and len(lines) == 1 and "Traceback" not in p.stderr
            and lines[0].startswith(expect_prefix) and (expect_exact is None or lines[0] == expect_exact))
    if not good:
        fail("%s: rc=%s stdout=%r stderr=%r" % (what, p.returncode, p.stdout[-300:], p.stderr[-600:]))
    ok("%s -> exit 3, one line: %s" % (what, lines[0][:90]))


def test_compile(tmp):
    for name in ALL_PY:
        py_compile.compile(os.path.join(HERE, name), cfile=os.path.join(tmp, name + "c"), doraise=True)
    ok("py_compile: %d files" % len(ALL_PY))


def test_help():
    for name in SCRIPTS + ["run_all.py"]:
        p = run([sys.executable, os.path.join(HERE, name), "--help"])
        check(p.returncode == 0 and "usage" in p.stdout.lower() and p.stderr == "", "%s --help without torch" % name)


def test_refusals(tmp):
    cases = [("noimport", make_fake_torch(tmp, "noimport"), "capture: torch is not importable", None),
             ("nocuda", make_fake_torch(tmp, "nocuda"), common.MSG_NO_CUDA, common.MSG_NO_CUDA)]
    if importlib.util.find_spec("torch") is None:
        cases.append(("this machine (no torch)", None, "capture: torch is not importable", None))
    out = os.path.join(tmp, "refusal_out")
    for label, path, prefix, exact in cases:
        for name in SCRIPTS:
            for extra in VARIANTS.get(name, [[]]):
                extra = [a.format(tmp=tmp) for a in extra]
                p = run([sys.executable, os.path.join(HERE, name), "--out", out] + extra, pythonpath=path)
                assert_refusal(p, "[%s] %s %s" % (label, name, " ".join(extra)), prefix, exact)
        p = run([sys.executable, os.path.join(HERE, "run_all.py"), "--out", out], pythonpath=path)
        assert_refusal(p, "[%s] run_all.py" % label, prefix, exact)
    check(not os.path.exists(out) or not os.listdir(out), "refused runs wrote no files")
    check(not os.path.exists(os.path.join(tmp, "refusal_big")), "refused scale.py --big wrote nothing")


def test_run_all_force(tmp):
    path = os.path.join(tmp, "nocuda")
    out = os.path.join(tmp, "force", "captured")
    tar = os.path.join(tmp, "force", "captured.tar.gz")
    p = run([sys.executable, os.path.join(HERE, "run_all.py"), "--out", out, "--tar", tar, "--force",
             "--budget", "200"], pythonpath=path, timeout=300)
    check(p.returncode == 3, "run_all --force (no CUDA) exits 3 (rc=%s)" % p.returncode)
    with open(os.path.join(out, "manifest.json")) as f:
        man = json.load(f)
    names = [c["name"] for c in man["captures"]]
    check(len(names) == DEFAULT_CAPTURES and "scale_big" not in names
          and all(c["status"] == "refused" for c in man["captures"]),
          "manifest lists %d captures (not the optional scale_big), all refused" % DEFAULT_CAPTURES)
    check(all(isinstance(c.get("seconds"), (int, float)) for c in man["captures"]), "manifest has per-capture seconds")
    with tarfile.open(tar) as tf:
        members = set(tf.getnames())
    need = {"captured/manifest.json", "captured/README.md", "captured/logs/frag_oom.log"}
    check(need <= members, "tarball carries manifest, README and logs (%d members)" % len(members))
    progress = [l for l in p.stdout.splitlines() if l.startswith("[run_all")]
    check(len(progress) >= DEFAULT_CAPTURES + 1, "run_all printed %d progress lines" % len(progress))


def test_truth_writer(tmp):
    env = {"torch_version": "2.x-fake", "cuda_version": "12.x", "gpu_name": "Fake GPU",
           "total_capacity_bytes": 150 * common.GiB}
    facts = {"verdict": "fragmentation", "requested_bytes": 72 * common.MiB, "zeta": [3, 2, 1],
             "sites": {"b": {"site": "frag_oom.py:60:big_request"}, "a": {"site": "x.py:1:f"}},
             "top_peak_site": "frag_oom.py:60:big_request", "fraction": 0.0142}
    checks = {"oom_raised": True, "largest_free_block_below_request": True}
    truth = common.build_truth("fake", facts, env, [{"file": "fake.pickle", "bytes": 1}],
                               {"reserved_bytes": 1}, checks, script="fake.py")
    path = common.write_truth(os.path.join(tmp, "fake.truth.json"), truth)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    back = json.loads(text)
    check(text == json.dumps(back, sort_keys=True, indent=2) + "\n", "truth file is sorted-key JSON, newline-terminated")
    for key in ("schema", "capture", "torch_version", "gpu_name", "total_capacity_bytes", "facts",
                "observed", "checks", "story_held", "snapshots", "env", "cuda_version", "script"):
        if key not in back:
            fail("truth misses %r" % key)
    ok("truth has schema/torch_version/gpu_name/total_capacity_bytes/facts/checks/story_held")
    check(back["story_held"] is True and back["facts"]["requested_bytes"] == 72 * 2**20, "facts round-trip, story_held")
    check(common.SITE_FORMAT.match(back["facts"]["top_peak_site"]) is not None, "site format basename:line:function")
    bad = common.build_truth("fake", facts, env, [], {}, {"x": True, "y": False})
    check(bad["story_held"] is False, "one failed check -> story_held false")
    for label, badfacts, exc in [("NaN", {"x": math.nan}, ValueError),
                                 ("non-string key", {1: "x"}, TypeError),
                                 ("bytes value", {"x": b"raw"}, TypeError)]:
        try:
            common.build_truth("fake", badfacts, env, [], {}, {})
        except exc:
            ok("truth rejects %s" % label)
        else:
            fail("truth accepted %s" % label)
    check(not os.path.exists(path + ".tmp"), "truth written atomically (no .tmp left)")


def test_sites(tmp):
    total = 0
    for name in SCRIPTS:
        path = os.path.join(HERE, name)
        sites = common.find_sites(path)
        used = common.site_labels_used(path)
        missing = sorted(used - set(sites))
        if missing:
            fail("%s uses undefined site labels %s" % (name, missing))
        with open(path) as f:
            lines = f.read().splitlines()
        for label, s in sites.items():
            if not common.SITE_FORMAT.match(s["site"]):
                fail("%s: bad site %r" % (name, s["site"]))
            if ("@site " + label) not in lines[s["line"] - 1] or s["function"] == "<module>":
                fail("%s: site %r does not point at its marker inside a function" % (name, label))
        total += len(sites)
    ok("site markers: %d sites in %d scripts resolve to basename:line:function" % (total, len(SCRIPTS)))
    s = common.find_sites(os.path.join(HERE, "frag_oom.py"))
    check(s["request"]["function"] == "big_request" and s["long_lived"]["function"] == "carve",
          "frag_oom sites: %s, %s" % (s["request"]["site"], s["long_lived"]["site"]))
    s = common.find_sites(os.path.join(HERE, "kv_cache.py"))
    check(s["kv_cache"]["function"] == "ensure_cache", "method site uses co_name: %s" % s["kv_cache"]["site"])
    bad_cases = {
        "multiline": "def f(torch):\n    x = torch.empty(\n        3)  # @site a\n",
        "multiline2": "def f(torch):\n    x = torch.empty(  # @site a\n        3)\n",
        "comprehension": "def f(torch):\n    x = [torch.empty(3) for _ in range(2)]  # @site a\n",
        "nocall": "def f(torch):\n    x = 3  # @site a\n",
        "duplicate": "def f(t):\n    a = t.e()  # @site a\n    b = t.e()  # @site a\n",
    }
    for label, src in bad_cases.items():
        p = os.path.join(tmp, "bad_%s.py" % label)
        with open(p, "w") as f:
            f.write(src)
        try:
            common.find_sites(p)
        except ValueError:
            ok("find_sites rejects %s marker" % label)
        else:
            fail("find_sites accepted %s marker" % label)


def test_summary():
    MiB = common.MiB
    fr_req = [{"filename": "/abs/path/frag_oom.py", "line": 60, "name": "big_request"},
              {"filename": "/abs/path/frag_oom.py", "line": 99, "name": "main"}]
    fr_long = [{"name": "c10::alloc", "filename": "??", "line": 0},
               {"filename": "/abs/path/frag_oom.py", "line": 50, "name": "carve"}]
    fr_buf = [{"filename": "/abs/side_stream.py", "line": 40, "name": "make_shared_buffer"}]
    snap = {
        "segments": [
            {"device": 0, "address": 1 << 40, "total_size": 20 * MiB, "allocated_size": 4 * MiB,
             "active_size": 4 * MiB, "requested_size": 4 * MiB, "stream": 0, "segment_type": "large",
             "is_expandable": False, "frames": [],
             "blocks": [
                 {"address": 1 << 40, "size": 4 * MiB, "requested_size": 4 * MiB, "state": "active_allocated",
                  "frames": fr_long},
                 {"address": (1 << 40) + 4 * MiB, "size": 16 * MiB, "requested_size": 7,
                  "state": "inactive", "frames": []}]},
            {"device": 0, "address": 2 << 40, "total_size": 64 * MiB, "allocated_size": 0,
             "active_size": 64 * MiB, "requested_size": 64 * MiB, "stream": 12345, "segment_type": "large",
             "is_expandable": True, "frames": [],
             "blocks": [{"address": 2 << 40, "size": 64 * MiB, "requested_size": 64 * MiB,
                         "state": "active_pending_free", "frames": fr_buf}]},
            {"device": 1, "address": 3 << 40, "total_size": 2 * MiB, "allocated_size": 0, "active_size": 0,
             "stream": 0, "blocks": [{"size": 2 * MiB, "state": "inactive", "frames": []}]},
        ],
        "device_traces": [[
            {"action": "segment_alloc", "addr": 1 << 40, "size": 20 * MiB, "stream": 0, "frames": fr_long},
            {"action": "alloc", "addr": 1 << 40, "size": 4 * MiB, "stream": 0, "frames": fr_long},
            {"action": "alloc", "addr": 5, "size": 10 * MiB, "stream": 0, "frames": fr_req},
            {"action": "free_requested", "addr": 5, "size": 10 * MiB, "stream": 0, "frames": fr_req},
            {"action": "free_completed", "addr": 5, "size": 10 * MiB, "stream": 0, "frames": fr_req},
            {"action": "free_completed", "addr": 77, "size": 1, "stream": 0},
            {"action": "oom", "addr": 0, "device_free": 123, "size": 72 * MiB, "stream": 0, "frames": fr_req},
        ], []],
        "allocator_settings": {"expandable_segments": False, "max_split_size": -1},
    }
    s = common.summarize_snapshot(snap)
    exp = {
        "segments": 2, "reserved_bytes": 84 * MiB, "allocated_bytes": 4 * MiB, "expandable_segments": 1,
        "inactive_bytes": 16 * MiB, "largest_inactive_block": 16 * MiB, "segment_streams": [0, 12345],
        "trace_entries": 7, "cpp_frames": 1, "python_frames": 4,
    }
    for k, v in exp.items():
        if s[k] != v:
            fail("summary %s = %r, expected %r" % (k, s[k], v))
    ok("summary: segments/reserved/allocated/inactive/largest/streams/frames")
    check(s["oom_events"] == [{"size": 72 * MiB, "device_free": 123, "stream": 0,
                               "site": "frag_oom.py:60:big_request"}], "summary: oom event with device_free and site")
    check(s["live_by_site"] == [{"site": "frag_oom.py:50:carve", "count": 1, "bytes": 4 * MiB}],
          "summary: live bytes by innermost Python frame (C++ frame skipped)")
    check(s["pending_free_by_site"][0]["site"] == "side_stream.py:40:make_shared_buffer"
          and s["blocks_by_state"]["active_pending_free"] == {"count": 1, "bytes": 64 * MiB},
          "summary: pending free counted separately")
    pk = s["peak"]
    check(pk["peak_requested_bytes"] == 14 * MiB and pk["end_requested_bytes"] == 4 * MiB
          and pk["orphan_frees"] == 1 and pk["top_sites_at_peak"][0]["site"] == "frag_oom.py:60:big_request",
          "summary: trace replay peak 14 MiB, top site at peak, orphan free counted")
    check(s["allocator_settings"]["max_split_size"] == -1, "summary: allocator_settings carried")
    lst = common.summarize_snapshot(snap["segments"])
    check(lst["top_level"] == "list" and lst["trace_entries"] == 0, "summary: bare-list snapshot")
    common.build_truth("x", {}, {}, [], s, {})      # summary must be JSON-clean
    ok("summary is JSON-serialisable")


DRY_RUN_EXPECTED = {
    "retained_graph": "story-failed",        # toy has no autograd: nothing is retained
    "retained_graph_fixed": "ok",
    "frag_oom": "ok",
    "frag_oom_expandable": "story-failed",   # toy has no expandable segments: it OOMs
    "capacity_oom": "ok",
    "kv_cache": "ok",
    "kv_cache_leak": "ok",
    "diff_base": "ok",
    "diff_extra": "ok",
    "side_stream": "ok",
    "protocols": "ok",
    "alloc_settings": "story-failed",        # toy has no expandable segments: that run's setting is not applied
    "recording_modes": "ok",
    "scale": "ok",
    "stacks_all": "ok",                      # the toy's synthetic C++ frames
    "autograd_all": "ok",                    # the toy's nn-only autograd
}


def test_dry_run(tmp):
    fake = os.path.join(HERE, "fake_torch")
    out = os.path.join(tmp, "dry", "captured")
    tar = os.path.join(tmp, "dry", "captured.tar.gz")
    p = run([sys.executable, os.path.join(HERE, "run_all.py"), "--out", out, "--tar", tar, "--budget", "200"],
            pythonpath=fake, timeout=300)
    with open(os.path.join(out, "manifest.json")) as f:
        man = json.load(f)
    got = {c["name"]: c["status"] for c in man["captures"]}
    if got != DRY_RUN_EXPECTED or p.returncode != 1:
        fail("dry run statuses %r (rc %s)\n%s" % (got, p.returncode, p.stdout[-2000:]))
    ok("dry run (toy allocator): %d captures ran, statuses as expected, run_all exit 1" % len(got))
    with tarfile.open(tar) as tf:
        members = set(tf.getnames())
    for c in man["captures"]:
        for fe in c["files"]:
            if not fe["present"] or ("captured/" + fe["file"]) not in members:
                fail("dry run: %s missing %s" % (c["name"], fe["file"]))
    ok("dry run: every snapshot and truth file present and in the tarball")
    with open(os.path.join(out, "frag_oom.truth.json")) as f:
        frag = json.load(f)
    o = frag["observed"]
    check(frag["facts"]["verdict"] == "fragmentation" and o["largest_inactive_block"] == 60 * common.MiB
          and o["inactive_bytes"] == 1800 * common.MiB and o["oom_events"][0]["size"] == 72 * common.MiB
          and o["oom_events"][0]["site"] == frag["facts"]["oom_site"],
          "dry run frag_oom: 1800 MiB free, largest 60 MiB, oom 72 MiB at %s" % frag["facts"]["oom_site"])
    with open(os.path.join(out, "diff_pair.truth.json")) as f:
        diff = json.load(f)
    check(diff["story_held"] and diff["facts"]["observed_peak_delta_bytes"] == 128 * common.MiB,
          "dry run diff_pair: peak delta = extra buffer (128 MiB)")
    for name in DRY_RUN_EXPECTED:
        with open(os.path.join(out, name + ".truth.json")) as f:
            t = json.load(f)
        if t["story_held"] != (DRY_RUN_EXPECTED[name] == "ok"):
            fail("dry run: %s story_held=%s" % (name, t["story_held"]))
    ok("dry run: story_held matches the exit status in every truth file")
    check_alloc_settings(out)
    check_autograd_all(out)
    check_recording_modes_truth(out, {"segments_only": "captured", "pool": "captured", "host": "captured",
                                      "json": "unsupported"}, "dry run")
    check_scale(out)


def load_truth(out, name):
    with open(os.path.join(out, name + ".truth.json"), encoding="utf-8") as f:
        return json.load(f)


def check_alloc_settings(out):
    MiB = common.MiB
    t = load_truth(out, "alloc_settings")
    runs = {r["setting"]: r for r in t["facts"]["runs"]}
    tags = ["default", "expandable", "max_split_128", "roundup4", "gc06_max_split_128"]
    check(list(runs) == tags and all(r.get("truth") and r.get("snapshot") for r in runs.values())
          and len(t["snapshots"]) == 5, "dry run alloc_settings: 5 runs, each with its snapshot and truth")
    need = ("peak_reserved_bytes", "num_alloc_retries", "num_ooms", "segments_current", "segments_peak", "oomed")
    check(all(all(isinstance(r.get(k), (int, bool)) for k in need) for r in runs.values()),
          "dry run alloc_settings: every run has peak reserved, retries, ooms, segment counts, oomed")
    d = runs["default"]
    check(d["oomed"] and d["oom_op"] == ["alloc", "request", 160 * MiB] and d["oom_phase"] == "request"
          and d["num_ooms"] == 1 and d["num_alloc_retries"] == 1 and t["checks"]["default_run_oomed"],
          "dry run alloc_settings: default OOMs at the 160 MiB request (1 retry, 1 oom)")
    check(not runs["max_split_128"]["oomed"] and runs["max_split_128"]["num_alloc_retries"] >= 1
          and runs["roundup4"]["oomed"] and runs["roundup4"]["oom_phase"] == "carve",
          "dry run alloc_settings: max_split_size_mb:128 avoids the OOM, roundup_power2_divisions:4 OOMs while carving")
    check(t["checks"]["settings_applied_in_every_run"] is False
          and [k for k, r in runs.items() if not r["settings_applied"]] == ["expandable"],
          "dry run alloc_settings: only the expandable run's setting is not applied (the toy has none)")
    per = load_truth(out, "alloc_settings_default")
    cap = per["facts"]["memory_cap"]
    check(cap["cap_bytes"] == 2112 * MiB and len(per["facts"]["sequence"]["ops"]) == 65
          and per["story_held"], "dry run alloc_settings_default: cap 2112 MiB, 65 ops, story held")


def check_autograd_all(out):
    t = load_truth(out, "autograd_all")
    f, o = t["facts"], t["observed"]
    pb = 25184256          # (512*2048 + 2048 + 2048*2048 + 2048 + 2048*512 + 512) * 4
    check(f["param_bytes"] == f["param_bytes_analytic"] == pb and f["grad_bytes"] == pb
          and f["optimizer_state_bytes"]["exp_avg"] == {"cuda": pb} and f["optimizer_state_bytes_cuda"] == 2 * pb
          and f["optimizer_state_bytes_cpu"] == 6 * 4,
          "dry run autograd_all: params = grads = %d B, Adam state 2x on cuda + 6 CPU steps" % pb)
    check(o["grad_blocks_cpp_only"] == 6 and o["cpp_only_freed_events"] > 0 and all(t["checks"].values()),
          "dry run autograd_all: 6 gradient blocks with C++ frames only, backward temporaries freed")


def check_recording_modes_truth(out, expected, label):
    t = load_truth(out, "recording_modes")
    got = {k: v["status"] for k, v in t["facts"]["variants"].items()}
    if got != expected or not t["story_held"]:
        fail("%s recording_modes: statuses %r, checks %r" % (label, got, t["checks"]))
    for k, v in t["facts"]["variants"].items():
        if v["status"] == "unsupported" and not v.get("reason"):
            fail("%s recording_modes: %s unsupported without a reason" % (label, k))
        if v["status"] == "captured" and not os.path.exists(os.path.join(out, v["file"])):
            fail("%s recording_modes: %s file %s missing" % (label, k, v["file"]))
    ok("%s recording_modes: %s" % (label, ", ".join("%s %s" % kv for kv in sorted(got.items()))))
    return t


def check_scale(out):
    t = load_truth(out, "scale")
    o = t["observed"]
    check(o["trace_entries"] == t["facts"]["max_entries"] == 4096 and o["anchor_alloc_events"] == 0
          and o["anchor_live_blocks"] == 1 and t["facts"]["events_lower_bound"] > 4096,
          "dry run scale: the ring wrapped (4096 entries of >= %d events), anchor live without its alloc"
          % t["facts"]["events_lower_bound"])


def test_recording_modes_probes(tmp):
    """Version probing: the same script against stand-ins lacking (or having) each feature."""
    fake = os.path.join(HERE, "fake_torch")
    cases = [
        ("no host flag, no MemPool, no include_traces", {"MEMLENS_FAKE_TORCH_HIDE": "host,mempool,include_traces"},
         {"segments_only": "captured", "pool": "captured", "host": "unsupported", "json": "unsupported"}),
        ("no pools at all", {"MEMLENS_FAKE_TORCH_HIDE": "host,mempool,include_traces,graph"},
         {"segments_only": "captured", "pool": "unsupported", "host": "unsupported", "json": "unsupported"}),
        ("a JSON-writing _dump_snapshot", {"MEMLENS_FAKE_TORCH_JSON_DUMP": "1"},
         {"segments_only": "captured", "pool": "captured", "host": "captured", "json": "captured"}),
    ]
    for i, (label, env, expected) in enumerate(cases):
        out = os.path.join(tmp, "modes%d" % i)
        p = run([sys.executable, os.path.join(HERE, "recording_modes.py"), "--out", out], pythonpath=fake,
                extra_env=env)
        if p.returncode != 0:
            fail("recording_modes (%s): rc %s\n%s%s" % (label, p.returncode, p.stdout[-1500:], p.stderr[-1500:]))
        t = check_recording_modes_truth(out, expected, "stand-in with %s:" % label)
        v = t["facts"]["variants"]
        if i == 0:
            check(v["pool"]["method"].startswith("CUDA graph") and v["segments_only"]["top_level"] == "dict"
                  and v["segments_only"]["trace_entries"] == 0 and "no pinned-host flag" in v["host"]["reason"],
                  "fallbacks: CUDA graph private pool, _snapshot() with history off, host flag reported missing")
        if i == 2:
            with open(os.path.join(out, "recording_json.json"), encoding="utf-8") as f:
                js = json.load(f)
            check(v["json"]["format"] == "json" and isinstance(js, dict) and js.get("segments")
                  and {"file": "recording_json.json", "format": "json",
                       "bytes": os.path.getsize(os.path.join(out, "recording_json.json"))} in t["snapshots"],
                  "JSON branch: recording_json.json holds JSON and is listed in the truth's snapshots")


def test_scale_big(tmp):
    """run_all runs scale_big only when asked, writes it outside --out and never packs it."""
    fake = os.path.join(HERE, "fake_torch")
    out = os.path.join(tmp, "big", "captured")
    tar = os.path.join(tmp, "big", "captured.tar.gz")
    big = os.path.join(tmp, "big", "external", "scale_big.pickle")
    p = run([sys.executable, os.path.join(HERE, "run_all.py"), "--out", out, "--tar", tar, "--only", "scale_big",
             "--big-entries", "20000", "--big-path", big], pythonpath=fake, timeout=300)
    with open(os.path.join(out, "manifest.json")) as f:
        man = json.load(f)
    caps = man["captures"]
    check(p.returncode == 0 and [c["name"] for c in caps] == ["scale_big"] and caps[0]["status"] == "ok",
          "run_all --only scale_big runs just that (rc %s)" % p.returncode)
    ext = caps[0].get("external_files", [{}])[0]
    check(ext.get("present") and ext.get("bytes") == os.path.getsize(big)
          and ext.get("sha256") == common.sha256_file(big) and ext.get("packed") is False,
          "manifest records scale_big.pickle's size (%s B) and sha256, not packed" % ext.get("bytes"))
    with tarfile.open(tar) as tf:
        members = set(tf.getnames())
    check("captured/scale_big.truth.json" in members and not any(m.endswith("scale_big.pickle") for m in members),
          "tarball has scale_big.truth.json but not the big snapshot")
    t = load_truth(out, "scale_big")
    check(t["story_held"] and t["snapshots"] == [] and t["facts"]["external_snapshot"]["bytes"] == ext["bytes"]
          and t["observed"]["trace_entries"] == 20000 and "scale_big.pickle" in p.stdout + open(
              os.path.join(out, "logs", "scale_big.log")).read(),
          "scale_big truth: 20000 entries, size and sha256, no committed snapshot listed")
    for args, what in ((["--big-path", os.path.join(out, "x.pickle")], "a --big-path inside --out"),
                       (["--only", "no_such_capture"], "an unknown capture name")):
        p = run([sys.executable, os.path.join(HERE, "run_all.py"), "--out", out] + args, pythonpath=fake)
        check(p.returncode == 2 and "error:" in p.stderr, "run_all rejects %s (exit 2)" % what)


def main():
    with tempfile.TemporaryDirectory(prefix="memlens_selftest_") as tmp:
        test_compile(tmp)
        test_help()
        test_refusals(tmp)
        test_run_all_force(tmp)
        test_truth_writer(tmp)
        test_sites(tmp)
        test_summary()
        test_dry_run(tmp)
        test_recording_modes_probes(tmp)
        test_scale_big(tmp)
    print("selftest: %d checks passed" % passed)


if __name__ == "__main__":
    main()
