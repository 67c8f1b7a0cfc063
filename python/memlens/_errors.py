"""The exceptions of the memlens package."""

from __future__ import annotations

from typing import Sequence

__all__ = ["BinaryNotFoundError", "MemlensError", "RecordingUnavailableError"]


class MemlensError(Exception):
    """memlens refused the arguments or the input (its exit status 2), or could not run.

    ``str(error)`` is the one line memlens printed, e.g. ``memlens: bad.pickle: byte 12:
    truncated pickle``. The attributes keep the rest:

    - ``message``: that line;
    - ``returncode``: the binary's exit status (``None`` when it did not run);
    - ``stderr``: everything it printed on standard error;
    - ``argv``: the command line that ran.
    """

    def __init__(
        self,
        message: str,
        *,
        returncode: int | None = None,
        stderr: str = "",
        argv: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.returncode = returncode
        self.stderr = stderr
        self.argv = list(argv)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # Keeps the keyword-only attributes through pickling (pytest-xdist, multiprocessing).
        return (_rebuild, (type(self), self.message, self.returncode, self.stderr, self.argv))


def _rebuild(cls, message, returncode, stderr, argv):  # type: ignore[no-untyped-def]
    return cls(message, returncode=returncode, stderr=stderr, argv=argv)


class BinaryNotFoundError(MemlensError):
    """The ``memlens`` binary that the package runs is not installed (see
    :func:`memlens.find_memlens_bin`)."""


class RecordingUnavailableError(MemlensError):
    """:func:`memlens.record` cannot record here: torch is not importable, CUDA is not
    available, or this torch has no ``torch.cuda.memory._record_memory_history``."""
