"""Typed records for tests that need a job in a store or in hand: the smallest valid spec, plan and target."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from orchestrator.contract import Fingerprint, RunLabels
from orchestrator.plan.models import Plan
from orchestrator.plan.settings import Settings
from orchestrator.spec.models import JobSpec
from orchestrator.state.machine import JobState
from orchestrator.state.store import JobRecord, NewJob
from orchestrator.target import Target

REGION = "ap-guangzhou"
TARGET = Target(kind="emulator", region=REGION, appid="1250000000", endpoint="127.0.0.1:1")


def spec(name: str = "demo", **fields: Any) -> JobSpec:
    return JobSpec.model_validate({"name": name, "region": REGION, "instance": {"type": "S5.MEDIUM4"},
                                   "train": {"command": "python train.py"}, **fields})


def plan(**fields: Any) -> Plan:
    return Plan.model_validate({"region": REGION, "image_id": "img-1", **fields})


def new_job(job_id: str = "job-1", name: str = "demo", *, job_spec: JobSpec | None = None,
            job_plan: Plan | None = None, target: Target = TARGET, settings: Settings | None = None,
            deadline: float = 9e9, source_dir: str = "/", fingerprint: Fingerprint | None = None,
            labels: RunLabels | None = None) -> NewJob:
    return NewJob(job_id=job_id, name=name, spec=job_spec or spec(name), plan=job_plan or plan(), target=target,
                  settings=settings or Settings(), deadline=deadline, source_dir=source_dir, fingerprint=fingerprint,
                  labels=labels or RunLabels())


def job_record(job_id: str = "job-1", name: str = "demo", state: JobState = JobState.PENDING,
               **changes: Any) -> JobRecord:
    """A job as a store would give it back, without a store."""
    base = JobRecord(
        job_id=job_id, name=name, state=state, outcome=None, reason="", spec=spec(name), plan=plan(),
        target=TARGET, attempt=1, created_at=0.0, updated_at=0.0, deadline=9e9, image_id=None, exit_code=None,
        cost_cny=0.0, cancel_requested=False, keep_until=None, final_step=None, lease_owner=None, lease_token=1,
        lease_expires=0.0, source_dir="/", settings=Settings(),
    )
    return replace(base, **changes)
