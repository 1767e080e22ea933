"""``load_spec``: a job spec file (plus ``--set`` overrides) to a validated JobSpec, or one SpecError."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from orchestrator.spec.errors import SpecError
from orchestrator.spec.explain import explain
from orchestrator.spec.models import JobSpec
from orchestrator.spec.overrides import apply_overrides
from orchestrator.spec.yamlfile import read_mapping

if TYPE_CHECKING:
    from orchestrator.policy.loader import JobPolicies

_REQUIRED_FIELDS = [name for name, field in JobSpec.model_fields.items() if field.is_required()]


def load_spec(path: str | os.PathLike[str], overrides: Sequence[str] = ()) -> JobSpec:
    """Read, override and validate the spec at ``path``, and check that the policies it names load.

    Raises SpecError (and nothing else) for anything wrong with the file, the overrides or the policies.
    """
    return load_job(path, overrides)[0]


def load_job(path: str | os.PathLike[str], overrides: Sequence[str] = ()) -> tuple[JobSpec, JobPolicies]:
    """``load_spec``, with the policies it names (loaded once)."""
    spec_path = Path(path)
    document = apply_overrides(read_mapping(spec_path, "job spec", _REQUIRED_FIELDS), overrides)
    try:
        spec = JobSpec.model_validate(document)
    except ValidationError as exc:
        raise SpecError(explain(exc, JobSpec, str(spec_path))) from exc
    # Imported here: orchestrator.policy builds on this package's models, so it cannot be imported at the top.
    from orchestrator.policy.loader import load_job_policies

    return spec, load_job_policies(spec, spec_path)
