"""What a CI run knows of a job: where it was submitted from (its CI system's variables), the facts its summary
tells (from the store's records), and which branch a baseline comes from."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..contract import RunFacts, RunLabels
from ..state.machine import JobState
from ..state.store import Event, JobRecord

DEFAULT_BRANCH = "main"


def labels_from(env: Mapping[str, str]) -> RunLabels:
    """The ref, the commit and the run's page, from GitHub Actions' or GitLab CI's variables (CVMJOB_REF wins)."""
    run_url = ""
    if env.get("GITHUB_RUN_ID"):
        run_url = (f"{env.get('GITHUB_SERVER_URL', 'https://github.com')}/{env.get('GITHUB_REPOSITORY', '')}"
                   f"/actions/runs/{env['GITHUB_RUN_ID']}")
    return RunLabels(
        ref=env.get("CVMJOB_REF") or env.get("GITHUB_REF_NAME") or env.get("CI_COMMIT_REF_NAME", ""),
        sha=env.get("GITHUB_SHA") or env.get("CI_COMMIT_SHA", ""),
        run_url=run_url or env.get("CI_PIPELINE_URL", ""),
    )


def default_branch(env: Mapping[str, str]) -> str:
    """Where baselines come from: CVMJOB_BASELINE_REF, else the repository's default branch as GitHub's event
    payload names it (GitLab: CI_DEFAULT_BRANCH), else main."""
    if env.get("CVMJOB_BASELINE_REF"):
        return env["CVMJOB_BASELINE_REF"]
    if env.get("CI_DEFAULT_BRANCH"):
        return env["CI_DEFAULT_BRANCH"]
    try:
        event = json.loads(Path(env["GITHUB_EVENT_PATH"]).read_text())
        return str(event["repository"]["default_branch"])
    except (KeyError, OSError, ValueError, TypeError):
        return DEFAULT_BRANCH


def reclaims(events: list[Event]) -> int:
    """Attempts the cloud took back: each RUNNING -> RECOVERING."""
    return sum(1 for e in events if e.kind == "transition" and e.from_state == JobState.RUNNING.value
               and e.to_state == JobState.RECOVERING.value)


def run_facts(job: JobRecord, events: list[Event], metrics: dict[str, float], now: float) -> RunFacts:
    ended = job.updated_at if job.state.is_terminal() else None
    return RunFacts(job_id=job.job_id, name=job.name, state=job.state.value, metrics=metrics,
                    cost_cny=job.cost_cny, duration_seconds=(ended or now) - job.created_at,
                    attempts=job.attempt, reclaims=reclaims(events), finished_at=ended,
                    ref=job.labels.ref or None)
