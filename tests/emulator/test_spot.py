"""The spot market: capacity errors, asynchronous launch failures, reclaims with and without notice, and seeded
random reclaims."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from tencentcloud.cvm.v20170312 import cvm_client

from orchestrator.emulator.client import AdminError
from tests.emulator.conftest import REGION, cred, profile
from tests.emulator.cvm_support import (
    SPOT_TYPE,
    ZONE,
    admin_instance,
    api_error,
    boot,
    call,
    describe,
    metadata,
    run,
    run_one,
    state_of,
    user_data,
    wait_file,
    wait_for,
    wait_state,
)
from tests.emulator_process import EmulatorProcess, start_emulator

SPOT = {"InstanceChargeType": "SPOTPAID", "InstanceType": SPOT_TYPE}
SLEEPER = "#!/bin/bash\nsleep 1000 &\necho $! > $HOME/sleep.pid\n"
UTC8 = timezone(timedelta(hours=8))


def test_spot_capacity_is_checked_at_launch(emulator: EmulatorProcess, cvm: Any) -> None:
    emulator.admin.set_stock(ZONE, SPOT_TYPE, "SPOTPAID", 2)
    with api_error("ResourceInsufficient.SpecifiedInstanceType"):
        run(cvm, InstanceCount=3, **SPOT)
    run(cvm, InstanceCount=2, **SPOT)
    with api_error("ResourcesSoldOut.SpecifiedInstanceType"):
        run(cvm, **SPOT)
    run_one(cvm, InstanceType=SPOT_TYPE)  # pay-as-you-go stock is separate
    with pytest.raises(AdminError):
        emulator.admin.set_stock(ZONE, "PNV4.7XLARGE116", "SPOTPAID", 1)  # not sold in that zone


def test_launch_failures_end_launch_failed(emulator: EmulatorProcess, cvm: Any) -> None:
    emulator.admin.set_stock(ZONE, SPOT_TYPE, "SPOTPAID", 1)
    emulator.admin.add_launch_failures(count=1, message="no T4 left in the zone", zone=ZONE, charge_type="SPOTPAID")
    failing = run_one(cvm, **SPOT)
    with api_error("ResourcesSoldOut.SpecifiedInstanceType"):
        run_one(cvm, **SPOT)  # the failing launch holds its capacity while PENDING
    emulator.admin.advance(1)
    (inst,) = describe(cvm, failing)
    assert (inst.InstanceState, inst.LatestOperationState, inst.LatestOperationErrorMsg) == (
        "LAUNCH_FAILED", "FAILED", "no T4 left in the zone")
    with api_error("UnsupportedOperation.InstanceStateLaunchFailed"):
        call(cvm, "TerminateInstances", {"InstanceIds": [failing]})
    fine = run_one(cvm, **SPOT)  # capacity came back; the rule was used up
    boot(emulator, cvm, fine)
    charge = next(c for c in emulator.admin.billing()["ledger"] if c["resource_id"] == failing)
    assert (charge["billed_seconds"], charge["cost_fen"], charge["released"]) == (0, 0, True)
    emulator.admin.advance(301)
    assert state_of(cvm, failing) is None  # auto-removed, as the TF provider expects


def test_clearing_faults_drops_pending_launch_failures(emulator: EmulatorProcess, cvm: Any) -> None:
    """DELETE /_emulator/faults clears every kind of fault, launch failures and image faults included, and GET
    describes them all."""
    emulator.admin.add_launch_failures(count=2, zone=ZONE)
    emulator.admin.add_image_faults("fail")
    emulator.admin.inject("error", service="cvm", action="DescribeZones", count=None)
    faults = emulator.admin.faults()
    assert [(r["count"], r["zone"]) for r in faults["launch_failures"]] == [(2, ZONE)]
    assert faults["image_faults"] == ["fail"] and len(faults["api"]) == 1
    emulator.admin.clear_faults()
    faults = emulator.admin.faults()
    assert (faults["api"], faults["launch_failures"], faults["image_faults"]) == ([], [], [])
    boot(emulator, cvm, run_one(cvm, **SPOT))  # RUNNING, not LAUNCH_FAILED


def test_reclaim_with_notice(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm, UserData=user_data(SLEEPER), **SPOT)
    boot(emulator, cvm, instance_id)
    me = admin_instance(emulator, instance_id)
    sleeper = Path("/proc") / wait_file(Path(me["home"]) / "sleep.pid").strip()
    assert metadata(emulator, me, "/latest/meta-data/spot/termination-time")[0] == 404
    notice = emulator.admin.reclaim(instance_id, 120)
    status, text = metadata(emulator, me, "/latest/meta-data/spot/termination-time")
    assert status == 200 and text == notice["termination_time"]
    kill_at = datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC8).timestamp()
    assert abs(kill_at - (emulator.admin.now() + 120)) < 3
    assert "spot/" in metadata(emulator, me, "/latest/meta-data/")[1].split("\n")
    assert state_of(cvm, instance_id) == "RUNNING" and sleeper.exists()
    emulator.admin.advance(121)
    assert state_of(cvm, instance_id) in ("TERMINATING", None)
    wait_for(lambda: not sleeper.exists(), what="the reclaimed instance's processes to die")
    wait_state(cvm, instance_id, None)
    wait_for(lambda: not Path(me["sandbox"]).exists(), what="the reclaimed instance's disk to go")


def test_reclaim_without_notice_and_only_spot(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm, **SPOT)
    boot(emulator, cvm, instance_id)
    emulator.admin.reclaim(instance_id, None)
    assert state_of(cvm, instance_id) == "TERMINATING"
    emulator.admin.advance(1)
    assert state_of(cvm, instance_id) is None
    postpaid = run_one(cvm)
    with pytest.raises(AdminError, match="400"):
        emulator.admin.reclaim(postpaid, 120)


@pytest.fixture
def random_reclaims(tmp_path: Path) -> Iterator[EmulatorProcess]:
    server = start_emulator(tmp_path / "state", "--clock", "manual", "--spot-reclaim-rate", "2", "--seed", "7")
    yield server
    server.stop()


def test_seeded_random_reclaims_are_deterministic(random_reclaims: EmulatorProcess) -> None:
    emulator = random_reclaims
    cvm = cvm_client.CvmClient(cred(emulator), REGION, profile(emulator))
    spots = run(cvm, InstanceCount=3, **SPOT)
    postpaid = run_one(cvm)
    emulator.admin.advance(1)
    records = {i["instance_id"]: i for i in emulator.admin.instances()}
    assert records[postpaid]["random_notice_at"] is None
    for instance_id in spots:
        rec = records[instance_id]
        delay = random.Random(f"7:{instance_id}").expovariate(2 / 3600)
        assert rec["random_notice_at"] == pytest.approx(rec["first_running_at"] + delay)
    first = min(spots, key=lambda i: records[i]["random_notice_at"])
    now = emulator.admin.now()
    emulator.admin.advance(records[first]["random_notice_at"] - now + 1)
    noticed = admin_instance(emulator, first)
    assert noticed["notice_at"] == pytest.approx(records[first]["random_notice_at"])
    assert noticed["reclaim_at"] == pytest.approx(noticed["notice_at"] + 120)
    assert state_of(cvm, first) == "RUNNING"  # the default two-minute notice runs first
    last = max(records[i]["random_notice_at"] for i in spots)
    emulator.admin.advance(last - emulator.admin.now() + 120 + 1)
    assert {i.InstanceId for i in call(cvm, "DescribeInstances").InstanceSet} == {postpaid}
