"""memlens.record against the stand-in torch (samples/capture/fake_torch): context manager,
decorator, nesting, the recording state it restores, the OOM hook, the errors without torch
or CUDA, and ``python -m memlens record``."""

from __future__ import annotations

import json
import pickle
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List

import pytest

import memlens
from conftest import FAKE_TORCH, run_python, subprocess_env

MiB = 1 << 20


def _alloc(torch: Any, mib: float) -> Any:
    return torch.empty(int(mib * MiB), dtype=torch.uint8, device="cuda")


def _load(path: Path) -> Dict[str, Any]:
    data = path.read_bytes()
    assert data[:2] == b"\x80\x04", "pickle protocol 4"
    return pickle.loads(data)


def _actions(snapshot: Dict[str, Any]) -> List[str]:
    return [e["action"] for e in snapshot["device_traces"][0]]


@pytest.fixture
def spy(fake_torch: Any, monkeypatch: pytest.MonkeyPatch) -> List[Dict[str, Any]]:
    """Every _record_memory_history call's keywords, still passed on to the stand-in."""
    calls: List[Dict[str, Any]] = []
    real = fake_torch.cuda.memory._record_memory_history

    def rec(*args: Any, **kwargs: Any) -> None:
        assert not args, "memlens passes keywords"
        calls.append(dict(kwargs))
        real(**kwargs)

    monkeypatch.setattr(fake_torch.cuda.memory, "_record_memory_history", staticmethod(rec))
    return calls


@pytest.mark.installed
def test_context_manager(fake_torch: Any, spy: List[Dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "sub" / "snap.pickle"
    keep = _alloc(fake_torch, 4)
    with memlens.record(path) as r:
        assert fake_torch._A.rec
        a = _alloc(fake_torch, 8)
        b = _alloc(fake_torch, 2)
        del b
    assert r.path == str(path)
    assert not fake_torch._A.rec, "recording stopped"
    assert spy == [
        {"enabled": "all", "context": "all", "stacks": "all", "max_entries": 100_000},
        {"enabled": None},
    ]
    snap = _load(path)
    acts = _actions(snap)
    assert acts.count("alloc") == 2 and "free_requested" in acts
    assert not list(path.parent.glob("*.tmp-*")), "temporary file renamed"
    # memlens reads it: the 8 MiB allocation made inside the block is live at the end
    summary = memlens.analyze("summary", path)
    assert summary["devices"][0]["allocated_bytes"] >= 12 * MiB
    top = memlens.analyze("top", path, at="end")
    assert any("test_record.py" in s["site"] for s in top["devices"][0]["sites"])
    del a, keep


def test_options_reach_torch(fake_torch: Any, spy: List[Dict[str, Any]], tmp_path: Path) -> None:
    with memlens.record(tmp_path / "s.pickle", max_entries=50, stacks="python", on_oom=False):
        for _ in range(40):
            _alloc(fake_torch, 1)
    assert spy[0] == {"enabled": "all", "context": "all", "stacks": "python", "max_entries": 50}
    snap = _load(tmp_path / "s.pickle")
    assert len(snap["device_traces"][0]) <= 50, "ring of max_entries"
    frames = [f for e in snap["device_traces"][0] for f in e.get("frames", [])]
    assert frames and all(f["filename"] != "??" for f in frames), "python stacks only"


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        memlens.record("x", max_entries=0)
    with pytest.raises(ValueError):
        memlens.record("x", stacks="cpp")


def test_decorator(fake_torch: Any, spy: List[Dict[str, Any]], tmp_path: Path) -> None:
    path = tmp_path / "step.pickle"

    @memlens.record(path, max_entries=1000)
    def step(n: int) -> int:
        """A training step."""
        assert fake_torch._A.rec
        xs = [_alloc(fake_torch, 1) for _ in range(n)]
        return len(xs)

    assert step.__name__ == "step" and step.__doc__ == "A training step."
    assert not fake_torch._A.rec
    assert step(3) == 3
    assert not fake_torch._A.rec
    first = _actions(_load(path)).count("alloc")
    assert step(5) == 5, "each call records afresh"
    assert _actions(_load(path)).count("alloc") == 5
    assert first == 3
    assert [c.get("enabled") for c in spy] == ["all", None, "all", None]


def test_decorator_recursion_and_exceptions(fake_torch: Any, tmp_path: Path) -> None:
    path = tmp_path / "r.pickle"

    @memlens.record(path, on_oom=False)
    def f(depth: int) -> None:
        _alloc(fake_torch, 1)
        if depth:
            f(depth - 1)
        else:
            raise KeyError("boom")

    with pytest.raises(KeyError):
        f(2)
    assert not fake_torch._A.rec
    assert memlens.record.__name__ and path.is_file()


def test_nesting_restores_the_outer_recording(fake_torch: Any, spy: List[Dict[str, Any]], tmp_path: Path) -> None:
    outer, inner = tmp_path / "outer.pickle", tmp_path / "inner.pickle"
    with memlens.record(outer, max_entries=5000, stacks="python"):
        _alloc(fake_torch, 1)
        with memlens.record(inner, max_entries=100, stacks="all"):
            assert fake_torch._rec["stacks"] == "all"
            _alloc(fake_torch, 2)
        assert fake_torch._A.rec, "the outer recording goes on"
        assert fake_torch._rec["stacks"] == "python"
        _alloc(fake_torch, 3)
    assert not fake_torch._A.rec
    assert spy == [
        {"enabled": "all", "context": "all", "stacks": "python", "max_entries": 5000},
        # a nested ring is never shorter than the enclosing one
        {"enabled": "all", "context": "all", "stacks": "all", "max_entries": 5000},
        {"enabled": "all", "context": "all", "stacks": "python", "max_entries": 5000},
        {"enabled": None},
    ]
    sizes = [e["size"] for e in _load(outer)["device_traces"][0] if e["action"] == "alloc"]
    assert sizes == [1 * MiB, 2 * MiB, 3 * MiB], "the outer history survived the inner record"
    assert [e["size"] for e in _load(inner)["device_traces"][0] if e["action"] == "alloc"] == [1 * MiB, 2 * MiB]


def test_same_object_reentered(fake_torch: Any, tmp_path: Path) -> None:
    rec = memlens.record(tmp_path / "same.pickle", on_oom=False)
    with rec:
        with rec:
            assert fake_torch._A.rec
        assert fake_torch._A.rec
    assert not fake_torch._A.rec


def _oom(torch: Any, cap_mib: int = 64) -> None:
    torch.cuda.set_per_process_memory_fraction(cap_mib * MiB / torch._A.total)


def test_on_oom_dumps_at_the_oom_and_prints_the_verdict(fake_torch: Any, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "oom.pickle"
    _oom(fake_torch)
    with pytest.raises(fake_torch.OutOfMemoryError):
        with memlens.record(path) as r:
            held = [_alloc(fake_torch, 10) for _ in range(4)]
            try:
                _alloc(fake_torch, 40)
            except fake_torch.OutOfMemoryError:
                # dumped by the observer, before the exception reached this frame
                assert path.is_file()
                assert _actions(_load(path))[-1] == "oom"
                raise
    assert r.oom_dumped
    assert not fake_torch._A.rec
    err = capsys.readouterr().err
    assert "snapshot at the OOM written to %s" % path in err
    assert "memlens oom: " in err and "first fix: " in err
    # the headline is memlens oom's own
    report = memlens.analyze("oom", path)
    assert report["ooms"] and report["ooms"][-1]["headline"] in err
    # the block ended with the OOM: the file keeps the snapshot of the OOM moment
    assert _actions(_load(path))[-1] == "oom"
    del held


def test_caught_oom_is_dumped_again_at_exit(fake_torch: Any, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "oom2.pickle"
    _oom(fake_torch)
    with memlens.record(path) as r:
        try:
            _alloc(fake_torch, 100)
        except fake_torch.OutOfMemoryError:
            pass
        after = _alloc(fake_torch, 1)  # the program recovered
    assert r.oom_dumped
    acts = _actions(_load(path))
    assert "oom" in acts and "alloc" in acts[acts.index("oom"):], "dumped at exit, after the recovery"
    del after
    assert "memlens oom: " in capsys.readouterr().err


def test_on_oom_false(fake_torch: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nooom.pickle"
    _oom(fake_torch)
    with pytest.raises(fake_torch.OutOfMemoryError):
        with memlens.record(path, on_oom=False) as r:
            try:
                _alloc(fake_torch, 100)
            except fake_torch.OutOfMemoryError:
                assert not path.exists(), "no OOM hook"
                raise
    assert not r.oom_dumped and path.is_file()
    assert "memlens oom" not in capsys.readouterr().err
    assert "oom" in _actions(_load(path))


def test_one_observer_for_every_recording(fake_torch: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(3):
        with memlens.record(tmp_path / ("%d.pickle" % i)):
            pass
    assert len(fake_torch._oom_observers) == 1
    # outside any recording the observer does nothing
    _oom(fake_torch)
    with pytest.raises(fake_torch.OutOfMemoryError):
        _alloc(fake_torch, 100)
    assert "memlens" not in capsys.readouterr().err
    # nested recordings with on_oom both get the OOM snapshot
    a, b = tmp_path / "a.pickle", tmp_path / "b.pickle"
    with memlens.record(a):
        with memlens.record(b):
            with pytest.raises(fake_torch.OutOfMemoryError):
                _alloc(fake_torch, 100)
            assert a.read_bytes() == b.read_bytes()


def test_observer_never_raises(fake_torch: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """A failing dump inside the hook must not replace the OOM the program sees."""
    _oom(fake_torch)
    with memlens.record(tmp_path / "x.pickle"):
        monkeypatch.setattr(fake_torch.cuda.memory, "_snapshot", staticmethod(lambda: 1 / 0))
        with pytest.raises(fake_torch.OutOfMemoryError):
            _alloc(fake_torch, 100)
        monkeypatch.undo()
    assert "the OOM hook failed (ZeroDivisionError" in capsys.readouterr().err


def test_torch_without_oom_observer(fake_torch: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(fake_torch._C, "_cuda_attach_out_of_memory_observer")
    with pytest.warns(RuntimeWarning, match="_cuda_attach_out_of_memory_observer"):
        with memlens.record(tmp_path / "w.pickle"):
            _alloc(fake_torch, 1)
    assert (tmp_path / "w.pickle").is_file()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with memlens.record(tmp_path / "w2.pickle", on_oom=False):
            pass


def test_without_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert "torch is not importable" in (memlens.recording_unavailable_reason() or "")
    rec = memlens.record(tmp_path / "n.pickle")  # creating it is fine (decorators at import time)
    with pytest.raises(memlens.RecordingUnavailableError, match="torch is not importable") as e:
        with rec:
            pass
    assert isinstance(e.value, memlens.MemlensError)
    assert not (tmp_path / "n.pickle").exists()


def test_without_cuda(monkeypatch: pytest.MonkeyPatch, stub_torch_dirs: Dict[str, str], tmp_path: Path) -> None:
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(stub_torch_dirs["nocuda"])
    import torch

    monkeypatch.setitem(sys.modules, "torch", torch)
    assert torch.__version__ == "0.0-nocuda"
    with pytest.raises(memlens.RecordingUnavailableError, match=r"CUDA is not available"):
        with memlens.record(tmp_path / "n.pickle"):
            pass

    @memlens.record(tmp_path / "n.pickle")
    def f() -> None:
        raise AssertionError("must not run")

    with pytest.raises(memlens.RecordingUnavailableError):
        f()


# -- python -m memlens record ------------------------------------------------------------------

SCRIPT = '''
import json, sys, torch
MiB = 1 << 20
json.dump({"argv": sys.argv, "name": __name__, "path0": sys.path[0]}, open(sys.argv[1], "w"))
keep = [torch.empty(3 * MiB, dtype=torch.uint8, device="cuda") for _ in range(2)]
if "--oom" in sys.argv:
    torch.cuda.set_per_process_memory_fraction(64 * MiB / torch._A.total)
    torch.empty(200 * MiB, dtype=torch.uint8, device="cuda")
if "--exit" in sys.argv:
    sys.exit(int(sys.argv[sys.argv.index("--exit") + 1]))
'''


@pytest.fixture
def script(tmp_path: Path) -> Path:
    p = tmp_path / "train.py"
    p.write_text(SCRIPT)
    return p


@pytest.mark.installed
def test_python_m_record(memlens_bin: str, script: Path, tmp_path: Path) -> None:
    out, seen = tmp_path / "snap.pickle", tmp_path / "seen.json"
    r = run_python(["-m", "memlens", "record", "-o", str(out), "--", str(script), str(seen), "--lr", "1"],
                   subprocess_env(str(FAKE_TORCH)), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    info = json.loads(seen.read_text())
    assert info == {"argv": [str(script), str(seen), "--lr", "1"], "name": "__main__", "path0": str(tmp_path)}
    assert _actions(_load(out)).count("alloc") == 2
    assert "snapshot written to %s" % out in r.stderr
    assert memlens.analyze("summary", out)["devices"][0]["allocated_bytes"] == 6 * MiB


def test_python_m_record_default_output_and_options(memlens_bin: str, script: Path, tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    r = run_python(["-m", "memlens", "record", "--max-entries", "3", "--stacks", "python", "--no-oom",
                    str(script), str(seen)], subprocess_env(str(FAKE_TORCH)), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    snap = _load(tmp_path / "memlens-train.pickle")
    assert len(snap["device_traces"][0]) <= 3
    assert json.loads(seen.read_text())["argv"] == [str(script), str(seen)]


def test_python_m_record_exit_status(memlens_bin: str, script: Path, tmp_path: Path) -> None:
    out = tmp_path / "e.pickle"
    r = run_python(["-m", "memlens", "record", "-o", str(out), str(script), str(tmp_path / "s.json"), "--exit", "3"],
                   subprocess_env(str(FAKE_TORCH)), cwd=str(tmp_path))
    assert r.returncode == 3
    assert out.is_file()


def test_python_m_record_oom(memlens_bin: str, script: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.pickle"
    r = run_python(["-m", "memlens", "record", "-o", str(out), "--", str(script), str(tmp_path / "s.json"), "--oom"],
                   subprocess_env(str(FAKE_TORCH)), cwd=str(tmp_path))
    assert r.returncode == 1
    assert "OutOfMemoryError" in r.stderr.splitlines()[-1]
    assert "memlens oom: " in r.stderr and "first fix: " in r.stderr
    assert r.stderr.index("memlens oom: ") < r.stderr.index("Traceback"), "the verdict comes before the traceback"
    assert "oom" in _actions(_load(out))
    assert memlens.analyze("oom", out)["ooms"]


def test_python_m_record_module(memlens_bin: str, tmp_path: Path) -> None:
    pkg = tmp_path / "proj"
    pkg.mkdir()
    (pkg / "trainer.py").write_text(SCRIPT)
    out, seen = tmp_path / "m.pickle", tmp_path / "seen.json"
    r = run_python(["-m", "memlens", "record", "-o", str(out), "-m", "trainer", str(seen), "-x"],
                   subprocess_env(str(FAKE_TORCH), str(pkg)), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    info = json.loads(seen.read_text())
    assert info["name"] == "__main__" and info["argv"] == [str(pkg / "trainer.py"), str(seen), "-x"]
    assert out.is_file()


def test_python_m_record_without_torch(memlens_bin: str, script: Path, tmp_path: Path,
                                       stub_torch_dirs: Dict[str, str]) -> None:
    for which, expected in [("broken", "torch is not importable"), ("nocuda", "CUDA is not available")]:
        seen = tmp_path / ("seen-%s.json" % which)
        r = run_python(["-m", "memlens", "record", "-o", str(tmp_path / "x.pickle"), str(script), str(seen)],
                       subprocess_env(stub_torch_dirs[which]), cwd=str(tmp_path))
        assert r.returncode == 2
        assert r.stderr.strip().splitlines() == [r.stderr.strip()], "one line"
        assert expected in r.stderr and "Traceback" not in r.stderr
        assert not seen.exists(), "the script did not run"


def test_python_m_record_usage(tmp_path: Path) -> None:
    r = run_python(["-m", "memlens", "record"], subprocess_env(), cwd=str(tmp_path))
    assert r.returncode == 2 and "SCRIPT" in r.stderr
    r = run_python(["-m", "memlens", "record", "nope.py"], subprocess_env(), cwd=str(tmp_path))
    assert r.returncode == 2 and "nope.py: no such file" in r.stderr
    r = run_python(["-m", "memlens", "record", "--help"], subprocess_env(), cwd=str(tmp_path))
    assert r.returncode == 0 and "--max-entries" in r.stdout
