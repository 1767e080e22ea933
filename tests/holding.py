"""A training held until the test has looked (``tiny.py --hold-at``): the test controls how long a job trains
instead of guessing a length that outlasts its looks on a loaded machine, and the job ends as soon as it is let go."""

from __future__ import annotations

from pathlib import Path

from orchestrator.contract import TAG_JOB
from orchestrator.emulator.client import AdminClient

RELEASE = "tiny.release"  # the file under the instance's $HOME that tiny.py's hold waits for


def held(step: int) -> str:
    """tiny.py's flags that hold its training before ``step`` until ``release`` lets it go."""
    return f"--hold-at {step} --release {RELEASE}"


def release(admin: AdminClient, *job_ids: str) -> list[str]:
    """Let the held trainings on the running instances of ``job_ids`` (none: every running instance, a pool's
    members too) go on; the instances let go. An instance launched later (a next attempt) holds again until
    released in its turn."""
    released = []
    for instance in admin.instances(processes=False):
        tags = instance.get("tags") or {}
        if instance["state"] == "RUNNING" and (not job_ids or tags.get(TAG_JOB) in job_ids):
            (Path(instance["home"]) / RELEASE).touch()
            released.append(str(instance["instance_id"]))
    return released
