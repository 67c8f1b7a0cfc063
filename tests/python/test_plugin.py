"""The pytest plugin, run through pytester in child pytest processes with the stand-in torch
(or a torch that fails to import, or one without CUDA)."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import FAKE_TORCH, PACKAGE_PARENT, require_installed

TESTS = '''
import pytest
MiB = 1 << 20

def alloc(mib):
    import torch
    return torch.empty(mib * MiB, dtype=torch.uint8, device="cuda")

@pytest.mark.cuda_memory(max_peak="1GiB", max_frag="100%")
def test_small():
    x = alloc(4)

@pytest.mark.cuda_memory(max_peak="6MiB")
def test_big():
    xs = [alloc(4) for _ in range(3)]

def test_unmarked():
    y = alloc(64)
'''


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, memlens_bin: str, request: pytest.FixtureRequest):
    """Runs a child pytest with the plugin (through its pytest11 entry point when memlens is
    installed, else with -p) and the given torch on PYTHONPATH."""
    loaded = request.config.pluginmanager.has_plugin("memlens")

    def go(torch_dir: str, *args: str) -> pytest.RunResult:
        monkeypatch.setenv("PYTHONPATH", "%s:%s" % (torch_dir, PACKAGE_PARENT))
        monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
        monkeypatch.delenv("MEMLENS_FAKE_TORCH_HIDE", raising=False)
        extra: List[str] = [] if loaded else ["-p", "memlens.pytest_plugin"]
        return pytester.runpytest_subprocess(*extra, "-p", "no:cacheprovider", "-rA", *args, timeout=300)

    return go


@pytest.mark.installed
def test_entry_point() -> None:
    """The wheel registers the plugin with pytest (pytest11), and pytest loaded it."""
    require_installed()
    eps = importlib.metadata.entry_points()
    group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
    assert [ep.value for ep in group if ep.name == "memlens"] == ["memlens.pytest_plugin"]


@pytest.mark.installed
def test_entry_point_loaded(request: pytest.FixtureRequest) -> None:
    require_installed()
    assert request.config.pluginmanager.has_plugin("memlens")


@pytest.mark.installed
def test_pass_and_fail(pytester: pytest.Pytester, run) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_mem=TESTS)
    result = run(str(FAKE_TORCH))
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "FAILED test_mem.py::test_big" in out
    # the broken budget, memlens's line for it, and the site behind it
    assert "max_peak broken: peak 12.00 MiB on device 0 exceeds 6.00 MiB" in out
    lineno = TESTS.splitlines().index("    xs = [alloc(4) for _ in range(3)]")
    assert re.search(r"12\.00 MiB .*test_mem\.py:%d:" % lineno, out) or re.search(r"test_mem\.py:\d+:alloc", out), out
    snap = re.search(r"snapshot: (\S+\.pickle)", out)
    assert snap and Path(snap.group(1)).is_file(), "the snapshot is in pytest's tmp dir"
    assert str(pytester.path) not in snap.group(1) or "memlens-" in snap.group(1)
    assert "report:" not in out


def test_failure_output_is_not_a_traceback(pytester: pytest.Pytester, run) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_mem=TESTS)
    result = run(str(FAKE_TORCH), "-k", "big")
    result.assert_outcomes(failed=1, deselected=2)
    out = result.stdout.str()
    assert "cuda_memory: memlens check failed: 1 budget(s) broken" in out
    assert "top sites:" in out
    assert "Traceback" not in out


def test_skipped_without_cuda_or_torch(pytester: pytest.Pytester, run,  # type: ignore[no-untyped-def]
                                       stub_torch_dirs: Dict[str, str]) -> None:
    pytester.makepyfile(test_mem='''
import pytest

@pytest.mark.cuda_memory(max_peak="1GiB")
def test_marked():
    raise AssertionError("must not run")

def test_plain():
    pass
''')
    for which, reason in [("nocuda", "CUDA is not available"), ("broken", "torch is not importable")]:
        result = run(stub_torch_dirs[which])
        result.assert_outcomes(passed=1, skipped=1)
        out = result.stdout.str()
        assert re.search(r"SKIPPED \[1\] test_mem\.py:\d+: cuda_memory: memlens\.record: %s" % reason, out), out


def test_memlens_dir_keeps_snapshots(pytester: pytest.Pytester, run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_mem=TESTS)
    keep = tmp_path / "snaps"
    result = run(str(FAKE_TORCH), "--memlens-dir", str(keep))
    result.assert_outcomes(passed=2, failed=1)
    names = sorted(p.name for p in keep.iterdir())
    assert names == ["test_mem.py_test_big.pickle", "test_mem.py_test_small.pickle"]
    assert "snapshot: %s" % (keep / "test_mem.py_test_big.pickle") in result.stdout.str()
    assert not list(keep.glob("*.html")), "no report without --memlens-report"


def test_memlens_report(pytester: pytest.Pytester, run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_mem=TESTS)
    keep = tmp_path / "snaps"
    result = run(str(FAKE_TORCH), "--memlens-dir", str(keep), "--memlens-report")
    result.assert_outcomes(passed=2, failed=1)
    html = keep / "test_mem.py_test_big.html"
    assert html.is_file(), "the failing test's report is next to its snapshot"
    assert html.read_bytes().lstrip().lower().startswith(b"<!doctype html")
    assert not (keep / "test_mem.py_test_small.html").exists(), "only failing tests get a report"
    assert "report: %s" % html in result.stdout.str()


def test_report_in_tmp_dir(pytester: pytest.Pytester, run) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_mem=TESTS)
    result = run(str(FAKE_TORCH), "--memlens-report", "-k", "big")
    out = result.stdout.str()
    m = re.search(r"report: (\S+\.html)", out)
    assert m and Path(m.group(1)).is_file(), out


def test_failing_test_keeps_its_own_failure(pytester: pytest.Pytester, run) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_mem='''
import pytest

@pytest.mark.cuda_memory(max_peak="1KiB")
def test_broken():
    import torch
    x = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    assert 1 == 2, "the test's own failure"
''')
    result = run(str(FAKE_TORCH))
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "the test's own failure" in out
    assert "max_peak broken" not in out


def test_oom_in_marked_test(pytester: pytest.Pytester, run) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_mem='''
import pytest

@pytest.mark.cuda_memory(max_peak="40GiB")
def test_oom():
    import torch
    torch.cuda.set_per_process_memory_fraction(64 * (1 << 20) / torch._A.total)
    torch.empty(200 << 20, dtype=torch.uint8, device="cuda")
''')
    result = run(str(FAKE_TORCH))
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "OutOfMemoryError" in out
    assert "memlens oom: " in out and "first fix: " in out, "the verdict is in the captured stderr"


def test_marker_without_budget(pytester: pytest.Pytester, run) -> None:  # type: ignore[no-untyped-def]
    pytester.makepyfile(test_mem='''
import pytest

@pytest.mark.cuda_memory()
def test_nobudget():
    pass

@pytest.mark.cuda_memory("40GiB")
def test_positional():
    pass
''')
    result = run(str(FAKE_TORCH))
    out = result.stdout.str() + result.stderr.str()
    assert result.ret != 0
    assert "needs at least one budget" in out or "keywords only" in out
    assert " passed" not in out.splitlines()[-1]


def test_other_check_options_and_recording_options(pytester: pytest.Pytester, run,  # type: ignore[no-untyped-def]
                                                   tmp_path: Path) -> None:
    pytester.makepyfile(test_mem='''
import pytest

@pytest.mark.cuda_memory(max_peak="50%", capacity="16MiB", max_entries=15, stacks="python")
def test_capacity():
    import torch
    xs = [torch.empty(2 << 20, dtype=torch.uint8, device="cuda") for _ in range(6)]
''')
    keep = tmp_path / "k"
    result = run(str(FAKE_TORCH), "--memlens-dir", str(keep))
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "50% of 16.00 MiB" in out, out
    import pickle
    snap = pickle.loads((keep / "test_mem.py_test_capacity.pickle").read_bytes())
    trace = snap["device_traces"][0]
    assert len(trace) <= 15, "max_entries reached the recording"
    assert all(f["filename"] != "??" for e in trace for f in e.get("frames", [])), "python stacks only"


def test_dump_failure_fails_the_test(pytester: pytest.Pytester, run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    keep = tmp_path / "gone"
    pytester.makepyfile(test_mem='''
import os, shutil, pytest

@pytest.mark.cuda_memory(max_peak="1GiB")
def test_pulls_the_rug():
    shutil.rmtree(%r)
    open(%r, "w").close()          # the snapshot's directory is now a file

def test_after():
    pass
''' % (str(keep), str(keep)))
    result = run(str(FAKE_TORCH), "--memlens-dir", str(keep))
    result.assert_outcomes(failed=1, passed=1)
    assert "cuda_memory: could not record %s" % (keep / "test_mem.py_test_pulls_the_rug.pickle") in result.stdout.str()
