"""A 2-node x 2-process DDP job through the CLI: it completes, and after one node is reclaimed mid-run the whole
attempt is replaced and resumes from the last checkpoint."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tencentcloud.common import credential
from tencentcloud.vpc.v20170312 import models as vpc_models
from tencentcloud.vpc.v20170312 import vpc_client

from orchestrator.state.machine import EXIT_CODES, JobState
from tests.e2e.conftest import REGION, Cli
from tests.e2e.spot_support import JobWatch, LiveCount, job_folder, spot_overrides, start_steps, steps_in
from tests.e2e.test_run import no_instance_left
from tests.e2e.test_spot import NOTICE, PACE, STEPS, assert_one_attempt_alive_at_a_time, attempt_log, finish
from tests.emulator.conftest import profile

pytestmark = pytest.mark.e2e

NODES = ("train.nnodes=2",)
_WORLD = re.compile(r"^world=(\d+) ", re.MULTILINE)


def both_logs(cli: Cli, job_id: str, attempt: int) -> tuple[str, str]:
    """Node 0's and node 1's logs; rank 0 (the one printing steps) may be on either: ranks come from the
    rendezvous."""
    return attempt_log(cli, job_id, attempt, 0), attempt_log(cli, job_id, attempt, 1)


def test_a_two_node_job_completes(cli: Cli, tmp_path: Path) -> None:
    steps = 30
    spec = job_folder(tmp_path)
    overrides = spot_overrides(steps, every=10, pace=0, extra=NODES, ddp=True)
    result = cli.run("run", str(spec), *overrides[2:], timeout=240)  # on-demand: drop billing.mode=spot
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    final = cli.status()
    assert final["state"] == "SUCCEEDED" and final["attempt"] == 1
    assert sorted(n["node"] for n in final["nodes"]) == [0, 1]
    assert len({n["instance_id"] for n in final["nodes"]}) == 2
    logs = both_logs(cli, final["job_id"], 1)
    assert [_WORLD.findall(log) for log in logs].count(["4"]) == 1  # one rank 0, of 2 nodes x 2 processes
    assert steps_in("".join(logs)) == list(range(steps))
    assert [c["step"] for c in final["checkpoints"]] == [9, 19, 29]
    assert no_instance_left(cli)


def test_a_two_node_job_completes_after_one_node_is_reclaimed(cli: Cli, tmp_path: Path) -> None:
    steps = STEPS
    spec = job_folder(tmp_path)
    watch = JobWatch(cli.emulator)
    with LiveCount(cli.emulator) as live:
        process = cli.start("run", str(spec), *spot_overrides(steps, every=steps, pace=PACE, extra=NODES, ddp=True))
        try:
            first = watch.running(attempt=1, nodes=2)
            watch.wait_for_step(attempt=1, step=10, nodes=2)
            cli.emulator.admin.reclaim(first[1]["instance_id"], NOTICE)  # node 1 only
        finally:
            code = finish(process, cli)
    assert code == 0, cli.output()[-4000:]
    final = cli.status(watch.job_id)
    assert final["state"] == "SUCCEEDED" and final["attempt"] == 2, final["reason"]
    assert final["result"] is None or final["result"]["outcome"] == "succeeded"

    first_logs, second_logs = both_logs(cli, watch.job_id, 1), both_logs(cli, watch.job_id, 2)
    first_steps, second_steps = steps_in("".join(first_logs)), steps_in("".join(second_logs))
    # Every rank stopped at the same step after the emergency checkpoint node 1's notice asked for.
    emergency = first_steps[-1]
    assert first_steps == list(range(emergency + 1))
    assert [c["step"] for c in final["checkpoints"]] == [emergency, steps - 1]
    assert start_steps("".join(second_logs)) == [emergency + 1]
    assert second_steps == list(range(emergency + 1, steps))
    lost = [n for n in final["nodes"] if n["attempt"] == 1]
    assert sorted(n["node"] for n in lost) == [0, 1] and all(n["state"] == "lost" for n in lost), lost
    assert_one_attempt_alive_at_a_time(cli, watch, live, nodes=2)
    assert no_instance_left(cli)


def closed_group(cli: Cli) -> str:
    """A security group as the API makes one, given only egress: its members cannot reach each other."""
    client = vpc_client.VpcClient(credential.Credential(cli.emulator.secret_id, cli.emulator.secret_key), REGION,
                                  profile(cli.emulator))
    request = vpc_models.CreateSecurityGroupRequest()
    request.GroupName, request.GroupDescription = "training", "egress only"
    group = str(client.CreateSecurityGroup(request).SecurityGroup.SecurityGroupId)
    rules = vpc_models.CreateSecurityGroupPoliciesRequest()
    rules.from_json_string(json.dumps({"SecurityGroupId": group, "SecurityGroupPolicySet": {
        "Egress": [{"Protocol": "ALL", "CidrBlock": "0.0.0.0/0", "Action": "ACCEPT"}]}}))
    client.CreateSecurityGroupPolicies(rules)
    return group


def test_a_two_node_job_in_a_group_that_does_not_admit_its_nodes_fails_naming_the_rule(cli: Cli,
                                                                                        tmp_path: Path) -> None:
    group = closed_group(cli)
    overrides = spot_overrides(10, every=10, pace=0, extra=(*NODES, f"network.security_groups=[{group}]"))
    result = cli.run("run", str(job_folder(tmp_path)), *overrides[2:], timeout=240)
    assert result.returncode == EXIT_CODES[JobState.FAILED_SETUP], result.stdout[-4000:] + result.stderr[-2000:]
    reason = cli.status()["reason"]
    assert re.fullmatch(
        rf"preflight_failed: node 1 cannot reach node 0's rendezvous at 127\.16\.\d+\.\d+:\d+: the connection is "
        rf"dropped, so {group} do not admit the job's nodes to each other\. add an inbound rule to {group} from "
        rf"{group} itself, protocol ALL, action ACCEPT \(or leave network\.security_groups unset: cvmjob's own group "
        r"admits its members\)", reason), reason
    assert no_instance_left(cli)
