"""The one definition of "under CI" (conftest.py's ``flag_on``), the same as the Rust tests'
(tests/common/ci.rs): ``CI=0``, ``CI=false`` and an empty ``CI`` are not CI; and every check of
the installed wheel is among the tests the wheel stage of scripts/test runs."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

import pytest

from conftest import flag_on


@pytest.mark.parametrize(
    "value, on",
    [
        ("1", True),
        ("true", True),
        ("yes", True),
        ("TRUE", True),
        ("0", False),
        ("false", False),
        ("False", False),
        ("no", False),
        ("", False),
        (" 0 ", False),
        (None, False),
    ],
)
def test_ci_values(value: Optional[str], on: bool) -> None:
    assert flag_on(value) is on


def test_every_check_of_the_install_runs_against_the_wheel() -> None:
    """A test that checks the installed wheel (calls ``require_installed``) is marked
    ``installed``: the wheel stage of scripts/test runs only those (``-m installed``), and the source-tree
    run of ``cargo test`` skips it, so an unmarked one would run nowhere."""
    unmarked = []
    checks = 0
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
                continue
            calls = {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
            if "require_installed" not in calls:
                continue
            checks += 1
            marks = {d.attr for d in node.decorator_list
                     if isinstance(d, ast.Attribute) and isinstance(d.value, ast.Attribute) and d.value.attr == "mark"}
            if "installed" not in marks:
                unmarked.append(f"{path.name}::{node.name}")
    assert checks >= 3, "the checks of the install (require_installed) were not found"
    assert unmarked == [], unmarked
