"""The CLI's other verbs through a user's eyes: schema, plan (nothing created), run --detach then logs -f, the
ActionTimer every instance carries, the balance check before a launch and `cvmjob cost` after it."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest
import yaml
from tencentcloud.cvm.v20170312 import cvm_client

from orchestrator.errors import EXIT_CLOUD_ERROR
from tests.e2e.conftest import QUICKSTART, REGION, Cli
from tests.e2e.spot_support import job_folder, tiny_command
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
    submitted = cli.run("run", str(job_folder(tmp_path)), "--detach", "--output", "json", "--set",
                        "snapshot.enabled=false", "--set", f"train.command={tiny_command(30, 0.05, 10)}")
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


def test_a_run_the_balance_cannot_pay_is_refused_and_one_it_can_is_costed_with_its_time_not_training(
        cli: Cli, tmp_path: Path) -> None:
    cli.emulator.admin.set_balance(100)  # ¥1: not the hour the cloud freezes at purchase
    refused = cli.run("run", str(QUICKSTART))
    assert refused.returncode == EXIT_CLOUD_ERROR, refused.stdout + refused.stderr
    assert "more than the account's available balance of ¥1.00: top up the account" in refused.stderr
    assert cli.emulator.admin.calls(action="RunInstances") == []  # nothing launched, not even a DryRun
    assert json.loads(cli.run("ls", "--output", "json").stdout) == []  # nor submitted

    cli.emulator.admin.set_balance(10_000_000)
    done = cli.run("run", str(job_folder(tmp_path)), "--output", "json", "--set", "snapshot.enabled=false",
                   "--set", f"train.command={tiny_command(20, 0.05, 10)}", "--set", "tags.team=ml")
    assert done.returncode == 0, done.stdout + done.stderr
    job = json.loads(done.stdout)
    costed = cli.run("cost", "--by", "tag", "--output", "json")
    assert costed.returncode == 0, costed.stderr
    report = json.loads(costed.stdout)
    [row] = report["jobs"]
    assert (row["job_id"], row["cost_cny"], row["source"], row["tags"]) == (job["job_id"], job["cost_cny"], "bill",
                                                                          {"team": "ml"})
    # Boot, setup, preflight, sync, uploads and teardown were billed too: a share of the bill, not all of it.
    # Seconds, not yuan: a short run's share at the quickstart type's 8.69 CNY/h can round to ¥0.00.
    assert row["not_training_seconds"] > 0 and 0 <= row["not_training_cny"] <= row["cost_cny"]
    assert [(g["key"], g["cost_cny"]) for g in report["groups"]] == [("team=ml", job["cost_cny"])]
