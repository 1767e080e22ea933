"""``load_spec``: a job spec file (plus ``--set`` overrides) to a validated JobSpec, or one SpecError."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from orchestrator.spec.errors import SpecError
from orchestrator.spec.explain import explain
from orchestrator.spec.models import JobSpec
from orchestrator.spec.overrides import apply_overrides
from orchestrator.spec.sources import Sources
from orchestrator.spec.yamlfile import read_document, read_mapping

Model = TypeVar("Model", bound=BaseModel)


def required_fields(model: type[BaseModel]) -> list[str]:
    return [name for name, field in model.model_fields.items() if field.is_required()]


def load_spec(path: str | os.PathLike[str], overrides: Sequence[str] = (),
              document: dict[str, Any] | None = None) -> JobSpec:
    """Read, override and validate the spec at ``path``: the spec alone (``policy.loader.load_job`` loads the
    policies it names too). ``document``: the spec's mapping, read already (a sweep's trial); ``path`` is still
    where relative paths start and what a problem names.

    Raises SpecError (and nothing else) for anything wrong with the file or the overrides.
    """
    if document is None:
        return load_file(Path(path), JobSpec, "job spec", overrides)
    return validate(JobSpec, apply_overrides(document, overrides), Sources(str(path), overrides=overrides))


def load_file(path: Path, model: type[Model], what: str, overrides: Sequence[str] = ()) -> Model:
    """The ``model`` (a job or a sweep spec, a ``what``) in the YAML file at ``path`` with ``overrides`` applied;
    each problem at its field's ``file:line:col``, or at its ``--set``."""
    read = read_document(path, what, required_fields(model))
    return validate(model, apply_overrides(read.data, overrides), Sources(str(path), read.positions, overrides))


def validate(model: type[Model], document: dict[str, Any], sources: Sources) -> Model:
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise SpecError(explain(exc, model, sources)) from exc


def read_job(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The job spec file's mapping, not validated yet (a sweep renders its trials' parameters into it first)."""
    return read_mapping(Path(path), "job spec", required_fields(JobSpec))
