from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.spec import load_spec
from orchestrator.spec.errors import SpecError
from orchestrator.spec.overrides import apply_overrides, parse_value, set_values
from tests.unit.spec.conftest import FULL_SPEC, MINIMAL_SPEC, error_lines


def test_overrides_reach_nested_fields_and_list_items(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(FULL_SPEC), [
        "train.nnodes=4", "data.0.target=digits", "billing.spot_max_price=3.5", "zones.1=ap-guangzhou-6",
        "train.command=python train.py --lr: 3",
    ])

    assert spec.train.nnodes == 4
    assert spec.data[0].target == "digits"
    assert spec.billing.spot_max_price == 3.5
    assert spec.zones == ("ap-guangzhou-3", "ap-guangzhou-6")
    assert spec.train.command == "python train.py --lr: 3"


def test_overrides_create_missing_mappings_and_append(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(MINIMAL_SPEC), [
        "limits.max_cost=20", "zones.0=ap-guangzhou-3", "data.0.source=cos://d-1250000000/x", "data.0.target=x",
    ])

    assert spec.limits.max_cost == 20
    assert spec.zones == ("ap-guangzhou-3",)
    assert str(spec.data[0].source) == "cos://d-1250000000/x/"


def test_override_to_null_resets_a_field(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(FULL_SPEC), ["storage.bucket=", "checkpoints.upload_to=null"])
    assert spec.storage.bucket is None and spec.checkpoints.upload_to is None


def test_override_replaces_a_null_section(write_spec: Callable[[str], Path]) -> None:
    spec = load_spec(write_spec(MINIMAL_SPEC + "image:\n"), ["image.id=img-487zeit5"])
    assert spec.image is not None and spec.image.id == "img-487zeit5"


def test_misspelt_override_path_is_a_field_error(write_spec: Callable[[str], Path]) -> None:
    (line,) = error_lines(write_spec(FULL_SPEC), ["train.nnode=2"])
    assert line == "--set train.nnode=2: train.nnode: unknown field. did you mean 'nnodes'?"


@pytest.mark.parametrize(("override", "expected"), [
    ("train.nnodes", "--set train.nnodes: expected key.path=value, e.g. --set train.nnodes=2"),
    ("train..nnodes=2", "--set train..nnodes=2: expected key.path=value, e.g. --set train.nnodes=2"),
    ("data.5.target=x", "--set data.5.target=x: data.5: not an index of this list. use 0..1 (1 appends)"),
    ("data.first.target=x", "--set data.first.target=x: data.first: not an index of this list. use 0..1 (1 appends)"),
    ("name.first=x", "--set name.first=x: name: is 'quickstart', not a mapping or list, so it has no 'first'"),
])
def test_bad_overrides(write_spec: Callable[[str], Path], override: str, expected: str) -> None:
    assert error_lines(write_spec(FULL_SPEC), [override]) == [expected]


def test_apply_overrides_leaves_the_document_alone() -> None:
    document = {"train": {"nnodes": 1}}
    assert apply_overrides(document, ["train.nnodes=2"]) == {"train": {"nnodes": 2}}
    assert document == {"train": {"nnodes": 1}}


@pytest.mark.parametrize(("raw", "value"), [
    ("2", 2), ("2.5", 2.5), ("true", True), ("", None), ("null", None), ("'007'", "007"), ("text", "text"),
    ("[a, b]", ["a", "b"]), ("{gpu: T4}", {"gpu": "T4"}), ("a: b", "a: b"), ("- x", "- x"), ("[unclosed", "[unclosed"),
])
def test_values_are_yaml_scalars_or_flow_collections(raw: str, value: object) -> None:
    assert parse_value(raw) == value


def test_set_values_keeps_each_value_as_it_is_and_names_a_bad_path() -> None:
    document = {"name": "x", "train": {"command": "c"}, "data": [{"target": "a"}]}
    assert set_values(document, {"train.env.LR": 1e-3, "train.env.OPT": "null", "data.1": {"target": "b"}}) == {
        "name": "x", "train": {"command": "c", "env": {"LR": 1e-3, "OPT": "null"}},
        "data": [{"target": "a"}, {"target": "b"}]}
    assert document["train"] == {"command": "c"}  # a copy: the template is left as it was
    with pytest.raises(SpecError, match=r"set.data.5: data.5: not an index of this list"):
        set_values(document, {"data.5": 1})
