"""memlens.analyze, memlens.check and CheckResult, the flag mapping and the error mapping."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import memlens
from memlens import command_line
from conftest import IN_CI, SAMPLES, require_installed

TRAIN = str(SAMPLES / "train_small.pickle")
LEAK = str(SAMPLES / "list_leak.pickle")
BARE = str(SAMPLES / "bare_list.pickle")


# -- keyword options -> flags ------------------------------------------------------------


def test_command_line_maps_keywords() -> None:
    assert command_line("check", "a.pickle", max_peak="40GiB") == [
        "check", "--max-peak", "40GiB", "--format", "json", "--", "a.pickle"]
    assert command_line("check", "a", allow_unmeasured=True, ignore_lines=False, baseline=None) == [
        "check", "--allow-unmeasured", "--format", "json", "--", "a"]
    assert command_line("check", "a", n=5, max_peak=42 * 2**30) == [
        "check", "-n", "5", "--max-peak", "45097156608", "--format", "json", "--", "a"]
    assert command_line("check", "a", max_frag=0.3, min_abs=0.000001) == [
        "check", "--max-frag", "0.3", "--min-abs", "0.000001", "--format", "json", "--", "a"]
    assert command_line("x", Path("dir") / "f.pickle", rules=Path("r.toml"), tag=["a", "b"]) == [
        "x", "--rules", "r.toml", "--tag", "a", "--tag", "b", "--format", "json", "--", os.path.join("dir", "f.pickle")]
    # paths that look like flags stay paths
    assert command_line("summary", "-weird.pickle")[-2:] == ["--", "-weird.pickle"]


@pytest.mark.parametrize("key", ["format", "output", "o", "force"])
def test_command_line_refuses_output_keywords(key: str) -> None:
    with pytest.raises(TypeError, match="standard output"):
        command_line("summary", "a", **{key: "x"})


@pytest.mark.parametrize("bad", [["x", True], {"a": 1}, float("nan")])
def test_command_line_refuses_odd_values(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        command_line("check", "a", max_peak=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("cmd", ["", "--help", None])
def test_command_line_refuses_bad_command(cmd: object) -> None:
    with pytest.raises(ValueError):
        command_line(cmd)  # type: ignore[arg-type]


# -- analyze ---------------------------------------------------------------------------


@pytest.mark.installed
def test_analyze_summary(memlens_bin: str) -> None:
    report = memlens.analyze("summary", TRAIN)
    assert report["schema_version"] == 1
    assert report["file"] == TRAIN
    dev = report["devices"][0]
    # samples/README.md: train_small's known totals
    assert dev["reserved_bytes"] == 180355072
    assert dev["allocated_bytes"] == 130517504


def test_analyze_pathlike_and_options(memlens_bin: str) -> None:
    top = memlens.analyze("top", Path(TRAIN), n=3, by="site")
    assert top["by"] == "site" and 1 <= len(top["devices"][0]["sites"]) <= 3
    assert top == memlens.analyze("top", TRAIN, n=3, by="site")


def test_exit_1_returns_the_report(memlens_bin: str) -> None:
    cli = subprocess.run([memlens_bin, "leaks", LEAK], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert cli.returncode == 1, "list_leak.pickle should have a leak finding"
    report = memlens.analyze("leaks", LEAK)
    assert report["schema_version"] == 1
    assert report["findings"], "exit 1 means findings"


def test_exit_2_raises_with_the_line(memlens_bin: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pickle")
    cli = subprocess.run([memlens_bin, "summary", missing], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert cli.returncode == 2
    with pytest.raises(memlens.MemlensError) as e:
        memlens.analyze("summary", missing)
    assert str(e.value) == cli.stderr.strip().splitlines()[0]
    assert str(e.value).startswith("memlens: ") and "nope.pickle" in str(e.value)
    assert e.value.returncode == 2
    assert e.value.argv[0] == memlens_bin and e.value.argv[-1] == missing
    assert "\n" not in e.value.message
    # pickles with its attributes
    again = pickle.loads(pickle.dumps(e.value))
    assert (again.message, again.returncode, again.stderr) == (e.value.message, 2, e.value.stderr)


def test_exit_2_on_corrupt_input(memlens_bin: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(open(TRAIN, "rb").read()[:1000])
    with pytest.raises(memlens.MemlensError, match=r"^memlens: .*bad\.pickle"):
        memlens.analyze("summary", bad)


def test_usage_error_raises(memlens_bin: str) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_flag'"):
        memlens.analyze("summary", TRAIN, no_such_flag=True)  # refused before the binary runs
    with pytest.raises(memlens.MemlensError, match="unrecognized subcommand") as e:
        memlens.analyze("no-such-command", TRAIN)
    assert e.value.returncode == 2
    with pytest.raises(memlens.MemlensError) as e2:
        memlens.analyze("flame", TRAIN)  # flame has no JSON format (svg, folded, speedscope)
    assert e2.value.returncode == 2


def test_binary_not_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMLENS_BIN", str(tmp_path / "missing"))
    with pytest.raises(memlens.BinaryNotFoundError, match="MEMLENS_BIN"):
        memlens.find_memlens_bin()
    with pytest.raises(memlens.MemlensError):
        memlens.analyze("summary", TRAIN)


def test_memlens_bin_override(monkeypatch: pytest.MonkeyPatch, memlens_bin: str) -> None:
    monkeypatch.setenv("MEMLENS_BIN", memlens_bin)
    assert memlens.find_memlens_bin() == os.path.abspath(memlens_bin)


# -- check -----------------------------------------------------------------------------


@pytest.mark.installed
def test_check_passes(memlens_bin: str) -> None:
    r = memlens.check(TRAIN, max_peak="40GiB", max_frag="90%")
    assert r.passed and bool(r) and r.returncode == 0
    assert r.failures == []
    assert [b.budget for b in r.budgets] == ["max_peak", "max_frag"]
    assert all(b.status == "pass" for b in r.budgets)
    assert r.report["status"] == "pass"
    assert str(r).startswith("memlens check passed")


def test_check_fails_naming_budget_and_sites(memlens_bin: str) -> None:
    r = memlens.check(TRAIN, max_peak="1MiB", max_frag="99%")
    assert not r.passed and not bool(r) and r.returncode == 1
    assert [f.budget for f in r.failures] == ["max_peak"]
    f = r.failures[0]
    assert f.status == "fail" and f.limit_bytes == 1 << 20 and f.actual_bytes > f.limit_bytes
    assert f.over_bytes == f.actual_bytes - f.limit_bytes
    assert f.top_sites and f.top_sites[0].bytes > 0
    text = str(r)
    assert "max_peak" in text and "broken" in text
    assert f.message in text
    assert f.top_sites[0].site in text
    assert "max_frag" not in text.split("\n")[0]
    assert r.report == memlens.analyze("check", TRAIN, max_peak="1MiB", max_frag="99%")


def test_check_sizes_as_ints(memlens_bin: str) -> None:
    as_text = memlens.check(TRAIN, max_peak="1MiB")
    as_int = memlens.check(TRAIN, max_peak=1 << 20)
    assert as_int.failures[0].limit_bytes == as_text.failures[0].limit_bytes == 1 << 20
    assert as_int.failures[0].actual_bytes == as_text.failures[0].actual_bytes
    assert memlens.check(TRAIN, max_frag=0.99).passed == memlens.check(TRAIN, max_frag="99%").passed


def test_check_unmeasured(memlens_bin: str) -> None:
    r = memlens.check(BARE, max_peak="40GiB")  # a bare segment list: no trace, no peak
    assert not r.passed
    assert [b.status for b in r.failures] == ["unmeasured"]
    assert r.failures[0].reason
    assert "unmeasured" in str(r)
    allowed = memlens.check(BARE, max_peak="40GiB", allow_unmeasured=True)
    assert allowed.passed and allowed.failures == [] and len(allowed.unmeasured) == 1
    assert "unmeasured" in str(allowed)


def test_check_baseline_and_several_files(memlens_bin: str) -> None:
    base, cand = SAMPLES / "diff_base.pickle", SAMPLES / "diff_cand.pickle"
    r = memlens.check(cand, baseline=base, fail_on_growth="1%")
    assert [b.budget for b in r.budgets] == ["baseline"]
    assert r.passed == (r.budgets[0].status == "pass")
    both = memlens.check([TRAIN, str(cand)], max_peak="1MiB")
    assert len(both.report["files"]) == 2 and len(both.failures) == 2
    assert str(cand) in str(both)


def test_check_errors_raise(memlens_bin: str) -> None:
    with pytest.raises(memlens.MemlensError, match="size"):
        memlens.check(TRAIN, max_peak="40 parsecs")
    with pytest.raises(memlens.MemlensError, match="capacity"):
        memlens.check(TRAIN, max_peak="90%")
    with pytest.raises(memlens.MemlensError):
        memlens.check(TRAIN)  # no budget


def test_format_size() -> None:
    assert memlens.format_size(512) == "512 B"
    assert memlens.format_size(1536) == "1.50 KiB"
    assert memlens.format_size(-(2 << 20)) == "-2.00 MiB"


# -- the package as installed --------------------------------------------------------------


@pytest.mark.installed
def test_package_is_typed_and_documented() -> None:
    pkg = Path(memlens.__file__).parent
    assert (pkg / "py.typed").is_file()
    for name in memlens.__all__:
        obj = getattr(memlens, name)
        if callable(obj):
            assert obj.__doc__, name


@pytest.mark.installed
def test_installed_wheel_layout(memlens_bin: str) -> None:
    """Under .ci/run (MEMLENS_TEST_INSTALLED=1): the wheel's binary is in the venv's scripts
    directory, found there without MEMLENS_BIN, and is `memlens` on PATH."""
    require_installed()
    assert "MEMLENS_BIN" not in os.environ
    scripts = sysconfig.get_path("scripts")
    assert memlens_bin == os.path.join(scripts, "memlens")
    assert "site-packages" in memlens.__file__
    assert memlens.__version__ != "0+unknown"
    on_path = subprocess.run(["memlens", "--version"], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", "")})
    assert on_path.returncode == 0 and on_path.stdout.split()[-1] == memlens.__version__
    if IN_CI:
        assert sys.prefix != sys.base_prefix, "CI runs the tests in a fresh venv"
