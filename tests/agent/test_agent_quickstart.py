"""The agent end to end on an emulated instance: the quickstart succeeds, and a second attempt on the same
instance syncs nothing and resumes from the first one's last checkpoint."""

from __future__ import annotations

from orchestrator.contract import Outcome
from tests.agent.conftest import AgentJob


def test_quickstart_succeeds_and_a_second_attempt_resumes_without_syncing_again(agent_job: AgentJob) -> None:
    first = agent_job.config(1, command="python train.py --steps 12", checkpoints={"interval_steps": 4})
    second = agent_job.config(2, command="python train.py --steps 16", checkpoints={"interval_steps": 4})
    instance_id = agent_job.launch(first, second)

    result = agent_job.wait_result(instance_id, 1)
    log = agent_job.log(1)
    assert result.outcome == Outcome.SUCCEEDED, f"{result.reason}\n{result.log_tail}"
    assert (result.exit_code, result.final_step, result.instance_id) == (0, 11, instance_id)
    assert "step=11 loss=" in log and "val_accuracy=" in result.log_tail
    assert result.outputs_uploaded == 2
    outputs = {o.key.rsplit("/", 1)[1] for o in agent_job.state.iter_objects(agent_job.layout.outputs_prefix)}
    assert outputs == {"model.pt", "metrics.json"}
    status = agent_job.status(1)
    assert status is not None and status["phase"] == "done" and status["seq"] > 2 and status["step"] == 11

    result = agent_job.wait_result(instance_id, 2)
    assert result.outcome == Outcome.SUCCEEDED, f"{result.reason}\n{result.log_tail}"
    log = agent_job.log(2)
    assert "0 bytes to download" in log
    assert "start_step=12 resume_from=" in log and "step=11 " not in log and "step=15 loss=" in log
    manifest = agent_job.manifest()
    assert [(c.step, c.attempt) for c in manifest.checkpoints] == [(7, 1), (11, 1), (15, 2)]
