"""The one definition of "under CI" (conftest.py's ``flag_on``), the same as the Rust tests'
(tests/common/ci.rs): ``CI=0``, ``CI=false`` and an empty ``CI`` are not CI."""

from __future__ import annotations

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
