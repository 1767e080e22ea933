"""docs/spec.md stays true: its example loads, and it mentions every field of the spec and the policies."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from orchestrator.policy.models import PoolPolicy, RecoveryPolicy
from orchestrator.spec import JobSpec, load_spec

DOC = Path(__file__).parents[3] / "docs" / "spec.md"


def _field_names(annotation: Any) -> set[str]:
    """Field names of every model in ``annotation``, nested ones included."""
    names = set()
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            names |= {name} | _field_names(field.annotation)
    for argument in get_args(annotation):
        names |= _field_names(argument)
    return names


def test_the_example_loads(tmp_path: Path) -> None:
    example = re.search(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert example is not None
    path = tmp_path / "job.yaml"
    path.write_text(example.group(1), encoding="utf-8")
    assert load_spec(path).name == "quickstart"


@pytest.mark.parametrize("model", [JobSpec, RecoveryPolicy, PoolPolicy])
def test_every_field_is_documented(model: type[BaseModel]) -> None:
    prose = re.sub(r"```.*?```", "", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    spans = " ".join(re.findall(r"`([^`]+)`", prose))
    missing = sorted(name for name in _field_names(model) if not re.search(rf"\b{name}\b", spans))
    assert missing == []
