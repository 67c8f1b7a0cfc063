"""``python -m memlens ...`` is the binary: same output, same exit status."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from conftest import ROOT, SAMPLES, run_python, subprocess_env

TRAIN = str(SAMPLES / "train_small.pickle")


@pytest.mark.installed
@pytest.mark.parametrize(
    "args",
    [
        ["summary", TRAIN],
        ["summary", TRAIN, "--format", "json"],
        ["leaks", str(SAMPLES / "list_leak.pickle")],
        ["check", TRAIN, "--max-peak", "1MiB"],
        ["summary", "/nonexistent/x.pickle"],
        ["--version"],
        ["--help"],
        ["no-such-command"],
    ],
    ids=["summary", "json", "leaks-exit1", "check-exit1", "missing-exit2", "version", "help", "usage"],
)
def test_python_m_is_the_binary(memlens_bin: str, args: List[str]) -> None:
    direct = subprocess.run([memlens_bin, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    via = run_python(["-m", "memlens", *args], subprocess_env(), cwd=str(ROOT))
    assert via.returncode == direct.returncode
    assert via.stdout == direct.stdout
    assert via.stderr == direct.stderr


@pytest.mark.installed
def test_python_m_stdin(memlens_bin: str) -> None:
    """The binary inherits standard input (`-` reads the snapshot from it)."""
    data = Path(TRAIN).read_bytes()
    direct = subprocess.run([memlens_bin, "summary", "-", "--format", "json"], input=data, stdout=subprocess.PIPE)
    via = subprocess.run([sys.executable, "-m", "memlens", "summary", "-",
                          "--format", "json"], input=data, stdout=subprocess.PIPE, env=subprocess_env())
    assert via.returncode == direct.returncode == 0
    assert via.stdout == direct.stdout


@pytest.mark.installed
def test_python_m_without_binary(tmp_path: Path) -> None:
    r = run_python(["-m", "memlens", "summary", TRAIN], subprocess_env(MEMLENS_BIN=str(tmp_path / "none")),
                   cwd=str(ROOT))
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert "MEMLENS_BIN" in r.stderr
