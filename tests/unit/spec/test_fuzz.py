"""Whatever is in the file or the overrides, load_spec returns a JobSpec or raises SpecError: nothing else."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.spec import JobSpec, SpecError, load_spec
from tests.unit.spec.conftest import FULL_SPEC

BASE = yaml.safe_load(FULL_SPEC)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _paths(child, (*prefix, index))
    return found


PATHS = _paths(BASE)
FIELD_NAMES = sorted({str(part) for path in PATHS for part in path})
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30) | st.sampled_from(
    ["auto", "30m", "cos://x-1250000000/a", "GN7.2XLARGE40", "spot", "", "-1", "1d", "img-487zeit5"])
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8),
                                                                inner, max_size=3),
    max_leaves=8,
)


def _load(directory: Path, text: str, overrides: Sequence[str] = ()) -> None:
    path = directory / "job.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        assert isinstance(load_spec(path, overrides), JobSpec)
    except SpecError as exc:
        for line in str(exc).splitlines():
            assert line.startswith((str(path), "--set ")), line
            assert "Traceback" not in line and "errors.pydantic.dev" not in line


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(max_examples=300, deadline=None)
@given(path=st.sampled_from(PATHS), value=values, delete=st.booleans())
def test_any_value_anywhere(directory: Path, path: tuple[Any, ...], value: Any, delete: bool) -> None:
    document = copy.deepcopy(BASE)
    node = document
    for part in path[:-1]:
        node = node[part]
    if delete and isinstance(node, dict):
        del node[path[-1]]
    else:
        node[path[-1]] = value
    _load(directory, yaml.safe_dump(document, allow_unicode=True))


@settings(max_examples=200, deadline=None)
@given(document=st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=8), values, max_size=6))
def test_any_mapping(directory: Path, document: dict[str, Any]) -> None:
    _load(directory, yaml.safe_dump(document, allow_unicode=True))


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text(directory: Path, text: str) -> None:
    _load(directory, text)


@settings(max_examples=200, deadline=None)
@given(overrides=st.lists(st.text(max_size=30) | st.builds(
    lambda path, value: ".".join(map(str, path)) + "=" + value, st.sampled_from(PATHS), st.text(max_size=15)),
    max_size=3))
def test_any_overrides(directory: Path, overrides: list[str]) -> None:
    _load(directory, FULL_SPEC, overrides)
