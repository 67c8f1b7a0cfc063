"""pytest plugin: CUDA memory budgets on tests (registered through the ``pytest11`` entry
point when memlens is installed).

::

    @pytest.mark.cuda_memory(max_peak="40GiB", max_frag="30%")
    def test_train_step():
        ...

The test's call runs under :class:`memlens.record`; the snapshot is written to the test's
directory in pytest's temporary directory (or ``--memlens-dir DIR``) and checked with
``memlens check``. A broken budget fails the test with memlens's line for it and the sites
behind it. Where torch or CUDA is missing, a marked test is skipped with the reason, never
passed.

Marker keywords: ``max_peak``, ``max_reserved``, ``max_frag``, ``max_leaked``, ``baseline``
(at least one), any other ``memlens check`` flag (``gpu="h100"``, ``at="end"``,
``allow_unmeasured=True``, ...) and the recording's ``max_entries`` and ``stacks``.

Options: ``--memlens-dir DIR`` keeps every marked test's snapshot in DIR;
``--memlens-report`` also writes the HTML report (``memlens report``) of a failing test
next to its snapshot.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from typing import Any, Generator

import pytest

from ._api import check
from ._binary import find_memlens_bin
from ._errors import MemlensError
from ._record import record, recording_unavailable_reason

_MARKER = "cuda_memory"
_BUDGETS = ("max_peak", "max_reserved", "max_frag", "max_leaked", "baseline")
_RECORD_KEYS = ("max_entries", "stacks")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memlens", "CUDA memory budgets (memlens)")
    group.addoption(
        "--memlens-dir",
        metavar="DIR",
        default=None,
        help="keep the CUDA memory snapshot of every test marked cuda_memory in DIR "
        "(default: pytest's temporary directory)",
    )
    group.addoption(
        "--memlens-report",
        action="store_true",
        default=False,
        help="write the HTML report (memlens report) of a test that breaks its cuda_memory "
        "budget next to its snapshot",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cuda_memory(max_peak=None, max_reserved=None, max_frag=None, max_leaked=None, "
        "baseline=None, **check_flags): record the test's CUDA memory with memlens and fail "
        "it when a budget breaks (sizes as '40GiB' or bytes; skipped without torch/CUDA)",
    )


def _marker_options(marker: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The marker's ``check`` options and ``record`` options; a UsageError when malformed."""
    if marker.args:
        raise pytest.UsageError(
            "@pytest.mark.cuda_memory takes keywords only (max_peak=..., max_reserved=..., "
            f"max_frag=..., max_leaked=..., baseline=...), not {marker.args!r}"
        )
    budgets = dict(marker.kwargs)
    rec = {k: budgets.pop(k) for k in _RECORD_KEYS if k in budgets}
    if not any(budgets.get(k) is not None for k in _BUDGETS):
        raise pytest.UsageError(
            "@pytest.mark.cuda_memory needs at least one budget: max_peak, max_reserved, "
            "max_frag, max_leaked or baseline"
        )
    return budgets, rec


def _safe_name(nodeid: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_.")
    return name[:150] or "test"


def _snapshot_path(item: pytest.Item) -> str:
    name = _safe_name(item.nodeid)
    keep = item.config.getoption("--memlens-dir")
    if keep:
        os.makedirs(keep, exist_ok=True)
        return os.path.join(os.path.abspath(keep), name + ".pickle")
    factory = getattr(item.config, "_tmp_path_factory", None)
    if factory is not None:
        directory = str(factory.mktemp("memlens-" + name[-40:], numbered=True))
    else:  # pragma: no cover (pytest without the tmp_path plugin)
        directory = tempfile.mkdtemp(prefix="memlens-")
    return os.path.join(directory, name + ".pickle")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marked tests are skipped, with the reason, where recording is impossible (torch is
    imported here only when some collected test is marked)."""
    marked = [item for item in items if item.get_closest_marker(_MARKER) is not None]
    if not marked:
        return
    reason = recording_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"cuda_memory: {reason}")
    for item in marked:
        item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker(_MARKER)
    if marker is not None:
        _marker_options(marker)  # a malformed marker is an error even where it would skip


def _html_report(snapshot: str) -> tuple[str | None, str | None]:
    html = os.path.splitext(snapshot)[0] + ".html"
    argv = [find_memlens_bin(), "report", "--force", "-o", html, "--", snapshot]
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, (err[0] if err else f"memlens report exited with status {proc.returncode}")
    return html, None


_FAILURE_ATTR = "_memlens_cuda_memory_failure"


def _judge(item: pytest.Item, snapshot: str, budgets: dict[str, Any]) -> str | None:
    """The failure message of a test whose call passed, or None when its memory did too."""
    try:
        outcome = check(snapshot, **budgets)
    except MemlensError as e:
        return f"cuda_memory: memlens check could not judge {snapshot}: {e}"
    if outcome.passed:
        return None
    lines = [f"cuda_memory: {outcome}", f"snapshot: {snapshot}"]
    if item.config.getoption("--memlens-report"):
        try:
            html, err = _html_report(snapshot)
        except MemlensError as e:
            html, err = None, str(e)
        lines.append(f"report: {html}" if html else f"report: not written ({err})")
    return "\n".join(lines)


# Old-style hook wrappers (any pytest from 7.0 on): the call runs under `record`, and the
# verdict turns a passing call's report into a failure in pytest_runtest_makereport, as
# pytest-memray's limit_memory does.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    marker = item.get_closest_marker(_MARKER)
    if marker is None:
        yield
        return
    budgets, rec_opts = _marker_options(marker)
    snapshot = _snapshot_path(item)
    rec = record(snapshot, on_oom=True, **rec_opts)
    rec.__enter__()
    outcome = yield
    excinfo = outcome.excinfo
    try:
        rec.__exit__(*(excinfo if excinfo is not None else (None, None, None)))
        item.user_properties.append(("memlens_snapshot", snapshot))
        if excinfo is None:
            setattr(item, _FAILURE_ATTR, _judge(item, snapshot, budgets))
    except Exception as e:  # noqa: BLE001 (a failed dump fails the test, reported below, never the session)
        if excinfo is None:
            setattr(item, _FAILURE_ATTR, f"cuda_memory: could not record {snapshot}: {type(e).__name__}: {e}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    if call.when != "call":
        return
    failure = getattr(item, _FAILURE_ATTR, None)
    if failure is None:
        return
    report = outcome.get_result()
    if report.passed:
        report.outcome = "failed"
        report.longrepr = failure
