"""The Python API returns exactly the JSON the CLI prints: every sample, several commands.

The CLI side is the binary run directly with a hand-written command line (not built by
memlens.command_line), its standard output compared text-for-text (key order included) with
the API's dict written back as JSON, and its exit status 2 compared with MemlensError.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import memlens
from conftest import SAMPLES, require, sample_files

# (command, extra CLI arguments, the same as analyze() keywords)
COMMANDS: List[Tuple[str, List[str], Dict[str, Any]]] = [
    ("summary", [], {}),
    ("top", ["--at", "peak", "-n", "10"], {"at": "peak", "n": 10}),
    ("top", ["--by", "stack", "--cost", "allocated"], {"by": "stack", "cost": "allocated"}),
    ("frag", [], {}),
    ("oom", ["--gpu", "h100"], {"gpu": "h100"}),
    ("leaks", [], {}),
    ("categories", [], {}),
    ("timeline", ["--points", "200"], {"points": 200}),
    ("check", ["--max-peak", "100MiB", "--max-frag", "30%", "--allow-unmeasured"],
     {"max_peak": "100MiB", "max_frag": "30%", "allow_unmeasured": True}),
]

SAMPLES_ALL = sample_files()


def _cli(memlens_bin: str, argv: List[str]) -> subprocess.CompletedProcess:
    return subprocess.run([memlens_bin, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=120)


def _compare(memlens_bin: str, cli_argv: List[str], command: str, args: List[str], options: Dict[str, Any]) -> int:
    """Runs both; the same JSON text for exit 0/1, the same line for exit 2. Returns the exit."""
    cli = _cli(memlens_bin, cli_argv)
    assert cli.returncode in (0, 1, 2), cli.stderr
    if cli.returncode == 2:
        with pytest.raises(memlens.MemlensError) as e:
            memlens.analyze(command, *args, **options)
        first = cli.stderr.decode().strip().splitlines()[0]
        assert str(e.value) == first
        assert e.value.returncode == 2
        return 2
    api = memlens.analyze(command, *args, **options)
    assert json.dumps(api) == json.dumps(json.loads(cli.stdout)), "API and CLI JSON differ"
    assert api == json.loads(cli.stdout)
    return cli.returncode


def test_samples_present() -> None:
    require(len(SAMPLES_ALL) >= 20, "expected the bundled samples in %s, found %d" % (SAMPLES, len(SAMPLES_ALL)))
    assert any(p.suffix == ".json" for p in SAMPLES_ALL)


@pytest.mark.parametrize("command,cli_args,options", COMMANDS, ids=["%s%d" % (c[0], i) for i, c in enumerate(COMMANDS)])
@pytest.mark.parametrize("sample", SAMPLES_ALL, ids=[p.name for p in SAMPLES_ALL])
def test_api_equals_cli(memlens_bin: str, sample: Path, command: str, cli_args: List[str],
                        options: Dict[str, Any]) -> None:
    code = _compare(memlens_bin, [command, str(sample), *cli_args, "--format", "json"], command, [str(sample)], options)
    # every bundled sample is readable by every command: a report (1: leaks or a broken budget)
    assert code in (0, 1)


def test_api_equals_cli_exit_codes(memlens_bin: str) -> None:
    """Exit 1 reports are compared too (leaks finds the leak; a budget breaks)."""
    leak = str(SAMPLES / "list_leak.pickle")
    assert _compare(memlens_bin, ["leaks", leak, "--format", "json"], "leaks", [leak], {}) == 1
    train = str(SAMPLES / "train_small.pickle")
    assert _compare(memlens_bin, ["check", train, "--max-peak", "1MiB", "--format", "json"], "check", [train],
                    {"max_peak": "1MiB"}) == 1


def test_api_equals_cli_errors(memlens_bin: str, tmp_path: Path) -> None:
    """Exit 2: the API raises MemlensError carrying the CLI's first stderr line."""
    truncated = tmp_path / "truncated.pickle"
    truncated.write_bytes((SAMPLES / "train_small.pickle").read_bytes()[:4096])
    missing = str(tmp_path / "missing.pickle")
    train = str(SAMPLES / "train_small.pickle")
    for argv, command, args, options in [
        (["summary", str(truncated), "--format", "json"], "summary", [str(truncated)], {}),
        (["top", missing, "--format", "json"], "top", [missing], {}),
        (["check", train, "--max-peak", "lots", "--format", "json"], "check", [train], {"max_peak": "lots"}),
        (["summary", train, "--device", "7", "--format", "json"], "summary", [train], {"device": 7}),
    ]:
        assert _compare(memlens_bin, argv, command, args, options) == 2, argv


def test_api_equals_cli_two_files(memlens_bin: str) -> None:
    base, cand = str(SAMPLES / "diff_base.pickle"), str(SAMPLES / "diff_cand.pickle")
    require(Path(base).is_file() and Path(cand).is_file(), "diff samples missing")
    assert _compare(memlens_bin, ["diff", base, cand, "--format", "json"], "diff", [base, cand], {}) == 0
    assert _compare(memlens_bin, ["diff", base, cand, "--fail-on-growth", "1%", "--format", "json"], "diff",
                    [base, cand], {"fail_on_growth": "1%"}) in (0, 1)
    files = [str(p) for p in SAMPLES_ALL[:6]]
    assert _compare(memlens_bin, ["summary", *files, "--format", "json"], "summary", files, {}) == 0
    assert _compare(memlens_bin, ["batch", *files, "--format", "json", "--jobs", "1"], "batch", files, {"jobs": 1}) == 0


def test_api_equals_cli_explain(memlens_bin: str) -> None:
    msg = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which "
           "1.50 GiB is free. Of the allocated memory 70.00 GiB is allocated by PyTorch, and 5.00 GiB is "
           "reserved by PyTorch but unallocated.")
    assert _compare(memlens_bin, ["explain", msg, "--format", "json"], "explain", [msg], {}) == 0
