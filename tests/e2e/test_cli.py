"""The CLI's other verbs through a user's eyes: schema, plan (nothing created), run --detach then logs -f, and the
ActionTimer every instance carries."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest
import yaml
from tencentcloud.cvm.v20170312 import cvm_client

from tests.e2e.conftest import QUICKSTART, REGION, Cli
from tests.e2e.test_run import no_instance_left
from tests.emulator.conftest import cred, profile
from tests.emulator.cvm_support import call
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e


def test_schema_is_a_json_schema_the_examples_satisfy(cli: Cli) -> None:
    printed = cli.run("schema")
    assert printed.returncode == 0, printed.stderr
    schema = json.loads(printed.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False  # extra="forbid": editors flag a misspelt field
    for example in sorted((QUICKSTART.parents[1]).glob("*/job.yaml")):
        jsonschema.validate(yaml.safe_load(example.read_text()), schema)


def test_plan_prices_the_placements_and_creates_nothing(cli: Cli) -> None:
    planned = cli.run("plan", str(QUICKSTART), "--output", "json")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)["plan"]
    first = plan["candidates"][0]
    assert (first["instance_type"], first["charge_type"]) == ("GN7.2XLARGE32", "POSTPAID_BY_HOUR")
    assert first["price_per_hour"] > 0 and plan["estimated_cost"] == pytest.approx(first["price_per_hour"] * 0.5, 0.01)
    table = cli.run("plan", str(QUICKSTART)).stdout
    assert "placements, in the order they will be tried" in table and "limits.max_runtime" in table
    assert cli.emulator.admin.instances() == []  # only a DryRun reached RunInstances
    assert cli.emulator.admin.calls(action="InquiryPriceRunInstances")


def test_detach_returns_at_once_and_logs_follow_the_job_to_its_end(cli: Cli, tmp_path: Path) -> None:
    submitted = cli.run("run", str(QUICKSTART), "--detach", "--output", "json", "--set", "snapshot.enabled=false",
                        "--set", "train.command=python train.py --steps 30")
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["job_id"]

    # Every instance carries a server-side TerminateInstances at the job's deadline (max_runtime 30m, plus margin):
    # if every controller dies, the instance still does.
    (instance,) = wait_until("the instance", cli.emulator.admin.instances, 60)
    cvm = cvm_client.CvmClient(cred(cli.emulator), REGION, profile(cli.emulator))
    (timer,) = call(cvm, "DescribeInstancesActionTimer", {"InstanceIds": [instance["instance_id"]]}).ActionTimers
    assert timer.TimerAction == "TerminateInstances"
    created = cli.status(job_id)["created_at"]
    assert 30 * 60 <= datetime.fromisoformat(timer.ActionTime).timestamp() - created <= 45 * 60

    followed = cli.run("logs", job_id, "--follow", timeout=300)
    assert followed.returncode == 0, followed.stderr
    assert "step=29" in followed.stdout and "result: succeeded" in followed.stdout
    assert cli.status(job_id)["state"] == "SUCCEEDED"
    wait_until("the instance to go", lambda: no_instance_left(cli), 60)
