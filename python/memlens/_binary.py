"""Finding and running the bundled ``memlens`` binary.

The wheel installs the Rust binary into the environment's scripts directory (``bin/`` of a
virtual environment, ``Scripts\\`` on Windows), next to the ``python`` that imports this
package, the way ruff's and py-spy's wheels do. It is looked for, in order:

1. ``$MEMLENS_BIN``, when set (a binary built with cargo, say ``target/release/memlens``);
2. the scripts directory of the running interpreter's install scheme
   (``sysconfig.get_path("scripts")``);
3. the user scheme's scripts directory (``pip install --user``);
4. ``bin/`` beside the directory holding this package (``pip install --target DIR``);
5. ``memlens`` on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

from ._errors import BinaryNotFoundError

__all__ = ["find_memlens_bin"]

_EXE = "memlens" + (sysconfig.get_config_var("EXE") or "")


def _user_scheme() -> str | None:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    if os.name == "nt":
        return "nt_user"
    if sys.platform == "darwin" and getattr(sys, "_framework", None):
        return "osx_framework_user"
    return "posix_user"


def _candidates() -> list[str]:
    out: list[str] = []
    scripts = sysconfig.get_path("scripts")
    if scripts:
        out.append(os.path.join(scripts, _EXE))
    scheme = _user_scheme()
    if scheme is not None:
        try:
            user_scripts = sysconfig.get_path("scripts", scheme=scheme)
        except KeyError:
            user_scripts = None
        if user_scripts:
            out.append(os.path.join(user_scripts, _EXE))
    # pip install --target DIR puts the package in DIR/memlens and the binary in DIR/bin.
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.join(os.path.dirname(here), "bin", _EXE))
    return out


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_memlens_bin() -> str:
    """Return the path of the ``memlens`` binary this package runs.

    Raises :class:`memlens.BinaryNotFoundError` (a :class:`memlens.MemlensError`) when there
    is none: ``$MEMLENS_BIN`` names no executable file, or the package was installed
    without its binary (from a copy of ``python/`` rather than the wheel).
    """
    env = os.environ.get("MEMLENS_BIN")
    if env:
        if _is_executable(env):
            return os.path.abspath(env)
        raise BinaryNotFoundError(
            f"memlens: $MEMLENS_BIN={env!r} is not an executable file"
        )
    tried = _candidates()
    for path in tried:
        if _is_executable(path):
            return path
    on_path = shutil.which(_EXE)
    if on_path is not None:
        return on_path
    raise BinaryNotFoundError(
        "memlens: the memlens binary was not found (looked in {} and on PATH); install the "
        "memlens wheel (pip install memlens, or pip install . in a checkout) or set "
        "MEMLENS_BIN to a binary built with cargo".format(", ".join(tried))
    )
