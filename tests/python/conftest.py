"""Shared fixtures of the Python package's tests.

They run against whichever ``memlens`` package Python imports: the installed wheel (as
``scripts/test`` does, in a fresh venv; ``MEMLENS_TEST_INSTALLED=1`` then also checks the wheel's
layout), or the source tree with ``PYTHONPATH=python MEMLENS_BIN=target/release/memlens``.
Recording is tested against the stand-in torch of samples/capture/fake_torch (a toy
allocator, not PyTorch). A missing prerequisite (the binary, the samples) skips with a
message, and fails under CI (``IN_CI``: ``CI`` on, by ``flag_on``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

import memlens

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
FAKE_TORCH = SAMPLES / "capture" / "fake_torch"


def flag_on(value: Optional[str]) -> bool:
    """Whether an environment switch's value turns it on: unset, empty, ``0``, ``false``,
    ``no`` or ``off`` (any case, spaces around ignored) is off; anything else (``1``,
    ``true``, ``yes``) is on. The Rust tests read ``CI`` by the same rule
    (tests/common/ci.rs, ``flag_value``)."""
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


# The one definition of "under CI" of the Python tests (``CI=0`` is not CI).
IN_CI = flag_on(os.environ.get("CI"))
INSTALLED = os.environ.get("MEMLENS_TEST_INSTALLED") == "1"
# `cargo test` runs these tests from the source tree (tests/it/python_package.rs); the checks of
# the installed wheel's layout then belong to the wheel stage of scripts/test, which runs the tests marked
# `installed` (pyproject.toml; test_ci_rule.py checks that every require_installed test is one).
SOURCE_RUN = os.environ.get("MEMLENS_TEST_SOURCE") == "1"
# The directory that holds the imported memlens package (site-packages, or python/).
PACKAGE_PARENT = str(Path(memlens.__file__).resolve().parent.parent)


def require(condition: bool, why: str) -> None:
    """Skip with ``why`` unless ``condition``; under CI, fail instead."""
    if condition:
        return
    if IN_CI:
        pytest.fail("%s (a prerequisite; required under CI)" % why, pytrace=False)
    log_skip(why)
    pytest.skip(why)


def log_skip(why: str) -> None:
    """Appends the skip to the file ``MEMLENS_SKIP_LOG`` names, when set: ``scripts/test``
    counts the lines on its last line ("skipped: N"), as the Rust tests' skips."""
    path = os.environ.get("MEMLENS_SKIP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write("python: " + why.replace("\n", " ") + "\n")


def require_installed() -> None:
    """The test checks an installed wheel: skip in the source-tree run of `cargo test` (the
    wheel stage of scripts/test runs it), else as ``require``."""
    if SOURCE_RUN and not INSTALLED:
        pytest.skip("checks the installed wheel: run by the wheel stage of scripts/test")
    require(INSTALLED, "not testing an installed wheel (set MEMLENS_TEST_INSTALLED=1 after pip install)")


def sample_files() -> List[Path]:
    return sorted(SAMPLES.glob("*.pickle")) + sorted(SAMPLES.glob("*.json"))


@pytest.fixture(scope="session")
def memlens_bin() -> str:
    try:
        return memlens.find_memlens_bin()
    except memlens.BinaryNotFoundError as e:
        require(False, str(e))
        raise


def subprocess_env(*extra_path: str, **env: str) -> Dict[str, str]:
    """The environment of a child Python that imports this memlens (and the extra paths
    first, such as a stand-in torch)."""
    out = dict(os.environ)
    parts = [*extra_path, PACKAGE_PARENT]
    if out.get("PYTHONPATH"):
        parts.append(out["PYTHONPATH"])
    out["PYTHONPATH"] = os.pathsep.join(parts)
    out.pop("MEMLENS_FAKE_TORCH_HIDE", None)
    out.update(env)
    return out


def run_python(args: List[str], env: Dict[str, str], cwd: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
    )


def _drop_torch() -> None:
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        del sys.modules[name]


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch, memlens_bin: str) -> Iterator[object]:
    """A fresh import of the stand-in torch (its allocator starts empty)."""
    require((FAKE_TORCH / "torch" / "__init__.py").is_file(), "no stand-in torch at %s" % FAKE_TORCH)
    monkeypatch.delenv("MEMLENS_FAKE_TORCH_HIDE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    _drop_torch()
    monkeypatch.syspath_prepend(str(FAKE_TORCH))
    import torch

    assert torch.__version__ == "0.0-fake", torch.__file__
    try:
        yield torch
    finally:
        if torch.cuda.memory is not None:
            torch.cuda.memory._record_memory_history(enabled=None)
        _drop_torch()


@pytest.fixture
def stub_torch_dirs(tmp_path: Path) -> Dict[str, str]:
    """Directories holding a ``torch`` that fails to import, and one without CUDA."""
    broken = tmp_path / "torch_broken" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('stand-in: no torch here')\n")
    nocuda = tmp_path / "torch_nocuda" / "torch"
    nocuda.mkdir(parents=True)
    (nocuda / "__init__.py").write_text(
        "__version__ = '0.0-nocuda'\n"
        "class _Memory:\n"
        "    @staticmethod\n"
        "    def _record_memory_history(*a, **k): raise AssertionError('must not record')\n"
        "    @staticmethod\n"
        "    def _snapshot(): raise AssertionError('must not snapshot')\n"
        "class cuda:\n"
        "    memory = _Memory\n"
        "    @staticmethod\n"
        "    def is_available(): return False\n"
    )
    return {"broken": str(broken.parent), "nocuda": str(nocuda.parent)}
