"""The job spec: pydantic models, loading with "did you mean" errors, canonical JSON. Pure: no cloud calls.

The names below are loaded when first asked for: every import of a submodule (the agent's of the training's
fields, the store's of the compute section) runs this file first, and loading all of them here made each such
process build every model and import the YAML loader (a tenth of a second of CPU at every start)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.spec.canonical import spec_digest, spec_to_json
    from orchestrator.spec.cos import CosUri
    from orchestrator.spec.durations import Duration, parse_duration
    from orchestrator.spec.errors import Problem, SpecError
    from orchestrator.spec.loader import load_spec
    from orchestrator.spec.models import JobSpec
    from orchestrator.spec.suggest import suggest

_HOME = {  # each name's module
    "CosUri": "cos",
    "Duration": "durations",
    "JobSpec": "models",
    "Problem": "errors",
    "SpecError": "errors",
    "load_spec": "loader",
    "parse_duration": "durations",
    "spec_digest": "canonical",
    "spec_to_json": "canonical",
    "suggest": "suggest",
}
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
assert sorted(__all__) == sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value
