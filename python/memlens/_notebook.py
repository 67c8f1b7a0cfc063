"""The notebook API: ``memlens.open(path)`` gives a :class:`Snapshot` whose methods mirror the
commands and return typed results that render as compact tables in Jupyter and turn into
pandas DataFrames (``pip install 'memlens[pandas]'``).

Each result holds exactly the command's ``--format json`` report (``.data``) and a table of
its main rows (``.rows``, ``.to_pandas()``, ``_repr_html_``). A handle keeps one ``memlens
session`` child process, which decodes each file once and answers every later command from
that model; the handle also keeps each answer (``top()`` twice is one request).
"""

from __future__ import annotations

import base64
import gzip
import html
import importlib
import json
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, TypeVar

from ._api import StrPath, _refuse_streams, command_line, format_size
from ._binary import find_memlens_bin
from ._errors import MemlensError

__all__ = [
    "CategoriesResult",
    "DiffResult",
    "FitResult",
    "LeaksResult",
    "OomResult",
    "Result",
    "Snapshot",
    "SummaryResult",
    "TimelineResult",
    "TopResult",
    "open",
]

# Rows shown by ``_repr_html_`` (``to_pandas`` has them all).
HTML_ROWS = 20


class Result:
    """One command's report: ``data`` is its JSON as the binary printed it; ``rows`` its main
    table, one dict per row with the keys ``columns`` names."""

    command: ClassVar[str] = ""
    columns: ClassVar[tuple[str, ...]] = ()

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The main table, one dict per row."""
        return [{c: r.get(c) for c in self.columns} for r in self._rows()]

    def _rows(self) -> Iterator[dict[str, Any]]:
        return iter(())

    def to_pandas(self) -> Any:
        """The main table as a pandas DataFrame (needs ``pip install 'memlens[pandas]'``)."""
        try:
            pd = importlib.import_module("pandas")
        except ImportError as e:
            raise ImportError("to_pandas needs pandas: pip install 'memlens[pandas]'") from e
        return pd.DataFrame(self.rows, columns=list(self.columns))

    def _repr_html_(self) -> str:
        rows = self.rows
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{_cell(c, r.get(c))}</td>" for c in self.columns) + "</tr>"
            for r in rows[:HTML_ROWS]
        )
        more = (
            f"<p>… {len(rows) - HTML_ROWS} more rows (<code>.to_pandas()</code> has them all)</p>"
            if len(rows) > HTML_ROWS
            else ""
        )
        title = f"<b>memlens {html.escape(self.command)}</b>: {len(rows)} rows"
        return f"<div>{title}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}</div>"

    def __repr__(self) -> str:
        return f"<memlens {self.command}: {len(self.rows)} rows>"


def _is_fraction(column: str) -> bool:
    """Whether ``column`` holds a fraction of a whole (``share``, ``*_share``), shown as a
    percentage."""
    return column == "share" or column.endswith("_share")


def format_share(value: float) -> str:
    """A fraction as the CLI writes it, a percentage with one decimal (``0.123`` → ``12.3%``);
    a non-zero fraction that would read ``0.0%`` reads ``<0.1%`` (``-<0.1%`` below zero)."""
    percent = value * 100
    shown = f"{percent:.1f}%"
    if value != 0 and shown in ("0.0%", "-0.0%"):
        return "<0.1%" if value > 0 else "-<0.1%"
    return shown


def _cell(column: str, value: Any) -> str:
    """One table cell: bytes in IEC units and fractions as percentages, each with its raw
    value in the title; other floats to three significant digits."""
    if value is None:
        return "–"
    if isinstance(value, int) and not isinstance(value, bool) and column.endswith("bytes"):
        return f'<span title="{value} bytes">{html.escape(format_size(value))}</span>'
    if isinstance(value, (int, float)) and not isinstance(value, bool) and _is_fraction(column):
        return f'<span title="{html.escape(repr(value))}">{html.escape(format_share(value))}</span>'
    if isinstance(value, float):
        return f"{value:.3g}"
    return html.escape(str(value))


class SummaryResult(Result):
    """``memlens summary``: one row per device."""

    command = "summary"
    columns = ("device", "reserved_bytes", "allocated_bytes", "requested_bytes", "rounding_waste_bytes",
               "inactive_bytes", "largest_inactive_block_bytes", "segments", "blocks", "trace_entries")

    def _rows(self) -> Iterator[dict[str, Any]]:
        return iter(self.data.get("devices", []))


class TopResult(Result):
    """``memlens top``: one row per (device, site) at the moment."""

    command = "top"
    columns = ("device", "site", "bytes", "count", "share")

    def _rows(self) -> Iterator[dict[str, Any]]:
        for d in self.data.get("devices", []):
            for s in d.get("sites", []):
                yield dict(s, device=d["device"])


class TimelineResult(Result):
    """``memlens timeline``: one row per (device, point)."""

    command = "timeline"
    columns = ("device", "event_index", "time_us", "live_requested_bytes", "allocated_bytes", "reserved_bytes")

    def _rows(self) -> Iterator[dict[str, Any]]:
        for d in self.data.get("devices", []):
            for p in d.get("points", []):
                yield dict(p, device=d["device"])


def judgement_words(j: dict[str, Any]) -> str:
    """A judgement (``{"state", "why", "record"}``) in the CLI's words: ``cannot judge: WHY;
    record RECORD``, or the reason itself when judged."""
    why = str(j.get("why", ""))
    if j.get("state") == "cannot_judge":
        record = j.get("record")
        return f"cannot judge: {why}" + (f"; record {record}" if record else "")
    return why


def _judgement_html(label: str, j: dict[str, Any]) -> str:
    state = html.escape(str(j.get("state")))
    return (f'<p><b>{html.escape(label)}</b>: <span data-state="{state}">'
            f"{html.escape(judgement_words(j))}</span></p>")


class CategoriesResult(Result):
    """``memlens categories``: one row per (device, category), and the :attr:`judgement` that
    says whether the memory could be told by kind (``cannot_judge`` when more than half of it
    matches no rule: no stack frames, or stacks no rule knows)."""

    command = "categories"
    columns = ("device", "category", "bytes", "count", "share", "confidence")

    def _rows(self) -> Iterator[dict[str, Any]]:
        for d in self.data.get("devices", []):
            for c in d.get("categories", []):
                yield dict(c, device=d["device"])

    @property
    def judgement(self) -> dict[str, Any]:
        """``{"state": "found" | "none" | "cannot_judge", "why": str, "record": str | None}``
        over every device (``data["devices"][i]["judgement"]`` per device)."""
        j: dict[str, Any] = self.data.get("judgement") or {}
        return j

    def _repr_html_(self) -> str:
        table = super()._repr_html_()
        if self.judgement.get("state") in ("none", "cannot_judge"):
            return table + _judgement_html("judgement", self.judgement)
        return table

    def __repr__(self) -> str:
        if self.judgement.get("state") in ("none", "cannot_judge"):
            return f"<memlens categories: {len(self.rows)} rows; {judgement_words(self.judgement)}>"
        return super().__repr__()


class LeaksResult(Result):
    """``memlens leaks``: one row per finding, and the :attr:`judgement` that says whether no
    row means "judged: nothing grows" or "cannot judge" (too few steps, no trace); :attr:`leak`
    and :attr:`retained_graph` judge each kind of growth apart."""

    command = "leaks"
    columns = ("device", "kind", "site", "bytes_per_step", "steps", "live_bytes_at_end", "fix")

    def _rows(self) -> Iterator[dict[str, Any]]:
        return iter(self.data.get("findings", []))

    @property
    def judgement(self) -> dict[str, Any]:
        """``{"state": "found" | "none" | "cannot_judge", "why": str, "record": str | None}``:
        what the analysis concluded over every device (``data["devices"][i]["judgement"]`` per
        device)."""
        j: dict[str, Any] = self.data.get("judgement") or {}
        return j

    @property
    def leak(self) -> dict[str, Any]:
        """Leaks alone (growth kept outside an autograd graph), judged as :attr:`judgement`."""
        j: dict[str, Any] = self.data.get("leak") or {}
        return j

    @property
    def retained_graph(self) -> dict[str, Any]:
        """Retained autograd graphs alone, judged as :attr:`judgement`."""
        j: dict[str, Any] = self.data.get("retained_graph") or {}
        return j

    def _judgement_words(self) -> str:
        return judgement_words(self.judgement)

    def _kinds_html(self) -> str:
        # Each kind on its own when growth was found, as the CLI does.
        if not self.leak or not self.retained_graph:
            return ""
        if self.judgement.get("state") != "found":
            return ""
        return _judgement_html("leak", self.leak) + _judgement_html("retained graph", self.retained_graph)

    def _repr_html_(self) -> str:
        if self.judgement.get("state") == "found" or not self.judgement:
            return super()._repr_html_() + self._kinds_html()
        state = html.escape(str(self.judgement.get("state")))
        return (f'<div><b>memlens leaks</b>: <span data-state="{state}">'
                f"{html.escape(self._judgement_words())}</span></div>") + self._kinds_html()

    def __repr__(self) -> str:
        if self.judgement.get("state") in ("none", "cannot_judge"):
            return f"<memlens leaks: {self._judgement_words()}>"
        return super().__repr__()


class OomResult(Result):
    """``memlens oom``: one row per OOM event."""

    command = "oom"
    columns = ("device", "event_index", "verdict", "requested_bytes", "device_free_bytes", "allocated_bytes",
               "reserved_unallocated_bytes", "headline")

    def _rows(self) -> Iterator[dict[str, Any]]:
        return iter(self.data.get("ooms", []))


class FitResult(Result):
    """``memlens fit``: one row per (device, fix), cheapest first; :attr:`capacity` says per
    device whether the moment fits (``cannot_judge`` without a known capacity)."""

    command = "fit"
    columns = ("device", "id", "action", "cost", "confidence", "saves_bytes", "peak_after_bytes")

    def _rows(self) -> Iterator[dict[str, Any]]:
        for d in self.data.get("devices", []):
            for f in d.get("fixes", []):
                yield dict(f, device=d["device"])

    @property
    def capacity(self) -> dict[int, dict[str, Any]]:
        """Per device: ``{"state": "found" (a shortage) | "none" (it fits) | "cannot_judge",
        "why": str, "record": str | None}``."""
        return {int(d["device"]): dict(d.get("capacity") or {}) for d in self.data.get("devices", [])}

    def _repr_html_(self) -> str:
        notes = "".join(_judgement_html(f"device {dev} capacity", j)
                        for dev, j in self.capacity.items() if j.get("state") == "cannot_judge")
        return super()._repr_html_() + notes


class DiffResult(Result):
    """``memlens diff``: one row per changed site."""

    command = "diff"
    columns = ("status", "site", "base_bytes", "cand_bytes", "delta_bytes", "base_count", "cand_count")

    def _rows(self) -> Iterator[dict[str, Any]]:
        return iter(self.data.get("sites", []))


_Handle = TypeVar("_Handle", bound="Snapshot")


class _Session:
    """One ``memlens session`` child: command lines in, one JSON answer per line out. Started
    on first use; ended by :meth:`close` (or when the handle is collected)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._next = 0
        self.decodes = 0

    def request(self, argv: list[str], opened: dict[str, str] | None = None) -> tuple[int, str, str | None]:
        """(exit status, what the command printed, its one-line error). ``opened`` maps a file
        named in ``argv`` to a path of a descriptor already open on it (``/proc/PID/fd/N``): the
        session reads that, not the name again (the MCP server's files)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                try:
                    self._proc = subprocess.Popen(
                        [str(find_memlens_bin()), "session"],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                        text=True,
                        encoding="utf-8",
                    )
                except OSError as e:
                    raise MemlensError(f"memlens: could not start the session: {e}") from e
            self._next += 1
            assert self._proc.stdin is not None and self._proc.stdout is not None
            try:
                line = json.dumps({"id": self._next, "argv": argv, "opened": opened or {}})
                self._proc.stdin.write(line + "\n")
                self._proc.stdin.flush()
                line = self._proc.stdout.readline()
            except OSError as e:
                raise MemlensError(f"memlens: the session ended: {e}") from e
            if not line:
                raise MemlensError(f"memlens: the session ended (exit {self._proc.wait()})")
            try:
                answer = json.loads(line)
            except ValueError as e:
                raise MemlensError(f"memlens: the session answered no JSON ({e})") from e
            self.decodes = int(answer.get("decodes", 0))
            return int(answer["exit"]), str(answer["stdout"]), answer.get("error")

    def close(self) -> None:
        """Ends the child (its models go with it)."""
        with self._lock:
            if self._proc is not None:
                if self._proc.stdin is not None:
                    self._proc.stdin.close()
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                if self._proc.stdout is not None:
                    self._proc.stdout.close()
                self._proc = None


class Snapshot:
    """A snapshot file opened for analysis. Methods mirror the commands (their keyword
    arguments are the commands' flags, as :func:`memlens.analyze` maps them) and return typed
    results. The handle's session decodes the file once; each distinct call's answer is kept.
    ``close()`` (or ``with memlens.open(...) as snap:``) ends the session."""

    def __init__(self, path: StrPath) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise MemlensError(f"memlens: {self.path}: not a regular file")
        self._cache: dict[tuple[Any, ...], Any] = {}
        self._session = _Session()

    def close(self) -> None:
        """Ends the handle's session (its decoded models); results already made stay."""
        self._session.close()

    def __enter__(self: _Handle) -> _Handle:  # noqa: PYI019 (Self is Python 3.11+; no typing_extensions)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._session.close()
        except (OSError, ValueError, AttributeError):
            pass  # at interpreter shutdown: the pipes or modules may be gone already

    @property
    def decodes(self) -> int:
        """Files the handle's session has decoded so far (each file once)."""
        return self._session.decodes

    def analyze(self, command: str, *paths: StrPath, **options: Any) -> dict[str, Any]:
        """``memlens.analyze(command, this file, *paths, **options)`` answered by the handle's
        session: the command's JSON report (exit 1 is a report; exit 2 raises
        :class:`memlens.MemlensError` with memlens's line)."""
        args = (self.path, *paths)
        argv = command_line(command, *args, **options)
        _refuse_streams("analyze", command, args, options)
        code, out, error = self._session.request(argv)
        if code not in (0, 1):
            raise MemlensError(error or f"memlens: {command} failed (exit {code})", returncode=code, argv=argv)
        report = json.loads(out)
        if not isinstance(report, dict):
            raise MemlensError(f"memlens: {command} printed JSON that is not an object")
        return report

    def _run(self, kind: Callable[[dict[str, Any]], Result], command: str, *paths: StrPath, **options: Any) -> Any:
        key = (command, tuple(str(p) for p in paths), tuple(sorted((k, repr(v)) for k, v in options.items())))
        if key not in self._cache:
            self._cache[key] = kind(self.analyze(command, *paths, **options))
        return self._cache[key]

    def summary(self) -> SummaryResult:
        """Per-device totals, pools, trace statistics, settings."""
        result: SummaryResult = self._run(SummaryResult, "summary")
        return result

    def top(self, at: str | None = None, by: str | None = None, **options: Any) -> TopResult:
        """What was live at the peak (or ``at``), by site (or ``by``)."""
        result: TopResult = self._run(TopResult, "top", **_given(at=at, by=by, **options))
        return result

    def timeline(self, points: int | None = None, **options: Any) -> TimelineResult:
        """Live, allocated and reserved bytes over the trace (``points=0``: every event)."""
        result: TimelineResult = self._run(TimelineResult, "timeline", **_given(points=points, **options))
        return result

    def categories(self, at: str | None = None, **options: Any) -> CategoriesResult:
        """Live bytes by kind at the peak (or ``at``)."""
        result: CategoriesResult = self._run(CategoriesResult, "categories", **_given(at=at, **options))
        return result

    def leaks(self, **options: Any) -> LeaksResult:
        """Memory that grows step after step."""
        result: LeaksResult = self._run(LeaksResult, "leaks", **options)
        return result

    def oom(self, **options: Any) -> OomResult:
        """Every OOM: its numbers, cause and fixes."""
        result: OomResult = self._run(OomResult, "oom", **options)
        return result

    def fit(self, at: str | None = None, **options: Any) -> FitResult:
        """What the memory is made of and the fixes that make it fit."""
        result: FitResult = self._run(FitResult, "fit", **_given(at=at, **options))
        return result

    def diff(self, other: Snapshot | StrPath, **options: Any) -> DiffResult:
        """This snapshot (the base) against ``other`` (the candidate)."""
        path = other.path if isinstance(other, Snapshot) else Path(other)
        result: DiffResult = self._run(DiffResult, "diff", path, **options)
        return result

    def report_html(self) -> str:
        """The self-contained page of ``memlens report`` (kept once made)."""
        key = ("report-html",)
        if key not in self._cache:
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "page.html")
                code, _, error = self._session.request(["report", "-o", out, "--", str(self.path)])
                if code != 0:
                    raise MemlensError(error or "memlens: report failed")
                self._cache[key] = Path(out).read_text("utf-8")
        page: str = self._cache[key]
        return page

    def _repr_html_(self) -> str:
        """The page inline, in an iframe sandboxed to its own script (no same-origin access),
        compressed: the iframe holds a loader and the page gzipped in base64 (``inline_page``),
        so each shown page adds to the notebook about an eighth of the page's size."""
        page = html.escape(inline_page(self.report_html()), quote=True)
        return (
            f'<iframe sandbox="allow-scripts" srcdoc="{page}" '
            'style="width:100%;height:720px;border:1px solid #ddd"></iframe>'
        )

    def __repr__(self) -> str:
        return f"<memlens.Snapshot {str(self.path)!r}>"


# The loader of an inline page: decodes the base64 in PAGE, gunzips it with the browser's
# DecompressionStream and writes the page over the loader's document (its scripts then run as
# the page's own). Nothing is fetched.
_LOADER = (
    '<!DOCTYPE html><meta charset="utf-8"><title>memlens</title>'
    '<script id="memlens-packed" type="application/gzip;base64">{packed}</script>'
    "<script>(async () => {{"
    'const b64 = document.getElementById("memlens-packed").textContent;'
    "const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));"
    'const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));'
    "const page = await new Response(stream).text();"
    "document.open(); document.write(page); document.close();"
    "}})();</script>"
)


def inline_page(page: str) -> str:
    """``page`` as a small self-unpacking document: the page gzipped (level 9) in base64 inside
    a loader that unpacks it in the browser (``DecompressionStream``) and writes it as its own
    document. A 1.9 MB page of a real snapshot becomes about 0.3 MB."""
    packed = base64.b64encode(gzip.compress(page.encode("utf-8"), compresslevel=9, mtime=0))
    return _LOADER.format(packed=packed.decode("ascii"))


def unpack_inline_page(document: str) -> str:
    """The page an ``inline_page`` document holds (the inverse, for tests and tools)."""
    start = document.index('type="application/gzip;base64">') + len('type="application/gzip;base64">')
    end = document.index("</script>", start)
    return gzip.decompress(base64.b64decode(document[start:end])).decode("utf-8")


def _given(**options: Any) -> dict[str, Any]:
    return {k: v for k, v in options.items() if v is not None}


def open(path: StrPath) -> Snapshot:
    """Opens a snapshot for analysis in a notebook: ``memlens.open("snap.pickle").top()``."""
    return Snapshot(path)
