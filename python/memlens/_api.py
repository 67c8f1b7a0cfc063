"""``memlens.analyze`` and ``memlens.check``: the binary's JSON reports as Python values.

Nothing is computed here: every figure comes from the ``memlens`` binary, run with
``--format json``; this module builds its command line and reads what it prints.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import subprocess
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence, Union

from ._binary import find_memlens_bin
from ._errors import MemlensError
from ._options import OPTIONS, PATH_OPTIONS, TEXT_POSITIONALS

__all__ = [
    "BudgetResult",
    "CheckResult",
    "SiteLine",
    "analyze",
    "check",
    "command_line",
    "format_size",
]

StrPath = Union[str, "os.PathLike[str]"]
Scalar = Union[str, int, float, "os.PathLike[str]"]
OptionValue = Union[None, bool, Scalar, Sequence[Scalar]]

# Keywords that would change where or how the report is printed: analyze() always reads
# `--format json` from standard output.
_RESERVED = {"format", "output", "o", "force", "f"}

# What a keyword name may look like at all (a command's flags are in `_options.OPTIONS`).
_KEYWORD = re.compile(r"[a-z][a-z0-9_]*\Z")
# What a command name may look like (`memlens COMMAND`).
_COMMAND = re.compile(r"[a-z][a-z0-9-]*\Z")

# What `os.stat` says a path is, for the kinds that are not files a snapshot is read from.
_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _checked(what: str, text: str) -> str:
    """``text`` as one argument of the command line, or :class:`MemlensError` naming ``what``
    (the flag, or the positional argument) when no command line can carry it: a NUL byte
    (``execve`` would cut the argument there; ``subprocess`` refuses it), or characters the
    file system encoding cannot write."""
    nul = text.find("\0")
    if nul >= 0:
        raise MemlensError(
            f"memlens: {what} {text!r}: a NUL byte at index {nul}; no command-line argument can hold one"
        )
    try:
        os.fsencode(text)
    except UnicodeError as e:
        raise MemlensError(f"memlens: {what} {text!r}: not encodable on the command line ({e})") from e
    return text


def _text(flag: str, value: object) -> str:
    if isinstance(value, bool):
        raise TypeError(f"{flag}: True/False only as the whole value (a bare flag or none)")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"{flag}: {value!r} is not a number memlens reads")
        text = repr(value)
        if "e" in text or "E" in text:  # 1e-05: memlens reads plain decimals only
            text = (f"{value:.20f}").rstrip("0").rstrip(".")
        return text
    if isinstance(value, str):
        return _checked(flag, value)
    if isinstance(value, os.PathLike):
        path = os.fspath(value)
        if not isinstance(path, str):
            raise TypeError(f"{flag}: expected a str path, not {type(path).__name__}")
        return _checked(flag, path)
    raise TypeError(
        f"{flag}: expected a string, an int, a float or a path, not {type(value).__name__}"
    )


def _unexpected(caller: str, key: str, command: str) -> TypeError:
    known = OPTIONS.get(command)
    text = f"{caller}() got an unexpected keyword argument {key!r}"
    if known is not None:
        text += " (memlens {}'s options: {})".format(command, ", ".join(sorted(known)))
    return TypeError(text)


def _argv(caller: str, command: str, args: Sequence[StrPath], options: Mapping[str, OptionValue]) -> list[str]:
    if not isinstance(command, str) or not _COMMAND.match(command):
        raise ValueError(f"command must be a memlens command name such as 'summary', not {command!r}")
    known = OPTIONS.get(command)
    argv: list[str] = [command]
    for key, value in options.items():
        if key in _RESERVED:
            raise TypeError(
                f"{key}=: memlens.analyze always reads the JSON report from standard output; "
                "run the binary (memlens.find_memlens_bin()) for other formats"
            )
        # Only names of the command's flags: anything else ("output=/x", "-o", "x y") would
        # reach the command line as an argument of its own.
        if not _KEYWORD.match(key) or (known is not None and key not in known):
            raise _unexpected(caller, key, command)
        flag = ("-" + key) if len(key) == 1 else ("--" + key.replace("_", "-"))
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
            continue
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            text = _text(flag, item)
            # A value that starts with "-" is joined to its flag, or clap reads it as a flag.
            argv += [f"{flag}={text}"] if text.startswith("-") else [flag, text]
    argv += ["--format", "json", "--"]
    argv += [_text(f"argument {i}", a) for i, a in enumerate(args, 1)]
    return argv


def command_line(command: str, *args: StrPath, **options: OptionValue) -> list[str]:
    """The arguments ``analyze(command, *args, **options)`` passes to the binary (after its
    path): ``[command, *flags, "--format", "json", "--", *args]``.

    Keyword options become flags: ``max_peak="40GiB"`` is ``--max-peak 40GiB`` (underscores
    become dashes; a one-letter name is a short flag, ``n=5`` is ``-n 5``), ``True`` a bare
    flag (``allow_unmeasured=True`` is ``--allow-unmeasured``), ``False`` and ``None`` are
    left out, a list or tuple repeats the flag once per item, ints are bytes or counts as
    written, and ``os.PathLike`` values are paths; a value that starts with ``-`` is joined
    to its flag (``--baseline=-old.pickle``). ``format``, ``output`` and ``force`` are
    refused: the report is always JSON on standard output.

    A keyword that is not one of the command's flags (``memlens COMMAND --help``) raises
    :class:`TypeError`, as Python does for an unexpected keyword argument (for a command
    memlens does not have, only names such as ``max_peak`` pass: the binary refuses the
    command); an argument holding a NUL byte raises :class:`memlens.MemlensError` naming it.
    """
    return _argv("command_line", command, args, options)


def _kind(path: str) -> str | None:
    """What ``path`` is when it is neither a regular file, a directory nor missing: a FIFO,
    a device, a socket (``os.stat`` never blocks, even on a FIFO)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None  # missing, unreadable: the binary says so in its line
    for test, kind in _SPECIAL:
        if test(mode):
            return kind
    return None


def _refuse_streams(caller: str, command: str, args: Sequence[StrPath], options: Mapping[str, OptionValue]) -> None:
    """:class:`MemlensError` for a path argument that is a FIFO, a device or a socket.

    The API reads snapshot files: a FIFO would make the binary wait for a writer (its "waiting
    for a writer" line goes to the standard error this module captures, so the call would hang
    without a word), a device or a socket would be read as a stream. Missing paths and
    directories are left to the binary, whose line says so at once.
    """
    paths: list[tuple[str, object]] = []
    if command not in TEXT_POSITIONALS:
        paths += [("", a) for a in args]
    for key in PATH_OPTIONS:
        value = options.get(key)
        if value is not None and not isinstance(value, bool):
            items = value if isinstance(value, (list, tuple)) else [value]
            paths += [("--" + key.replace("_", "-") + " ", v) for v in items]
    for flag, item in paths:
        if not isinstance(item, (str, os.PathLike)):
            continue
        path = os.fspath(item)
        if not isinstance(path, str) or path == "-":
            continue
        kind = _kind(path)
        if kind is not None:
            raise MemlensError(
                f"memlens: {flag}{path}: is {kind}, not a regular file; {caller}() reads snapshot files, not streams"
            )


def _error_line(stderr: str) -> str:
    """The message of a run that failed: memlens's own error is its first line; clap's
    (``error: ...``) is every line up to its usage and help lines, joined, so that the line
    naming the argument (``<FILES>...``, ``[possible values: ...]``, a tip) is kept."""
    lines = [line.strip() for line in stderr.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return ""
    if not lines[0].startswith("error: "):
        return lines[0]
    kept = []
    for line in lines:
        if line.startswith(("Usage:", "For more information")):
            break
        kept.append(line)
    return " ".join(kept)


def _run_json(
    caller: str, command: str, args: Sequence[StrPath], options: Mapping[str, OptionValue]
) -> tuple[dict[str, Any], int]:
    tail = _argv(caller, command, args, options)
    _refuse_streams(caller, command, args, options)
    argv = [find_memlens_bin()] + tail
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError as e:
        raise MemlensError(f"memlens: could not run {argv[0]}: {e}", argv=argv) from e
    stderr = proc.stderr.decode("utf-8", "replace")
    if proc.returncode not in (0, 1):
        line = _error_line(stderr)
        if proc.returncode < 0:
            line = line or f"memlens: killed by signal {-proc.returncode}"
        raise MemlensError(
            line or f"memlens: exited with status {proc.returncode}",
            returncode=proc.returncode,
            stderr=stderr,
            argv=argv,
        )
    try:
        report = json.loads(proc.stdout)
    except ValueError as e:
        raise MemlensError(
            f"memlens: {command} printed no JSON report ({e})",
            returncode=proc.returncode,
            stderr=stderr,
            argv=argv,
        ) from e
    if not isinstance(report, dict):
        raise MemlensError(
            f"memlens: {command} printed JSON that is not an object",
            returncode=proc.returncode,
            stderr=stderr,
            argv=argv,
        )
    return report, proc.returncode


def analyze(command: str, *args: StrPath, **options: OptionValue) -> dict[str, Any]:
    """Run ``memlens COMMAND ARGS... --format json`` and return the report it prints.

    ``args`` are the command's positional arguments (snapshot paths; the message for
    ``explain``); keyword ``options`` are its flags, mapped as :func:`command_line` says::

        memlens.analyze("summary", "snap.pickle")
        memlens.analyze("top", "snap.pickle", at="peak", by="stack", n=10)
        memlens.analyze("leaks", "snap.pickle", warmup=2)
        memlens.analyze("diff", "base.pickle", "cand.pickle", fail_on_growth="5%")

    The result is exactly the JSON object the binary prints (the schemas are in
    ``docs/schemas/``). Exit status 1 (``leaks`` found something, a ``check`` budget broke,
    ``diff --fail-on-growth`` tripped) is a result, not an error: the report is returned.
    Exit status 2 (usage or input errors) raises :class:`memlens.MemlensError` whose text is
    the one line memlens printed (for an argument the command line parser refused, its whole
    message on one line, which names the argument).

    Nothing runs when an argument cannot be right: a keyword that is not one of the command's
    flags raises :class:`TypeError`; an argument holding a NUL byte, and a path that is a
    FIFO, a device or a socket (which the binary would wait on or read as a stream), raise
    :class:`memlens.MemlensError` naming it.
    """
    report, _ = _run_json("analyze", command, args, options)
    return report


@dataclass(frozen=True)
class SiteLine:
    """A site behind a budget (``top_sites`` in the JSON): ``bytes`` at ``site`` in
    ``count`` allocations (for ``baseline``: growth, may be negative)."""

    site: str
    bytes: int
    count: int


@dataclass(frozen=True)
class BudgetResult:
    """One budget on one file, from ``memlens check --format json`` (``files[].budgets[]``).

    ``status`` is ``"pass"``, ``"fail"`` or ``"unmeasured"``; ``message`` is memlens's line
    for a person; ``raw`` the whole JSON object (see ``docs/schemas/check.schema.json``).
    """

    file: str
    budget: str
    status: str
    limit: str
    message: str
    top_sites: tuple[SiteLine, ...]
    device: int | None
    actual_bytes: int | None
    limit_bytes: int | None
    over_bytes: int | None
    actual_ratio: float | None
    limit_ratio: float | None
    reason: str | None
    lower_bound: bool
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def _from_json(cls, file: str, b: Mapping[str, Any]) -> BudgetResult:
        return cls(
            file=file,
            budget=b["budget"],
            status=b["status"],
            limit=b["limit"],
            message=b["message"],
            top_sites=tuple(SiteLine(s["site"], s["bytes"], s["count"]) for s in b.get("top_sites", [])),
            device=b.get("device"),
            actual_bytes=b.get("actual_bytes"),
            limit_bytes=b.get("limit_bytes"),
            over_bytes=b.get("over_bytes"),
            actual_ratio=b.get("actual_ratio"),
            limit_ratio=b.get("limit_ratio"),
            reason=b.get("reason"),
            lower_bound=bool(b.get("lower_bound", False)),
            raw=dict(b),
        )


_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]


def format_size(n: int) -> str:
    """Bytes as memlens writes them: ``1536`` → ``1.50 KiB``, ``-2097152`` → ``-2.00 MiB``."""
    sign = "-" if n < 0 else ""
    v = float(abs(n))
    i = 0
    while v >= 1024 and i < len(_UNITS) - 1:
        v /= 1024
        i += 1
    return f"{sign}{abs(n)} B" if i == 0 else f"{sign}{v:.2f} {_UNITS[i]}"


class CheckResult:
    """The outcome of :func:`memlens.check`.

    - ``passed``: ``True`` when memlens exits 0: every budget measured and held (an
      unmeasured budget passes only with ``allow_unmeasured=True``).
    - ``failures``: the budgets that make it fail (status ``fail``, and ``unmeasured``
      unless allowed), each a :class:`BudgetResult` with its message and top sites.
    - ``unmeasured``: the budgets the file could not measure, allowed or not.
    - ``budgets``: every budget of every file.
    - ``report``: the JSON report exactly as ``memlens check --format json`` prints it.
    - ``returncode``: the binary's exit status (0 or 1).

    ``bool(result)`` is ``passed``; ``str(result)`` says which budget broke, by how much,
    and the sites behind it.
    """

    def __init__(self, report: dict[str, Any], returncode: int) -> None:
        self.report = report
        self.returncode = returncode
        self.allow_unmeasured = bool(report.get("allow_unmeasured", False))
        self.budgets: list[BudgetResult] = [
            BudgetResult._from_json(f["file"], b) for f in report.get("files", []) for b in f.get("budgets", [])
        ]
        self.unmeasured: list[BudgetResult] = [b for b in self.budgets if b.status == "unmeasured"]
        self.failures: list[BudgetResult] = [
            b
            for b in self.budgets
            if b.status == "fail" or (b.status == "unmeasured" and not self.allow_unmeasured)
        ]
        self.passed: bool = returncode == 0

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        verdict = "passed" if self.passed else "failed"
        return f"<CheckResult {verdict}: {len(self.budgets)} budget(s), {len(self.failures)} failing>"

    def __str__(self) -> str:
        files = self.report.get("files", [])
        if self.passed:
            held = len(self.budgets) - len(self.unmeasured)
            head = f"memlens check passed: {held} budget(s) held on {len(files)} file(s)"
            if self.unmeasured:
                head += f" ({len(self.unmeasured)} unmeasured, allowed)"
            lines = [head]
            lines += [f"  {b.budget} {b.status}: {b.message}" for b in self.budgets]
            return "\n".join(lines)
        broken = [b for b in self.failures if b.status == "fail"]
        unmeasured = [b for b in self.failures if b.status == "unmeasured"]
        parts = []
        if broken:
            parts.append(f"{len(broken)} budget(s) broken")
        if unmeasured:
            parts.append(f"{len(unmeasured)} unmeasured")
        lines = ["memlens check failed: {}".format(", ".join(parts or [f"exit status {self.returncode}"]))]
        for b in self.failures:
            where = b.file if len(files) > 1 else ""
            label = "{} {}".format(b.budget, "unmeasured" if b.status == "unmeasured" else "broken")
            lines.append("  {}{}: {}".format(label, f" ({where})" if where else "", b.message))
            if b.status == "unmeasured" and b.reason and b.reason not in b.message:
                lines.append(f"    {b.reason}")
            if b.top_sites:
                lines.append("    top sites:")
                for s in b.top_sites:
                    lines.append(f"      {format_size(s.bytes):>12} ×{s.count:<5d} {s.site}")
        for f in files:
            for note in f.get("notes", []):
                lines.append(f"  note: {note}")
        return "\n".join(lines)


def check(
    path: StrPath | Sequence[StrPath],
    max_peak: str | int | None = None,
    max_reserved: str | int | None = None,
    max_frag: str | float | None = None,
    max_leaked: str | int | None = None,
    baseline: StrPath | None = None,
    *,
    allow_unmeasured: bool = False,
    **options: OptionValue,
) -> CheckResult:
    """Check budgets on a snapshot with ``memlens check`` and return a :class:`CheckResult`.

    Sizes are the CLI's strings (``"40GiB"``, ``"81920MiB"``, ``"90%"`` of ``gpu=`` or
    ``capacity=``) or ints (bytes); ``max_frag`` is a percentage (``"30%"``) or a fraction
    (``0.3``). ``baseline`` is a snapshot whose peak the file's peak is compared with
    (``fail_on_growth="5%"``, ``min_abs="256MiB"``). Other keywords are ``check``'s flags,
    as in :func:`analyze`: ``at="end"``, ``gpu="h100"``, ``device=0``, ``sites=10``,
    ``ignore_lines=True``. ``path`` may be one path or a list of paths.

    A broken budget is a result (``passed`` is ``False``), not an exception; usage and input
    errors raise :class:`memlens.MemlensError`.
    """
    if isinstance(path, (str, os.PathLike)):
        paths: list[StrPath] = [path]
    else:
        paths = list(path)
    opts: dict[str, OptionValue] = {
        "max_peak": max_peak,
        "max_reserved": max_reserved,
        "max_frag": max_frag,
        "max_leaked": max_leaked,
        "baseline": baseline,
        "allow_unmeasured": allow_unmeasured,
    }
    opts.update(options)
    report, code = _run_json("check", "check", paths, opts)
    return CheckResult(report, code)
