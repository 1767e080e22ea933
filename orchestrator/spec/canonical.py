"""The spec's canonical JSON (spec.json in COS) and its digest (the base of deterministic ids)."""

from __future__ import annotations

import hashlib
import json

from orchestrator.spec.models import JobSpec


def spec_to_json(spec: JobSpec) -> str:
    """Compact JSON with sorted keys and every default filled in: equal specs give equal text."""
    return json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


def spec_digest(spec: JobSpec) -> str:
    """SHA-256 (hex) of ``spec_to_json(spec)``."""
    return hashlib.sha256(spec_to_json(spec).encode()).hexdigest()
