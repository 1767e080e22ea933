from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.spec import JobSpec, load_spec, spec_to_json
from tests.unit.spec.conftest import FULL_SPEC, MINIMAL_SPEC

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema validates the exported schema")


@pytest.fixture(scope="module")
def validator() -> Any:
    schema = JobSpec.model_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("text", [FULL_SPEC, MINIMAL_SPEC])
def test_example_specs_are_valid_against_the_schema(validator: Any, text: str) -> None:
    assert list(validator.iter_errors(yaml.safe_load(text))) == []


def test_canonical_json_is_valid_against_the_schema(validator: Any, write_spec: Callable[[str], Path]) -> None:
    document = json.loads(spec_to_json(load_spec(write_spec(FULL_SPEC))))
    assert list(validator.iter_errors(document)) == []


@pytest.mark.parametrize(("path", "value"), [
    (("trian",), {"command": "x"}),
    (("billing", "mode"), "spotted"),
    (("train", "hang_timeout"), "1.5h"),
    (("data", 0, "source"), "s3://datasets-1250000000/x"),
    (("instance", "type"), "gn7.2xlarge32"),
    (("disks", "system", "size_gib"), 10),
    (("name",), "My Job"),
    (("train", "env"), {"lower": "x"}),
])
def test_schema_rejects_what_the_models_reject(validator: Any, path: tuple[str | int, ...], value: object) -> None:
    document = yaml.safe_load(FULL_SPEC)
    node = document
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    assert list(validator.iter_errors(document)) != []


def test_schema_documents_fields_for_editors() -> None:
    schema = JobSpec.model_json_schema()
    train = schema["$defs"]["TrainSpec"]["properties"]
    assert "torchrun" in train["command"]["description"]
    assert train["hang_timeout"]["anyOf"][0]["anyOf"][0]["pattern"]
    assert schema["properties"]["name"]["examples"] == ["quickstart"]
    assert schema["additionalProperties"] is False
