#!/usr/bin/env python3
"""Scan a fleet of CUDA memory snapshots with memlens on Dask, then ask DuckDB two questions.

    python3 examples/fleet_scan.py SNAPSHOTS DATASET [--memlens PATH] [--workers N]
                                   [--shard-size K] [--scheduler threads|processes|distributed]
                                   [--top N] [--json]

SNAPSHOTS is a directory tree of snapshots laid out one directory per run (``RUN/rankR.pickle``,
Megatron's ``snapshot_R.pickle``, anything whose name carries the rank as ``memlens batch``
reads it). The map step is memlens itself: the files are cut into shards of ``--shard-size``
and each shard is one ``memlens batch --format parquet -o DATASET --partition-by run,rank``
process, run by Dask (a ``dask.bag`` over the shards; the local threaded scheduler by
default, ``processes`` for a process pool, ``distributed`` for a ``dask.distributed`` client
already configured by the caller). The shards write their Parquet parts into one dataset with
no merge step: each part is written atomically and named by its input file.

Then DuckDB reads the dataset and answers:

- the worst ranks: per run, each rank's highest peak (over its devices), its ratio to the
  run's median, and the site holding most at that peak; the ``--top`` worst overall;
- the sites that grew across runs: runs in name order, for each pair of consecutive runs the
  sites whose bytes at the peak (summed over a file's devices, the highest over the run's
  ranks, as ``memlens diff`` counts one file) grew, biggest growth first.

``--json`` prints both answers as one JSON object (what tests/it/fleet.rs checks); without it,
two small tables. Needs ``pip install dask duckdb`` and a memlens binary (``--memlens``, else
``$MEMLENS_BIN``, else ``memlens`` on PATH).

On a cluster where a task can die, ``python -m memlens fleet scan`` (``memlens.fleet``) writes
the same dataset with retries and a ``files`` row for every file (docs/scale.md, "On a
cluster"); the queries below read it unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

SNAPSHOT_SUFFIXES = (".pickle", ".pkl", ".pck", ".json", ".gz", ".zst", ".zstd")


def find_snapshots(root: Path) -> List[str]:
    """Every snapshot file under ``root``, sorted."""
    return sorted(
        str(p) for p in root.rglob("*") if p.is_file() and p.name.endswith(SNAPSHOT_SUFFIXES)
    )


def memlens_shard(shard: List[str], memlens: str, dataset: str) -> List[dict]:
    """The map step: one memlens process writes the parts of every file of ``shard``.

    Returns one record per shard: its files, memlens's exit code and stderr (exit 2 means some
    files could not be read; their ``files`` rows say why and the others are written).
    """
    cmd = [memlens, "batch", "--format", "parquet", "-o", dataset,
           "--partition-by", "run,rank", "--jobs", "1", "--force", *shard]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in (0, 2):
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd[:6]), p.returncode, p.stderr))
    return [{"files": len(shard), "exit": p.returncode, "stderr": p.stderr.strip()}]


def scan(snapshots: List[str], memlens: str, dataset: str, shard_size: int,
         workers: int, scheduler: str) -> List[dict]:
    """Runs memlens over ``snapshots`` as a Dask bag of shards."""
    import dask
    import dask.bag as db

    shards = [snapshots[i:i + shard_size] for i in range(0, len(snapshots), shard_size)]
    bag = db.from_sequence(shards, npartitions=max(1, len(shards)))
    records = bag.map(memlens_shard, memlens=memlens, dataset=dataset).flatten()
    if scheduler == "distributed":
        return records.compute()
    with dask.config.set(scheduler=scheduler, num_workers=workers):
        return records.compute()


def table(dataset: str, name: str) -> str:
    return ("read_parquet('%s/table=%s/**/*.parquet', hive_partitioning = true, "
            "union_by_name = true)" % (dataset, name))


WORST_RANKS = """
WITH per_rank AS (
    SELECT run, rank, any_value(file) AS file, max(peak_bytes) AS peak_bytes,
           arg_max(top_site, peak_bytes) AS top_site
    FROM {files} WHERE ok AND rank IS NOT NULL
    GROUP BY run, rank
), medians AS (
    SELECT run, median(peak_bytes) AS median_peak FROM per_rank GROUP BY run
)
SELECT p.run, p.rank, p.file, p.peak_bytes,
       round(p.peak_bytes / nullif(m.median_peak, 0), 3) AS over_median, p.top_site
FROM per_rank p JOIN medians m USING (run)
ORDER BY p.peak_bytes DESC, p.run, p.rank
LIMIT {top}
"""

GROWN_SITES = """
WITH per_file AS (
    SELECT run, file, site, sum(bytes) AS bytes FROM {sites} GROUP BY run, file, site
), per_run AS (
    SELECT run, site, max(bytes) AS bytes FROM per_file GROUP BY run, site
), runs AS (
    SELECT run, row_number() OVER (ORDER BY run) AS k FROM (SELECT DISTINCT run FROM {files})
), pairs AS (
    SELECT a.run AS from_run, b.run AS to_run FROM runs a JOIN runs b ON b.k = a.k + 1
), sites AS (SELECT DISTINCT site FROM per_run)
SELECT p.from_run, p.to_run, s.site,
       coalesce(x.bytes, 0) AS before_bytes, coalesce(y.bytes, 0) AS after_bytes,
       coalesce(y.bytes, 0) - coalesce(x.bytes, 0) AS growth_bytes
FROM pairs p CROSS JOIN sites s
LEFT JOIN per_run x ON x.run = p.from_run AND x.site = s.site
LEFT JOIN per_run y ON y.run = p.to_run AND y.site = s.site
WHERE coalesce(y.bytes, 0) > coalesce(x.bytes, 0)
ORDER BY growth_bytes DESC, p.from_run, s.site
"""


def query(dataset: str, top: int) -> dict:
    """The two answers, as lists of row dicts."""
    import duckdb

    con = duckdb.connect()
    out = {}
    for key, sql in (("worst_ranks", WORST_RANKS), ("grown_sites", GROWN_SITES)):
        sql = sql.format(files=table(dataset, "files"), sites=table(dataset, "sites"), top=top)
        rel = con.sql(sql)
        cols = rel.columns
        out[key] = [dict(zip(cols, row)) for row in rel.fetchall()]
    return out


def iec(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return "%.2f %s" % (n / size, unit)
    return "%d B" % n


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshots", type=Path)
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--memlens", default=os.environ.get("MEMLENS_BIN") or shutil.which("memlens"))
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--shard-size", type=int, default=64)
    ap.add_argument("--scheduler", default="threads",
                    choices=("threads", "processes", "distributed"))
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if not a.memlens:
        ap.error("no memlens binary: pass --memlens PATH or set MEMLENS_BIN")
    snapshots = find_snapshots(a.snapshots)
    if not snapshots:
        ap.error("no snapshot files under %s" % a.snapshots)
    a.dataset.mkdir(parents=True, exist_ok=True)
    records = scan(snapshots, a.memlens, str(a.dataset), max(1, a.shard_size), a.workers,
                   a.scheduler)
    unreadable = [r["stderr"] for r in records if r["exit"] == 2]
    answers = query(str(a.dataset), a.top)
    answers["files"] = sum(r["files"] for r in records)
    answers["shards"] = len(records)
    answers["unreadable"] = unreadable
    if a.json:
        print(json.dumps(answers, indent=2, default=str))
        return 0
    print("%d snapshots in %d shards -> %s" % (answers["files"], len(records), a.dataset))
    for err in unreadable:
        print(err, file=sys.stderr)
    print("\nWorst ranks (highest peak first):")
    for r in answers["worst_ranks"]:
        print("  %-12s rank %-4s %12s  x%.2f of the run's median  %s"
              % (r["run"], r["rank"], iec(r["peak_bytes"]), r["over_median"] or 0, r["top_site"]))
    print("\nSites that grew across runs:")
    if not answers["grown_sites"]:
        print("  none (fewer than two runs, or nothing grew)")
    for r in answers["grown_sites"]:
        print("  %s -> %s  +%s  %s" % (r["from_run"], r["to_run"], iec(r["growth_bytes"]),
                                        r["site"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
