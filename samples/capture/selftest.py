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
   diff pair, pending free, protocols) hold; the ones the toy cannot model (autograd-retained
   graph, expandable segments, C++ frames) report story-failed.
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
           "side_stream.py", "stacks_all.py", "protocols.py"]
# extra argument sets that take a different path before the CUDA check
VARIANTS = {
    "retained_graph.py": [[], ["--fixed"]],
    "frag_oom.py": [[], ["--mode", "native"], ["--mode", "expandable"]],
    "kv_cache.py": [[], ["--leak"]],
    "diff_pair.py": [[], ["--extra-buffer"]],
    "stacks_all.py": [[], ["--symbolize", "dladdr"]],
}
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


def run(cmd, pythonpath=None, cwd=None, timeout=120):
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for k in common.ALLOC_CONF_VARS + ("MEMLENS_CAPTURE_REEXEC",):
        env.pop(k, None)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
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
                p = run([sys.executable, os.path.join(HERE, name), "--out", out] + extra, pythonpath=path)
                assert_refusal(p, "[%s] %s %s" % (label, name, " ".join(extra)), prefix, exact)
        p = run([sys.executable, os.path.join(HERE, "run_all.py"), "--out", out], pythonpath=path)
        assert_refusal(p, "[%s] run_all.py" % label, prefix, exact)
    check(not os.path.exists(out) or not os.listdir(out), "refused runs wrote no files")


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
    check(len(names) == 12 and all(c["status"] == "refused" for c in man["captures"]),
          "manifest lists 12 captures, all refused")
    check(all(isinstance(c.get("seconds"), (int, float)) for c in man["captures"]), "manifest has per-capture seconds")
    with tarfile.open(tar) as tf:
        members = set(tf.getnames())
    need = {"captured/manifest.json", "captured/README.md", "captured/logs/frag_oom.log"}
    check(need <= members, "tarball carries manifest, README and logs (%d members)" % len(members))
    progress = [l for l in p.stdout.splitlines() if l.startswith("[run_all")]
    check(len(progress) >= 13, "run_all printed %d progress lines" % len(progress))


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
    "stacks_all": "story-failed",            # toy has no C++ frames
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
    ok("dry run (toy allocator): 12 captures ran, statuses as expected, run_all exit 1")
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
    print("selftest: %d checks passed" % passed)


if __name__ == "__main__":
    main()
