"""Ctrl-C, SIGTERM and kill -9 of the controller: graceful cancel with nothing leaked, and resume."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from orchestrator.state.machine import EXIT_CODES, JobState
from tests.e2e.conftest import Cli
from tests.e2e.spot_support import job_folder, tiny_command
from tests.e2e.test_run import no_instance_left
from tests.holding import held, release
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

# tiny.py (no torch: what is tested is the controller's cancel), held after `training` is seen until the cancel's
# checkpoint request ends the hold, however slowly `cvmjob status` answers on a loaded machine.
LONGER = ("--set", f"train.command={tiny_command(20, 0.1, 5, held(8))}")


def training(status: dict[str, Any]) -> bool:
    agent = status.get("agent") or {}
    return status["state"] == "RUNNING" and agent.get("phase") == "training" and (agent.get("step") or 0) >= 5


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_cancels_gracefully_and_leaks_nothing(cli: Cli, sig: signal.Signals, tmp_path: Path) -> None:
    process = cli.start("run", str(job_folder(tmp_path)), *LONGER)
    try:
        status = cli.wait_for(training)
        process.send_signal(sig)
        assert process.wait(timeout=180) == EXIT_CODES[JobState.CANCELLED], cli.output()
    finally:
        process.kill()
        process.wait()
    final = cli.status(status["job_id"])
    assert final["state"] == "CANCELLED"
    assert [p["state"] for p in final["phases"]][-3:] == ["CANCELLING", "TEARING_DOWN", "CANCELLED"]
    assert final["checkpoints"], "the agent checkpointed before stopping"
    assert no_instance_left(cli)
    assert cli.emulator.admin.calls(action="CreateImage") == []


def stubborn_job(tmp_path: Path) -> Path:
    """A training that ignores every request to stop: only tearing the instance down ends it."""
    folder = tmp_path / "stubborn"
    folder.mkdir()
    (folder / "stubborn.py").write_text(
        "import signal, time\n"
        "for s in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT):\n"
        "    signal.signal(s, signal.SIG_IGN)\n"
        "print('step=0 loss=1.0', flush=True)\n"
        "time.sleep(3600)\n"
    )
    (folder / "job.yaml").write_text(
        "name: stubborn\nregion: ap-guangzhou\ninstance: {type: S5.MEDIUM4}\n"
        "train: {command: exec python3 stubborn.py, cpu_nproc: 1}\nlimits: {max_runtime: 20m}\n"
    )
    return folder / "job.yaml"


def test_a_second_ctrl_c_tears_down_at_once(cli: Cli, tmp_path: Path) -> None:
    process = cli.start("run", str(stubborn_job(tmp_path)))
    try:
        status = cli.wait_for(lambda s: s["state"] == "RUNNING" and (s.get("agent") or {}).get("phase") == "training")
        process.send_signal(signal.SIGINT)
        cli.wait_for(lambda s: s["state"] == "CANCELLING", timeout=60)  # the agent is asked; the training ignores it
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=90) == EXIT_CODES[JobState.CANCELLED], cli.output()  # not the 180 s grace
    finally:
        process.kill()
        process.wait()
    final = cli.status(status["job_id"])
    assert [p["state"] for p in final["phases"]][-3:] == ["CANCELLING", "TEARING_DOWN", "CANCELLED"]
    assert "Tearing down now." in cli.output() and "cancelled: tearing down at once" in cli.output()
    # Terminated in the cloud; the training, deaf to SIGTERM, dies at the emulator's SIGKILL a few seconds on.
    wait_until("the instance's processes to die", lambda: no_instance_left(cli), 30)


def test_kill_9_of_the_controller_then_resume_finishes_on_the_same_instance(cli: Cli, tmp_path: Path) -> None:
    # Held mid-run until the controller was killed, however slowly `cvmjob status` answers on a loaded machine.
    held_job = ("--set", f"train.command={tiny_command(20, 0.1, 10, held(8))}")
    process = cli.start("run", str(job_folder(tmp_path)), *held_job)
    try:
        status = cli.wait_for(training)
        process.kill()  # SIGKILL: no handler runs, nothing is cleaned up
        process.wait()
    finally:
        process.kill()
        process.wait()
    job_id = status["job_id"]
    assert cli.status(job_id)["state"] == "RUNNING"
    assert release(cli.emulator.admin, job_id) == [status["nodes"][0]["instance_id"]]
    resumed = cli.run("resume", job_id, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    final = cli.status(job_id)
    assert final["state"] == "SUCCEEDED"
    created = cli.emulator.admin.instances()
    assert len(created) == 1, created  # no second instance (the plan's DryRun creates none)
    assert {n["instance_id"] for n in final["nodes"]} == {status["nodes"][0]["instance_id"]}
    assert no_instance_left(cli)
