"""The agents' short-lived COS keys when the cloud refuses new ones (issue 27, item 8): the refusal is one stated
event naming the permission, retried while the agents' keys are valid; the silence it causes is never taken for a
lost instance."""

from __future__ import annotations

import pytest

from orchestrator.state.machine import JobState
from tests.faults.conftest import expect_scenario
from tests.faults.harness import Pool, Record, World, names, scenario
from tests.faults.test_matrix import exit_code, finish, running, train
from tests.waiting import holds_for

GROUP = "keys"
PERMISSION = "sts:GetFederationToken"


@scenario("key-refresh-refused", GROUP, cost=70)
def key_refresh_refused(w: World) -> None:
    """Mid-training, every STS key expires and GetFederationToken is refused (the controller's key lost
    sts:GetFederationToken): the silent agent's new keys are refused. The controller says so once, naming the
    permission, and neither dies nor takes the silence it caused for a lost instance (the policy's heartbeat
    staleness is 15 s); once the permission is back, its next try gives the agent new keys and the same attempt
    succeeds."""
    job_id = w.submit(train(steps=300, step_seconds=0.1, every=10))
    process = w.resume(job_id)
    running(w, job_id)
    w.inject("error", service="sts", action="GetFederationToken", code="AuthFailure.UnauthorizedOperation",
             message=f"The credential's policy does not allow name/{PERMISSION}.", count=None)
    w.admin.expire_credentials()
    w.note("admin: every STS credential expires now")

    def stated() -> list[str]:
        return [e.detail for e in w.store().events(job_id) if PERMISSION in e.detail]

    w.wait(stated, 90, "the refusal stated in the job's events")
    w.wait(lambda: len([c for c in w.admin.calls(action="GetFederationToken") if c["error"]]) >= 2, 90,
           "the refused refresh tried again")

    def untouched() -> bool:
        job = w.job(job_id)
        return (process.poll() is None and job.state == JobState.RUNNING and job.attempt == 1
                and not w.admin.calls(action="TerminateInstances"))

    holds_for("the controller alive, the job RUNNING on its first attempt, nothing terminated", untouched, 5)
    w.clear_faults()
    w.note("the permission is back (faults cleared)")
    finish(w, job_id, JobState.SUCCEEDED, timeout=180)
    exit_code(w, process, JobState.SUCCEEDED)
    assert w.job(job_id).attempt == 1, w.describe()
    assert len(stated()) == 1, stated()
    w.record.checked.append("the refusal stated once, naming sts:GetFederationToken; no termination for the silence")


@pytest.mark.parametrize("scenario_name", names(GROUP))
def test_keys_on_the_emulator(scenario_name: str, fault_pool: Pool, record: Record) -> None:
    expect_scenario(fault_pool, scenario_name, record)
