"""memlens: read PyTorch CUDA memory snapshots: where GPU memory went and why it ran out.

The Python package runs the ``memlens`` binary installed with it (nothing is re-computed in
Python) and records snapshots:

- :func:`open` gives a :class:`Snapshot` for notebooks: ``top()``, ``timeline()``,
  ``categories()``, ``leaks()``, ``oom()``, ``fit()``, ``diff(other)`` return typed results
  with ``.to_pandas()`` and an HTML table; the handle itself shows the report page inline;
- :func:`analyze` runs any command with ``--format json`` and returns the report;
- :func:`check` checks budgets and returns a :class:`CheckResult`;
- :class:`record` records the CUDA allocator's history around a block or a function and
  dumps the snapshot (also at the moment of an OOM);
- ``python -m memlens ...`` is the binary; ``python -m memlens record -o snap.pickle --
  train.py ARGS`` runs a script under :class:`record`;
- the pytest plugin (``@pytest.mark.cuda_memory(max_peak="40GiB")``) lives in
  :mod:`memlens.pytest_plugin`.
- :mod:`memlens.fleet` writes the Parquet dataset of many snapshots on a ``dask.distributed``
  cluster (``python -m memlens fleet scan``) and maps batches of paths to Arrow tables for
  Ray Data or Spark (``pip install 'memlens[fleet]'``).

See docs/python.md.
"""

from ._api import (
    BudgetResult,
    CheckResult,
    SiteLine,
    analyze,
    check,
    command_line,
    format_size,
)
from ._binary import find_memlens_bin
from ._errors import BinaryNotFoundError, MemlensError, RecordingUnavailableError
from ._notebook import (
    CategoriesResult,
    DiffResult,
    FitResult,
    LeaksResult,
    OomResult,
    Result,
    Snapshot,
    SummaryResult,
    TimelineResult,
    TopResult,
    open,
)
from ._record import record, recording_unavailable_reason

try:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _version

    try:
        __version__ = _version("memlens")
    except PackageNotFoundError:  # running from a source tree
        __version__ = "0+unknown"
except ImportError:  # pragma: no cover (Python < 3.8)
    __version__ = "0+unknown"

__all__ = [
    "BinaryNotFoundError",
    "BudgetResult",
    "CategoriesResult",
    "CheckResult",
    "DiffResult",
    "FitResult",
    "LeaksResult",
    "MemlensError",
    "OomResult",
    "RecordingUnavailableError",
    "Result",
    "SiteLine",
    "Snapshot",
    "SummaryResult",
    "TimelineResult",
    "TopResult",
    "__version__",
    "analyze",
    "check",
    "command_line",
    "find_memlens_bin",
    "format_size",
    "open",
    "record",
    "recording_unavailable_reason",
]
