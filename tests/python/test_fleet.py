"""memlens.fleet on real processes: a ``dask scheduler`` and two ``dask worker`` processes
(started here, killed on teardown) run the scans, and every dataset is compared, part by part,
with the one ``memlens batch --format parquet`` writes in one process for the same files.

Tasks that die are made by wrapper scripts given as the binary: one SIGKILLs itself the first
time it runs, one kills its worker process the first time, one always SIGKILLs itself on a
file named ``*poisoned*.pickle``. ``python -m memlens fleet scan`` is run against the cluster
and on its own local cluster; :func:`memlens.fleet.tables` and :class:`memlens.fleet.ArrowMapper`
are checked against the same one-process dataset, the mapper under Ray Data for real.

dask.distributed, pyarrow, duckdb and ray are prerequisites (skipped outside CI when missing,
required under CI: scripts/test installs them), as are ``../shared/samples/real`` for the scan
of real snapshots.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import memlens
import pytest
from conftest import ROOT, SAMPLES, require, subprocess_env
from memlens import fleet

RANKS = SAMPLES / "ranks"
REAL = ROOT.parent / "shared" / "samples" / "real"
# Small real snapshots of ../shared/samples/real (SOURCES.md): device 1 only, no history; a
# state-only dict; a tiny traced one; a PyTorch 2.0-era OOM dump; a bare list of segments.
REAL_PICKS = [
    "Maphsge4__select_n__dec166a__snapshot.pickle",
    "jogregoire__How-Diffusion-Models-Work__my_snapshot.pickle",
    "shreyansh26__MLSys-Experiments__model_memory_usage_profile_grad.pkl",
    "drisspg__transformer_nuggets__test_data_mini_snapshot.pickle",
    "Yiyi-philosophy__LLM-inference__oom_snapshot.pickle",
    "Muduard__LayoutEditing__memory_snapshot.pkl",
]


def _importable(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


@pytest.fixture(scope="module")
def deps() -> None:
    require(_importable("distributed", "pyarrow", "duckdb"), "dask.distributed, pyarrow and duckdb are not installed (pip install 'dask[distributed]' pyarrow duckdb)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Ends each process started here and what it started (its own session), by its group."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


@pytest.fixture(scope="module")
def scheduler(deps: None, memlens_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a ``dask scheduler`` on 127.0.0.1 with two ``dask worker --nthreads 1``
    processes (each under its nanny, which restarts it when it dies)."""
    import distributed

    logs = tmp_path_factory.mktemp("dask")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = subprocess_env(MEMLENS_BIN=memlens_bin)
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        with open(logs / f"{name}.log", "wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "dask", *args], env=env, cwd=str(ROOT), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            ))

    try:
        start("scheduler", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard")
        for i in range(2):
            start(f"worker{i}", "worker", address, "--nthreads", "1", "--no-dashboard",
                  "--local-directory", str(logs / f"w{i}"), "--name", f"w{i}")
        with distributed.Client(address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        _stop(procs)


# ---------------------------------------------------------------------------------------------
# Datasets, part by part.


def _parts(directory: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    return {
        str(p.relative_to(directory)): pq.read_table(p)
        for p in sorted(directory.rglob("*.parquet"))
        if not p.name.startswith(".")
    }


def _assert_same(got: Path, want: Path, *, but: Sequence[str] = ()) -> dict[str, Any]:
    """``got`` has exactly ``want``'s parts (the same paths), each with equal rows and schema,
    except the parts of the files in ``but``; returns got's parts."""
    a, b = _parts(got), _parts(want)
    assert sorted(a) == sorted(b)
    assert a, "an empty dataset"
    skipped = {fleet.part_path(f, t, "run,rank") for f in but for t in fleet.TABLES}
    for rel in a:
        if rel in skipped:
            continue
        assert a[rel].schema == b[rel].schema, rel
        assert a[rel].equals(b[rel]), rel
    # And the same rows as a query engine reads the two (sorted).
    import duckdb

    for table in fleet.TABLES:
        rows = []
        for d in (got, want):
            sql = f"SELECT * FROM read_parquet('{d}/table={table}/**/*.parquet', hive_partitioning = true)"
            if but:
                sql += " WHERE file NOT IN ({})".format(", ".join(f"'{f}'" for f in but))
            rows.append(sorted(duckdb.sql(sql).fetchall(), key=repr))
        assert rows[0] == rows[1], table
    return a


def _batch(memlens_bin: str, files: Sequence[str], out: Path, cwd: Path = ROOT) -> int:
    """The one-process dataset of ``files``."""
    p = subprocess.run(
        [memlens_bin, "batch", "--format", "parquet", "-o", str(out), "--partition-by", "run,rank", *files],
        cwd=str(cwd), stdin=subprocess.DEVNULL, capture_output=True, check=False,
    )
    assert p.returncode in (0, 2), p.stderr
    return p.returncode


def _wrapper(path: Path, memlens_bin: str, body: str) -> str:
    """A stand-in for the binary: ``body`` (sh) then the real binary; ``--list`` goes straight
    to the real one."""
    path.write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" --list "*) exec "{memlens_bin}" "$@";; esac\n'
        f"{body}\n"
        f'exec "{memlens_bin}" "$@"\n'
    )
    path.chmod(0o755)
    return str(path)


# ---------------------------------------------------------------------------------------------
# Where parts go, and the schemas fleet writes with.


def test_part_paths_are_memlens_own(deps: None, memlens_bin: str, tmp_path: Path) -> None:
    """fleet.part_path (used to check a shard's parts and to write those of a file whose task
    died) names exactly the parts memlens writes, for awkward names: ranks in each form the
    binary reads, none, a dot file, no extension, spaces and percent signs, non-ASCII, stems
    cut at 200 bytes (inside a %XX too), relative and ./ names, no parent directory."""
    names = [
        "run 1/rank3.pickle", "run 1/RANK_7.PICKLE", "run 1/snap_r12.pt.gz", "run 1/model-r3",
        "run 1/.hidden", "run 1/noext", "run 1/foo.", "run 1/a b&c%41.pickle",
        "run 1/rank99999999999_rank2.pickle", "run 1/x_r5_.json", "ünï/ünï_rank-4.json",
        "long/" + "x" * 230 + ".pickle", "long/" + "é" * 100 + ".pickle", "long/" + "ab" + "é" * 99 + ".pickle",
        "top_rank1.pickle",
    ]
    for n in names:
        (tmp_path / n).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / n).write_bytes(b"not a snapshot")
    named = names + ["./run 1/rank3.pickle", str(tmp_path / "run 1" / "noext")]
    for by in ("run,rank", "rank", None):
        out = tmp_path / f"ds-{by}"
        argv = [memlens_bin, "batch", "--format", "parquet", "-o", str(out), "--jobs", "1", *named]
        if by:
            argv[6:6] = ["--partition-by", by]
        p = subprocess.run(argv, cwd=str(tmp_path), capture_output=True, check=False)
        assert p.returncode == 2, p.stderr
        want = sorted(_parts(out))
        got = sorted({fleet.part_path(f, t, by) for f in named for t in fleet.TABLES})
        assert got == want, by
    # The rank column of the failed rows is the rank fleet reads from a name.
    import pyarrow.parquet as pq

    for f in named:
        row = pq.read_table(out / fleet.part_path(f, "files", None)).to_pylist()[0]
        assert row["file"] == f
        assert row["rank"] == fleet._rank_of(fleet._base_name(f)), f


def test_schemas_are_memlens_own(deps: None, memlens_bin: str) -> None:
    """The schemas fleet writes a dead file's parts with are read from parts the binary
    writes; the built-in ones (its fallback) are the same."""
    tpl = fleet._template(memlens_bin)
    assert tpl.source == "memlens"
    assert tpl.schema_version == 1
    assert tpl.memlens_version
    builtin = fleet._builtin_schemas()
    for t in fleet.TABLES:
        assert tpl.schemas[t] == builtin[t], t
    assert fleet._template("/nonexistent/memlens").source == "built-in"


# ---------------------------------------------------------------------------------------------
# Scans on the cluster.


def test_scan_of_a_rank_set_is_one_process_batch(
    scheduler: str, memlens_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """samples/ranks (4 files, relative names read from the caller's directory) in shards of 3:
    the dataset of one memlens batch process, part for part."""
    monkeypatch.chdir(ROOT)
    r = fleet.scan(["samples/ranks"], tmp_path / "ds", scheduler=scheduler, memlens=memlens_bin, shard_size=3)
    assert r.files == [f"samples/ranks/rank{i}.pickle" for i in range(4)]
    assert (r.shards, r.failed, r.died, r.retries, r.split) == (2, {}, [], 0, 0)
    assert r.ok and r.out == str(tmp_path / "ds")
    assert r.summary() == f"4 files in 2 shards -> {tmp_path / 'ds'}: 4 read, 0 unreadable, 0 retries"
    _batch(memlens_bin, ["samples/ranks"], tmp_path / "want")
    _assert_same(tmp_path / "ds", tmp_path / "want")


def test_scan_of_real_snapshots_and_an_unreadable_file(scheduler: str, memlens_bin: str, tmp_path: Path) -> None:
    """Real snapshots (../shared/samples/real) and a garbage file: the same dataset as one
    process, the garbage file a failed row with memlens's error."""
    require(all((REAL / n).is_file() for n in REAL_PICKS), f"no real snapshots in {REAL} (../shared)")
    bad = tmp_path / "junk" / "rank9.pickle"
    bad.parent.mkdir()
    bad.write_bytes(b"\x80\x04\x95garbage")
    files = [str(REAL / n) for n in REAL_PICKS] + [str(bad)]
    r = fleet.scan(files, tmp_path / "ds", scheduler=scheduler, memlens=memlens_bin, shard_size=2)
    assert r.files == files and r.shards == 4
    assert list(r.failed) == [str(bad)] and r.died == [] and not r.ok
    assert str(bad) in r.failed[str(bad)]
    assert _batch(memlens_bin, files, tmp_path / "want") == 2
    parts = _assert_same(tmp_path / "ds", tmp_path / "want")
    row = parts[fleet.part_path(str(bad), "files")].to_pylist()
    assert len(row) == 1 and row[0]["ok"] is False and row[0]["rank"] == 9
    assert row[0]["error"] == r.failed[str(bad)]


def test_a_killed_task_is_retried(scheduler: str, memlens_bin: str, tmp_path: Path) -> None:
    """The binary SIGKILLed the first time it runs: dask runs that task again (one retry),
    and the dataset is still one process's."""
    flaky = _wrapper(tmp_path / "flaky.sh", memlens_bin, f'mkdir "{tmp_path}/died" 2>/dev/null && kill -9 $$')
    files = [str(RANKS / f"rank{i}.pickle") for i in range(4)]
    r = fleet.scan(files, tmp_path / "ds", scheduler=scheduler, memlens=flaky, shard_size=2, retries=2)
    assert (tmp_path / "died").is_dir()
    assert (r.failed, r.died, r.retries, r.split) == ({}, [], 1, 0)
    _batch(memlens_bin, files, tmp_path / "want")
    _assert_same(tmp_path / "ds", tmp_path / "want")


def test_a_task_whose_worker_dies_is_run_again(scheduler: str, memlens_bin: str, tmp_path: Path) -> None:
    """The binary kills its worker process (the task's) the first time: the scheduler runs
    the task on a worker again, counted as a retry; the dataset is still one process's."""
    body = f'if mkdir "{tmp_path}/killed" 2>/dev/null; then sleep 0.5; kill -9 $PPID; kill -9 $$; fi'
    killer = _wrapper(tmp_path / "killer.sh", memlens_bin, body)
    files = [str(RANKS / f"rank{i}.pickle") for i in range(4)]
    r = fleet.scan(files, tmp_path / "ds", scheduler=scheduler, memlens=killer, shard_size=2)
    assert (tmp_path / "killed").is_dir()
    assert (r.failed, r.died, r.split) == ({}, [], 0)
    assert r.retries == 1
    _batch(memlens_bin, files, tmp_path / "want")
    _assert_same(tmp_path / "ds", tmp_path / "want")


def test_a_shard_that_always_dies_ends_as_failed_rows(scheduler: str, memlens_bin: str, tmp_path: Path) -> None:
    """A file the binary always dies on (SIGKILL), in a shard with a good file: the shard is
    retried, then split; the good file is read alone; the other, whose task keeps dying, has
    its parts anyway, where memlens puts them, with memlens's schemas: a files row with ok
    false saying how often it died, and an empty part in every other table. No file is
    missing."""
    run = tmp_path / "snaps" / "runA"
    run.mkdir(parents=True)
    shutil.copy(RANKS / "rank0.pickle", run / "rank0.pickle")
    shutil.copy(RANKS / "rank1.pickle", run / "poisoned_rank1.pickle")
    shutil.copy(RANKS / "rank2.pickle", run / "rank2.pickle")
    dies = _wrapper(
        tmp_path / "dies.sh", memlens_bin,
        'for a in "$@"; do case "$a" in *poisoned*.pickle) kill -9 $$;; esac; done',
    )
    files = [str(run / "rank0.pickle"), str(run / "poisoned_rank1.pickle"), str(run / "rank2.pickle")]
    poisoned = files[1]
    r = fleet.scan(files, tmp_path / "ds", scheduler=scheduler, memlens=dies, shard_size=2, retries=1)
    why = (
        "memlens fleet: the task reading this file died 4 times (2 in a shard of 2 files, 2 alone); "
        "the last time: memlens was killed by SIGKILL"
    )
    assert r.failed == {poisoned: why}
    assert r.died == [poisoned]
    # The shard of two: 1 retry; then the poisoned file alone: 1 retry.
    assert (r.shards, r.retries, r.split) == (2, 2, 1)
    assert "1 of them because memlens kept dying on it" in r.summary()
    assert _batch(memlens_bin, files, tmp_path / "want") == 0
    parts = _assert_same(tmp_path / "ds", tmp_path / "want", but=[poisoned])
    want = _parts(tmp_path / "want")
    for t in fleet.TABLES:
        rel = fleet.part_path(poisoned, t)
        assert parts[rel].schema == want[rel].schema, t
        if t != "files":
            assert parts[rel].num_rows == 0, t
    (row,) = parts[fleet.part_path(poisoned, "files")].to_pylist()
    real = want[fleet.part_path(poisoned, "files")].to_pylist()[0]
    assert row["file"] == poisoned and row["ok"] is False and row["error"] == why
    assert (row["rank"], row["schema_version"], row["memlens_version"]) == (1, real["schema_version"], real["memlens_version"])
    assert row["sha256"] is None and row["device"] is None and row["peak_bytes"] is None
    assert row["warning_codes"] == []
    # Every file has its files row.
    import duckdb

    got = duckdb.sql(
        f"SELECT file, ok, run, rank FROM read_parquet('{tmp_path}/ds/table=files/**/*.parquet', "
        "hive_partitioning = true) ORDER BY file"
    ).fetchall()
    assert got == sorted([(files[0], True, "runA", 0), (poisoned, False, "runA", 1), (files[2], True, "runA", 2)])


# ---------------------------------------------------------------------------------------------
# python -m memlens fleet scan.


def _fleet(args: list[str], memlens_bin: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlens", "fleet", *args], env=subprocess_env(MEMLENS_BIN=memlens_bin),
        cwd=str(ROOT), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, check=False,
    )


def test_fleet_scan_command(scheduler: str, memlens_bin: str, tmp_path: Path) -> None:
    """On the cluster: exit 0 and one summary line; with an unreadable file, exit 2 and its
    line first (as batch prints it); usage errors are one line and exit 2."""
    p = _fleet(["scan", "samples/ranks", "-o", str(tmp_path / "ds"), "--scheduler", scheduler, "--shard-size", "3"], memlens_bin)
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines()[-1] == f"memlens fleet: 4 files in 2 shards -> {tmp_path / 'ds'}: 4 read, 0 unreadable, 0 retries"
    _batch(memlens_bin, ["samples/ranks"], tmp_path / "want")
    _assert_same(tmp_path / "ds", tmp_path / "want")

    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"")
    p = _fleet(["scan", "samples/ranks/rank0.pickle", str(bad), "-o", str(tmp_path / "ds2"), "--scheduler", scheduler], memlens_bin)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    assert lines[-1] == f"memlens fleet: 2 files in 1 shard -> {tmp_path / 'ds2'}: 1 read, 1 unreadable, 0 retries"
    assert lines[-2].startswith("memlens: ") and str(bad) in lines[-2]

    # fleet report: the dataset reported as batch reports the files it came from.
    for fmt in ("table", "json", "jsonl"):
        want = subprocess.run(
            [memlens_bin, "batch", "samples/ranks", "--format", fmt], cwd=str(ROOT), capture_output=True, text=True, check=False
        )
        p = _fleet(["report", str(tmp_path / "ds"), "--format", fmt], memlens_bin)
        assert (p.returncode, p.stdout) == (0, want.stdout), (fmt, p.stderr)
        assert "Across 4 ranks: 1 rank stands out" in want.stdout or fmt != "table"
    got = fleet.report(tmp_path / "ds", memlens=memlens_bin)
    assert [o["rank"] for o in got["cross_rank"]["outliers"]] == [2]
    assert got["cross_rank"]["steps"]["steps"] == ["ProfilerStep#1", "ProfilerStep#2"]
    p = _fleet(["report", str(tmp_path / "ds2"), "--format", "json"], memlens_bin)
    assert p.returncode == 2
    rows = {r["file"]: r for r in json.loads(p.stdout)["files"]}
    assert rows[str(bad)]["ok"] is False and rows["samples/ranks/rank0.pickle"]["ok"] is True

    for args, says in (
        (["scan", "samples/ranks"], "the following arguments are required: -o/--output"),
        (["scan", "samples/ranks", "-o", str(tmp_path / "x"), "--shard-size", "0"], "--shard-size: must be at least 1"),
        (["scan", "samples/ranks", "-o", str(tmp_path / "x"), "--partition-by", "job"], "'job' is neither run nor rank"),
        (["scan", "x", "-o", str(tmp_path / "x"), "--scheduler", scheduler, "--workers", "2"], "--workers sizes the local cluster"),
        ([], "a command is required"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["report"], "the following arguments are required: OUT"),
        (["report", str(tmp_path / "nothing")], "not a directory"),
        (["report", "samples/ranks"], "not a memlens dataset"),
    ):
        p = _fleet(args, memlens_bin)
        assert p.returncode == 2, (args, p.stderr)
        assert len(p.stderr.splitlines()) == 1 and says in p.stderr, (args, p.stderr)
        assert p.stdout == ""
    p = _fleet(["scan", "--help"], memlens_bin)
    assert p.returncode == 0 and "--scheduler ADDRESS" in p.stdout and "exit status" in p.stdout


def test_fleet_scan_on_a_local_cluster(deps: None, memlens_bin: str, tmp_path: Path) -> None:
    """Without --scheduler: a LocalCluster of worker processes for the scan."""
    p = _fleet(["scan", "samples/ranks", "-o", str(tmp_path / "ds"), "--workers", "1", "--shard-size", "1"], memlens_bin)
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines()[-1] == f"memlens fleet: 4 files in 4 shards -> {tmp_path / 'ds'}: 4 read, 0 unreadable, 0 retries"
    _batch(memlens_bin, ["samples/ranks"], tmp_path / "want")
    _assert_same(tmp_path / "ds", tmp_path / "want")


# ---------------------------------------------------------------------------------------------
# Arrow tables, Ray Data and Spark.


def _sorted_rows(table: Any) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=repr)


def test_tables_are_the_dataset(deps: None, memlens_bin: str, tmp_path: Path) -> None:
    """tables(): the five tables of a batch of paths are the rows of the one-process dataset;
    partition_by adds the keys a table lacks."""
    import pyarrow as pa

    bad = tmp_path / "r" / "rank5.pickle"
    bad.parent.mkdir()
    bad.write_bytes(b"nope")
    files = [str(RANKS / "rank0.pickle"), str(RANKS / "rank2.pickle"), str(bad)]
    got = fleet.tables(files, memlens=memlens_bin)
    assert sorted(got) == sorted(fleet.TABLES)
    _batch(memlens_bin, files, tmp_path / "want")
    want = _parts(tmp_path / "want")
    for t in fleet.TABLES:
        mine = pa.concat_tables([v for k, v in want.items() if k.startswith(f"table={t}/")])
        assert got[t].schema == mine.schema, t
        assert _sorted_rows(got[t]) == _sorted_rows(mine), t
    assert [r["ok"] for r in got["files"].to_pylist() if r["file"] == str(bad)] == [False]

    parted = fleet.tables(files, memlens=memlens_bin, partition_by="run,rank")
    assert parted["files"].column_names == got["files"].column_names + ["run"]
    assert parted["sites"].column_names == got["sites"].column_names + ["run", "rank"]
    assert sorted(set(parted["files"].column("run").to_pylist())) == ["r", "ranks"]
    empty = fleet.tables([], memlens=memlens_bin)
    assert all(empty[t].num_rows == 0 and empty[t].schema == got[t].schema for t in fleet.TABLES)
    # A binary that dies is an error, not an empty table.
    dies = _wrapper(tmp_path / "dies.sh", memlens_bin, "kill -9 $$")
    with pytest.raises(memlens.MemlensError, match="killed by SIGKILL"):
        fleet.tables(files, memlens=dies)


def test_arrow_mapper_under_ray_data(deps: None, memlens_bin: str, tmp_path: Path) -> None:
    """ArrowMapper as Ray Data's map_batches function on a local Ray: the sites of
    ray.data.from_items(paths) are tables()'s."""
    require(_importable("ray", "ray.data"), "ray[data] is not installed (pip install 'ray[data]')")
    import ray

    files = [str(RANKS / f"rank{i}.pickle") for i in range(4)]
    want = fleet.tables(files, memlens=memlens_bin)
    env = subprocess_env(MEMLENS_BIN=memlens_bin)
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": env["PYTHONPATH"], "MEMLENS_BIN": memlens_bin}},
    )
    try:
        ds = ray.data.from_items(files)
        for table in ("files", "sites"):
            mapped = ds.map_batches(fleet.ArrowMapper(table), batch_format="pyarrow", batch_size=2)
            rows = mapped.take_all()
            assert sorted(rows, key=repr) == _sorted_rows(want[table]), table
    finally:
        ray.shutdown()


def test_arrow_mapper_as_spark_map_in_arrow(deps: None, memlens_bin: str) -> None:
    """ArrowMapper.map_in_arrow as Spark calls it (an iterator of record batches in, one
    out; not under Spark here), and its schema as the DDL string mapInArrow takes."""
    import pyarrow as pa

    files = [str(RANKS / f"rank{i}.pickle") for i in range(4)]
    want = fleet.tables(files, memlens=memlens_bin, partition_by="run")
    mapper = fleet.ArrowMapper("files", memlens=memlens_bin, partition_by="run")
    batches = [pa.record_batch([pa.array(files[:3])], names=["path"]), pa.record_batch([pa.array(files[3:])], names=["path"])]
    out = list(mapper.map_in_arrow(iter(batches)))
    assert all(isinstance(b, pa.RecordBatch) and b.schema == mapper.schema() for b in out)
    assert _sorted_rows(pa.Table.from_batches(out)) == _sorted_rows(want["files"])
    ddl = mapper.spark_schema()
    assert ddl.startswith("`schema_version` BIGINT, `memlens_version` STRING, `file` STRING")
    assert "`ok` BOOLEAN" in ddl and "`fragmentation` DOUBLE" in ddl
    assert ddl.endswith("`warning_codes` ARRAY<STRING>, `path_step` BIGINT, `tp` BIGINT, `cp` BIGINT, `ep` BIGINT, `dp` BIGINT, `pp` BIGINT, `run` STRING")
    # Ray's numpy batches (a dict of columns), and a batch without a column of paths.
    assert mapper({"item": files[:1]}).num_rows == 1
    with pytest.raises(ValueError, match="no column"):
        mapper(pa.table({"a": [1], "b": [2]}))

