"""Scenario-side bookkeeping for the samples with known answers (samples/truth/*.json).

A Tracker sits between a scenario and the simulator: every malloc/free of the scenario goes
through it, and it keeps its own tally of live *requested* bytes per call site and per
category, the index of the trace entry each call produced, and the peak. Nothing here reads the
written pickle back: the truth files come from what the scenario did.

Site of an allocation (same rule the truth files promise): the innermost Python frame outside
the `torch` package; else the innermost Python frame; else "<no frames>". Written
`filename:line:name` with a "no line" line as -1.
"""

import json

from .stacks import LINE_NONE_CPP, LINE_NONE_PY

NO_FRAMES = "<no frames>"
TRACKERS = []  # every Tracker created, in order (check_truth.py compares their timelines)


def site_of_specs(specs):
    pys = [s for s in specs if s[0] == "py"]
    chosen = None
    for s in pys:
        if "torch" not in s[2].split("/"):
            chosen = s
            break
    if chosen is None and pys:
        chosen = pys[0]
    if chosen is None:
        return NO_FRAMES
    _kind, name, filename, line = chosen
    if line in (LINE_NONE_PY, LINE_NONE_CPP):
        line = -1
    return "%s:%d:%s" % (filename, line, name)


class Tracker:
    """Live requested bytes of one device, as the scenario sees them."""

    def __init__(self, run, dev=0):
        self.run = run
        self.dev = dev
        self.live = {}      # block serial -> (size, site, category)
        self.bytes = 0
        self.peak_bytes = 0
        self.peak_index = -1
        self.peak_time_us = None
        self.peak_sites = {}
        self.peak_cats = {}
        self.cat_bytes = {}
        self.cat_max = {}   # category -> max live bytes of that category over the run
        self.marks = []     # (label, live bytes, per-site bytes)
        self.changes = []   # (trace index, live bytes after that entry)
        TRACKERS.append(self)

    # trace position of the entry the last call produced (the ring buffer must not wrap)
    def _last(self, action, addr):
        t = self.run.alloc[self.dev].trace
        assert t.next == 0, "tracked scenarios must not wrap the trace ring buffer"
        te = t.buf[-1]
        assert te.action == action and te.addr == addr, (te.action, action)
        return len(t.buf) - 1, te

    def malloc(self, nbytes, specs, cat="other", stream=0, gap=(4, 90)):
        b = self.run.malloc(nbytes, specs, dev=self.dev, stream=stream, gap=gap)
        idx, te = self._last("alloc", b.ptr)
        site = site_of_specs(specs)
        self.live[b.serial] = (nbytes, site, cat)
        self.bytes += nbytes
        self.cat_bytes[cat] = self.cat_bytes.get(cat, 0) + nbytes
        self.changes.append((idx, self.bytes))
        if self.cat_bytes[cat] > self.cat_max.get(cat, 0):
            self.cat_max[cat] = self.cat_bytes[cat]
        if self.bytes > self.peak_bytes:
            self.peak_bytes = self.bytes
            self.peak_index = idx
            self.peak_time_us = te.time_us
            self.peak_sites = self.sites()
            self.peak_cats = dict(self.cat_bytes)
        return b

    def free(self, block, specs, gap=(2, 40)):
        nbytes, _site, cat = self.live.pop(block.serial)
        ptr = block.ptr  # merging with a free neighbour may move block.ptr
        self.run.free(block, specs, gap=gap)
        idx, _te = self._last("free_completed", ptr)
        self.bytes -= nbytes
        self.changes.append((idx, self.bytes))
        self.cat_bytes[cat] -= nbytes

    def sites(self):
        out = {}
        for nbytes, site, _cat in self.live.values():
            b, c = out.get(site, (0, 0))
            out[site] = (b + nbytes, c + 1)
        return out

    def mark(self, label):
        self.marks.append((label, self.bytes, self.sites()))
        return self.bytes

    def events(self):
        return len(self.run.alloc[self.dev].trace.buf)

    def timeline(self):
        """Live bytes after every trace entry of this device."""
        out = []
        cur = 0
        changes = dict(self.changes)
        for i in range(self.events()):
            cur = changes.get(i, cur)
            out.append(cur)
        return out

    def peak_facts(self, top=5):
        ranked = sorted(self.peak_sites.items(), key=lambda kv: (-kv[1][0], kv[0]))
        return {
            "device": self.dev,
            "events": self.events(),
            "initial_bytes": 0,
            "peak_bytes": self.peak_bytes,
            "peak_event_index": self.peak_index,
            "peak_time_us": self.peak_time_us,
            "end_bytes": self.bytes,
            "top_site": ranked[0][0] if ranked else None,
            "top_site_bytes": ranked[0][1][0] if ranked else 0,
            "top_site_count": ranked[0][1][1] if ranked else 0,
            "sites_at_peak": [{"site": s, "bytes": b, "count": c} for s, (b, c) in ranked[:top]],
        }


def write_truth(obj, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
