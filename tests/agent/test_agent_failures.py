"""Failures are results too: a failing setup command and a crashing training each end with their outcome, the
exit code and the log tail, and nothing keeps running."""

from __future__ import annotations

from orchestrator.contract import Outcome
from tests.agent.conftest import AgentJob

CRASH = "import sys\nprint('about to divide', flush=True)\n1 / 0\n"


def test_setup_and_training_failures_are_reported_with_their_log_tail(agent_job: AgentJob) -> None:
    setup = agent_job.config(1, command="python train.py",
                             setup=["echo preparing", "echo 'no such package' >&2; exit 3"])
    crash = agent_job.config(2, command="python crash.py", extra_files={"crash.py": CRASH})
    instance_id = agent_job.launch(setup, crash)

    failed_setup = agent_job.wait_result(instance_id, 1)
    assert (failed_setup.outcome, failed_setup.exit_code) == (Outcome.SETUP_FAILED, 3)
    assert "setup command 2" in failed_setup.reason and "no such package" in failed_setup.log_tail
    status = agent_job.status(1)
    assert status is not None and status["phase"] == "failed"

    crashed = agent_job.wait_result(instance_id, 2)
    assert (crashed.outcome, crashed.exit_code) == (Outcome.TRAINING_FAILED, 1), crashed.reason
    assert "ZeroDivisionError" in crashed.log_tail and "about to divide" in agent_job.log(2)
    assert crashed.final_step is None and crashed.outputs_uploaded == 0
