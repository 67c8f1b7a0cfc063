"""Hostile arguments to memlens.analyze and memlens.check (issue 36, item 7): a FIFO or a
device for a path, a NUL byte, clap's errors, keyword names that are not options, values and
paths that start with "-". Each is refused before the binary runs, or with a message that
names the argument; none hangs or writes a file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, FrozenSet, List

import pytest

import memlens
from memlens import _api
from memlens._options import OPTIONS
from conftest import SAMPLES, flag_on, require

TRAIN = str(SAMPLES / "train_small.pickle")


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> List[List[str]]:
    """Fails the test if the binary is started: the call must be refused before that."""
    started: List[List[str]] = []

    def run(argv: List[str], *a: Any, **k: Any) -> None:
        started.append(list(argv))
        raise AssertionError("the binary ran: %r" % (argv,))

    monkeypatch.setattr(_api.subprocess, "run", run)
    return started


@pytest.fixture
def fifo(tmp_path: Path) -> str:
    require(hasattr(os, "mkfifo"), "os.mkfifo is not available here")
    path = str(tmp_path / "snap.pickle")
    os.mkfifo(path)
    return path


# -- a FIFO, a device: refused before the binary would wait on it -------------------------------


def test_fifo_positional_is_refused_naming_it(fifo: str, no_run: List[List[str]]) -> None:
    with pytest.raises(memlens.MemlensError) as e:
        memlens.analyze("summary", fifo)
    assert str(e.value) == (
        "memlens: %s: is a FIFO (named pipe), not a regular file; analyze() reads snapshot files, not streams" % fifo
    )
    assert e.value.returncode is None and e.value.argv == []
    with pytest.raises(memlens.MemlensError) as e2:
        memlens.check([TRAIN, fifo], max_peak="40GiB")
    assert str(e2.value) == (
        "memlens: %s: is a FIFO (named pipe), not a regular file; check() reads snapshot files, not streams" % fifo
    )
    assert no_run == []


def test_fifo_option_is_refused_naming_the_flag(fifo: str, no_run: List[List[str]]) -> None:
    with pytest.raises(memlens.MemlensError) as e:
        memlens.check(TRAIN, baseline=Path(fifo), fail_on_growth="5%")
    assert str(e.value) == (
        "memlens: --baseline %s: is a FIFO (named pipe), not a regular file; check() reads snapshot files, "
        "not streams" % fifo
    )
    with pytest.raises(memlens.MemlensError) as e2:
        memlens.analyze("explain", message_file=fifo)
    assert str(e2.value) == (
        "memlens: --message-file %s: is a FIFO (named pipe), not a regular file; analyze() reads snapshot "
        "files, not streams" % fifo
    )
    assert no_run == []


def test_character_device_is_refused(no_run: List[List[str]]) -> None:
    require(os.path.exists(os.devnull) and os.name == "posix", "no /dev/null")
    with pytest.raises(memlens.MemlensError) as e:
        memlens.analyze("top", os.devnull)
    assert str(e.value) == (
        "memlens: /dev/null: is a character device, not a regular file; analyze() reads snapshot files, not streams"
    )
    assert no_run == []


def test_explain_message_is_text_not_a_path(memlens_bin: str, fifo: str) -> None:
    """explain's positional arguments are the message: a message that happens to name a FIFO
    is read as words, not opened."""
    with pytest.raises(memlens.MemlensError) as e:
        memlens.analyze("explain", fifo)
    assert str(e.value).startswith("memlens: expected a PyTorch out-of-memory message such as ")
    assert str(e.value).endswith("; found none in %d characters" % len(fifo))


def test_directory_and_missing_file_are_the_binarys_line(memlens_bin: str, tmp_path: Path) -> None:
    # Neither can hang: the binary answers at once, and its line is the error.
    with pytest.raises(memlens.MemlensError) as e:
        memlens.analyze("summary", tmp_path)
    assert str(e.value) == "memlens: %s: is a directory, expected a snapshot file" % tmp_path
    assert e.value.returncode == 2
    # batch reads directories: this one is empty
    with pytest.raises(memlens.MemlensError) as e2:
        memlens.analyze("batch", tmp_path)
    assert str(e2.value) == "memlens: batch: no snapshot files in %s" % tmp_path


# -- NUL bytes: MemlensError naming the argument, before subprocess -----------------------------


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: memlens.analyze("summary", "snap\0.pickle"),
         r"memlens: argument 1 'snap\x00.pickle': a NUL byte at index 4; no command-line argument can hold one"),
        (lambda: memlens.analyze("diff", TRAIN, Path("b\0")),
         r"memlens: argument 2 'b\x00': a NUL byte at index 1; no command-line argument can hold one"),
        (lambda: memlens.check(TRAIN, max_peak="40G\0iB"),
         r"memlens: --max-peak '40G\x00iB': a NUL byte at index 3; no command-line argument can hold one"),
        (lambda: memlens.check(TRAIN, max_peak="1GiB", baseline=Path("\0base")),
         r"memlens: --baseline '\x00base': a NUL byte at index 0; no command-line argument can hold one"),
        (lambda: memlens.analyze("top", TRAIN, keep=["torch", "lib\0raries"]),
         r"memlens: --keep 'lib\x00raries': a NUL byte at index 3; no command-line argument can hold one"),
        (lambda: memlens.analyze("explain", "CUDA out of memory\0"),
         r"memlens: argument 1 'CUDA out of memory\x00': a NUL byte at index 18; no command-line argument can hold one"),
    ],
    ids=["positional", "pathlike", "option", "path-option", "list-item", "explain-message"],
)
def test_nul_byte_names_the_argument(call: Any, message: str, no_run: List[List[str]]) -> None:
    with pytest.raises(memlens.MemlensError) as e:
        call()
    assert str(e.value) == message
    assert no_run == []


def test_unencodable_argument_names_it(no_run: List[List[str]]) -> None:
    with pytest.raises(memlens.MemlensError) as e:
        memlens.analyze("summary", "snap\ud800.pickle")
    assert str(e.value).startswith(r"memlens: argument 1 'snap\ud800.pickle': not encodable on the command line (")
    assert no_run == []


# -- clap's errors: the whole message, which names the argument ---------------------------------


@pytest.mark.parametrize(
    "command,args,options,message",
    [
        ("top", [TRAIN], {"by": "bogus"},
         "error: invalid value 'bogus' for '--by <BY>': `bogus`: expected site, stack, file, "
         "function, metadata or metadata:KEY"),
        ("top", [TRAIN], {"n": "x"},
         "error: invalid value 'x' for '--limit <LIMIT>': invalid digit found in string"),
        ("check", [TRAIN], {"max_peak": True},
         "error: a value is required for '--max-peak <SIZE|PCT>' but none was supplied"),
        ("summary", [], {},
         "error: the following required arguments were not provided: <FILES>..."),
        ("top", [TRAIN], {"device": -1},
         "error: invalid value '-1' for '--device <N>': -1 is not in 0..=4294967295"),
        ("nosuchcommand", [TRAIN], {},
         "error: unrecognized subcommand 'nosuchcommand'"),
    ],
    ids=["possible-values", "short-flag", "value-required", "missing-positional", "negative", "subcommand"],
)
def test_clap_error_is_whole(memlens_bin: str, command: str, args: List[str], options: Dict[str, Any],
                             message: str) -> None:
    with pytest.raises(memlens.MemlensError) as e:
        memlens.analyze(command, *args, **options)
    assert str(e.value) == message
    assert e.value.returncode == 2
    assert "For more information" in e.value.stderr  # the help lines stay in .stderr only


def test_memlens_own_error_stays_its_first_line(memlens_bin: str) -> None:
    with pytest.raises(memlens.MemlensError) as e:
        memlens.check(TRAIN, max_reserved="40parsecs")
    assert str(e.value) == (
        'memlens: --max-reserved: size "40parsecs": unknown unit; expected a number of bytes or a number with a '
        "unit, e.g. 80GiB, 81920MiB, 1.5TiB, 80GB"
    )


# -- keyword names: only the command's flags -----------------------------------------------------


SUMMARY_OPTIONS = "device, salvage, threads, timings, width"


@pytest.mark.parametrize("key", ["output=/x", "-o", "x y", "Max_peak", "max-peak", "nope", "limit", "h", "help",
                                 "version", "_x", "1"])
def test_unknown_keyword_is_a_type_error(key: str, tmp_path: Path, no_run: List[List[str]]) -> None:
    with pytest.raises(TypeError) as e:
        memlens.analyze("summary", TRAIN, **{key: True})
    assert str(e.value) == "analyze() got an unexpected keyword argument %r (memlens summary's options: %s)" % (
        key, SUMMARY_OPTIONS)
    with pytest.raises(TypeError) as e2:
        memlens.command_line("summary", TRAIN, **{key: "1"})
    assert str(e2.value).startswith("command_line() got an unexpected keyword argument %r (" % key)
    assert no_run == []


def test_keyword_that_names_a_file_writes_nothing(tmp_path: Path, no_run: List[List[str]]) -> None:
    target = tmp_path / "written.json"
    key = "output=%s" % target
    with pytest.raises(TypeError, match=r"^check\(\) got an unexpected keyword argument 'output="):
        memlens.check(TRAIN, max_peak="40GiB", **{key: True})
    assert not target.exists()
    assert no_run == []


def test_keyword_of_another_command_is_refused(no_run: List[List[str]]) -> None:
    with pytest.raises(TypeError) as e:
        memlens.check(TRAIN, max_peak="40GiB", by="site")  # top's and diff's flag, not check's
    assert str(e.value).startswith("check() got an unexpected keyword argument 'by' (memlens check's options: "
                                   "allow_unmeasured, at, baseline,")
    assert no_run == []


def test_every_known_keyword_is_accepted() -> None:
    for command, names in OPTIONS.items():
        argv = memlens.command_line(command, "f", **{name: "1" for name in names})
        assert len(argv) == 2 * len(names) + 5, command


def _help_options(memlens_bin: str, command: str) -> FrozenSet[str]:
    text = subprocess.run([memlens_bin, command, "--help"], stdout=subprocess.PIPE, text=True, check=True).stdout
    names = set()
    for m in re.finditer(r"^\s+(?:-(\w), )?--([a-z0-9-]+)", text, re.M):
        short, long = m.groups()
        if long in ("help", "version", "format", "output", "force"):
            continue
        names.add(long.replace("-", "_"))
        if short:
            names.add(short)
    return frozenset(names)


def _options_table(memlens_bin: str) -> Dict[str, FrozenSet[str]]:
    """Every command's flags as the binary's --help lists them, in its order."""
    top = subprocess.run([memlens_bin, "--help"], stdout=subprocess.PIPE, text=True, check=True).stdout
    commands = re.findall(r"^  ([a-z]+)  ", top.split("Commands:")[1].split("Options:")[0], re.M)
    return {c: _help_options(memlens_bin, c) for c in commands if c != "help"}


def _generated_lines(table: Dict[str, FrozenSet[str]]) -> str:
    """The OPTIONS table as _options.py writes it between its markers."""
    lines = ["# BEGIN GENERATED from `memlens COMMAND --help`", "OPTIONS: dict[str, frozenset[str]] = {"]
    for command, names in table.items():
        lines.append("    \"%s\": frozenset([%s])," % (command, ", ".join('"%s"' % n for n in sorted(names))))
    lines += ["}", "# END GENERATED"]
    return "\n".join(lines) + "\n"


def test_options_table_is_the_binarys_help(memlens_bin: str) -> None:
    """memlens._options.OPTIONS is every command's flags as --help lists them: a command or flag
    added to the binary must be there (or analyze() refuses it). ``MEMLENS_BLESS=1`` rewrites
    the table from the binary (python/memlens/_options.py, between its markers)."""
    table = _options_table(memlens_bin)
    if flag_on(os.environ.get("MEMLENS_BLESS")):
        path = Path(__file__).resolve().parents[2] / "python" / "memlens" / "_options.py"
        text = path.read_text()
        start = text.index("# BEGIN GENERATED")
        end = text.index("# END GENERATED\n") + len("# END GENERATED\n")
        path.write_text(text[:start] + _generated_lines(table) + text[end:])
        return
    assert list(table) == list(OPTIONS), "regenerate: MEMLENS_BLESS=1 with this test"
    for command, names in table.items():
        assert names == OPTIONS[command], "%s (regenerate: MEMLENS_BLESS=1 with this test)" % command


# -- values and paths that start with "-" --------------------------------------------------------


def test_dash_values_are_joined_to_their_flag() -> None:
    assert memlens.command_line("check", "a", baseline="-old.pickle", max_peak="1GiB") == [
        "check", "--baseline=-old.pickle", "--max-peak", "1GiB", "--format", "json", "--", "a"]
    assert memlens.command_line("top", "a", n=-3) == ["top", "-n=-3", "--format", "json", "--", "a"]
    assert memlens.command_line("top", "a", keep=["torch", "-x"]) == [
        "top", "--keep", "torch", "--keep=-x", "--format", "json", "--", "a"]


def test_dash_paths_are_paths(memlens_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if "MEMLENS_BIN" in os.environ:  # it may be relative to where the tests started
        monkeypatch.setenv("MEMLENS_BIN", memlens_bin)
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(TRAIN, "-snap.pickle")
    shutil.copyfile(TRAIN, "-base.pickle")
    report = memlens.analyze("summary", "-snap.pickle")
    assert report["file"] == "-snap.pickle"
    assert report["devices"][0]["reserved_bytes"] == 180355072  # samples/README.md
    result = memlens.check("-snap.pickle", baseline="-base.pickle", fail_on_growth="1%")
    assert [(b.budget, b.status) for b in result.budgets] == [("baseline", "pass")]
