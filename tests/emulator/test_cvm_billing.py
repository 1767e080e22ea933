"""What instances cost: the account balance falls by exactly what the ledger meters, on a manual clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tencentcloud.billing.v20180709 import billing_client
from tencentcloud.cvm.v20170312 import cvm_client

from tests.emulator.conftest import REGION, cred, profile
from tests.emulator.cvm_support import SPOT_TYPE, call, describe, run_one, state_of
from tests.emulator_process import EmulatorProcess, start_emulator

BOOT_SECONDS = 10
START = 10_000_000  # fen on a new account
T4_HOURLY = 869  # fen per hour, GN7.2XLARGE32 pay-as-you-go (orchestrator/emulator/catalog.py)
T4_SPOT_HOURLY = 174  # 20 % of it
T4_MONTHLY = 375_408  # 869 x 720 h x 0.6


@pytest.fixture
def manual_cloud(tmp_path: Path) -> Iterator[EmulatorProcess]:
    server = start_emulator(tmp_path / "state", "--clock", "manual", "--boot-seconds", str(BOOT_SECONDS))
    yield server
    server.stop()


def balance(emulator: EmulatorProcess) -> Any:
    from tencentcloud.billing.v20180709 import models

    client = billing_client.BillingClient(cred(emulator), REGION, profile(emulator))
    return client.DescribeAccountBalance(models.DescribeAccountBalanceRequest())


def test_balance_falls_by_the_metered_amount(manual_cloud: EmulatorProcess) -> None:
    emulator = manual_cloud
    cvm = cvm_client.CvmClient(cred(emulator), REGION, profile(emulator))
    postpaid = run_one(cvm, InstanceType=SPOT_TYPE)
    spot = run_one(cvm, InstanceType=SPOT_TYPE, InstanceChargeType="SPOTPAID")
    prepaid = run_one(cvm, InstanceType=SPOT_TYPE, InstanceChargeType="PREPAID", InstanceChargePrepaid={"Period": 1})
    bought = balance(emulator)
    assert bought.FreezeAmount == T4_HOURLY + T4_SPOT_HOURLY  # one hour of each hourly instance
    assert bought.CashAccountBalance == START - T4_MONTHLY  # the month is paid up front
    assert bought.Balance == START - T4_MONTHLY - T4_HOURLY - T4_SPOT_HOURLY

    emulator.admin.advance(BOOT_SECONDS)
    assert {i.InstanceState for i in describe(cvm, postpaid, spot, prepaid)} == {"RUNNING"}
    emulator.admin.advance(1234)
    running = balance(emulator)
    assert running.FreezeAmount == T4_HOURLY + T4_SPOT_HOURLY
    call(cvm, "TerminateInstances", {"InstanceIds": [postpaid]})
    call(cvm, "TerminateInstances", {"InstanceIds": [spot]})
    call(cvm, "TerminateInstances", {"InstanceIds": [prepaid]})
    emulator.admin.advance(5)
    assert state_of(cvm, postpaid) is None and state_of(cvm, prepaid) == "SHUTDOWN"

    ledger = {c["resource_id"]: c for c in emulator.admin.billing()["ledger"]}
    assert ledger[postpaid]["billed_seconds"] == ledger[spot]["billed_seconds"] == 1234
    assert ledger[postpaid]["cost_fen"] == round(T4_HOURLY * 1234 / 3600) == 298
    assert ledger[spot]["cost_fen"] == round(T4_SPOT_HOURLY * 1234 / 3600) == 60
    assert ledger[prepaid]["cost_fen"] == T4_MONTHLY
    after = balance(emulator)
    assert after.FreezeAmount == 0
    assert after.Balance == after.CashAccountBalance == START - sum(c["cost_fen"] for c in ledger.values())


def test_stop_charging_stops_the_meter(manual_cloud: EmulatorProcess) -> None:
    emulator = manual_cloud
    cvm = cvm_client.CvmClient(cred(emulator), REGION, profile(emulator))
    instance_id = run_one(cvm, InstanceType=SPOT_TYPE)
    emulator.admin.advance(BOOT_SECONDS + 100)
    call(cvm, "StopInstances", {"InstanceIds": [instance_id], "StoppedMode": "STOP_CHARGING"})
    emulator.admin.advance(1000)  # stopped: not metered
    assert balance(emulator).FreezeAmount == 0
    call(cvm, "StartInstances", {"InstanceIds": [instance_id]})
    assert balance(emulator).FreezeAmount == T4_HOURLY  # a new charge, a new frozen hour
    emulator.admin.advance(1 + 200)
    ledger = {c["resource_id"]: c for c in emulator.admin.billing()["ledger"]}
    # 100 s before the stop plus STOPPING's 1 s; then 200 s after STARTING's 1 s.
    assert ledger[instance_id]["billed_seconds"] == 101
    assert ledger[f"{instance_id}.1"]["billed_seconds"] == 200


def test_the_admin_api_sets_the_cash_balance_and_instances_go_on_consuming_it(manual_cloud: EmulatorProcess) -> None:
    emulator = manual_cloud
    cvm = cvm_client.CvmClient(cred(emulator), REGION, profile(emulator))
    run_one(cvm, InstanceType=SPOT_TYPE)
    emulator.admin.advance(BOOT_SECONDS + 3600)
    assert emulator.admin.set_balance(5000) == {"cash": 5000, "frozen": T4_HOURLY, "real": 5000 - T4_HOURLY,
                                                "consumed": T4_HOURLY}
    now = balance(emulator)
    assert (now.CashAccountBalance, now.FreezeAmount, now.Balance) == (5000, T4_HOURLY, 5000 - T4_HOURLY)
    emulator.admin.advance(1800)
    assert balance(emulator).CashAccountBalance == 5000 - (round(T4_HOURLY * 1.5) - T4_HOURLY)  # metered in total
