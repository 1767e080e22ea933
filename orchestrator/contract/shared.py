"""Controller -> other machines and later runs: the job's document (job.json), the fingerprints of `--if-changed`,
the facts CI reads of a run."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import LAYOUT_VERSION, Model
from .layout import Location
from .reports import Metrics


class DataDigest(Model):
    """One data entry's listing at a moment: the sha256 of its objects' keys, sizes and ETags."""

    bucket: str
    prefix: str
    objects: int
    bytes: int
    sha256: str


class Fingerprint(Model):
    """What a job's result depends on (orchestrator/ci/fingerprint.py)."""

    cvmjob_version: str
    spec_sha256: str
    workdir_sha256: str
    image_id: str
    data: list[DataDigest]


class FingerprintEntry(Model):
    """``_fingerprints/<digest>.json``: the job that succeeded on these inputs, and what it left."""

    layout_version: int = LAYOUT_VERSION
    job_id: str
    name: str
    finished_at: float
    fingerprint: Fingerprint
    outputs: Location
    metrics: Metrics = Field(default_factory=dict)
    image_id: str | None = None


class JobDoc(Model):
    """``job.json``: the job's records as the store of its controller holds them (orchestrator/state/jobdoc.py)."""

    layout_version: int = LAYOUT_VERSION
    job: dict[str, Any]
    nodes: list[dict[str, Any]]
    events: list[dict[str, Any]]


class RunLabels(Model):
    """Where a job was submitted from, as its CI system says (orchestrator/ci/facts.py reads them)."""

    ref: str = ""  # the git branch or tag
    sha: str = ""
    run_url: str = ""


class RunFacts(Model):
    """One job as its summary tells it; ``_latest/<name>/<ref>.json`` holds the newest succeeded one's."""

    job_id: str
    name: str
    state: str
    metrics: dict[str, float]
    cost_cny: float | None
    duration_seconds: float | None
    attempts: int
    reclaims: int
    finished_at: float | None
    ref: str | None  # the git ref it ran for
    up_to_date: bool = False  # `--if-changed` found a job that succeeded on the same inputs: this is that job
