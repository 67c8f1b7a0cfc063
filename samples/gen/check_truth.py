#!/usr/bin/env python3
"""Cross-check of samples/truth/*.json (scenario bookkeeping) against the independent replay
oracle (tests/oracle/replay_oracle.py) run on the written pickles.

  python3 samples/gen/check_truth.py

For every `peak` object in a truth file (per sample): device, events, initial_bytes, peak_bytes,
peak_event_index, peak_time_us, end_bytes, the top site with its bytes/count and the listed
sites_at_peak must equal the oracle's. OOM truths: the last trace entry is the `oom` with
device_free_bytes and oom_size. Also re-runs every scenario in memory and compares its bookkeeping
timeline (live bytes after every trace entry) with the oracle's `timeline` of the file.
Prints one line per check; exits non-zero on a mismatch.
"""

import importlib.util
import json
import os
import pickle
import sys

sys.dont_write_bytecode = True  # keep samples/gen and tests/oracle free of __pycache__
HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.normpath(os.path.join(HERE, ".."))
ORACLE = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "oracle", "replay_oracle.py"))

spec = importlib.util.spec_from_file_location("replay_oracle", ORACLE)
oracle = importlib.util.module_from_spec(spec)
spec.loader.exec_module(oracle)


def pairs(truth):
    """(sample path relative to samples/, peak object) pairs of one truth file."""
    if "peak" in truth:
        yield truth["sample"], truth["peak"], truth
    for key, name in (("peak_base", "diff_base.pickle"), ("peak_cand", "diff_cand.pickle")):
        if key in truth:
            yield name, truth[key], truth
    for r in truth.get("ranks", []):
        yield r["file"], r["peak"], truth


def check_one(rel, pk, truth):
    path = os.path.join(SAMPLES, rel)
    snap = oracle.load(path)
    res = oracle.peak(snap)
    devs = {d["device"]: d for d in res["devices"]}
    assert list(devs) == [pk["device"]], (rel, list(devs))
    d = devs[pk["device"]]
    for k in ("events", "initial_bytes", "peak_bytes", "peak_event_index", "peak_time_us", "end_bytes"):
        assert d[k] == pk[k], (rel, k, d[k], pk[k])
    top = d["sites"][0]
    assert (top["site"], top["bytes"], top["count"]) == (pk["top_site"], pk["top_site_bytes"], pk["top_site_count"]), \
        (rel, top)
    want = pk["sites_at_peak"]
    assert d["sites"][:len(want)] == want, (rel, d["sites"][:len(want)], want)
    if "verdict" in truth:
        with open(path, "rb") as f:
            raw = pickle.load(f)
        last = raw["device_traces"][pk["device"]][-1]
        assert last["action"] == "oom", rel
        assert last["device_free"] == truth["device_free_bytes"] and last["size"] == truth["oom_size"], rel
        assert len(raw["device_traces"][pk["device"]]) - 1 == truth["oom_event_index"], rel
    return d


def check_timelines():
    """Re-run every scenario in memory: each Tracker's live-bytes-after-every-entry list must equal
    the oracle's timeline of the corresponding file on disk (files in sorted path order)."""
    sys.path.insert(0, HERE)
    from memgen import findings, truth as memtruth
    bad = 0
    for name, path, fn in findings.FINDING_SAMPLES:
        del memtruth.TRACKERS[:]
        objs, _facts = fn()
        paths = [path] if path is not None else sorted(objs)
        trackers = list(memtruth.TRACKERS)
        if not trackers:
            print("--  timeline %-28s not tracked (a wrapped ring buffer)" % name)
            continue
        assert len(trackers) == len(paths), name
        for rel, tk in zip(paths, trackers):
            tl = oracle.timeline(oracle.load(os.path.join(SAMPLES, rel)))["devices"]
            # the in-memory trace also holds the `snapshot` marker recorded when the file was built;
            # `initial`: bytes live before history recording began, which the tracker leaves out
            initial = getattr(tk, "initial", 0)
            mine = [b + initial for b in tk.timeline()]
            ok = (len(tl) == 1 and tl[0]["device"] == tk.dev and tl[0]["initial_bytes"] == initial
                  and len(mine) == len(tl[0]["bytes"]) + 1 and tl[0]["bytes"] == mine[:-1])
            print("%s timeline %-28s %d points" % ("ok " if ok else "BAD", rel, len(tl[0]["bytes"])))
            bad += not ok
    return bad


def main():
    tdir = os.path.join(SAMPLES, "truth")
    bad = check_timelines()
    for name in sorted(os.listdir(tdir)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(tdir, name)) as f:
            truth = json.load(f)
        for rel, pk, t in pairs(truth):
            try:
                d = check_one(rel, pk, t)
                print("ok  %-28s peak %d @ %d  top %s" % (rel, d["peak_bytes"], d["peak_event_index"],
                                                          d["sites"][0]["site"]))
            except AssertionError as e:
                bad += 1
                print("BAD %-28s %s" % (rel, e))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
