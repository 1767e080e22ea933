"""The account's quotas (cvm/quota.py): DescribeAccountQuota as the SDK models it, the spot quota in vCPU cores per
zone (50 by default) held by the spot instances that are not terminating, LimitExceeded.SpotQuota for a launch or
a DryRun that does not fit, and the admin call that plays the ticket which raises it."""

from __future__ import annotations

from typing import Any

import pytest
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException

from orchestrator.emulator.client import AdminError
from tests.emulator.cvm_support import (
    SMALL,
    SPOT_TYPE,
    ZONE,
    api_error,
    call,
    launch_params,
    run,
    run_one,
    wait_state,
)
from tests.emulator_process import EmulatorProcess

GUANGZHOU = ["ap-guangzhou-3", "ap-guangzhou-4", "ap-guangzhou-6", "ap-guangzhou-7"]
SPOT = {"InstanceChargeType": "SPOTPAID", "InstanceType": SPOT_TYPE}  # GN7.2XLARGE32: 8 vCPU cores


def quota(cvm: Any, **filters: list[str]) -> Any:
    """DescribeAccountQuota with ``zone`` / ``quota_type`` filters; the AccountQuota model back."""
    wanted = [{"Name": name.replace("_", "-"), "Values": values} for name, values in filters.items()]
    answer = call(cvm, "DescribeAccountQuota", {"Filters": wanted} if wanted else {})
    return answer.AccountQuotaOverview.AccountQuota


def spot(cvm: Any, zone: str = ZONE) -> tuple[int, int, int]:
    (row,) = quota(cvm, zone=[zone], quota_type=["SpotPaidQuotaSet"]).SpotPaidQuotaSet
    assert row.Zone == zone
    return row.TotalQuota, row.UsedQuota, row.RemainingQuota


def test_a_new_account_has_every_quota_of_its_region(emulator: EmulatorProcess, cvm: Any) -> None:
    answer = call(cvm, "DescribeAccountQuota")
    assert answer.AppId == int(emulator.appid) and answer.AccountQuotaOverview.Region == "ap-guangzhou"
    sets = answer.AccountQuotaOverview.AccountQuota
    assert [(r.Zone, r.TotalQuota, r.UsedQuota, r.RemainingQuota) for r in sets.SpotPaidQuotaSet] == [
        (zone, 50, 0, 50) for zone in GUANGZHOU]
    assert [(r.Zone, r.TotalQuota, r.RemainingQuota) for r in sets.PostPaidQuotaSet] == [
        (zone, 30, 30) for zone in GUANGZHOU]
    assert [(r.Zone, r.OnceQuota) for r in sets.PrePaidQuotaSet] == [(zone, 300) for zone in GUANGZHOU]
    assert [(r.UsedQuota, r.TotalQuota) for r in sets.ImageQuotaSet] == [(0, 500)]
    (groups,) = sets.DisasterRecoverGroupQuotaSet
    assert (groups.GroupQuota, groups.CurrentNum, groups.CvmInHostGroupQuota) == (10, 0, 50)


def test_the_filters_pick_zones_and_sets(emulator: EmulatorProcess, cvm: Any) -> None:
    picked = quota(cvm, zone=["ap-guangzhou-6", "ap-guangzhou-3"], quota_type=["SpotPaidQuotaSet", "PostPaidQuotaSet"])
    assert [r.Zone for r in picked.SpotPaidQuotaSet] == ["ap-guangzhou-3", "ap-guangzhou-6"]
    assert [r.Zone for r in picked.PostPaidQuotaSet] == ["ap-guangzhou-3", "ap-guangzhou-6"]
    assert picked.PrePaidQuotaSet is None and picked.ImageQuotaSet is None
    with api_error("InvalidParameterValue"):
        quota(cvm, quota_type=["SpotQuota"])
    with api_error("InvalidFilter"):
        quota(cvm, instance_type=[SPOT_TYPE])


def test_spot_instances_hold_their_cores_until_they_terminate(emulator: EmulatorProcess, cvm: Any) -> None:
    first, second = run(cvm, InstanceCount=2, **SPOT)
    run_one(cvm)  # pay-as-you-go: counted in its own set, not the spot quota
    assert spot(cvm) == (50, 16, 34)  # PENDING already holds them
    assert spot(cvm, "ap-guangzhou-4") == (50, 0, 50)
    (postpaid,) = quota(cvm, zone=[ZONE], quota_type=["PostPaidQuotaSet"]).PostPaidQuotaSet
    assert (postpaid.UsedQuota, postpaid.RemainingQuota) == (1, 29)

    emulator.admin.advance(1)
    wait_state(cvm, first, "RUNNING")
    call(cvm, "TerminateInstances", {"InstanceIds": [first]})
    assert spot(cvm) == (50, 8, 42)  # TERMINATING gives them back
    emulator.admin.reclaim(second, notice_seconds=60)
    assert spot(cvm) == (50, 8, 42)  # a notice is not the end: it runs until the reclaim
    emulator.admin.advance(61)
    assert spot(cvm) == (50, 0, 50)


def test_a_spot_launch_over_the_quota_is_refused_naming_the_zone_and_the_numbers(
        emulator: EmulatorProcess, cvm: Any) -> None:
    run(cvm, InstanceCount=6, **SPOT)  # 48 of 50
    for dry_run in (True, False):
        with pytest.raises(TencentCloudSDKException) as err:
            call(cvm, "RunInstances", launch_params(DryRun=dry_run, **SPOT))
        assert err.value.code == "LimitExceeded.SpotQuota"
        assert err.value.message == (
            f"The spot quota of {ZONE} is 50 vCPU cores and 48 are in use: 1 {SPOT_TYPE} (8 vCPU cores) do not fit "
            "in the 2 left. A ticket raises the quota.")
    assert call(cvm, "DescribeInstances").TotalCount == 6
    run_one(cvm, InstanceChargeType="SPOTPAID", InstanceType=SMALL)  # 2 cores still fit
    run_one(cvm, InstanceType=SPOT_TYPE)  # pay-as-you-go needs no spot quota
    run_one(cvm, Placement={"Zone": "ap-guangzhou-4"}, **SPOT)  # another zone, another quota


def test_the_quota_a_ticket_sets_is_per_zone_or_everywhere(emulator: EmulatorProcess, cvm: Any) -> None:
    assert emulator.admin.set_spot_quota(16, ZONE) == {ZONE: 16}
    run(cvm, InstanceCount=2, **SPOT)
    assert spot(cvm) == (16, 16, 0)
    with api_error("LimitExceeded.SpotQuota"):
        run(cvm, InstanceChargeType="SPOTPAID", InstanceType=SMALL)

    everywhere = emulator.admin.set_spot_quota(0)
    assert len(everywhere) == 8 and set(everywhere.values()) == {0}
    assert spot(cvm) == (0, 16, 0)  # lowered below what is held: nothing left, nothing taken away
    with api_error("LimitExceeded.SpotQuota"):
        run(cvm, Placement={"Zone": "ap-guangzhou-7"}, InstanceChargeType="SPOTPAID", InstanceType=SMALL)
    assert emulator.admin.set_spot_quota(None, "ap-guangzhou-7") == {"ap-guangzhou-7": 50}
    run(cvm, Placement={"Zone": "ap-guangzhou-7"}, InstanceChargeType="SPOTPAID", InstanceType=SMALL)

    for bad in ({"zone": "ap-nowhere-1", "spot_vcpus": 8}, {"spot_vcpus": -1}, {"spot_vcpus": "8"}, {"zone": ZONE}):
        with pytest.raises(AdminError) as refused:
            emulator.admin._call("PUT", "quota", bad)
        assert refused.value.status == 400, bad
    emulator.admin.reset()
    assert spot(cvm) == (50, 0, 50)  # a new account has the default again
