#!/usr/bin/env python3
"""Self-check of the generated samples (stdlib only): replays each trace against the
final segment list and checks the sharing / ordering facts the format doc states.

  python3 samples/gen/check_samples.py [--fresh] [FILE ...]   (default: samples/*.pickle, samples/ranks/*.pickle)

--fresh skips the one-dict-per-frame check (for `big --layout fresh` files).

Prints one line per file and exits non-zero on the first failing file.
"""

import glob
import os
import pickle
import pickletools
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
U64 = (1 << 64) - 1


class NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("global %s.%s" % (module, name))


def load(path):
    with open(path, "rb") as f:
        return NoGlobals(f).load()


def fail(msg):
    raise AssertionError(msg)


def check_cpp_layout(path):
    data = open(path, "rb").read()
    assert data[:2] == b"\x80\x02", "not protocol 2"
    ops = list(pickletools.genops(data))
    names = [op.name for op, _a, _p in ops]
    for bad in ("FRAME", "MEMOIZE", "SHORT_BINUNICODE", "BINUNICODE8", "GLOBAL", "REDUCE", "APPEND", "SETITEM"):
        if bad in names:
            fail("C++ layout contains %s" % bad)
    strings = {}
    for i, (op, arg, pos) in enumerate(ops):
        if op.name == "LONG1":
            if data[pos + 1] != 8:
                fail("LONG1 with %d bytes at %d" % (data[pos + 1], pos))
            if -(1 << 31) <= arg < (1 << 31):
                fail("LONG1 for an int32 value at %d" % pos)
        if op.name == "BINUNICODE":
            if arg in strings:
                fail("string %r written twice (C++ memoizes strings by value)" % arg)
            strings[arg] = pos
            if ops[i + 1][0].name not in ("BINPUT", "LONG_BINPUT"):
                fail("string not followed by BINPUT")
        if op.name in ("EMPTY_DICT", "EMPTY_LIST"):
            if ops[i + 1][0].name != "MARK":
                fail("%s not followed by MARK at %d" % (op.name, pos))
    return len(ops)


def check_file(path, shared_frames=True):
    snap = load(path)
    notes = []
    if isinstance(snap, list):
        segments, traces = snap, []
    else:
        segments, traces = snap.get("segments", []), snap.get("device_traces", [])
    legacy = any("history" in b for s in segments for b in s["blocks"])

    # --- segment / block invariants (I1-I9 where they apply)
    prev_key = None
    for s in segments:
        key = (s["device"], s["address"] & U64)
        if prev_key is not None and key <= prev_key:
            fail("segments not grouped by device / sorted by address: %r after %r" % (key, prev_key))
        prev_key = key
        blocks = s["blocks"]
        if sum(b["size"] for b in blocks) != s["total_size"]:
            fail("I1")
        if sum(b["size"] for b in blocks if b["state"] == "active_allocated") != s["allocated_size"]:
            fail("I2")
        if sum(b["size"] for b in blocks if b["state"] != "inactive") != s["active_size"]:
            fail("I3")
        if sum(b["requested_size"] for b in blocks if b["state"] != "inactive") != s["requested_size"]:
            fail("I4")
        if not legacy:
            a = s["address"]
            for b in blocks:
                if b["address"] != a:
                    fail("I5")
                a += b["size"]
        for b in blocks:
            if b["size"] % 512:
                fail("I8 block size")
            if b["state"] != "inactive" and b["requested_size"] > b["size"]:
                fail("I6")
            if b["state"] == "inactive" and not legacy and b["frames"]:
                fail("I7 inactive block with frames")
        if not s.get("is_expandable"):
            t = s["total_size"]
            if s["segment_type"] == "small" and t != 2 << 20:
                fail("small segment of %d bytes" % t)
            if s["segment_type"] == "large" and not (t == 20 << 20 or (t % (2 << 20) == 0 and t >= 10 << 20)):
                fail("large segment of %d bytes" % t)
        else:
            page = (2 << 20) if s["segment_type"] == "small" else (20 << 20)
            if s["total_size"] % page:
                fail("expandable range not page multiple")
        if not legacy:
            keys = list(s.keys())
            if s["frames"] and keys[-1] != "frames":
                fail("symbolized segment frames must come after blocks")
            if not s["frames"] and keys[-1] != "blocks":
                fail("empty segment frames must come before blocks")
    inactive_nonzero = sum(1 for s in segments for b in s["blocks"] if b["state"] == "inactive" and b["requested_size"])
    notes.append("stale-requested-inactive=%d" % inactive_nonzero)

    # --- sharing of frames objects
    if not legacy:
        holders = [b["frames"] for s in segments for b in s["blocks"]] + [s["frames"] for s in segments]
        holders += [e["frames"] for t in traces for e in t if "frames" in e]
        empties = {id(h) for h in holders if isinstance(h, list) and not h}
        if len(empties) > 1:
            fail("%d distinct empty frames lists" % len(empties))
        frames = {}
        for h in holders:
            for f in h:
                frames.setdefault(id(f), f)
        vals = {(f["name"], f["filename"], f["line"]) for f in frames.values()}
        if shared_frames and len(vals) != len(frames):
            fail("frame dicts not unique per frame: %d dicts, %d values" % (len(frames), len(vals)))
        for f in frames.values():
            if list(f.keys()) != ["name", "filename", "line"]:
                fail("frame key order %r" % list(f.keys()))

    # --- trace replay
    for dev, t in enumerate(traces):
        last = None
        live = {}      # addr -> entry
        pending = {}
        segs = []      # [start, end]
        seen_any_segment = False
        wrapped = bool(t) and t[0]["action"] in ("free_requested", "free_completed")
        for i, e in enumerate(t):
            a = e["action"]
            if "time_us" in e:
                if last is not None and e["time_us"] < last:
                    fail("time_us decreases at %d" % i)
                last = e["time_us"]
            if a in ("segment_alloc", "segment_map"):
                segs.append([e["addr"], e["addr"] + e["size"]])
                seen_any_segment = True
                nxt = t[i + 1] if i + 1 < len(t) else None
                if a == "segment_alloc" and not (nxt and nxt["action"] == "alloc" and nxt["addr"] == e["addr"]):
                    fail("segment_alloc not immediately followed by its alloc (%d)" % i)
                if nxt is not None and "frames" in e and nxt.get("frames") is not e["frames"]:
                    if nxt["action"] in ("alloc", "segment_map"):
                        fail("segment_alloc/map and its alloc do not share the traceback list (%d)" % i)
            elif a in ("segment_free", "segment_unmap"):
                segs = [r for r in segs if not (r[0] == e["addr"] and r[1] == e["addr"] + e["size"])]
            elif a == "alloc":
                if e["addr"] in live:
                    fail("double alloc at %d" % i)
                if seen_any_segment and not wrapped:
                    if not any(r[0] <= e["addr"] < r[1] for r in segs):
                        if not any(s["address"] <= e["addr"] < s["address"] + s["total_size"]
                                   for s in segments if s["device"] == dev):
                            fail("alloc outside known segments at %d" % i)
                live[e["addr"]] = e
            elif a == "free_requested":
                nxt = t[i + 1] if i + 1 < len(t) else None
                if e["addr"] in live:
                    if live[e["addr"]]["size"] != e["size"]:
                        fail("free_requested size != alloc size at %d" % i)
                    pending[e["addr"]] = live.pop(e["addr"])
                elif not wrapped:
                    fail("free of unknown block at %d" % i)
                if nxt and nxt["action"] == "free_completed" and nxt["addr"] == e["addr"]:
                    if nxt.get("frames") is not e.get("frames"):
                        # allowed only when a later malloc processed the deferred event
                        after = t[i + 2] if i + 2 < len(t) else None
                        if not (after and after["action"] in ("alloc", "segment_map", "segment_alloc")
                                and after.get("frames") is nxt.get("frames")):
                            fail("free_requested/free_completed pair does not share frames (%d)" % i)
            elif a == "free_completed":
                pending.pop(e["addr"], None)
        final_alloc = {b["address"]: b for s in segments if s["device"] == dev for b in s["blocks"]
                       if b["state"] == "active_allocated"} if not legacy else {}
        final_pending = {b["address"]: b for s in segments if s["device"] == dev for b in s["blocks"]
                         if b["state"] == "active_pending_free"} if not legacy else {}
        if legacy or not t or t[0]["action"] == "snapshot":
            continue
        for addr, e in live.items():
            b = final_alloc.get(addr)
            if b is None:
                fail("live alloc at %#x missing from final state" % addr)
            if b["requested_size"] != e["size"]:
                fail("block requested_size != alloc size at %#x" % addr)
            if "frames" in e and b["frames"] is not e["frames"]:
                fail("live block frames is not its alloc entry's frames list at %#x" % addr)
        # history started late: blocks allocated before recording began carry no frames and
        # have no trace entry
        late = {a for a, b in final_alloc.items() if a not in live and not b["frames"]}
        if late:
            notes.append("dev%d:%d blocks before history" % (dev, len(late)))
        if not wrapped:
            if set(final_alloc) - late != set(live):
                fail("final active_allocated blocks != replayed live set (dev %d)" % dev)
            if set(final_pending) != set(pending):
                fail("final active_pending_free blocks != replayed pending set (dev %d)" % dev)
        else:
            if not set(live) <= set(final_alloc):
                fail("wrapped: live set not in final state")
        notes.append("dev%d:%d entries/%d live/%d pending" % (dev, len(t), len(live), len(pending)))
    return notes


def main(argv):
    shared = "--fresh" not in argv
    files = [a for a in argv[1:] if a != "--fresh"] or (sorted(glob.glob(os.path.join(HERE, "..", "*.pickle")))
                                                        + sorted(glob.glob(os.path.join(HERE, "..", "ranks", "*.pickle"))))
    for path in files:
        notes = check_file(path, shared_frames=shared)
        if os.path.basename(path).startswith("cpp_"):
            notes.append("cpp-layout ops=%d" % check_cpp_layout(path))
        print("ok  %-28s %s" % (os.path.basename(path), " ".join(notes)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
