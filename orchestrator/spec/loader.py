"""``load_spec``: a job spec file (plus ``--set`` overrides) to a validated JobSpec, or one SpecError."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.spec.errors import SpecError
from orchestrator.spec.explain import explain
from orchestrator.spec.models import JobSpec
from orchestrator.spec.overrides import apply_overrides
from orchestrator.spec.yamlfile import read_mapping

_REQUIRED_FIELDS = [name for name, field in JobSpec.model_fields.items() if field.is_required()]


def load_spec(path: str | os.PathLike[str], overrides: Sequence[str] = (),
              document: dict[str, Any] | None = None) -> JobSpec:
    """Read, override and validate the spec at ``path``: the spec alone (``policy.loader.load_job`` loads the
    policies it names too). ``document``: the spec's mapping, read already (a sweep's trial); ``path`` is still
    where relative paths start and what a problem names.

    Raises SpecError (and nothing else) for anything wrong with the file or the overrides.
    """
    spec_path = Path(path)
    document = apply_overrides(read_job(spec_path) if document is None else document, overrides)
    try:
        return JobSpec.model_validate(document)
    except ValidationError as exc:
        raise SpecError(explain(exc, JobSpec, str(spec_path))) from exc


def read_job(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The job spec file's mapping, not validated yet (a sweep renders its trials' parameters into it first)."""
    return read_mapping(Path(path), "job spec", _REQUIRED_FIELDS)

