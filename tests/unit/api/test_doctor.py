"""`cvmjob doctor` against the emulator: every check passes on a new account, and under exactly the documented
minimal policy (docs/cam/controller.json); a permission taken away, a spot quota lowered or a state bucket of
another region each fail their own line, naming the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator import api
from orchestrator.cli.main import main
from orchestrator.errors import EXIT_CLOUD_ERROR
from orchestrator.providers.tencent import TencentSdk
from orchestrator.providers.tencent.probes import PROBES, UNASKED
from orchestrator.providers.tencent.storage import ObjectStore
from tests.emulator_process import EmulatorProcess

POLICY = Path(__file__).parents[3] / "docs" / "cam" / "controller.json"


def controller_policy(appid: str, without: str | None = None) -> dict[str, Any]:
    policy: dict[str, Any] = json.loads(POLICY.read_text().replace("<APPID>", appid).replace("<REGION>", "*"))
    for statement in policy["statement"]:
        statement["action"] = [a for a in statement["action"] if a != without]
    return policy


def failed(checks: list[api.Check]) -> list[tuple[str, str, str]]:
    return [(c.name, c.detail, c.fix) for c in checks if not c.ok]


def test_a_new_account_passes_every_check_and_each_permission_has_its_line(cloud: EmulatorProcess) -> None:
    checks = api.doctor("ap-guangzhou")
    assert failed(checks) == []
    names = [c.name for c in checks]
    assert names[:4] == ["credentials", "region", "image", "network"]
    assert names[-4:] == ["balance", "spot quota", "on-demand quota", "state bucket"]
    assert [n.removeprefix("permission ") for n in names if n.startswith("permission ")] == [*PROBES, *UNASKED]


def test_the_documented_policy_is_enough_and_each_of_its_actions_is_needed(cloud: EmulatorProcess) -> None:
    cloud.admin.set_account_policy(controller_policy(cloud.appid))
    assert failed(api.doctor("ap-guangzhou")) == []
    cloud.admin.set_account_policy(controller_policy(cloud.appid, without="name/cvm:TerminateInstances"))
    [(name, detail, fix)] = failed(api.doctor("ap-guangzhou"))
    assert name == "permission cvm:TerminateInstances"
    assert detail.startswith("refused (AuthFailure.UnauthorizedOperation")
    assert "\n" not in detail
    assert fix == "add name/cvm:TerminateInstances to the keys' policy (see docs/cam/controller.json)"


def test_a_permission_only_some_jobs_need_is_said_refused_without_failing(cloud: EmulatorProcess) -> None:
    cloud.admin.set_account_policy(controller_policy(cloud.appid, without="name/tcr:CreateInstanceToken"))
    checks = api.doctor("ap-guangzhou")
    assert failed(checks) == []
    [line] = [c.detail for c in checks if c.name == "permission tcr:CreateInstanceToken"]
    assert line.startswith("refused (AuthFailure.UnauthorizedOperation") and "container.login" in line
    assert "add name/tcr:CreateInstanceToken to the keys' policy" in line


def test_a_spot_quota_that_holds_no_gpu_type_fails_naming_the_ticket(cloud: EmulatorProcess) -> None:
    cloud.admin.set_spot_quota(4)
    [(name, detail, fix)] = failed(api.doctor("ap-guangzhou"))
    assert name == "spot quota" and "ap-guangzhou-3: 4 of 4 vCPU free" in detail
    assert detail.endswith("no GPU type fits (the smallest, GN7.LARGE20, needs 4)") or "no GPU type fits" in detail
    assert fix == "ask Tencent for more spot quota by ticket, or use billing.mode: on-demand"


def test_a_state_bucket_of_another_region_fails_naming_the_fix(cloud: EmulatorProcess, sdk: TencentSdk,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ObjectStore(sdk, f"shared-{cloud.appid}").create_bucket()  # in ap-guangzhou
    monkeypatch.setenv("CVMJOB_STATE_BUCKET", f"shared-{cloud.appid}")
    [(name, detail, fix)] = failed(api.doctor("ap-shanghai"))
    assert (name, detail) == ("state bucket", f"shared-{cloud.appid} is in ap-guangzhou, and the instances of "
                                              "ap-shanghai reach COS of their own region only")
    assert fix.startswith("unset CVMJOB_STATE_BUCKET")


def test_the_command_exits_non_zero_unless_a_job_could_run(cloud: EmulatorProcess,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["doctor", "--output", "json"])
    assert ended.value.code in (0, None) and json.loads(capsys.readouterr().out)["ok"] is True
    cloud.admin.set_account_policy(controller_policy(cloud.appid, without="name/vpc:DescribeSubnets"))
    with pytest.raises(SystemExit) as ended:
        main(["doctor"])
    said = capsys.readouterr().out
    assert ended.value.code == EXIT_CLOUD_ERROR
    assert "NO  permission vpc:DescribeSubnets: refused" in said
