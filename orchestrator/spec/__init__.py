"""The job spec: pydantic models, loading with "did you mean" errors, canonical JSON. Pure: no cloud calls."""

from orchestrator.spec.canonical import spec_digest, spec_to_json
from orchestrator.spec.cos import CosUri
from orchestrator.spec.durations import Duration, parse_duration
from orchestrator.spec.errors import Problem, SpecError
from orchestrator.spec.loader import load_spec
from orchestrator.spec.models import JobSpec
from orchestrator.spec.suggest import suggest

__all__ = [
    "CosUri",
    "Duration",
    "JobSpec",
    "Problem",
    "SpecError",
    "load_spec",
    "parse_duration",
    "spec_digest",
    "spec_to_json",
    "suggest",
]
