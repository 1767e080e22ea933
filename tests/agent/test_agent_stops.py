"""Stopping early on an emulated spot instance: a cancel from the controller, then (in the next attempt, which
resumes where the first stopped) a spot reclaim notice from the metadata service. Both end with an emergency
checkpoint committed before the agent reports; the loss log continues across them with no step repeated."""

from __future__ import annotations

import re
import time

from orchestrator.contract import Control, Outcome
from tests.agent.conftest import LIGHT, AgentJob

LONG = f"python train.py --steps 100000 {LIGHT}"


def wait_for_step(job: AgentJob, attempt: int, step: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while (status := job.status(attempt)) is None or (status.get("step") or -1) < step:
        assert time.monotonic() < deadline, f"attempt {attempt} never reached step {step}: {status}"
        time.sleep(0.2)


def steps_in(log: str) -> list[int]:
    return [int(m) for m in re.findall(r"^step=(\d+) loss=", log, re.MULTILINE)]


def test_cancel_then_spot_reclaim_each_leave_an_emergency_checkpoint(agent_job: AgentJob) -> None:
    first = agent_job.config(1, command=LONG, checkpoints={"interval_steps": 1000})
    second = agent_job.config(2, command=LONG, checkpoints={"interval_steps": 1000})
    instance_id = agent_job.launch(first, second, spot=True)

    wait_for_step(agent_job, 1, 3)
    control = Control(action="cancel", reason="cancelled by the test", time=time.time())
    agent_job.state.put_json(agent_job.layout.control(1), control.model_dump(mode="json"))
    cancelled = agent_job.wait_result(instance_id, 1)
    assert cancelled.outcome == Outcome.CANCELLED, f"{cancelled.reason}\n{cancelled.log_tail}"
    assert "emergency checkpoint step-" in cancelled.reason
    (entry,) = agent_job.manifest().checkpoints
    assert entry.emergency and entry.attempt == 1 and entry.step == cancelled.final_step
    first_steps = steps_in(agent_job.log(1))
    assert first_steps == list(range(entry.step + 1))

    wait_for_step(agent_job, 2, entry.step + 12)  # past at least one evaluation (every 10 steps)
    agent_job.emulator.admin.reclaim(instance_id, 30)
    preempted = agent_job.wait_result(instance_id, 2)
    assert preempted.outcome == Outcome.PREEMPTED, f"{preempted.reason}\n{preempted.log_tail}"
    status = agent_job.status(2)
    assert status is not None and status["phase"] == "preempted" and status["notice_time"]
    latest = agent_job.manifest().latest()
    assert latest is not None and latest.emergency and latest.attempt == 2 and latest.step == preempted.final_step
    second_steps = steps_in(agent_job.log(2))
    assert second_steps == list(range(entry.step + 1, latest.step + 1))  # continues, none repeated or skipped
    assert f"stopping after the requested checkpoint at step {latest.step}" in preempted.log_tail
    # A preempted attempt's result keeps what it evaluated last: a sweep's intermediate value.
    assert preempted.metrics_step is not None and (preempted.metrics_step + 1) % 10 == 0
    assert entry.step < preempted.metrics_step <= latest.step and set(preempted.metrics) == {"val_loss", "val_accuracy"}
