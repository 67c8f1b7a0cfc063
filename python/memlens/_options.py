"""What each memlens command accepts, for checking ``analyze``'s arguments before anything runs.

``OPTIONS`` is every command's flags as keyword names (``--max-peak`` is ``max_peak``, ``-n``
is ``n``), without ``--format``, ``--output``, ``--force`` and ``--help``: it is the
binary's ``COMMAND --help``, generated from it: ``tests/python/test_hostile.py`` compares the
two, so a command or flag added to the binary fails that test until the table is regenerated
(``MEMLENS_BLESS=1`` with that test rewrites the lines between the markers; review the diff).
"""

from __future__ import annotations

__all__ = ["OPTIONS", "PATH_OPTIONS", "TEXT_POSITIONALS"]

# BEGIN GENERATED from `memlens COMMAND --help`
OPTIONS: dict[str, frozenset[str]] = {
    "report": frozenset(["at", "bands", "capacity", "device", "gpu", "n", "phase", "salvage", "sites", "source_root", "step", "threads", "timings", "width", "window"]),
    "serve": frozenset(["bands", "bind", "capacity", "device", "gpu", "n", "port", "salvage", "sites", "source_root", "threads", "timings"]),
    "summary": frozenset(["device", "salvage", "threads", "timings", "width"]),
    "top": frozenset(["at", "by", "cost", "device", "frames", "full_stacks", "keep", "limit", "n", "phase", "salvage", "step", "threads", "timings", "width", "window"]),
    "lines": frozenset(["at", "cost", "device", "salvage", "source_root", "threads", "timings", "top", "width"]),
    "timeline": frozenset(["device", "phase", "points", "salvage", "step", "threads", "timings", "width", "window"]),
    "flame": frozenset(["allocator_frames", "at", "cost", "device", "frames", "keep", "phase", "salvage", "step", "threads", "timings", "width", "window"]),
    "frag": frozenset(["at", "by", "device", "salvage", "threads", "timings", "width", "worst"]),
    "oom": frozenset(["capacity", "device", "gpu", "n", "salvage", "sites", "threads", "timings", "width"]),
    "leaks": frozenset(["device", "min_bytes_per_step", "salvage", "steps", "threads", "timings", "warmup", "width"]),
    "categories": frozenset(["at", "device", "rules", "salvage", "threads", "timings", "width"]),
    "fit": frozenset(["at", "capacity", "device", "gpu", "salvage", "threads", "timings", "width"]),
    "explain": frozenset(["capacity", "gpu", "message_file", "salvage", "threads", "timings", "width"]),
    "diff": frozenset(["all", "at", "base_source_root", "by", "cost", "device", "fail_on_growth", "frame_depth", "ignore_lines", "keep", "limit", "min_abs", "n", "salvage", "source_root", "threads", "timings", "width"]),
    "check": frozenset(["allow_unmeasured", "at", "baseline", "capacity", "device", "fail_on_growth", "gpu", "ignore_lines", "max_frag", "max_leaked", "max_peak", "max_reserved", "min_abs", "n", "salvage", "sites", "threads", "timings", "width"]),
    "batch": frozenset(["device", "from_dataset", "ignore_lines", "j", "jobs", "list", "n", "partition_by", "partition_pattern", "salvage", "sites", "threads", "timings", "topology", "width"]),
    "export": frozenset(["base_ns", "device", "largest", "phase", "points", "salvage", "step", "threads", "timings", "width", "window"]),
    "slice": frozenset(["device", "from", "phase", "salvage", "step", "threads", "timings", "to", "width", "window"]),
    "whatif": frozenset(["capacity", "device", "gpu", "salvage", "set", "suggest", "threads", "timings", "width"]),
    "mcp": frozenset(["allow", "salvage", "threads", "timings"]),
    "session": frozenset(["max_memory", "salvage", "threads", "timings"]),
}
# END GENERATED

# Options whose value is a file memlens opens (``-`` is standard input, left to the binary).
PATH_OPTIONS: frozenset[str] = frozenset(["baseline", "message_file"])

# Commands whose positional arguments are text, not paths (``explain``'s message).
TEXT_POSITIONALS: frozenset[str] = frozenset(["explain"])

