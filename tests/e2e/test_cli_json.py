"""`cancel` and `logs` for scripts, through the CLI against the emulator: cancel's one JSON document, logs of the
newest job as JSON lines, and status's nodes carrying the spec's billing word beside the cloud's charge type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import Cli
from tests.e2e.spot_support import job_folder, tiny_command
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e


def test_cancel_and_logs_as_json(cli: Cli, tmp_path: Path) -> None:
    held = tiny_command(20, 0.05, extra="--hold-at 5 --release never-released")  # trains until cancelled
    submitted = cli.run("run", str(job_folder(tmp_path)), "--detach", "--output", "json", "--set",
                        "snapshot.enabled=false", "--set", f"train.command={held}")
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["job_id"]
    wait_until("step 4 in the log", lambda: "step=4 " in cli.run("logs", timeout=60).stdout, 240, poll=3)

    cancelled = cli.run("cancel", job_id, "--no-checkpoint", "--wait", "--output", "json", timeout=240)
    assert cancelled.returncode == 0, cancelled.stderr
    said = json.loads(cancelled.stdout)
    assert (said["job_id"], said["requested"], said["through"], said["state"], said["terminal"]) == (
        job_id, True, "store", "CANCELLED", True)
    again = json.loads(cli.run("cancel", job_id, "--output", "json", timeout=60).stdout)
    assert (again["requested"], again["through"], again["state"]) == (False, None, "CANCELLED")

    logs = cli.run("logs", "--output", "json", timeout=60)  # no job named: the newest, this one
    assert logs.returncode == 0, logs.stderr
    lines = [json.loads(line) for line in logs.stdout.splitlines()]
    assert {(line["job_id"], line["attempt"], line["node"]) for line in lines} == {(job_id, 1, 0)}
    texts = [line["line"] for line in lines]
    assert "step=4 loss=0.2000" in texts and not any("\n" in text for text in texts)

    (node,) = cli.status(job_id)["nodes"]
    assert (node["charge_type"], node["billing"]) == ("POSTPAID_BY_HOUR", "on-demand")
