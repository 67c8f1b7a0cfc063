#!/usr/bin/env python3
"""Reference oracle for PyTorch CUDA memory snapshots (stdlib only, independent of memlens).

  python3 tests/oracle/snapshot_oracle.py summary FILE   per-device totals as one JSON object
  python3 tests/oracle/snapshot_oracle.py check FILE     invariant violations (I1-I5, I8) as a JSON list
  python3 tests/oracle/snapshot_oracle.py frames FILE    distinct frames, by kind, as one JSON object
  python3 tests/oracle/snapshot_oracle.py stranded FILE  stranded free bytes of the final state and the
                                                         live blocks that pin them, as one JSON object

Input: a raw pickle, a gzip-compressed pickle (by magic bytes), or JSON (first non-blank
byte `{` or `[`). Pickles are loaded with an Unpickler whose find_class refuses every
global, so a file cannot run code. Shapes handled: bare list of segments, PyTorch 2.0
dict (blocks with `history`, no block `address`), modern dict. Output is compact JSON
with sorted keys.

Summary semantics (per device; a device is listed when it has segments or a non-empty trace):
  segments, blocks                counts
  reserved_bytes                  sum of segment total_size
  allocated_bytes                 sum of block size over state active_allocated
  requested_bytes                 sum of block requested_size over active_allocated
                                  (a 2.0 block without requested_size: history[0].real_size)
  pending_free_bytes              sum of size over active_pending_free
  inactive_bytes                  sum of size over inactive
  largest_inactive_block_bytes    0 if none
  trace_entries                   len(device_traces[device]) if present else 0
  actions                         action -> count over that device's trace
Addresses may be negative (int64 casts in the C++ path); they are masked to u64 where
compared. Sizes are used as they are.

Frames: every frame of block frames, block history and trace entries, distinct by
(filename, line, name): `distinct`, and of those `python` (filename ends in `.py`) and
`other` (C++, interpreter and generated code), plus `occurrences` (every frame counted).

Stranded (per device, final state): a cudaMalloc'd segment with a live block (active_allocated
or active_pending_free) strands all its inactive bytes, each live block pinning them; a wholly
free one strands nothing. An expandable range (is_expandable) is released page by page, pages of
2 MiB (small pool) or 20 MiB (otherwise) counted from the range's address: the part of a free
block outside its whole free pages is stranded, the bytes before the first whole page pinned by
the live block before it, those after the last by the live block after it, a free block inside
one page by both. Blocks without an address (PyTorch 2.0) are placed by the running sum.
`segments`: those with stranded bytes, each with its address, stranded_bytes and the sorted
addresses of its pinning blocks.

Check: one object per violation {segment (index), device, address, invariant, message[, expected,
actual]}. I1 sum of block sizes == total_size; I2 allocated_size; I3 active_size; I4 segment
requested_size (2.0 blocks without requested_size use history[0].real_size); I5 block addresses
are the running sum (skipped when blocks have no address, PyTorch 2.0); I8 block sizes are
multiples of 512, and segment sizes follow the native allocator (small 2 MiB, large 20 MiB or a
2 MiB multiple >= 10 MiB, expandable ranges multiples of 2 MiB / 20 MiB).
"""

import gzip
import io
import json
import pickle
import sys

SCHEMA_VERSION = 1
U64 = (1 << 64) - 1
MIB = 1 << 20


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
    head = data.lstrip()[:1]
    if head in (b"{", b"["):
        return json.loads(data.decode("utf-8"))
    return _NoGlobals(io.BytesIO(data)).load()


def shape(snap):
    """(segments, device_traces or None, kind)."""
    if isinstance(snap, list):
        return snap, None, "list"
    if isinstance(snap, dict):
        segs = snap.get("segments") or []
        traces = snap.get("device_traces")
        legacy = any("history" in b or ("address" not in b and "size" in b)
                     for s in segs for b in (s.get("blocks") or []))
        return segs, traces, "legacy" if legacy else "dict"
    raise ValueError("not a snapshot: top level %s" % type(snap).__name__)


def block_requested(b):
    if "requested_size" in b:
        return b["requested_size"]
    hist = b.get("history") or []
    if hist:
        return hist[0].get("real_size", 0)
    return 0


def summary(snap):
    segs, traces, _kind = shape(snap)
    devs = {}

    def dev(d):
        if d not in devs:
            devs[d] = {"device": d, "segments": 0, "blocks": 0, "reserved_bytes": 0, "allocated_bytes": 0,
                       "requested_bytes": 0, "pending_free_bytes": 0, "inactive_bytes": 0,
                       "largest_inactive_block_bytes": 0, "trace_entries": 0, "actions": {}}
        return devs[d]

    for s in segs:
        d = dev(s.get("device", 0))
        d["segments"] += 1
        d["reserved_bytes"] += s.get("total_size", 0)
        for b in s.get("blocks") or []:
            d["blocks"] += 1
            state = b.get("state")
            size = b.get("size", 0)
            if state == "active_allocated":
                d["allocated_bytes"] += size
                d["requested_bytes"] += block_requested(b)
            elif state == "active_pending_free":
                d["pending_free_bytes"] += size
            elif state == "inactive":
                d["inactive_bytes"] += size
                d["largest_inactive_block_bytes"] = max(d["largest_inactive_block_bytes"], size)
    for i, t in enumerate(traces or []):
        if not t:
            continue
        d = dev(i)
        for e in t:
            a = e.get("action")
            a = a if isinstance(a, str) else str(a)
            d["actions"][a] = d["actions"].get(a, 0) + 1
    for k, d in devs.items():
        if traces and isinstance(k, int) and 0 <= k < len(traces):
            d["trace_entries"] = len(traces[k])
    return {"schema_version": SCHEMA_VERSION, "devices": [devs[k] for k in sorted(devs)]}


def check(snap):
    """Violations of I1-I5 and I8 (see docs/snapshot-format.md section 2)."""
    segs, _traces, _kind = shape(snap)
    out = []

    def bad(i, s, inv, msg, expected=None, actual=None):
        v = {"segment": i, "device": s.get("device"), "address": (s.get("address", 0) & U64),
             "invariant": inv, "message": msg}
        if expected is not None:
            v["expected"] = expected
            v["actual"] = actual
        out.append(v)

    for i, s in enumerate(segs):
        blocks = s.get("blocks") or []
        sizes = [b.get("size", 0) for b in blocks]
        states = [b.get("state") for b in blocks]
        total = sum(sizes)
        if "total_size" in s and s["total_size"] != total:
            bad(i, s, "I1", "sum of block sizes != total_size", s["total_size"], total)
        alloc = sum(z for z, st in zip(sizes, states) if st == "active_allocated")
        if "allocated_size" in s and s["allocated_size"] != alloc:
            bad(i, s, "I2", "allocated_size != sum of active_allocated block sizes", s["allocated_size"], alloc)
        active = sum(z for z, st in zip(sizes, states) if st != "inactive")
        if "active_size" in s and s["active_size"] != active:
            bad(i, s, "I3", "active_size != sum of non-inactive block sizes", s["active_size"], active)
        if "requested_size" in s:
            req = sum(block_requested(b) for b, st in zip(blocks, states) if st != "inactive")
            if s["requested_size"] != req:
                bad(i, s, "I4", "segment requested_size != sum of non-inactive requested_size",
                    s["requested_size"], req)
        if blocks and all("address" in b for b in blocks) and "address" in s:
            addr = s["address"] & U64
            for j, b in enumerate(blocks):
                ba = b["address"] & U64
                if ba != addr:
                    bad(i, s, "I5", "block %d address is not the running sum" % j, addr, ba)
                    break
                addr = (addr + b.get("size", 0)) & U64
        for j, z in enumerate(sizes):
            if z % 512 != 0:
                bad(i, s, "I8", "block %d size %d is not a multiple of 512" % (j, z))
        # I8, segment sizes of the native allocator: small 2 MiB; large 20 MiB or a 2 MiB
        # multiple >= 10 MiB; expandable ranges multiples of 2 MiB (small) / 20 MiB (large)
        seg_type, tot = s.get("segment_type"), s.get("total_size")
        if seg_type in ("small", "large") and isinstance(tot, int):
            if s.get("is_expandable"):
                page = 2 * MIB if seg_type == "small" else 20 * MIB
                if tot % page:
                    bad(i, s, "I8", "expandable %s range of %d bytes is not a multiple of %d" % (seg_type, tot, page))
            elif seg_type == "small" and tot != 2 * MIB:
                bad(i, s, "I8", "small segment of %d bytes (expected 2 MiB)" % tot)
            elif seg_type == "large" and not (tot == 20 * MIB or (tot % (2 * MIB) == 0 and tot >= 10 * MIB)):
                bad(i, s, "I8", "large segment of %d bytes (expected 20 MiB or a 2 MiB multiple >= 10 MiB)" % tot)
    return out


def frames(snap):
    segs, traces, _kind = shape(snap)
    seen = set()
    occurrences = 0

    def take(fr):
        nonlocal occurrences
        for f in fr or []:
            occurrences += 1
            seen.add((f.get("filename", ""), f.get("line", 0), f.get("name", "")))

    for s in segs:
        for b in s.get("blocks") or []:
            take(b.get("frames"))
            for h in b.get("history") or []:
                take(h.get("frames"))
    for t in traces or []:
        for e in t or []:
            take(e.get("frames"))
    python = sum(1 for f in seen if isinstance(f[0], str) and f[0].endswith(".py"))
    return {"distinct": len(seen), "python": python, "other": len(seen) - python,
            "occurrences": occurrences}


def stranded(snap):
    segs, _traces, _kind = shape(snap)
    devs = {}
    for s in segs:
        d = devs.setdefault(s.get("device", 0), {"device": s.get("device", 0), "stranded_bytes": 0,
                                                  "releasable_bytes": 0, "segments": []})
        base = s.get("address", 0) & U64
        page = 2 * MIB if s.get("segment_type") == "small" else 20 * MIB
        blocks, at = [], base
        for b in s.get("blocks") or []:
            addr = b["address"] & U64 if "address" in b else at
            live = b.get("state") in ("active_allocated", "active_pending_free")
            blocks.append((addr, b.get("size", 0), live))
            at = addr + b.get("size", 0)
        free = sum(n for _a, n, live in blocks if not live)
        lives = [a for a, _n, live in blocks if live]
        stranded_here, pinners = 0, set()
        if not s.get("is_expandable"):
            if lives and free:
                stranded_here, pinners = free, set(lives)
            elif not lives:
                d["releasable_bytes"] += free
        else:
            for i, (a, n, live) in enumerate(blocks):
                if live:
                    continue
                prev = blocks[i - 1][0] if i > 0 and blocks[i - 1][2] else None
                nxt = blocks[i + 1][0] if i + 1 < len(blocks) and blocks[i + 1][2] else None
                lo = base + -(-(a - base) // page) * page
                hi = base + (a + n - base) // page * page
                if lo > hi:
                    stranded_here += n
                    pinners |= {x for x in (prev, nxt) if x is not None}
                    continue
                d["releasable_bytes"] += hi - lo
                if lo > a:
                    stranded_here += lo - a
                    if prev is not None:
                        pinners.add(prev)
                if a + n > hi:
                    stranded_here += a + n - hi
                    if nxt is not None:
                        pinners.add(nxt)
        if stranded_here:
            d["stranded_bytes"] += stranded_here
            d["segments"].append({"address": base, "stranded_bytes": stranded_here,
                                  "pinners": sorted(pinners)})
    return {"schema_version": SCHEMA_VERSION, "devices": [devs[k] for k in sorted(devs)]}


def dumps(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def main(argv):
    commands = {"summary": summary, "check": check, "frames": frames, "stranded": stranded}
    if len(argv) != 3 or argv[1] not in commands:
        sys.stderr.write(__doc__)
        return 2
    snap = load(argv[2])
    print(dumps(commands[argv[1]](snap)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
