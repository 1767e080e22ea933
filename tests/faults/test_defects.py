"""Every defect docs/reliability.md lists names tests that exist (tests/faults/defects.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.faults.defects import DEFECTS

ROOT = Path(__file__).resolve().parents[2]


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


@pytest.mark.parametrize("test", sorted({t for d in DEFECTS for t in d.tests}))
def test_every_listed_defect_names_a_test_that_exists(test: str) -> None:
    path, _, name = test.partition("::")
    assert (ROOT / path).is_file(), f"{test}: no such file"
    assert name.startswith("test") and name in _functions(ROOT / path), f"{test}: no such test function"
