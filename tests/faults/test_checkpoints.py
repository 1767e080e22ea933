"""Checkpoints belong to the job that wrote them (issue 27, item 1): jobs whose specs name the same
``checkpoints.upload_to`` each train from their own start, and a job starts from another's checkpoint only when its
spec says so (``checkpoints.resume_from``)."""

from __future__ import annotations

import pytest

from orchestrator.state.machine import JobState
from tests.faults.conftest import expect_scenario
from tests.faults.harness import JOB, Pool, Record, World, names, scenario

GROUP = "checkpoints"
SHARED_BUCKET = "cvmjob-ckpt-1250000000"
SHARED = f"checkpoints.upload_to=cos://{SHARED_BUCKET}/shared/"


def trained(w: World, job_id: str) -> str:
    """The job's log once it has succeeded."""
    job = w.wait_terminal(job_id)
    assert job.state == JobState.SUCCEEDED, f"{job_id} ended {job.state.value} ({job.reason})\n{w.describe()}"
    return w.log_text(job_id, job.attempt)


@scenario("checkpoints-shared-upload-to", GROUP, cost=40)
def shared_upload_to(w: World) -> None:
    """Two runs of one spec with the same `checkpoints.upload_to` each train from step 0 (the second restored the
    first's step 19 and trained nothing); a third with `checkpoints.resume_from: <the first's id>` starts from the
    first's step 19; one naming a job without a checkpoint is refused at plan (exit 2), nothing created."""
    w.cos().create_bucket(Bucket=SHARED_BUCKET)
    first = w.submit(SHARED)
    w.resume(first)
    assert "tiny: fresh start" in trained(w, first)
    second = w.submit(SHARED)
    w.resume(second)
    log = trained(w, second)
    assert "tiny: fresh start" in log and "resumed from" not in log, log[-2000:]
    ours = w.manifest(second)
    assert ours is not None and ours.checkpoints and {c.job for c in ours.checkpoints} == {second}, ours

    third = w.submit(SHARED, f"checkpoints.resume_from={first}",
                     "train.command=exec python3 tiny.py --steps 30 --step-seconds 0.1 --every 5")
    w.resume(third)
    log = trained(w, third)
    assert "tiny: resumed from step 19" in log and "start_step=20" in log, log[-2000:]
    assert [c.step for c in w.manifest(third).checkpoints] == [24, 29]  # type: ignore[union-attr]
    assert [c.step for c in w.manifest(first).checkpoints] == [4, 9, 14, 19]  # type: ignore[union-attr]

    jobs = len(w.jobs())
    refused = w.cli("plan", str(JOB), "--set", SHARED, "--set", "checkpoints.resume_from=job-00000000")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "checkpoints.resume_from" in refused.stderr, refused.stderr
    assert len(w.jobs()) == jobs


@pytest.mark.parametrize("scenario_name", names(GROUP))
def test_checkpoints(scenario_name: str, fault_pool: Pool, record: Record) -> None:
    expect_scenario(fault_pool, scenario_name, record)
