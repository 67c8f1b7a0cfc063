"""``memlens.record``: record PyTorch's CUDA allocator history and dump the snapshot.

It does what every team writes by hand::

    torch.cuda.memory._record_memory_history(enabled="all", context="all",
                                             stacks="all", max_entries=100_000)
    ...                                    # the code under study
    with open(path, "wb") as f:
        pickle.dump(torch.cuda.memory._snapshot(), f, protocol=4)
    torch.cuda.memory._record_memory_history(enabled=None)

plus the OOM hook (``torch._C._cuda_attach_out_of_memory_observer``) that dumps the snapshot
at the moment of an out-of-memory error, and prints ``memlens oom``'s verdict, before the
exception reaches the program.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import pickle
import subprocess
import sys
import threading
import warnings
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ._binary import find_memlens_bin
from ._errors import RecordingUnavailableError

if TYPE_CHECKING:  # typing.Self is 3.11+; the package runs on 3.8 with no dependency
    from typing_extensions import Self

__all__ = ["record", "recording_unavailable_reason"]

F = TypeVar("F", bound=Callable[..., Any])

# The recordings now open, innermost last. The allocator's recording is process-wide, so
# this is too.
_lock = threading.RLock()
_active: list[_Session] = []
# torch._C objects that already carry memlens's OOM observer. Observers cannot be detached,
# so one observer per torch serves every recording, gated by `_active`.
_observed: weakref.WeakSet[Any] = weakref.WeakSet()


def _torch() -> Any:
    """The torch module, or RecordingUnavailableError saying why not."""
    try:
        torch: Any = importlib.import_module("torch")
    except Exception as e:  # ImportError, or a broken install raising anything
        raise RecordingUnavailableError(
            f"memlens.record: torch is not importable ({type(e).__name__}: {e}); recording a CUDA memory "
            "snapshot needs PyTorch with CUDA"
        ) from e
    cuda: Any = getattr(torch, "cuda", None)
    memory: Any = getattr(cuda, "memory", None)
    if memory is None or not hasattr(memory, "_record_memory_history") or not hasattr(memory, "_snapshot"):
        raise RecordingUnavailableError(
            "memlens.record: this torch ({}) has no torch.cuda.memory._record_memory_history "
            "and _snapshot (PyTorch 2.1 or later records allocator history)".format(getattr(torch, "__version__", "unknown version"))
        )
    try:
        available = bool(cuda.is_available())
    except Exception as e:
        raise RecordingUnavailableError(
            f"memlens.record: torch.cuda.is_available() failed ({type(e).__name__}: {e})"
        ) from e
    if not available:
        raise RecordingUnavailableError(
            "memlens.record: CUDA is not available (torch.cuda.is_available() is False); "
            "recording a CUDA memory snapshot needs a CUDA device"
        )
    return torch


def recording_unavailable_reason() -> str | None:
    """``None`` when :func:`memlens.record` can record here, else the reason it cannot
    (torch not importable, CUDA not available, a torch without allocator history)."""
    try:
        _torch()
    except RecordingUnavailableError as e:
        return str(e)
    return None


def _write_snapshot(snapshot: Any, path: str) -> None:
    """``pickle.dump(snapshot, f, protocol=4)`` into a temporary file renamed to ``path``."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            pickle.dump(snapshot, f, protocol=4)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _oom_verdict(path: str) -> list[str]:
    """The headline and first fix of the last OOM in ``path``, from ``memlens oom``."""
    argv = [find_memlens_bin(), "oom", "--format", "json", "--", path]
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    if proc.returncode not in (0, 1):
        line = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        return [line[0] if line else f"memlens oom exited with status {proc.returncode}"]
    report = json.loads(proc.stdout)
    ooms = report.get("ooms") or []
    if not ooms:
        return ["memlens oom: no oom event in the snapshot (was history recorded with context?)"]
    last = ooms[-1]
    lines = ["memlens oom: {}".format(last.get("headline", last.get("verdict", "?")))]
    recs = last.get("recommendations") or []
    if recs:
        first = recs[0]
        fix = first.get("action", "")
        if first.get("why"):
            fix += " ({})".format(first["why"])
        lines.append(f"memlens oom: first fix: {fix}")
    return lines


def _on_oom(device: int, alloc: int, device_allocated: int, device_free: int) -> None:
    """The OOM observer PyTorch calls, after the allocator recorded the ``oom`` event and
    before it raises ``torch.cuda.OutOfMemoryError``. It never raises: an exception here
    would replace the OOM the program is about to see."""
    try:
        with _lock:
            sessions = [s for s in _active if s.on_oom]
            if not sessions:
                return
            torch = sys.modules.get("torch")
            if torch is None:
                return
            snapshot = torch.cuda.memory._snapshot()
            for s in sessions:
                _write_snapshot(snapshot, s.path)
                s.oom_dumped = True
            path = sessions[-1].path
        print(
            f"memlens: CUDA out of memory on device {device} ({alloc} bytes requested); snapshot at "
            f"the OOM written to {path}",
            file=sys.stderr,
        )
        try:
            lines = _oom_verdict(path)
        except Exception as e:  # noqa: BLE001 (the verdict is a courtesy; the snapshot is what matters)
            lines = [f"memlens oom: could not analyse the snapshot ({type(e).__name__}: {e})"]
        for line in lines:
            print(line, file=sys.stderr)
        print(f"memlens: details: memlens oom {path}", file=sys.stderr)
        sys.stderr.flush()
    except Exception as e:  # noqa: BLE001 (an exception here would replace the OOM)
        # Printing may fail too (stderr closed): the OOM hook still never raises.
        with contextlib.suppress(Exception):
            print(f"memlens: the OOM hook failed ({type(e).__name__}: {e})", file=sys.stderr)


def _attach_observer(torch: Any) -> None:
    c = getattr(torch, "_C", None)
    attach = getattr(c, "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        warnings.warn(
            "memlens.record(on_oom=True): this torch has no "
            "torch._C._cuda_attach_out_of_memory_observer; the snapshot is dumped when the "
            "block exits, not at the OOM",
            RuntimeWarning,
            stacklevel=4,
        )
        return
    if c in _observed:
        return
    attach(_on_oom)
    _observed.add(c)


class _Session:
    """One open recording (one ``with`` entry or one decorated call)."""

    def __init__(self, path: str, max_entries: int, stacks: str, on_oom: bool) -> None:
        self.path = path
        self.max_entries = max_entries
        self.stacks = stacks
        self.on_oom = on_oom
        self.oom_dumped = False
        self.torch: Any = None

    def settings(self) -> dict[str, Any]:
        return {"enabled": "all", "context": "all", "stacks": self.stacks, "max_entries": self.max_entries}

    def start(self) -> None:
        torch = _torch()
        with _lock:
            if _active:
                # A nested recording keeps the enclosing one's history: its ring is at least
                # as long as the enclosing one's.
                self.max_entries = max(self.max_entries, _active[-1].max_entries)
            torch.cuda.memory._record_memory_history(**self.settings())
            self.torch = torch
            _active.append(self)
            if self.on_oom:
                try:
                    _attach_observer(torch)
                except BaseException:
                    self._restore()
                    raise

    def _restore(self) -> None:
        """Leaves the recording state as it was before :meth:`start`."""
        if self in _active:
            _active.remove(self)
        if _active:
            self.torch.cuda.memory._record_memory_history(**_active[-1].settings())
        else:
            self.torch.cuda.memory._record_memory_history(enabled=None)

    def stop(self, failing: bool) -> None:
        with _lock:
            try:
                # After an OOM dump, a block that ends in an exception keeps the snapshot of
                # the OOM moment; otherwise the snapshot is taken now.
                if not (failing and self.oom_dumped):
                    _write_snapshot(self.torch.cuda.memory._snapshot(), self.path)
            finally:
                self._restore()


class record:
    """Record the CUDA allocator's history and dump the snapshot to ``path``.

    A context manager::

        with memlens.record("snap.pickle"):
            train_step()

    and a decorator (each call records afresh and rewrites ``path``)::

        @memlens.record("step.pickle", max_entries=200_000)
        def train_step(): ...

    On entry it calls ``torch.cuda.memory._record_memory_history(enabled="all",
    context="all", stacks=stacks, max_entries=max_entries)``; on exit it writes
    ``pickle.dump(torch.cuda.memory._snapshot(), f, protocol=4)`` to ``path`` (through a
    temporary file renamed into place; missing directories are created) and restores the
    recording state: an enclosing ``record`` gets its settings back, otherwise recording is
    stopped (``enabled=None``). A nested ``record`` keeps at least the enclosing ring size so
    the outer history is not cut.

    ``stacks`` is ``"all"`` (Python and C++ frames) or ``"python"``. With ``on_oom`` (the
    default) an out-of-memory error inside the block dumps the snapshot at the moment of the
    OOM (before the exception unwinds anything) and prints ``memlens oom``'s headline and
    first fix to standard error; if the block then ends with that exception, the file keeps
    the OOM-moment snapshot.

    Without torch, or without CUDA, entering raises :class:`memlens.RecordingUnavailableError`
    (a :class:`memlens.MemlensError`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        max_entries: int = 100_000,
        stacks: str = "all",
        on_oom: bool = True,
    ) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries must be a positive int, not {max_entries!r}")
        if stacks not in ("all", "python"):
            raise ValueError(f"stacks must be 'all' or 'python', not {stacks!r}")
        self.path = os.fspath(path)
        self.max_entries = max_entries
        self.stacks = stacks
        self.on_oom = bool(on_oom)
        self._sessions: list[_Session] = []
        #: Whether the last recording that ended dumped a snapshot at an OOM.
        self.oom_dumped = False

    def __enter__(self) -> Self:
        session = _Session(os.path.abspath(self.path), self.max_entries, self.stacks, self.on_oom)
        session.start()
        self._sessions.append(session)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        session = self._sessions.pop()
        self.oom_dumped = session.oom_dumped
        try:
            session.stop(failing=exc_type is not None)
        except Exception as e:
            if exc_type is None:
                raise
            # Do not hide the block's own exception behind a failed dump.
            warnings.warn(f"memlens.record: could not write {session.path}: {e}", RuntimeWarning, stacklevel=2)

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return (
            f"memlens.record({self.path!r}, max_entries={self.max_entries}, "
            f"stacks={self.stacks!r}, on_oom={self.on_oom!r})"
        )
