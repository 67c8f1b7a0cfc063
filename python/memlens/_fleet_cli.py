"""``python -m memlens fleet scan`` and ``report``: :func:`memlens.fleet.scan` and
:func:`memlens.fleet.report` on the command line.

Standard error gets a line per file that could not be read (as ``memlens batch`` prints
them), then one summary line. Exit status as ``memlens batch``'s: 0 when every file was
read, 2 when some could not be (their ``files`` rows say why); 2 with one line for a usage
error or a scan that could not run (no scheduler at the address, dask or pyarrow missing).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from ._errors import MemlensError

_FLEET_HELP = """\
usage: python -m memlens fleet scan PATHS... -o OUT [options]
       python -m memlens fleet report OUT [--format table|json|jsonl|csv] [options]

memlens on a cluster. Commands:
  scan    write the Parquet dataset of many snapshots with a dask.distributed cluster
          (python -m memlens fleet scan --help)
  report  the cross-rank answer of such a dataset, as memlens batch gives it of the
          snapshots (python -m memlens fleet report --help)
"""

_REPORT_DESCRIPTION = """\
Report the dataset OUT that `fleet scan` (or `memlens batch --format parquet -o OUT`) wrote,
as `memlens batch` reports the snapshots it came from: a row per file, the imbalance, and
the cross-rank answer (the ranks that stand out with the site that makes each, sites across
ranks, the step x rank peak matrix, the first rank to run out of memory and when, settings
that differ, ranks grouped by parallel coordinates). It runs `memlens batch --from-dataset
OUT`: the binary reads the files, sites, ooms and steps tables back, so the rule is batch's.
"""

_REPORT_EPILOG = """\
exit status: 0; 2 when some file of the dataset could not be read in the scan (its row
says why), or for a usage error or a dataset that cannot be read.

examples:
  python -m memlens fleet report /mnt/fleet/ds
  python -m memlens fleet report s3://bucket/fleet/ds/ --format json --topology topo.json
"""

_SCAN_DESCRIPTION = """\
Write the Parquet dataset of the snapshots PATHS name into OUT, as `memlens batch --format
parquet -o OUT --partition-by KEYS PATHS` does, with a dask.distributed cluster: the paths
are expanded by `memlens batch --list` (directories, globs, object-storage URL globs), cut
into shards of K files, and each shard is one `memlens batch --format parquet --jobs 1
--force` process on a worker, writing its parts into OUT (a directory every worker sees).
A task that dies is run again (--retries); a shard that still fails is run file by file,
and a file whose task keeps dying gets its files row anyway (ok false, saying so). Needs
pip install 'memlens[fleet]' here and on the workers.
"""

_SCAN_EPILOG = """\
exit status: 0 when every file was read; 2 when some could not be (their files rows say
why), and for a usage error or a scan that could not run.

examples:
  python -m memlens fleet scan /mnt/snapshots -o /mnt/fleet/ds
  python -m memlens fleet scan 's3://bucket/job-17/**/rank*.pickle' -o /mnt/fleet/ds \\
      --scheduler tcp://10.0.0.5:8786 --memlens /opt/memlens/bin/memlens
"""


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (--help for usage)\n")


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {n}")
    return n


def _scan_parser() -> _Parser:
    from .fleet import DEFAULT_SHARD_SIZE

    p = _Parser(
        prog="python -m memlens fleet scan",
        description=_SCAN_DESCRIPTION,
        epilog=_SCAN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="snapshot files, directories, globs or object-storage URLs")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="the dataset's directory (seen by every worker) or URL")
    p.add_argument(
        "--scheduler", metavar="ADDRESS",
        help="a running dask scheduler (tcp://HOST:8786); default: a local cluster of processes for this scan",
    )
    p.add_argument("--memlens", metavar="BIN", help="the memlens binary on the workers (default: each finds its own)")
    p.add_argument(
        "--shard-size", type=_positive, default=DEFAULT_SHARD_SIZE, metavar="K",
        help=f"files per task, one memlens process each (default {DEFAULT_SHARD_SIZE})",
    )
    p.add_argument(
        "--partition-by", default="run,rank", metavar="KEYS",
        help="run,rank (default), run, rank, or none: the dataset's partition directories",
    )
    p.add_argument("--retries", type=_count, default=2, metavar="N", help="runs of a failed task again (default 2)")
    p.add_argument(
        "--workers", type=_positive, metavar="N",
        help="worker processes of the local cluster (default: one per core); not with --scheduler",
    )
    return p


def _report_parser() -> _Parser:
    p = _Parser(
        prog="python -m memlens fleet report",
        description=_REPORT_DESCRIPTION,
        epilog=_REPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dataset", metavar="OUT", help="the dataset's directory or URL")
    p.add_argument(
        "--format", default="table", choices=("table", "json", "jsonl", "csv"),
        help="table (default), json, jsonl or csv, as memlens batch writes them",
    )
    p.add_argument(
        "--topology", metavar="FILE",
        help='the job\'s parallel layout, {"tp": 8, "pp": 4, "dp": 32} (optional "order"); default: the paths\' tp1_pp0 coordinates',
    )
    p.add_argument("-n", "--sites", type=_positive, metavar="N", help="sites listed (default 5)")
    p.add_argument("--memlens", metavar="BIN", help="the memlens binary (default: the one this package finds)")
    return p


def report_main(argv: list[str]) -> int:
    import subprocess

    from .fleet import report_argv

    a = _report_parser().parse_args(argv)
    try:
        cmd = report_argv(a.dataset, format=a.format, topology=a.topology, sites=a.sites, memlens=a.memlens)
        sys.stdout.flush()
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, check=False).returncode
    except MemlensError as e:
        print(_one_line(str(e)), file=sys.stderr)
        return 2
    except OSError as e:
        print(_one_line(f"memlens fleet: could not run memlens: {e}"), file=sys.stderr)
        return 2


def _one_line(text: str) -> str:
    return " ".join(text.split())


def scan_main(argv: list[str]) -> int:
    from .fleet import scan

    p = _scan_parser()
    a = p.parse_args(argv)
    if a.workers is not None and a.scheduler is not None:
        p.error("--workers sizes the local cluster; a --scheduler's cluster has its own workers")
    partition_by = None if a.partition_by.strip().lower() in ("", "none") else a.partition_by
    try:
        result = scan(
            a.paths, a.output, scheduler=a.scheduler, memlens=a.memlens, shard_size=a.shard_size,
            partition_by=partition_by, retries=a.retries, workers=a.workers,
        )
    except MemlensError as e:
        print(_one_line(str(e)), file=sys.stderr)
        return 2
    except (OSError, TimeoutError) as e:
        where = f"the scheduler at {a.scheduler}" if a.scheduler else "the local cluster"
        print(_one_line(f"memlens fleet: could not run on {where}: {e}"), file=sys.stderr)
        return 2
    for f, error in result.failed.items():
        print(_one_line(f"memlens: {error}" if f in error else f"memlens: {f}: {error}"), file=sys.stderr)
    print("memlens fleet: " + result.summary(), file=sys.stderr)
    return 2 if result.failed else 0


def main(argv: list[str]) -> int:
    """``python -m memlens fleet ...``; returns the exit status."""
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write(_FLEET_HELP)
        return 0
    if not argv:
        print("python -m memlens fleet: a command is required: scan or report (--help for usage)", file=sys.stderr)
        return 2
    if argv[0] == "report":
        return report_main(argv[1:])
    if argv[0] != "scan":
        print(
            f"python -m memlens fleet: unknown command {argv[0]!r}: the commands are scan and report (--help for usage)",
            file=sys.stderr,
        )
        return 2
    return scan_main(argv[1:])
