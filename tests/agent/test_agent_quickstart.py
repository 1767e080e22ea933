"""The agent end to end on an emulated instance: the quickstart survives a reboot in the middle of its training
and succeeds; the next attempt on the same instance syncs nothing and resumes from the last checkpoint."""

from __future__ import annotations

import re

from orchestrator.contract import Outcome
from tests.agent.conftest import LIGHT, PACED, AgentJob
from tests.agent.test_agent_stops import steps_in, wait_for_step
from tests.emulator.cvm_support import call, wait_state


def test_quickstart_survives_a_reboot_and_the_next_attempt_resumes_without_syncing(agent_job: AgentJob) -> None:
    # No snapshot after the first: a node cleaned for an image keeps no data for a next attempt (agent/seal.py).
    first = agent_job.config(1, command=f"python paced.py 0.05 --steps 100 {LIGHT}", extra_files=PACED,
                             checkpoints={"interval_steps": 10}, snapshot={"enabled": False})
    second = agent_job.config(2, command=f"python train.py --steps 110 {LIGHT}", checkpoints={"interval_steps": 10})
    instance_id = agent_job.launch(first, second)

    wait_for_step(agent_job, 1, 15)
    call(agent_job.cvm, "RebootInstances", {"InstanceIds": [instance_id]})
    wait_state(agent_job.cvm, instance_id, "RUNNING")
    result = agent_job.wait_result(instance_id, 1)
    log = agent_job.log(1)
    assert result.outcome == Outcome.SUCCEEDED, f"{result.reason}\n{result.log_tail}"
    assert (result.exit_code, result.final_step, result.instance_id) == (0, 99, instance_id)
    # The validation metrics of the last step, the one the run ended with (the attempt resumed after the reboot).
    assert result.metrics_step == 99 and set(result.metrics) == {"val_loss", "val_accuracy"}
    assert 0.0 <= result.metrics["val_accuracy"] <= 1.0
    assert "SIGTERM: stopping the training" in log and log.count("agent: job") == 2
    (resumed_at,) = (int(s) for s in re.findall(r"start_step=(\d+) resume_from=/", log))
    steps = steps_in(log)
    assert resumed_at > 0 and sorted(set(steps)) == list(range(100)) and steps[-1] == 99
    assert result.outputs_uploaded == 2 and "val_accuracy=" in result.log_tail
    outputs = {o.key.rsplit("/", 1)[1] for o in agent_job.state.iter_objects(agent_job.layout.outputs_prefix)}
    assert outputs == {"model.pt", "metrics.json"}
    status = agent_job.status(1)
    assert status is not None and status["phase"] == "done" and status["seq"] > 2 and status["step"] == 99

    result = agent_job.wait_result(instance_id, 2)
    assert result.outcome == Outcome.SUCCEEDED, f"{result.reason}\n{result.log_tail}"
    log = agent_job.log(2)
    assert "0 bytes to download" in log and "start_step=100 resume_from=" in log
    assert steps_in(log) == list(range(100, 110))
    manifest = agent_job.manifest()
    assert [(c.step, c.attempt) for c in manifest.checkpoints] == [(89, 1), (99, 1), (109, 2)]
