"""``cvmjob run --secret NAME``: names added to the spec's ``secrets``, validated as the spec's own are."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from orchestrator.spec.errors import SpecError
from orchestrator.spec.explain import explain
from orchestrator.spec.models import JobSpec


def with_secrets(spec: JobSpec, names: Sequence[str]) -> JobSpec:
    """``spec`` with ``names`` added to its ``secrets``; a name the spec (or an earlier ``--secret``) already has is
    kept once. SpecError when a name is not one the spec would take (its form, CVMJOB_*, torchrun's, train.env)."""
    added = [name for name in dict.fromkeys(names) if name not in spec.secrets]
    if not added:
        return spec
    try:
        return JobSpec.model_validate({**spec.model_dump(mode="json"), "secrets": [*spec.secrets, *added]})
    except ValidationError as exc:
        raise SpecError(explain(exc, JobSpec, "--secret")) from exc
