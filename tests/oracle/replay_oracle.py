#!/usr/bin/env python3
"""Independent replay oracle for PyTorch CUDA memory snapshots (stdlib only, independent of memlens).

  python3 tests/oracle/replay_oracle.py peak FILE       per-device peak of live requested bytes + sites at the peak
  python3 tests/oracle/replay_oracle.py timeline FILE   per-device live requested bytes after every trace event

Input: raw pickle, gzip-compressed pickle (magic bytes) or JSON (first non-blank byte `{` or `[`);
pickles are loaded with an Unpickler that refuses every global. Output: compact JSON, sorted keys.

Replay rules (per device = index into device_traces; only devices with a non-empty trace are listed):
  * an allocation is live from its `alloc` to its `free_completed` (or legacy `free`); between
    `free_requested` and `free_completed` it is pending and still counts;
  * `alloc` at an address that is already live replaces the live allocation there;
  * `free_requested` at an address without a live allocation is ignored;
  * `free_completed` / `free` at an address without a live allocation is an orphan free: an allocation
    alive before the trace began (ring buffer wrapped), with the free's size and the free's frames,
    live from before event 0 until that event;
  * a final block (segments of that device) in state active_allocated or active_pending_free whose
    address holds no live allocation after the last event is an allocation alive for the whole trace,
    with the block's requested_size and frames (PyTorch 2.0 blocks without `address`: the address is
    the segment address plus the running sum of block sizes; requested_size falls back to
    history[0].real_size, then size; frames to history[0].frames);
  * every other action (segment_*, oom, snapshot, ...) leaves live bytes unchanged;
  * live bytes are requested sizes as recorded (trace `size`, block `requested_size`).
Addresses are compared as unsigned 64-bit values.

peak: {"devices": [{"device", "events", "initial_bytes", "peak_bytes", "peak_event_index",
       "end_bytes", "peak_time_us", "sites": [{"site", "bytes", "count"}]}]}
  initial_bytes     live bytes before event 0 (all pre-trace allocations)
  peak_event_index  index of the first event after which live bytes reach their maximum;
                    -1 when the state before event 0 already is the maximum
  peak_time_us      time_us of that event, null for -1 or when the event has none
  sites             allocations live at the peak state grouped by site, bytes desc then site asc
timeline: {"devices": [{"device", "events", "initial_bytes", "bytes": [live bytes after event i, ...]}]}

Site of an allocation: the innermost frame that is neither a C++/interpreter frame (filename `??`,
empty, or ending in .c .cc .cpp .cxx .h .hpp .cu .cuh .so .o .s .dylib .dll .pyd .exe; a versioned
shared object such as libc.so.6; the interpreter binary python / python3.12 / python3.13t; or a
frame whose name is `??`, as stacks="all" records unsymbolized code) nor inside the `torch` package (a path
component equal to `torch`); else the innermost non-C++ frame; else `<no frames>` (frames absent,
empty, or C++ only). Written `filename:line:name`; lines 2^64-1 and -1 print as -1.
"""

import gzip
import io
import json
import pickle
import re
import sys

U64 = (1 << 64) - 1
# Native code: C/C++/CUDA sources, shared objects, object files and assembly (seen in real
# stacks="all" files: thread48.o, clone3.S), compared case-insensitively.
CPP_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".cu", ".cuh", ".so", ".o", ".s",
                ".dylib", ".dll", ".pyd", ".exe")
VERSIONED_SO = re.compile(r"\.so\.[0-9.]+$")
PYTHON_BINARY = re.compile(r"^python[0-9.dmtu]*$")
NO_FRAMES = "<no frames>"


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("refusing global %s.%s" % (module, name))

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refusing persistent id")


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if data.lstrip()[:1] in (b"{", b"["):
        return json.loads(data.decode("utf-8"))
    return _NoGlobals(io.BytesIO(data)).load()


# ----------------------------------------------------------------------------- sites

def is_cpp_frame(fr):
    fn = fr.get("filename", "")
    if not isinstance(fn, str):
        fn = str(fn)
    if fr.get("name") == "??" or fn in ("??", ""):
        return True
    low = fn.lower()
    base = low.replace("\\", "/").rsplit("/", 1)[-1]
    return (low.endswith(CPP_SUFFIXES) or bool(VERSIONED_SO.search(base))
            or (bool(PYTHON_BINARY.match(base)) and not base.endswith(".")))


def is_torch_frame(fr):
    fn = str(fr.get("filename", ""))
    # A directory named torch (the file itself may be called anything, even torch.py).
    return "torch" in fn.replace("\\", "/").split("/")[:-1]


def frame_text(fr):
    line = fr.get("line", 0)
    if line == U64 or line == -1:
        line = -1
    return "%s:%s:%s" % (fr.get("filename", ""), line, fr.get("name", ""))


def site_of(frames):
    if not frames:
        return NO_FRAMES
    frames = [f for f in frames if isinstance(f, dict)]
    python = [f for f in frames if not is_cpp_frame(f)]
    for f in python:
        if not is_torch_frame(f):
            return frame_text(f)
    if python:
        return frame_text(python[0])
    return NO_FRAMES


# ----------------------------------------------------------------------------- replay

class Alloc:
    __slots__ = ("size", "frames", "start", "end")

    def __init__(self, size, frames, start, end=None):
        self.size = size      # requested bytes
        self.frames = frames
        self.start = start    # live after event `start` (-1: before event 0)
        self.end = end        # not live after event `end` (None: still live at the end)

    def live_after(self, k):
        """Is it live in the state after event k (k = -1: the state before event 0)?"""
        return self.start <= k and (self.end is None or k < self.end)


def snapshot_parts(snap):
    if isinstance(snap, list):
        return snap, []
    if isinstance(snap, dict):
        return snap.get("segments") or [], snap.get("device_traces") or []
    raise ValueError("not a snapshot: top level %s" % type(snap).__name__)


def final_blocks(segments, device):
    """(address, requested, frames) of active_allocated / active_pending_free blocks of one device."""
    out = []
    for s in segments:
        if s.get("device", 0) != device:
            continue
        addr = s.get("address", 0)
        for b in s.get("blocks") or []:
            baddr = b["address"] if "address" in b else addr
            addr = baddr + b.get("size", 0)
            if b.get("state") not in ("active_allocated", "active_pending_free"):
                continue
            hist = b.get("history") or []
            if "requested_size" in b:
                req = b["requested_size"]
            elif hist and "real_size" in hist[0]:
                req = hist[0]["real_size"]
            else:
                req = b.get("size", 0)
            frames = b["frames"] if "frames" in b else (hist[0].get("frames") if hist else None)
            out.append((baddr & U64, req, frames))
    return out


def replay(trace, blocks):
    """All allocations of one device with their live intervals, in a list."""
    allocs = []
    live = {}  # addr -> Alloc
    for i, e in enumerate(trace):
        a = e.get("action")
        if a not in ("alloc", "free_completed", "free"):
            continue  # free_requested: pending, still live (or ignored when unknown)
        addr = e.get("addr", 0) & U64
        if a == "alloc":
            old = live.get(addr)
            if old is not None:
                old.end = i  # replaced
            x = Alloc(e.get("size", 0), e.get("frames"), i)
            live[addr] = x
            allocs.append(x)
        else:
            x = live.pop(addr, None)
            if x is not None:
                x.end = i
            else:  # orphan free: alive since before the trace, until this event
                allocs.append(Alloc(e.get("size", 0), e.get("frames"), -1, i))
    for addr, req, frames in blocks:
        if addr not in live:
            allocs.append(Alloc(req, frames, -1, None))
    return allocs


def timeline_of(n, allocs):
    """Live bytes before event 0 and after each event (difference array)."""
    delta = [0] * (n + 1)  # delta[k + 1] applies to the state after event k
    initial = 0
    for x in allocs:
        if x.start == -1:
            initial += x.size
        else:
            delta[x.start + 1] += x.size
        if x.end is not None:
            delta[x.end + 1] -= x.size
    out = []
    cur = initial
    for k in range(n):
        cur += delta[k + 1]
        out.append(cur)
    return initial, out


def device_results(snap):
    segments, traces = snapshot_parts(snap)
    res = []
    for d, trace in enumerate(traces):
        if not trace:
            continue
        allocs = replay(trace, final_blocks(segments, d))
        initial, tl = timeline_of(len(trace), allocs)
        res.append((d, trace, allocs, initial, tl))
    return res


def peak(snap):
    out = []
    for d, trace, allocs, initial, tl in device_results(snap):
        best, k = initial, -1
        for i, v in enumerate(tl):
            if v > best:
                best, k = v, i
        # self-check: the live set at k sums to the timeline value
        at_peak = [x for x in allocs if x.live_after(k)]
        assert sum(x.size for x in at_peak) == best
        sites = {}
        for x in at_peak:
            s = site_of(x.frames)
            b, c = sites.get(s, (0, 0))
            sites[s] = (b + x.size, c + 1)
        site_list = [{"site": s, "bytes": b, "count": c} for s, (b, c) in sites.items()]
        site_list.sort(key=lambda r: (-r["bytes"], r["site"]))
        t = trace[k].get("time_us") if k >= 0 else None
        out.append({"device": d, "events": len(trace), "initial_bytes": initial, "peak_bytes": best,
                    "peak_event_index": k, "end_bytes": tl[-1], "peak_time_us": t, "sites": site_list})
    return {"devices": out}


def timeline(snap):
    return {"devices": [{"device": d, "events": len(trace), "initial_bytes": initial, "bytes": tl}
                        for d, trace, _allocs, initial, tl in device_results(snap)]}


def dumps(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def main(argv):
    if len(argv) != 3 or argv[1] not in ("peak", "timeline"):
        sys.stderr.write(__doc__)
        return 2
    snap = load(argv[2])
    print(dumps(peak(snap) if argv[1] == "peak" else timeline(snap)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
