"""``python -m memlens ...``: the memlens binary, plus ``record``.

``python -m memlens COMMAND ...`` runs the binary installed with the package with the same
arguments (its exit status, output and signals are the binary's: on POSIX the process is
replaced by it). One command is the Python package's own, since it must run inside the
Python process being measured::

    python -m memlens record [-o FILE] [--max-entries N] [--stacks all|python] [--no-oom]
                             [--] SCRIPT [ARGS...]
    python -m memlens record [options] -m MODULE [ARGS...]

``python -m memlens mcp [--allow DIR]...`` serves memlens's analyses to coding agents over
the Model Context Protocol (stdio; :mod:`memlens.mcp_server`).

``python -m memlens fleet scan PATHS... -o OUT [--scheduler ADDRESS] [--memlens BIN]
[--shard-size K] [--partition-by KEYS] [--retries N] [--workers N]`` writes the Parquet
dataset of many snapshots with a ``dask.distributed`` cluster (:func:`memlens.fleet.scan`).

``record`` runs SCRIPT (or MODULE) as ``__main__`` with ``sys.argv = [SCRIPT, *ARGS]`` under
:class:`memlens.record`, like ``python SCRIPT ARGS`` would, and writes the snapshot to FILE
(default ``memlens-<name>.pickle``), also at the moment of an OOM.
"""

from __future__ import annotations

import argparse
import os
import runpy
import subprocess
import sys
from typing import Any

from ._binary import find_memlens_bin
from ._errors import MemlensError
from ._record import record

_RECORD_USAGE = (
    "python -m memlens record [-o FILE] [--max-entries N] [--stacks all|python] [--no-oom] "
    "[--] SCRIPT [ARGS...]\n"
    "       python -m memlens record [options] -m MODULE [ARGS...]"
)


def _record_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m memlens record",
        usage=_RECORD_USAGE,
        description="Run a Python script or module under memlens.record: record the CUDA "
        "allocator's history and dump the snapshot when it ends (and at the moment of an "
        "OOM, with memlens oom's verdict on standard error).",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="snapshot file (default: memlens-<name>.pickle)")
    p.add_argument(
        "--max-entries", type=int, default=100_000, metavar="N", help="allocator history ring size (default 100000)"
    )
    p.add_argument(
        "--stacks", choices=["all", "python"], default="all", help="frames recorded: all (Python and C++) or python"
    )
    p.add_argument("--no-oom", action="store_true", help="no OOM hook: dump only when the script ends")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module (like python -m MODULE)")
    return p


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """The options, and the script with its arguments: everything after ``--``, or from the
    first word that is neither an option nor an option's value (``-m MODULE`` ends the
    options too: the module's arguments follow it)."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return argv[:i], argv[i + 1 :]
        if a == "-m":
            return argv[: i + 2], argv[i + 2 :]
        if a.startswith("-m"):
            return argv[: i + 1], argv[i + 1 :]
        if a in ("-o", "--output", "--max-entries", "--stacks"):
            i += 2
            continue
        if a.startswith("-") and a != "-":
            i += 1
            continue
        return argv[:i], argv[i:]
    return argv, []


def record_main(argv: list[str]) -> int:
    """``python -m memlens record ...``; returns the exit status."""
    opts_argv, rest = _split(argv)
    parser = _record_parser()
    opts = parser.parse_args(opts_argv)
    if opts.module is None and not rest:
        parser.error("a SCRIPT (or -m MODULE) to run is required")
    if opts.module is not None:
        target, args = opts.module, rest
        name = opts.module.rsplit(".", 1)[-1]
    else:
        target, args = rest[0], rest[1:]
        name = os.path.splitext(os.path.basename(target))[0] or "script"
        if not os.path.isfile(target):
            print(f"memlens record: {target}: no such file", file=sys.stderr)
            return 2
    output = opts.output or f"memlens-{name}.pickle"
    rec = record(output, max_entries=opts.max_entries, stacks=opts.stacks, on_oom=not opts.no_oom)
    try:
        rec.__enter__()
    except MemlensError as e:  # torch or CUDA missing: the script does not run
        print(str(e), file=sys.stderr)
        return 2

    # As `python SCRIPT ARGS` / `python -m MODULE ARGS` would see it.
    sys.argv = [target] + args
    sys.path[0] = os.getcwd() if opts.module is not None else os.path.dirname(os.path.abspath(target))
    code = 0
    exc_info: tuple[Any, Any, Any] = (None, None, None)
    # What the script left alive stays alive until the snapshot is taken, as at the end of
    # `python SCRIPT`: its globals (returned by runpy), or the frames of its SystemExit.
    keep: Any = None
    try:
        try:
            if opts.module is not None:
                keep = runpy.run_module(opts.module, run_name="__main__", alter_sys=True)
            else:
                keep = runpy.run_path(target, run_name="__main__")
        except SystemExit as e:
            keep = e
            code = _exit_code(e)
    except BaseException:
        exc_info = sys.exc_info()
        raise
    finally:
        rec.__exit__(*exc_info)
        del keep
        print(f"memlens: snapshot written to {output}", file=sys.stderr)
        sys.stderr.flush()
    return code


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "record":
        return record_main(args[1:])
    if args and args[0] == "mcp":
        from .mcp_server import main as mcp_main

        return mcp_main(args[1:])
    if args and args[0] == "fleet":
        from ._fleet_cli import main as fleet_main

        return fleet_main(args[1:])
    try:
        binary = find_memlens_bin()
    except MemlensError as e:
        print(str(e), file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix" and argv is None:
        os.execv(binary, [binary] + args)
    return subprocess.run([binary, *args], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
