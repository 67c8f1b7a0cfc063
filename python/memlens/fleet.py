"""memlens on a cluster: ``memlens batch --format parquet`` as the map step of
``dask.distributed``, Ray Data or Spark.

- :func:`scan` writes the Parquet dataset of many snapshots (``memlens batch --format parquet
  -o OUT``'s layout, ``OUT/table=NAME[/KEY=VALUE...]/part-STEM-HASH.parquet``) with a
  ``dask.distributed`` cluster: the inputs are expanded by ``memlens batch --list``, cut into
  shards, and each shard is one ``memlens batch`` process on a worker writing its parts into
  ``OUT`` (a directory every worker sees). A task that dies is run again; a file whose task
  keeps dying still gets its ``files`` row (``ok`` false, saying so), so no file is ever
  missing from the dataset. ``python -m memlens fleet scan`` is its command line.
- :func:`tables` maps a batch of snapshot paths to Arrow tables (the binary writes them into a
  temporary directory, read back), and :class:`ArrowMapper` wraps it as the function of Ray
  Data's ``map_batches`` or Spark's ``mapInArrow``.
- :func:`report` is the report of such a dataset, read back by the binary (``memlens batch
  --from-dataset``): the rows, the imbalance and the cross-rank answer ``batch`` gives of the
  snapshots themselves; ``python -m memlens fleet report`` is its command line.
- :func:`views` creates DuckDB views over such a dataset that compute ``memlens batch``'s
  cross-rank answer (``cross_rank`` of ``--format json``) in SQL (``fleet_views.sql``, next
  to this module); :func:`views_sql` is their SQL text, for the ``duckdb`` command line.

Needs ``pip install 'memlens[fleet]'`` (``dask[distributed]`` and ``pyarrow``) where it runs,
on the workers too. See docs/scale.md, "On a cluster".
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib
import os
import posixpath
import re
import signal
import subprocess
import tempfile
import threading
import urllib.parse
import uuid
from typing import (
    Any,
    Iterable,
    Iterator,
    Sequence,
    Union,
)

from ._binary import find_memlens_bin
from ._errors import MemlensError

# pyarrow and dask.distributed are optional (the `fleet` extra) and untyped: their objects are
# `Any` here.
ArrowTable = Any  # pyarrow.Table
ArrowBatch = Any  # pyarrow.RecordBatch
ArrowSchema = Any  # pyarrow.Schema
DaskClient = Any  # distributed.Client

__all__ = [
    "TABLES", "ArrowMapper", "ScanResult", "list_files", "report", "report_argv", "scan", "tables", "views",
    "views_sql",
]

StrPath = Union[str, "os.PathLike[str]"]

# The tables of a dataset, in the order memlens writes them (src/compose/dataset.rs).
TABLES = ("files", "sites", "timeline", "ooms", "leaks", "steps")

# The value Hive tools read as null (src/cli/dataset.rs).
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# The columns of each table as src/compose/dataset.rs declares them: the schemas of the rows
# fleet writes itself only when the binary cannot write a part to read them from.
# i: int64, f: double, b: bool, s: string, l: list of strings.
_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "files": (
        ("schema_version", "i"), ("memlens_version", "s"), ("file", "s"), ("sha256", "s"),
        ("rank", "i"), ("device", "i"), ("ok", "b"), ("error", "s"), ("allocator_settings", "s"),
        ("peak_bytes", "i"), ("peak_event_index", "i"), ("peak_time_us", "i"),
        ("allocated_bytes", "i"), ("reserved_bytes", "i"), ("fragmentation", "f"), ("ooms", "i"),
        ("oom", "s"), ("top_site", "s"), ("top_site_bytes", "i"), ("warning_codes", "l"),
        ("path_step", "i"), ("tp", "i"), ("cp", "i"), ("ep", "i"), ("dp", "i"), ("pp", "i"),
    ),
    "sites": (
        ("file", "s"), ("device", "i"), ("moment", "s"), ("site", "s"), ("category", "s"),
        ("bytes", "i"), ("count", "i"),
    ),
    "timeline": (
        ("file", "s"), ("device", "i"), ("event_index", "i"), ("time_us", "i"),
        ("live_requested_bytes", "i"), ("allocated_bytes", "i"), ("reserved_bytes", "i"),
    ),
    "ooms": (
        ("file", "s"), ("device", "i"), ("event_index", "i"), ("time_us", "i"),
        ("requested_bytes", "i"), ("request_rounded_bytes", "i"), ("device_free_bytes", "i"),
        ("reserved_bytes", "i"), ("allocated_bytes", "i"), ("live_requested_bytes", "i"),
        ("largest_free_block_bytes", "i"), ("verdict", "s"),
    ),
    "leaks": (
        ("file", "s"), ("device", "i"), ("kind", "s"), ("site", "s"), ("bytes_per_step", "i"),
        ("steps", "i"), ("live_bytes_at_end", "i"), ("tensors_per_step", "f"),
        ("tensors_at_end", "i"), ("fit_r2", "f"),
    ),
    "steps": (
        ("file", "s"), ("device", "i"), ("step", "i"), ("name", "s"), ("found_by", "s"),
        ("first_event", "i"), ("last_event", "i"), ("live_at_start_bytes", "i"),
        ("live_at_end_bytes", "i"), ("peak_bytes", "i"), ("peak_event_index", "i"),
    ),
}
# `analyze::SCHEMA_VERSION`, for the same fallback.
_SCHEMA_VERSION = 1
# A part's stem is cut to this many bytes (src/cli/dataset.rs, STEM_MAX).
_STEM_MAX = 200

DEFAULT_SHARD_SIZE = 16


def _need(what: str) -> MemlensError:
    return MemlensError(
        f"memlens fleet: {what} is not installed: pip install 'memlens[fleet]' (dask[distributed] and pyarrow)"
    )


def _pyarrow() -> Any:
    """``pyarrow``, with its ``parquet`` and ``fs`` modules loaded."""
    try:
        pa = importlib.import_module("pyarrow")
        importlib.import_module("pyarrow.parquet")
        importlib.import_module("pyarrow.fs")
    except ImportError as e:
        raise _need("pyarrow") from e
    return pa


def _distributed() -> Any:
    try:
        return importlib.import_module("distributed")
    except ImportError as e:
        raise _need("dask.distributed") from e


# ---------------------------------------------------------------------------------------------
# Where memlens puts a file's parts: src/cli/dataset.rs (`Partitioning::dirs`, `part_path`),
# in Python, for the parts fleet checks and the ones it writes for a file whose task died.


def _lossy(s: str) -> str:
    """``to_string_lossy`` of a path as Rust has it: its bytes (surrogate-escaped ones too),
    invalid UTF-8 replaced."""
    return os.fsencode(s).decode("utf-8", "replace")


def _components(path: str) -> list[str]:
    """The components of ``path`` as Rust's ``Path::components`` gives them (less the root
    and ``.``, which never name a file)."""
    return [c for c in path.split("/") if c not in ("", ".")]


def _file_name(path: str) -> str | None:
    c = _components(path)
    return c[-1] if c and c[-1] != ".." else None


def _parent_name(path: str) -> str | None:
    c = _components(path)
    if not c:
        return None
    return c[-2] if len(c) >= 2 and c[-2] != ".." else None


def _file_stem(path: str) -> str | None:
    """Rust's ``Path::file_stem``: the name less its last ``.ext``; a name whose only dot
    leads it is its own stem."""
    name = _file_name(path)
    if name is None:
        return None
    before, dot, _after = name.rpartition(".")
    if not dot or before == "":
        return name
    return before


def _ascii_lower(s: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def _digits(s: str, start: int) -> tuple[int | None, int]:
    end = start
    while end < len(s) and s[end] in "0123456789":
        end += 1
    if end == start:
        return None, end
    value = int(s[start:end])
    return (value if value <= 0xFFFFFFFF else None), end


def _rank_of(name: str) -> int | None:
    """The rank in a file name, as ``memlens batch`` reads it (src/compose/batch.rs,
    ``rank_of``): ``rank[_-]?N``, else ``_rN.`` / ``_rN_`` / ``-rN``."""
    lower = _ascii_lower(name)
    start = 0
    while True:
        p = lower.find("rank", start)
        if p < 0:
            break
        i = p + 4
        if i < len(lower) and lower[i] in "_-":
            i += 1
        value, _ = _digits(lower, i)
        if value is not None:
            return value
        start = p + 4
    for i in range(len(lower) - 1):
        if lower[i + 1] != "r" or lower[i] not in "_-":
            continue
        value, end = _digits(lower, i + 2)
        if value is None:
            continue
        if lower[i] == "-" or (end < len(lower) and lower[end] in "._"):
            return value
    return None


def _escape(value: str) -> str:
    """Percent-encodes what a Hive path value cannot hold, byte by byte of its UTF-8."""
    out = []
    for b in value.encode("utf-8", "surrogatepass"):
        c = chr(b)
        if (c.isascii() and c.isalnum()) or c in "._-":
            out.append(c)
        else:
            out.append(f"%{b:02X}")
    return "".join(out) or NULL_PARTITION


def _partition_keys(partition_by: str | None) -> list[str]:
    keys = [k.strip() for k in (partition_by or "").split(",") if k.strip()]
    for k in keys:
        if k not in ("run", "rank"):
            raise MemlensError(
                f"memlens fleet: --partition-by: {k!r} is neither run nor rank (the keys fleet partitions by)"
            )
    return keys


def _partition_dirs(file: str, keys: Sequence[str]) -> list[str]:
    dirs = []
    for k in keys:
        value: str | None = None
        if k == "rank":
            name = _file_name(file)
            rank = _rank_of(_lossy(name)) if name is not None else None
            value = None if rank is None else str(rank)
        elif k == "run":
            parent = _parent_name(file)
            value = None if parent is None else _lossy(parent)
        dirs.append(f"{k}={NULL_PARTITION if value is None else _escape(value)}")
    return dirs


def _shortened(stem: str) -> str:
    if len(stem) <= _STEM_MAX:
        return stem
    cut = stem[:_STEM_MAX]
    i = cut.rfind("%")
    if i >= 0 and i + 3 > _STEM_MAX:
        return cut[:i]
    return cut


def part_path(file: str, table: str, partition_by: str | None = "run,rank") -> str:
    """Where ``memlens batch --format parquet`` puts ``file``'s part of ``table``, relative to
    the dataset's directory (``table=NAME/KEY=VALUE.../part-STEM-HASH.parquet``); ``file`` is
    the path as named on memlens's command line."""
    stem = _file_stem(file)
    stem_s = _escape(_lossy(stem)) if stem is not None else "stdin"
    digest = hashlib.sha256(os.fsencode(file)).hexdigest()[:12]
    parts = ["table=" + table, *_partition_dirs(file, _partition_keys(partition_by))]
    parts.append(f"part-{_shortened(stem_s)}-{digest}.parquet")
    return "/".join(parts)


def _base_name(file: str) -> str:
    return file.replace("\\", "/").rsplit("/", 1)[-1]


# ---------------------------------------------------------------------------------------------
# The dataset's file system: a local directory (made absolute) or a URL pyarrow.fs opens.


def _is_url(s: str) -> bool:
    return "://" in s


def _filesystem(out: str) -> tuple[Any, str]:
    pa = _pyarrow()
    if _is_url(out):
        fs, root = pa.fs.FileSystem.from_uri(out)
        return fs, root.rstrip("/")
    return pa.fs.LocalFileSystem(), out.rstrip("/") or "/"


def _write_part(fs: Any, path: str, table: Any) -> None:
    """Writes ``table`` as the Parquet file ``path``: locally through a temporary file renamed
    into place, as memlens writes its parts (a reader never sees half a part)."""
    pa = _pyarrow()
    pq = pa.parquet
    if isinstance(fs, pa.fs.LocalFileSystem):
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".memlens-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                pq.write_table(table, f, compression="none", store_schema=False)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return
    fs.create_dir(posixpath.dirname(path), recursive=True)
    pq.write_table(table, path, filesystem=fs, compression="none", store_schema=False)


# ---------------------------------------------------------------------------------------------
# The schemas memlens writes, read from parts the binary writes for an empty placeholder file.


@dataclasses.dataclass(frozen=True)
class _Template:
    schemas: dict[str, Any]  # table name -> pyarrow.Schema
    schema_version: int | None
    memlens_version: str | None
    source: str  # "memlens" (read from the binary's parts) or "built-in"


def _builtin_schemas() -> dict[str, Any]:
    pa = _pyarrow()
    types = {
        "i": pa.int64(),
        "f": pa.float64(),
        "b": pa.bool_(),
        "s": pa.string(),
        "l": pa.list_(pa.field("element", pa.string(), nullable=False)),
    }
    return {t: pa.schema([pa.field(n, types[k]) for n, k in cols]) for t, cols in _COLUMNS.items()}


@functools.lru_cache(maxsize=8)
def _template(memlens: str | None) -> _Template:
    """The six schemas, and the versions a ``files`` row carries, from the parts the binary
    writes for an empty placeholder file (a file it cannot read: its failed row); the
    schemas of src/compose/dataset.rs when the binary writes none."""
    pq = _pyarrow().parquet
    try:
        binary = memlens or find_memlens_bin()
        with tempfile.TemporaryDirectory(prefix="memlens-template-") as tmp:
            placeholder = os.path.join(tmp, "placeholder.pickle")
            open(placeholder, "wb").close()
            out = os.path.join(tmp, "ds")
            subprocess.run(
                [binary, "batch", "--format", "parquet", "-o", out, "--jobs", "1", "--", placeholder],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                check=False, timeout=120,
            )
            schemas = {}
            row: dict[str, Any] = {}
            for t in TABLES:
                part = os.path.join(out, part_path(placeholder, t, None))
                table = pq.read_table(part)
                schemas[t] = table.schema
                if t == "files":
                    row = table.to_pylist()[0]
            return _Template(schemas, row.get("schema_version"), row.get("memlens_version"), "memlens")
    except (OSError, MemlensError, IndexError, subprocess.SubprocessError, ValueError):
        return _Template(_builtin_schemas(), _SCHEMA_VERSION, None, "built-in")


def _write_failed(file: str, error: str, job: _Job) -> None:
    """Writes ``file``'s parts as memlens writes those of a file it could not read: its
    ``files`` row with ``ok`` false and ``error``, and an empty part in every other table."""
    pa = _pyarrow()
    tpl = _template(job.memlens)
    fs, root = _filesystem(job.out)
    for t in TABLES:
        schema = tpl.schemas[t]
        rows: list[dict[str, Any]] = []
        if t == "files":
            row: dict[str, Any] = {name: None for name in schema.names}
            row.update(
                schema_version=tpl.schema_version,
                memlens_version=tpl.memlens_version,
                file=_lossy(file),
                rank=_rank_of(_base_name(_lossy(file))),
                ok=False,
                error=error,
                warning_codes=[],
            )
            rows.append(row)
        table = pa.Table.from_pylist(rows, schema=schema)
        _write_part(fs, root + "/" + part_path(file, t, job.partition_by), table)


# ---------------------------------------------------------------------------------------------
# The tasks.


@dataclasses.dataclass(frozen=True)
class _Job:
    """What every task of one scan is given."""

    out: str  # the dataset: an absolute path, or a URL
    memlens: str | None  # the binary; None: find_memlens_bin() where the task runs
    partition_by: str
    cwd: str  # where scan() was called: relative input names are read from there
    topic: str  # the dask event topic each attempt is counted on


class TaskDied(RuntimeError):
    """A task's memlens process did not end as ``memlens batch`` ends (exit 0 or 2 with every
    part written): it was killed by a signal, exited otherwise, or did not write a part."""


def _log_attempt(topic: str, key: str) -> None:
    """Counts this attempt of task ``key`` on the scheduler (scan() subscribes to ``topic``)."""
    try:
        importlib.import_module("distributed").get_worker().log_event(topic, {"key": key})
    except (ImportError, ValueError):  # not on a dask worker
        pass


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def _run_shard(files: list[str], job: _Job, key: str) -> dict[str, str]:
    """The map step: one ``memlens batch --format parquet --jobs 1 --force`` process writes
    the parts of every file of the shard into the dataset. Returns ``{file: error}`` for the
    files memlens could not read (their ``files`` rows say so); raises :class:`TaskDied`
    when the process died or a file's ``files`` part is missing, so that dask runs the task
    again."""
    _log_attempt(job.topic, key)
    binary = job.memlens or find_memlens_bin()
    argv = [binary, "batch", "--format", "parquet", "-o", job.out, "--force", "--jobs", "1"]
    if job.partition_by:
        argv += ["--partition-by", job.partition_by]
    argv += ["--", *files]
    cwd = job.cwd if os.path.isdir(job.cwd) else None
    try:
        p = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError as e:
        raise TaskDied(f"could not run memlens ({binary}): {e}") from e
    stderr = p.stderr.decode("utf-8", "replace").strip()
    last = stderr.splitlines()[-1] if stderr else ""
    if p.returncode < 0:
        raise TaskDied(f"memlens was killed by {_signal_name(-p.returncode)}")
    if p.returncode not in (0, 2):
        raise TaskDied(f"memlens exited {p.returncode}" + (": " + last if last else ""))
    return _read_back(files, job, p.returncode, last)


def _read_back(files: Sequence[str], job: _Job, returncode: int, last: str) -> dict[str, str]:
    """The errors of ``files``' rows in table ``files``; :class:`TaskDied` if one is missing."""
    pq = _pyarrow().parquet
    fs, root = _filesystem(job.out)
    failed: dict[str, str] = {}
    for f in files:
        path = root + "/" + part_path(f, "files", job.partition_by)
        try:
            table = pq.read_table(path, filesystem=fs, columns=["ok", "error"])
        except (OSError, ValueError) as e:
            raise TaskDied(
                f"memlens exited {returncode} but its files part for {f} is missing ({e})"
                + ("; it said: " + last if last else "")
            ) from e
        for ok, error in zip(table.column("ok").to_pylist(), table.column("error").to_pylist()):
            if not ok:
                failed[f] = error or "not read"
                break
    return failed


# ---------------------------------------------------------------------------------------------
# The driver.


@dataclasses.dataclass(frozen=True)
class ScanResult:
    """What :func:`scan` did.

    - ``out``: the dataset (an absolute path, or the URL as given);
    - ``files``: every input file, as ``memlens batch --list`` named it, in that order;
    - ``shards``: how many shards they were cut into (one task each);
    - ``failed``: ``{file: error}`` for every file whose ``files`` row has ``ok`` false:
      those memlens could not read, and those in ``died``;
    - ``died``: the files whose task kept dying even alone (their rows were written by
      fleet, with the error saying how often it died), in input order;
    - ``retries``: how many times a task was run again (dask's ``retries=``, and a task whose
      worker died), over all tasks;
    - ``split``: the shards that still failed after their retries and were run again file
      by file.
    """

    out: str
    files: list[str]
    shards: int
    failed: dict[str, str]
    died: list[str]
    retries: int
    split: int

    @property
    def ok(self) -> bool:
        """Every file was read."""
        return not self.failed

    def summary(self) -> str:
        """One line: ``N files in S shards -> OUT: R read, U unreadable (...), T retries``."""
        read = len(self.files) - len(self.failed)
        text = (
            f"{_count(len(self.files), 'file')} in {_count(self.shards, 'shard')} -> {self.out}: "
            f"{read} read, {len(self.failed)} unreadable"
        )
        if self.died:
            text += f" ({len(self.died)} of them because memlens kept dying on {'it' if len(self.died) == 1 else 'them'})"
        text += ", " + _count(self.retries, "retry", "retries")
        if self.split:
            text += f", {_count(self.split, 'shard')} split"
        return text


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def list_files(paths: Sequence[StrPath], *, memlens: str | None = None) -> list[str]:
    """Every input file ``memlens batch`` would read for ``paths`` (directories and globs
    expanded, object-storage URL globs listed from the store): ``memlens batch --list``.
    Raises :class:`MemlensError` with memlens's line when nothing matches."""
    binary = memlens or find_memlens_bin()
    argv = [binary, "batch", "--list", "--", *[os.fspath(p) for p in paths]]
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError as e:
        raise MemlensError(f"memlens: could not run {binary}: {e}", argv=argv) from e
    stderr = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        lines = [line for line in stderr.splitlines() if line.strip()]
        raise MemlensError(
            lines[0] if lines else f"memlens: batch --list exited with status {p.returncode}",
            returncode=p.returncode, stderr=stderr, argv=argv,
        )
    seen = set()
    files = []
    for line in p.stdout.split(b"\n"):
        if not line:
            continue
        name = os.fsdecode(line)
        if name not in seen:
            seen.add(name)
            files.append(name)
    return files


def report_argv(
    dataset: StrPath,
    *,
    format: str = "json",
    topology: StrPath | None = None,
    sites: int | None = None,
    memlens: str | None = None,
) -> list[str]:
    """The command line of :func:`report`: ``memlens batch --from-dataset DATASET --format
    FORMAT [--topology FILE] [-n SITES]``."""
    argv = [memlens or find_memlens_bin(), "batch", "--from-dataset", "--format", format]
    if topology is not None:
        argv += ["--topology", os.fspath(topology)]
    if sites is not None:
        argv += ["-n", str(sites)]
    return [*argv, "--", os.fspath(dataset)]


def report(
    dataset: StrPath,
    *,
    topology: StrPath | None = None,
    sites: int | None = None,
    memlens: str | None = None,
) -> dict[str, Any]:
    """The report of a dataset :func:`scan` (or ``memlens batch --format parquet``) wrote, as
    ``memlens batch --format json`` gives it of the snapshots themselves: ``files`` (a row per
    file), ``imbalance`` and ``cross_rank`` (the ranks that stand out with their site, sites
    across ranks, the step × rank peak matrix, the first rank to run out of memory, settings
    that differ, ranks by parallel coordinates from the paths or ``topology``, a JSON file
    ``{"tp": 8, "pp": 4, "dp": 32}``). The binary reads the dataset's tables back
    (``--from-dataset``), so the rule is the one ``batch`` applies. ``dataset`` is a directory
    or, with object storage, a URL. Raises :class:`MemlensError` with memlens's line when the
    dataset cannot be read; files that failed in the scan are rows with ``ok`` false."""
    import json

    argv = report_argv(dataset, topology=topology, sites=sites, memlens=memlens)
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError as e:
        raise MemlensError(f"memlens: could not run {argv[0]}: {e}", argv=argv) from e
    stderr = p.stderr.decode("utf-8", "replace")
    if p.returncode not in (0, 2) or not p.stdout:
        lines = [line for line in stderr.splitlines() if line.strip()]
        raise MemlensError(
            lines[0] if lines else f"memlens: batch --from-dataset exited with status {p.returncode}",
            returncode=p.returncode, stderr=stderr, argv=argv,
        )
    out: dict[str, Any] = json.loads(p.stdout)
    return out


class _Attempts:
    """Counts the attempts of each task from the events its runs log."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def __call__(self, event: tuple[float, Any]) -> None:
        msg = event[1]
        if isinstance(msg, dict) and isinstance(msg.get("key"), str):
            with self._lock:
                self._counts[msg["key"]] = self._counts.get(msg["key"], 0) + 1

    def of(self, key: str) -> int:
        """The attempts of ``key`` (at least 1: an attempt's event may be lost when its
        worker dies at once)."""
        with self._lock:
            return max(1, self._counts.get(key, 0))

    def retries(self) -> int:
        with self._lock:
            return sum(max(0, n - 1) for n in self._counts.values())


@contextlib.contextmanager
def _client(scheduler: str | None, workers: int | None, tasks: int) -> Iterator[DaskClient]:
    distributed = _distributed()
    if scheduler is not None:
        with distributed.Client(scheduler, set_as_default=False) as client:
            yield client
        return
    n = workers or max(1, min(os.cpu_count() or 1, tasks))
    with distributed.LocalCluster(
        n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster, set_as_default=False) as client:
        yield client


def _wait(client: DaskClient, futures: dict[Any, Any]) -> tuple[dict[Any, Any], dict[Any, str]]:
    """Waits for ``futures`` (future -> what it is); the results of those that finished, and
    the error of those that did not, by what they are."""
    client.gather(list(futures), errors="skip")
    done: dict[Any, Any] = {}
    failed: dict[Any, str] = {}
    for fut, what in futures.items():
        if fut.status == "finished":
            done[what] = fut.result()
        elif fut.status == "error":
            exc = fut.exception()
            why = str(exc) if isinstance(exc, TaskDied) else f"{type(exc).__name__}: {exc}"
            failed[what] = " ".join(why.split())
        else:
            failed[what] = f"the task was {fut.status}"
    return done, failed


def scan(
    paths: StrPath | Sequence[StrPath],
    out: StrPath,
    *,
    scheduler: str | None = None,
    memlens: StrPath | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    partition_by: str | None = "run,rank",
    retries: int = 2,
    workers: int | None = None,
) -> ScanResult:
    """Writes the Parquet dataset of the snapshots ``paths`` name into ``out`` with
    ``dask.distributed``: the same dataset as one ``memlens batch --format parquet -o OUT
    --partition-by PARTITION_BY PATHS`` (same parts, same rows).

    - ``paths``: files, directories, globs, object-storage URLs (``s3://bucket/job/**/rank*.pickle``),
      expanded by ``memlens batch --list`` where ``scan`` runs. Relative names stay as named
      (they are the ``file`` column); the workers read them from this process's current
      directory, so on a cluster give absolute paths or URLs.
    - ``out``: the dataset, a directory every worker sees (made absolute here), or a URL
      (passed through).
    - ``scheduler``: the address of a running ``dask.distributed`` scheduler
      (``tcp://10.0.0.5:8786``); ``None`` starts a ``LocalCluster`` of ``workers`` processes
      (default: one per core, at most one per shard) for this scan.
    - ``memlens``: the binary the workers run (a path valid on them); ``None``: each finds its
      own (:func:`memlens.find_memlens_bin`).
    - ``shard_size``: files per task (each task is one ``memlens batch --jobs 1`` process).
    - ``partition_by``: ``"run,rank"``, ``"run"``, ``"rank"`` or ``None`` (no partitions).
    - ``retries``: how many times dask runs a failed task again (``client.submit(...,
      retries=)``: memlens killed by a signal, an exit status other than 0 or 2, a part not
      written); a task whose worker dies is re-run by the scheduler as well
      (``distributed.scheduler.allowed-failures``).

    A shard whose task still fails is run again file by file (with the same retries); a file
    whose task still fails gets its rows written here, as memlens writes those of a file it
    cannot read (``ok`` false; the error says the task died and how often), so every input
    file has its ``files`` row. Raises :class:`MemlensError` when nothing matches ``paths``,
    or when those rows cannot be written either.
    """
    if shard_size < 1:
        raise MemlensError("memlens fleet: the shard size must be at least 1")
    if retries < 0:
        raise MemlensError("memlens fleet: retries must be 0 or more")
    keys = _partition_keys(partition_by)
    _distributed()
    _pyarrow()
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    binary: str | None = None
    if memlens is not None:
        binary = os.fspath(memlens)
        if os.sep in binary and os.path.exists(binary):
            binary = os.path.abspath(binary)
    files = list_files(paths, memlens=binary)
    out_s = os.fspath(out)
    if not _is_url(out_s):
        out_s = os.path.abspath(out_s)
        try:
            os.makedirs(out_s, exist_ok=True)
        except OSError as e:
            raise MemlensError(f"memlens fleet: {out_s}: {e.strerror}") from e
    scan_id = uuid.uuid4().hex[:12]
    job = _Job(out_s, binary, ",".join(keys), os.getcwd(), "memlens-fleet-" + scan_id)
    shards = [files[i : i + shard_size] for i in range(0, len(files), shard_size)]
    with _client(scheduler, workers, len(shards)) as client:
        return _scan_on(client, job, files, shards, retries, scan_id)


def _scan_on(
    client: DaskClient, job: _Job, files: list[str], shards: list[list[str]], retries: int, scan_id: str
) -> ScanResult:
    attempts = _Attempts()
    client.subscribe_topic(job.topic, attempts)
    try:
        failed: dict[str, str] = {}
        futures = {}
        for i, shard in enumerate(shards):
            key = f"memlens-fleet-{scan_id}-shard-{i}"
            futures[client.submit(_run_shard, shard, job, key, key=key, retries=retries)] = (key, i)
        done, errored_shards = _wait(client, futures)
        for errors in done.values():
            failed.update(errors)
        # A shard that kept failing: each of its files alone, with the same retries.
        tries: dict[str, list[tuple[int, str]]] = {}
        last: dict[str, str] = {}
        died: list[str] = []
        singles = {}
        for (key, i), why in sorted(errored_shards.items(), key=lambda e: e[0][1]):
            shard = shards[i]
            for j, f in enumerate(shard):
                tries[f] = [(attempts.of(key), f"in a shard of {len(shard)} files" if len(shard) > 1 else "")]
                last[f] = why
                if len(shard) == 1:
                    died.append(f)
                    continue
                single = f"{key}-file-{j}"
                singles[client.submit(_run_shard, [f], job, single, key=single, retries=retries)] = (single, f)
        done, errored = _wait(client, singles)
        for errors in done.values():
            failed.update(errors)
        for (single, f), why in errored.items():
            tries[f].append((attempts.of(single), "alone"))
            last[f] = why
            died.append(f)
        died = [f for f in files if f in set(died)]
        for f in died:
            failed[f] = _died_error(tries[f], last[f])
        _write_died(client, job, died, failed, retries)
        split = sum(1 for (_, i) in errored_shards if len(shards[i]) > 1)
        return ScanResult(
            out=job.out,
            files=files,
            shards=len(shards),
            failed={f: failed[f] for f in files if f in failed},
            died=died,
            retries=attempts.retries(),
            split=split,
        )
    finally:
        with contextlib.suppress(Exception):
            client.unsubscribe_topic(job.topic)


def _died_error(tries: list[tuple[int, str]], last: str) -> str:
    total = sum(n for n, _ in tries)
    how = ", ".join(f"{n} {where}" for n, where in tries if where)
    where = f" ({how})" if how else ""
    return f"memlens fleet: the task reading this file died {_count(total, 'time')}{where}; the last time: {last}"


def _write_died(client: DaskClient, job: _Job, died: list[str], failed: dict[str, str], retries: int) -> None:
    """Writes the rows of the files whose task kept dying: on the workers (which see the
    dataset), else here; :class:`MemlensError` if neither can."""
    if not died:
        return
    futures = {}
    for f in died:
        futures[client.submit(_write_failed, f, failed[f], job, pure=False, retries=retries)] = f
    _, errored = _wait(client, futures)
    unwritten = []
    for f, why in errored.items():
        try:
            _write_failed(f, failed[f], job)
        except Exception as e:  # noqa: BLE001 (reported below with the workers' error)
            unwritten.append(f"{f} (on the workers: {why}; here: {e})")
    if unwritten:
        raise MemlensError(
            f"memlens fleet: could not write the failed rows of {_count(len(unwritten), 'file')} "
            f"whose task kept dying: {'; '.join(unwritten)}"
        )


# ---------------------------------------------------------------------------------------------
# A batch of paths to Arrow tables: the map function of Ray Data and Spark.


def tables(
    paths: Sequence[StrPath],
    *,
    memlens: StrPath | None = None,
    partition_by: str | None = None,
) -> dict[str, ArrowTable]:
    """The six tables (``files``, ``sites``, ``timeline``, ``ooms``, ``leaks``, ``steps``) of the
    snapshots ``paths`` name, as ``pyarrow.Table`` objects: ``memlens batch --format parquet``
    into a temporary directory, its parts read back (in the order of their paths) and the
    directory removed. Every table is there, empty when no file has such rows, with the
    schema memlens writes. A file memlens cannot read is a ``files`` row with ``ok`` false
    (as in the dataset); anything else memlens refuses (no such path, a usage error) raises
    :class:`MemlensError`.

    ``partition_by`` (``"run"``, ``"run,rank"``) adds each key as a string column to the tables
    that lack a column of that name (``files`` has ``rank`` already), from the partition
    directories, as a Hive reader would (null for ``__HIVE_DEFAULT_PARTITION__``).
    """
    pa = _pyarrow()
    pq = pa.parquet
    keys = _partition_keys(partition_by)
    names = [os.fspath(p) for p in paths]
    binary = os.fspath(memlens) if memlens is not None else find_memlens_bin()
    if not names:
        tpl = _template(binary)
        return {t: tpl.schemas[t].empty_table() for t in TABLES}
    with tempfile.TemporaryDirectory(prefix="memlens-tables-") as tmp:
        out = os.path.join(tmp, "ds")
        argv = [binary, "batch", "--format", "parquet", "-o", out, "--jobs", "1"]
        if keys:
            argv += ["--partition-by", ",".join(keys)]
        argv += ["--", *names]
        try:
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        except OSError as e:
            raise MemlensError(f"memlens: could not run {binary}: {e}", argv=argv) from e
        stderr = p.stderr.decode("utf-8", "replace")
        lines = [line for line in stderr.splitlines() if line.strip()]
        written = {t: _parts(os.path.join(out, "table=" + t)) for t in TABLES}
        if p.returncode not in (0, 2) or not written["files"]:
            why = lines[0] if lines else f"memlens: batch exited with status {p.returncode}"
            if p.returncode < 0:
                why = f"memlens: killed by {_signal_name(-p.returncode)}"
            raise MemlensError(why, returncode=p.returncode, stderr=stderr, argv=argv)
        result = {}
        for t in TABLES:
            pieces = []
            for rel in written[t]:
                table = pq.read_table(os.path.join(out, "table=" + t, rel))
                for k, v in _hive_values(rel, keys):
                    if k not in table.column_names:
                        table = table.append_column(pa.field(k, pa.string()), pa.array([v] * table.num_rows, pa.string()))
                pieces.append(table)
            result[t] = pa.concat_tables(pieces)
        return result


def _parts(directory: str) -> list[str]:
    """The Parquet files below ``directory``, relative to it, sorted."""
    found = []
    for d, _, names in os.walk(directory):
        for n in names:
            if n.endswith(".parquet") and not n.startswith((".", "_")):
                found.append(os.path.relpath(os.path.join(d, n), directory))
    return sorted(found)


def _hive_values(rel: str, keys: Sequence[str]) -> list[tuple[str, str | None]]:
    values = dict(d.split("=", 1) for d in rel.split(os.sep)[:-1] if "=" in d)
    out: list[tuple[str, str | None]] = []
    for k in keys:
        v = values.get(k, NULL_PARTITION)
        out.append((k, None if v == NULL_PARTITION else urllib.parse.unquote(v)))
    return out


class ArrowMapper:
    """Snapshot paths in, one of memlens's tables out, as the function of a data engine's
    map over batches of Arrow data: each batch is one :func:`tables` call (one ``memlens
    batch`` process) on the paths in its column ``column``.

    - Ray Data: ``ds.map_batches(ArrowMapper("files"), batch_format="pyarrow")`` (the mapper
      is called with a ``pyarrow.Table`` and returns one; a dict of columns, Ray's ``numpy``
      format, is accepted too);
    - Spark: ``df.mapInArrow(mapper.map_in_arrow, mapper.spark_schema())`` (an iterator of
      ``pyarrow.RecordBatch`` in, one out).

    ``column``: the column holding the paths; ``None`` takes ``path``, else ``item`` (what
    ``ray.data.from_items(paths)`` names it), else the batch's only column. ``memlens`` is the
    binary where the batches are mapped (``None``: :func:`memlens.find_memlens_bin` there);
    ``partition_by`` as for :func:`tables`.
    """

    def __init__(
        self,
        table: str = "files",
        *,
        column: str | None = None,
        memlens: StrPath | None = None,
        partition_by: str | None = None,
    ) -> None:
        if table not in TABLES:
            raise ValueError("table must be one of {}, not {!r}".format(", ".join(TABLES), table))
        self.table = table
        self.column = column
        self.memlens = None if memlens is None else os.fspath(memlens)
        self.partition_by = partition_by
        _partition_keys(partition_by)

    def _paths(self, batch: Any) -> list[str]:
        names = list(batch.keys()) if isinstance(batch, dict) else list(batch.schema.names)
        column = self.column
        if column is None:
            column = next((c for c in ("path", "item") if c in names), names[0] if len(names) == 1 else None)
        if column is None or column not in names:
            raise ValueError(
                "ArrowMapper: no column {!r} of paths in a batch with columns {}".format(column or "path", names)
            )
        values = batch[column]
        if hasattr(values, "to_pylist"):
            values = values.to_pylist()
        return [os.fspath(v) for v in values if v is not None]

    def __call__(self, batch: Any) -> ArrowTable:
        """One batch (a ``pyarrow.Table`` or ``RecordBatch``, or a dict of columns) in, the
        table ``self.table`` of its snapshots out."""
        return tables(self._paths(batch), memlens=self.memlens, partition_by=self.partition_by)[self.table]

    def map_in_arrow(self, batches: Iterable[ArrowBatch]) -> Iterator[ArrowBatch]:
        """Spark's ``mapInArrow`` function: the record batches of each input batch's table."""
        for batch in batches:
            yield from self(batch).to_batches()

    def schema(self) -> ArrowSchema:
        """The schema of the tables this mapper returns (memlens's, plus the partition keys
        the table lacks, as strings)."""
        pa = _pyarrow()
        schema = _template(self.memlens).schemas[self.table]
        for k in _partition_keys(self.partition_by):
            if k not in schema.names:
                schema = schema.append(pa.field(k, pa.string()))
        return schema

    def spark_schema(self) -> str:
        """:meth:`schema` as the DDL string ``mapInArrow`` takes as its schema."""
        return ", ".join(f"`{f.name}` {_spark_type(f.type)}" for f in self.schema())


def _spark_type(t: Any) -> str:
    pa = _pyarrow()
    if pa.types.is_list(t):
        return f"ARRAY<{_spark_type(t.value_type)}>"
    for test, name in (
        (pa.types.is_int64, "BIGINT"),
        (pa.types.is_float64, "DOUBLE"),
        (pa.types.is_boolean, "BOOLEAN"),
        (pa.types.is_string, "STRING"),
    ):
        if test(t):
            return name
    raise ValueError(f"no Spark type for {t}")


# ---------------------------------------------------------------------------------------------
# The cross-rank answer in SQL: fleet_views.sql's DuckDB views over a dataset.

# The SQL file next to this module (it ships in the wheel: maturin packs every file of the
# package directory that git does not ignore).
_VIEWS_SQL = "fleet_views.sql"
# Where the dataset's directory goes: only inside the file's SQL string literals.
_ROOT_PLACEHOLDER = "{root}"


def views_sql(root: StrPath) -> str:
    """The SQL of :func:`views` for the dataset at ``root``: ``CREATE OR REPLACE VIEW``
    statements to run in DuckDB (``duckdb my.db < views.sql``, or ``.read`` in its shell).

    ``root`` is the directory ``memlens batch --format parquet -o`` wrote (or its URL, for
    DuckDB's ``httpfs``); a local path is made absolute, so that views kept in a database file
    read the same files from any directory. It goes into SQL string literals with its single
    quotes doubled, so no path can end a literal; DuckDB reads ``*``, ``?`` and ``[`` in it
    as glob characters."""
    text = os.fspath(root)
    if not _is_url(text):
        text = os.path.abspath(text)
    text = text.rstrip("/") or "/"
    if "\x00" in text:
        raise ValueError("memlens.fleet.views: a NUL byte in the dataset path")
    with open(os.path.join(os.path.dirname(__file__), _VIEWS_SQL), encoding="utf-8") as f:
        sql = f.read()
    return sql.replace(_ROOT_PLACEHOLDER, text.replace("'", "''"))


def views(con: Any, root: StrPath) -> list[str]:
    """Creates (or replaces) in the DuckDB connection ``con`` the views of memlens's
    cross-rank answer over the dataset ``memlens batch --format parquet -o ROOT`` wrote, and
    returns their names in order of creation.

    The views (``fleet_views.sql`` documents each one):

    - ``memlens_files``, ``memlens_sites``, ``memlens_timeline``, ``memlens_ooms``,
      ``memlens_leaks``, ``memlens_steps``: the dataset's tables (without Hive partition
      columns);
    - ``memlens_rank_files`` (rank, file, peak_bytes, peak_device, path_step, tp, cp, ep, dp,
      pp): every rank file, its peak and where its path places it;
    - ``memlens_answer_step`` (at_step, path_steps): the step the answer is about when the
      paths name at least two (``cross_rank.at_step``), else null;
    - ``memlens_rank_peaks`` (rank, file, peak_bytes): each rank file of that step (of every
      file without one) and its peak;
    - ``memlens_rank_sites`` (rank, file, site, bytes): every rank's bytes at every site, 0
      where it has none; ``memlens_thresholds``: the rule's median and threshold for the peaks
      and each site (the rule itself: the macros ``memlens_median`` and ``memlens_threshold``);
    - ``memlens_peak_threshold`` (ranks, median_peak_bytes, peak_threshold_bytes, at_step):
      null threshold with fewer than 4 ranks;
    - ``memlens_outlier_ranks``: ``cross_rank.outliers`` (rank, file, peak_bytes,
      excess_bytes, over_median, site, site_bytes, site_median_bytes);
    - ``memlens_site_spread`` (site, median_bytes, min_bytes, max_bytes, outlier_ranks,
      excess_bytes) and ``memlens_site_outliers`` (site, rank, file, bytes):
      ``cross_rank.sites`` and ``sites_with_outliers``;
    - ``memlens_first_oom`` (rank, file, time_us, after_us, device, requested_bytes,
      verdict): ``cross_rank.first_oom``, its ``then`` and ``ranks_with_oom``;
    - ``memlens_settings_differ`` (key, value, ranks): ``cross_rank.settings_differ``;
    - ``memlens_rank_trace_steps`` (each rank file's trace steps, on its peak device),
      ``memlens_step_cells`` (a helper), ``memlens_step_peaks`` (rank, step, peak_bytes),
      ``memlens_step_columns`` (step, ranks, median_bytes, max_bytes, max_rank,
      outlier_ranks) and ``memlens_step_matrix`` (source, found_by, steps_found, steps,
      ranks): ``cross_rank.steps``, the step x rank peak matrix;
    - ``memlens_rank_coords`` (rank, file, axis, value, peak_bytes), ``memlens_parallel_groups``
      (axis, value, ranks, median_peak_bytes, min_peak_bytes, max_peak_bytes, max_rank),
      ``memlens_parallel_axes`` (axis, between_bytes, within_bytes), ``memlens_stage_outliers``
      (rank, stage, peak_bytes, stage_median_bytes, excess_bytes, stage_ranks) and
      ``memlens_parallel`` (source, ranks_placed, stages_judged): ``cross_rank.parallel`` as
      ``batch`` computes it without ``--topology`` (by the coordinates the paths name).

    They are views: each query reads the dataset's files as they are then. Needs the
    ``duckdb`` package (DuckDB 1.1 or later, for ``json_each``) and, for a URL, DuckDB's
    ``httpfs`` extension loaded in ``con``. docs/scale.md, "The cross-rank answer in SQL"."""
    sql = views_sql(root)
    con.execute(sql)
    return re.findall(r"^CREATE OR REPLACE VIEW (\w+)", sql, flags=re.MULTILINE)
