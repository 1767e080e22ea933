"""The balance check before anything is bought: a job's plan and a reserved pool's prepaid purchase, refused in one
line when the account's available balance does not cover what they may cost, with no RunInstances (not even its
DryRun) reaching the cloud; an account that may not read its balance is warned and goes on."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from orchestrator import api
from orchestrator.billing import funds
from orchestrator.billing import pool as pools
from orchestrator.errors import EXIT_CLOUD_ERROR
from orchestrator.providers.tencent import StaticCredential, TencentSdk, network
from orchestrator.providers.tencent.billing import AccountBalance, account_balance
from orchestrator.state.store import PoolStore, Store
from tests.emulator_process import EmulatorProcess

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "jobs" / "quickstart" / "job.yaml"
REGION = "ap-guangzhou"
# The quickstart: 30 min (limits.max_runtime) of GN7.2XLARGE32 on demand, 8.69 CNY/h on the emulator.
QUICKSTART_MOST = 4.34  # 8.69 x 0.5, rounded


def balance(real: float, credit: float | None = None) -> AccountBalance:
    return AccountBalance(real=real, real_credit=credit, frozen=0.0, owed=0.0)


def test_a_job_needs_its_estimate_or_its_max_cost_where_lower_but_at_least_the_hour_frozen_at_purchase() -> None:
    assert funds.job_need(48.0, None, 2.0, 24) == funds.Need(48.0, "for limits.max_runtime, 24 h",
                                                             "lower limits.max_runtime or limits.max_cost")
    assert funds.job_need(48.0, 10.0, 2.0, 24) == funds.Need(10.0, "up to limits.max_cost", "lower limits.max_cost")
    assert funds.job_need(1.0, None, 2.0, 0.5) == funds.Need(2.0, "one hour, frozen at purchase",
                                                             "choose a cheaper instance type or billing.mode")
    assert funds.job_need(None, 10.0, None, 1) is None  # an unpriced plan: nothing to check


def test_the_refusal_says_the_need_the_balance_and_what_to_do() -> None:
    need = funds.Need(1234.5, "for limits.max_runtime, 24 h", "lower limits.max_runtime")
    assert funds.refusal("job x", replace(need, cost=100.0), balance(100.0)) is None
    assert funds.refusal("job x", need, balance(2.0, credit=2000.0)) is None  # a credit limit counts
    assert funds.refusal("job x", need, balance(100.0)) == (
        "job x (for limits.max_runtime, 24 h) needs ¥1,234.50, more than the account's available balance of "
        "¥100.00: top up the account (Billing Center, Top up), or lower limits.max_runtime; nothing was launched")


@pytest.fixture
def sdk(emulator: EmulatorProcess) -> TencentSdk:
    return TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), REGION, emulator.endpoint,
                      emulator.appid)


def test_the_balance_comes_in_fen_and_is_read_in_cny(emulator: EmulatorProcess, sdk: TencentSdk) -> None:
    assert emulator.admin.set_balance(12_345)["cash"] == 12_345
    assert account_balance(sdk) == AccountBalance(real=123.45, real_credit=123.45, frozen=0.0, owed=0.0)


@pytest.fixture
def on_emulator(emulator: EmulatorProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EmulatorProcess:
    """`cvmjob run`'s view of the shared emulator: its endpoint and keys in the environment, a store of its own."""
    monkeypatch.setenv("CVMJOB_ENDPOINT", emulator.endpoint)
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", emulator.secret_id)
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", emulator.secret_key)
    monkeypatch.setenv("CVMJOB_HOME", str(tmp_path / "home"))
    return emulator


def test_a_job_the_balance_cannot_pay_is_refused_before_any_run_instances(on_emulator: EmulatorProcess) -> None:
    on_emulator.admin.set_balance(1500)  # ¥15: one node's hour frozen at purchase, not two nodes' hour or 3 h
    with pytest.raises(funds.InsufficientFunds) as refused:
        api.plan(QUICKSTART, ["data=[]", "train.nnodes=2", "limits.max_runtime=3h"])
    assert refused.value.exit_code == EXIT_CLOUD_ERROR
    assert str(refused.value) == (
        "job quickstart on 2 × GN7.2XLARGE32 in ap-guangzhou-3 (on-demand) (for limits.max_runtime, 3 h) needs "
        "¥52.14, more than the account's available balance of ¥15.00: top up the account (Billing Center, Top up), "
        "or lower limits.max_runtime or limits.max_cost; nothing was launched")
    assert on_emulator.admin.calls(action="RunInstances") == []  # not even the plan's DryRun
    with pytest.raises(funds.InsufficientFunds, match=r"\(up to limits.max_cost\) needs ¥30.00"):
        api.plan(QUICKSTART, ["data=[]", "train.nnodes=2", "limits.max_runtime=3h", "limits.max_cost=30"])
    with pytest.raises(funds.InsufficientFunds, match=r"\(one hour, frozen at purchase\) needs ¥17.38"):
        api.plan(QUICKSTART, ["data=[]", "train.nnodes=2"])  # 30 min, but the cloud freezes an hour

    report = api.plan(QUICKSTART, ["data=[]", "limits.max_cost=15"])  # one node: ¥8.69 frozen, ¥4.34 at most
    assert report.plan.estimated_cost == QUICKSTART_MOST
    assert on_emulator.admin.calls(action="RunInstances")  # the DryRun: the launch may go ahead


def test_keys_without_billing_rights_are_warned_once_and_launch(on_emulator: EmulatorProcess) -> None:
    on_emulator.admin.set_balance(1000)  # ¥10: the hour frozen at purchase, not the 24 h asked for
    on_emulator.admin.inject("error", service="billing", action="DescribeAccountBalance",
                             code="UnauthorizedOperation.CamNoAuth", message="no permission", count=None)
    report = api.plan(QUICKSTART, ["data=[]", "limits.max_runtime=24h"])
    [warning] = [n for n in report.notes if "balance" in n]
    assert warning.startswith("the account balance could not be read (UnauthorizedOperation.CamNoAuth)")
    assert "billing:DescribeAccountBalance" in warning


def test_a_prepaid_purchase_for_the_pool_counts_too(emulator: EmulatorProcess, sdk: TencentSdk,
                                                    tmp_path: Path) -> None:
    emulator.admin.set_balance(100_000)  # ¥1000: less than two months of two T4s (3754.08 CNY a month each)
    store = Store(tmp_path / "state.db")
    with pytest.raises(funds.InsufficientFunds, match=r"^buying 2 × GN7.2XLARGE32 in ap-guangzhou-3 \(2 month\(s\), "
                                                      r"paid at purchase\) needs ¥15,016.32, .* or buy fewer"):
        pools.grow(PoolStore(store), sdk, "p", "ap-guangzhou-3", "GN7.2XLARGE32", "img-487zeit5", 2, 2, False)
    assert emulator.admin.calls(action="RunInstances") == [] and PoolStore(store).members() == []


def test_a_pool_member_is_bought_into_the_default_subnet_and_cvmjobs_group(emulator: EmulatorProcess, sdk: TencentSdk,
                                                                          tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db")
    [member] = pools.grow(PoolStore(store), sdk, "p", "ap-guangzhou-3", "S5.MEDIUM4", "img-487zeit5", 1, 1, False,
                          wait_seconds=60)
    described = sdk.call("cvm", "DescribeInstances", {"InstanceIds": [member]})["InstanceSet"][0]
    vpc = network.default_vpc(sdk)
    subnet = next(s.subnet_id for s in network.subnets(sdk, str(vpc)) if s.zone == "ap-guangzhou-3" and s.is_default)
    assert described["VirtualPrivateCloud"]["SubnetId"] == subnet
    assert described["SecurityGroupIds"] == [network.ensure_security_group(sdk, "cvmjob:managed")[0]]
    store.close()
