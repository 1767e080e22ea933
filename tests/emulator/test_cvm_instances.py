"""CVM instances through the official SDK: launch, describe, the life cycle, validation codes."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.emulator.cvm_support import (
    IMAGE,
    SMALL,
    SPOT_TYPE,
    ZONE,
    admin_instance,
    api_error,
    boot,
    call,
    describe,
    hpc_cluster,
    launch_params,
    run,
    run_one,
    state_of,
    user_data,
    wait_state,
)
from tests.emulator_process import EmulatorProcess

ISO = "%Y-%m-%dT%H:%M:%SZ"


def iso_in(emulator: EmulatorProcess, seconds: float) -> str:
    return time.strftime(ISO, time.gmtime(emulator.admin.now() + seconds))


def test_run_instances_pending_then_running_with_tags(emulator: EmulatorProcess, cvm: Any) -> None:
    tags = [{"Key": "cvmjob:job", "Value": "j1"}, {"Key": "owner", "Value": "me"}]
    instance_id = run_one(cvm, InstanceName="trainer", TagSpecification=[{"ResourceType": "instance", "Tags": tags}])
    (pending,) = describe(cvm, instance_id)
    assert pending.InstanceState == "PENDING"
    assert pending.LatestOperation == "RunInstances" and pending.LatestOperationState == "OPERATING"
    wait_state(cvm, instance_id, "RUNNING", timeout=5)  # boot_seconds is 0.5 in tests: real time suffices
    (inst,) = describe(cvm, instance_id)
    assert inst.LatestOperationState == "SUCCESS"
    assert [(t.Key, t.Value) for t in inst.Tags] == [("cvmjob:job", "j1"), ("owner", "me")]
    assert (inst.InstanceType, inst.CPU, inst.Memory, inst.Placement.Zone) == (SMALL, 2, 4, ZONE)
    assert inst.InstanceName == "trainer" and inst.ImageId == IMAGE
    assert inst.InstanceChargeType == "POSTPAID_BY_HOUR" and inst.ExpiredTime is None
    [address] = inst.PrivateIpAddresses  # the subnet's address in its loopback form: 127 and its last octets
    assert address.startswith("127.16.") and address != "127.0.0.1"
    assert inst.VirtualPrivateCloud.VpcId.startswith("vpc-") and inst.SecurityGroupIds[0].startswith("sg-")
    assert time.strptime(inst.CreatedTime, ISO)
    assert inst.StopChargingMode == "NOT_APPLICABLE" and inst.RestrictState == "NORMAL"
    assert inst.SystemDisk.DiskSize == 50 and inst.GPUInfo is None
    assert len(inst.Uuid) == 36


def test_gpu_info_and_local_nvme(emulator: EmulatorProcess, cvm: Any) -> None:
    vgpu = run_one(cvm, InstanceType="GN7.2XLARGE40")
    hcc = run_one(cvm, InstanceType="HCCPNV4h.48XLARGE1024", Placement={"Zone": "ap-guangzhou-6"},
                  HpcClusterId=hpc_cluster(cvm, "ap-guangzhou-6"))
    by_id = {i.InstanceId: i for i in describe(cvm, vgpu, hcc)}
    assert by_id[vgpu].GPUInfo.GPUCount == 0.5 and by_id[vgpu].GPUInfo.GPUType == "NVIDIA T4"
    assert by_id[hcc].GPUInfo.GPUCount == 8
    assert [d.DiskType for d in by_id[hcc].DataDisks] == ["LOCAL_NVME"] * 4
    assert len(admin_instance(emulator, hcc)["local_disks"]) == 4


def test_client_token_replays_the_same_instances(emulator: EmulatorProcess, cvm: Any) -> None:
    first = run(cvm, ClientToken="job-1-attempt-1", InstanceCount=2)
    again = run(cvm, ClientToken="job-1-attempt-1", InstanceCount=2)
    assert first == again and len(first) == 2
    assert call(cvm, "DescribeInstances").TotalCount == 2
    emulator.admin.advance(1)
    call(cvm, "TerminateInstances", {"InstanceIds": first})
    emulator.admin.advance(5)
    assert run(cvm, ClientToken="job-1-attempt-1") == first  # remembered after the instances are gone
    assert call(cvm, "DescribeInstances").TotalCount == 0
    with api_error("InvalidClientToken.TooLong"):
        run(cvm, ClientToken="x" * 65)


def test_dry_run_checks_everything_and_launches_nothing(emulator: EmulatorProcess, cvm: Any) -> None:
    resp = call(cvm, "RunInstances", launch_params(DryRun=True))
    assert resp.RequestId and resp.InstanceIdSet is None
    assert call(cvm, "DescribeInstances").TotalCount == 0
    emulator.admin.set_stock(ZONE, SMALL, "POSTPAID_BY_HOUR", 0)
    with api_error("ResourcesSoldOut.SpecifiedInstanceType"):
        call(cvm, "RunInstances", launch_params(DryRun=True))
    with api_error("InvalidParameterValue.InstanceTypeNotFound"):
        call(cvm, "RunInstances", launch_params(DryRun=True, InstanceType="S5.NOPE"))


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"InstanceType": "S5.HUGE999"}, "InvalidParameterValue.InstanceTypeNotFound"),
        ({"InstanceType": "PNV4.7XLARGE116"}, "ResourceUnavailable.InstanceType"),  # not sold in guangzhou-3
        ({"Placement": {"Zone": "ap-nowhere-1"}}, "InvalidParameterValue.ZoneNotSupported"),
        ({"Placement": {"Zone": "ap-shanghai-4"}}, "InvalidZone.MismatchRegion"),
        ({"Placement": None}, "MissingParameter"),
        ({"ImageId": "img-00000000"}, "InvalidImageId.NotFound"),
        ({"ImageId": "ubuntu"}, "InvalidImageId.Malformed"),
        ({"InstanceCount": 0}, "InvalidParameterValue.Range"),
        ({"InstanceCount": 501}, "InvalidParameterValue.Range"),
        ({"UserData": "not base64!"}, "InvalidParameterValue.InvalidUserDataFormat"),
        ({"UserData": user_data("x" * 13000)}, "InvalidParameterValue.TooLarge"),
        ({"InstanceChargeType": "PREPAID"}, "MissingParameter"),
        ({"InstanceChargeType": "PREPAID", "InstanceChargePrepaid": {"Period": 7 * 13}}, "InvalidPeriod"),
        ({"InstanceChargeType": "CDHPAID"}, "UnsupportedOperation.InstanceChargeType"),
        ({"InstanceChargeType": "SPOTPAID", "InstanceType": SPOT_TYPE,
          "InstanceMarketOptions": {"MarketType": "spot", "SpotOptions": {"MaxPrice": "0.01"}}},
         "InvalidParameterValue.InsufficientPrice"),
        ({"InstanceMarketOptions": {"MarketType": "spot", "SpotOptions": {"MaxPrice": "9"}}},
         "InvalidParameterCombination"),
        ({"DataDisks": [{"DiskType": "LOCAL_NVME", "DiskSize": 3200}]}, "UnsupportedOperation.InvalidDisk"),
        ({"DataDisks": [{"DiskType": "CLOUD_SSD", "DiskSize": 15}]}, "InvalidParameterValue.Range"),
        ({"SystemDisk": {"DiskType": "FLOPPY", "DiskSize": 50}}, "InvalidParameterValue"),
        ({"CamRoleName": "bad role!"}, "InvalidParameterValue.CamRoleNameMalformed"),
        ({"HostName": "-bad-"}, "InvalidParameterValue.IllegalHostName"),
        ({"VirtualPrivateCloud": {"VpcId": "vpc-00000000", "SubnetId": "DEFAULT"}},
         "InvalidParameterValue.VpcIdNotExist"),
        ({"VirtualPrivateCloud": {"VpcId": "DEFAULT", "SubnetId": "subnet-00000000"}},
         "InvalidParameterValue.SubnetNotExist"),
        ({"VirtualPrivateCloud": {"VpcId": "DEFAULT", "SubnetId": "DEFAULT", "PrivateIpAddresses": ["10.0.0.9"]}},
         "VpcAddrNotInSubNet"),
        ({"SecurityGroupIds": ["sg-00000000"]}, "InvalidSecurityGroupId.NotFound"),
        ({"TagSpecification": [{"ResourceType": "instance", "Tags": [{"Key": "a", "Value": "1"},
                                                                    {"Key": "a", "Value": "2"}]}]},
         "InvalidParameterValue.DuplicateTags"),
        ({"TagSpecification": [{"ResourceType": "instance", "Tags": [{"Key": "qcloud:x", "Value": "1"}]}]},
         "FailedOperation.TagKeyReserved"),
        ({"ActionTimer": {"TimerAction": "TerminateInstances", "ActionTime": "tomorrow"}},
         "InvalidParameterValue.InvalidTimeFormat"),
        ({"ActionTimer": {"TimerAction": "StopInstances", "ActionTime": "2030-01-01T00:00:00Z"}},
         "InvalidParameterValue"),
        ({"LaunchTemplate": {"LaunchTemplateId": "lt-00000000"}}, "InvalidParameterValue.LaunchTemplateNotFound"),
    ],
)
def test_run_instances_validation(cvm: Any, overrides: dict[str, Any], code: str) -> None:
    params = {k: v for k, v in launch_params(**overrides).items() if v is not None}
    with api_error(code):
        call(cvm, "RunInstances", params)
    assert call(cvm, "DescribeInstances").TotalCount == 0


def test_action_timer_must_be_five_minutes_ahead_and_region_must_exist(emulator: EmulatorProcess, cvm: Any) -> None:
    with api_error("InvalidParameterValue.InvalidTimeFormat"):
        run(cvm, ActionTimer={"TimerAction": "TerminateInstances", "ActionTime": iso_in(emulator, 120)})
    from tencentcloud.cvm.v20170312 import cvm_client

    from tests.emulator.conftest import cred, profile

    elsewhere = cvm_client.CvmClient(cred(emulator), "ap-nowhere", profile(emulator))
    with api_error("InvalidRegion.NotFound"):
        call(elsewhere, "DescribeInstances")


def test_stock_and_min_count(emulator: EmulatorProcess, cvm: Any) -> None:
    emulator.admin.set_stock(ZONE, SMALL, "POSTPAID_BY_HOUR", 3)
    with api_error("ResourceInsufficient.SpecifiedInstanceType"):
        run(cvm, InstanceCount=4)
    assert len(run(cvm, InstanceCount=5, MinCount=2)) == 3  # partial delivery down to MinCount
    with api_error("ResourcesSoldOut.SpecifiedInstanceType"):
        run(cvm)
    rows = call(cvm, "DescribeZoneInstanceConfigInfos", {"Filters": [
        {"Name": "zone", "Values": [ZONE]}, {"Name": "instance-type", "Values": [SMALL]},
        {"Name": "instance-charge-type", "Values": ["POSTPAID_BY_HOUR"]}]}).InstanceTypeQuotaSet
    assert [(r.Status, r.StatusCategory) for r in rows] == [("SOLD_OUT", "WithoutStock")]


def test_instance_names_and_host_names(cvm: Any) -> None:
    ids = run(cvm, InstanceCount=2, InstanceName="node-{R:7,F:3}", HostName="worker")
    assert sorted((i.InstanceName, i.HostName) for i in describe(cvm, *ids)) == [
        ("node-007", "worker1"), ("node-008", "worker2")]
    plain = run(cvm, InstanceCount=2, InstanceName="w")
    assert sorted(i.InstanceName for i in describe(cvm, *plain)) == ["w1", "w2"]


def test_describe_filters_pagination_and_unknown_ids(emulator: EmulatorProcess, cvm: Any) -> None:
    def tagged(value: str) -> list[dict[str, Any]]:
        return [{"ResourceType": "instance", "Tags": [{"Key": "job", "Value": value}]}]

    a = run(cvm, InstanceCount=3, TagSpecification=tagged("a"), InstanceName="alpha")
    b = run_one(cvm, TagSpecification=tagged("b"), InstanceName="beta", Placement={"Zone": "ap-guangzhou-4"})
    spot = run_one(cvm, InstanceChargeType="SPOTPAID", InstanceType=SPOT_TYPE, InstanceName="gamma")

    def ids(*filters: tuple[str, list[str]]) -> set[str]:
        resp = call(cvm, "DescribeInstances", {"Filters": [{"Name": n, "Values": v} for n, v in filters]})
        return {i.InstanceId for i in resp.InstanceSet}

    assert ids(("zone", ["ap-guangzhou-4"])) == {b}
    assert ids(("instance-id", [a[0], b])) == {a[0], b}
    assert ids(("instance-name", ["beta", "gamma"])) == {b, spot}
    assert ids(("instance-charge-type", ["SPOTPAID"])) == {spot}
    assert ids(("tag-key", ["job"])) == {*a, b}
    assert ids(("tag-value", ["b"])) == {b}
    assert ids(("tag:job", ["a"])) == set(a)
    assert ids(("tag:job", ["a"]), ("instance-name", ["beta"])) == set()  # filters AND
    assert ids(("image-id", [IMAGE])) == {*a, b, spot}
    addresses = {i.InstanceId: i.PrivateIpAddresses[0] for i in describe(cvm, *a, b, spot)}
    assert ids(("private-ip-address", [addresses[b]])) == {b}
    # Real time moves the boot on (0.5 s in tests), so only a check that holds either side of it.
    assert ids(("instance-state", ["PENDING", "RUNNING"])) == {*a, b, spot}
    assert ids(("instance-state", ["STOPPED"])) == set()
    boot(emulator, cvm, spot)
    assert ids(("instance-state", ["RUNNING"])) == {*a, b, spot}

    first = call(cvm, "DescribeInstances", {"Limit": 2})
    rest = call(cvm, "DescribeInstances", {"Offset": 2, "Limit": 100})
    assert first.TotalCount == rest.TotalCount == 5
    assert len(first.InstanceSet) == 2 and len(rest.InstanceSet) == 3
    assert {i.InstanceId for i in [*first.InstanceSet, *rest.InstanceSet]} == {*a, b, spot}

    assert describe(cvm, "ins-00000000") == []  # well-formed and unknown: empty, not an error
    with api_error("InvalidInstanceId.Malformed"):
        describe(cvm, "i-123")
    with api_error("InvalidFilter"):
        ids(("colour", ["red"]))
    with api_error("InvalidParameter"):
        call(cvm, "DescribeInstances", {"InstanceIds": [b], "Filters": [{"Name": "zone", "Values": [ZONE]}]})
    with api_error("InvalidParameterValue.Range"):
        call(cvm, "DescribeInstances", {"Limit": 101})
    status = call(cvm, "DescribeInstancesStatus", {"InstanceIds": [b, "ins-00000000"]})
    assert [(s.InstanceId, s.InstanceState) for s in status.InstanceStatusSet] == [(b, "RUNNING")]


def test_terminate_then_gone_then_not_found(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm)
    with api_error("UnsupportedOperation.InstanceStatePending"):
        call(cvm, "TerminateInstances", {"InstanceIds": [instance_id]})
    boot(emulator, cvm, instance_id)
    call(cvm, "TerminateInstances", {"InstanceIds": [instance_id]})
    (inst,) = describe(cvm, instance_id)
    assert inst.InstanceState == "TERMINATING" and inst.LatestOperation == "TerminateInstances"
    with api_error("UnsupportedOperation.InstanceStateTerminating"):
        call(cvm, "TerminateInstances", {"InstanceIds": [instance_id]})
    wait_state(cvm, instance_id, None, timeout=5)
    with api_error("InvalidInstanceId.NotFound"):
        call(cvm, "TerminateInstances", {"InstanceIds": [instance_id]})


def test_terminate_rules_mixed_pricing_and_protection(emulator: EmulatorProcess, cvm: Any) -> None:
    postpaid = run_one(cvm)
    spot = run_one(cvm, InstanceChargeType="SPOTPAID", InstanceType=SPOT_TYPE)
    protected = run_one(cvm, DisableApiTermination=True)
    emulator.admin.advance(1)
    with api_error("UnsupportedOperation.InstanceMixedPricingModel"):
        call(cvm, "TerminateInstances", {"InstanceIds": [postpaid, spot]})
    with api_error("UnsupportedOperation.InstancesProtected"):
        call(cvm, "TerminateInstances", {"InstanceIds": [postpaid, protected]})
    assert state_of(cvm, postpaid) == "RUNNING"  # a failed batch changes nothing
    with api_error("InvalidParameterValue.LimitExceeded"):
        call(cvm, "TerminateInstances", {"InstanceIds": [f"ins-{i:08d}" for i in range(101)]})


def test_prepaid_goes_to_the_recycle_bin_first(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm, InstanceChargeType="PREPAID", InstanceChargePrepaid={"Period": 1})
    boot(emulator, cvm, instance_id)
    (inst,) = describe(cvm, instance_id)
    assert inst.ExpiredTime and inst.RenewFlag == "NOTIFY_AND_MANUAL_RENEW"
    call(cvm, "TerminateInstances", {"InstanceIds": [instance_id]})
    (inst,) = describe(cvm, instance_id)
    assert inst.InstanceState == "SHUTDOWN" and inst.IsolatedSource == "MANMADE"
    emulator.admin.advance(60)
    assert state_of(cvm, instance_id) == "SHUTDOWN"  # stays in the bin until destroyed
    call(cvm, "TerminateInstances", {"InstanceIds": [instance_id]})
    assert state_of(cvm, instance_id) == "TERMINATING"
    emulator.admin.advance(1)
    assert state_of(cvm, instance_id) is None


def test_stop_start_and_reboot(emulator: EmulatorProcess, cvm: Any) -> None:
    instance_id = run_one(cvm)
    with api_error("UnsupportedOperation.InstanceStatePending"):
        call(cvm, "StopInstances", {"InstanceIds": [instance_id]})
    boot(emulator, cvm, instance_id)
    with api_error("UnsupportedOperation.InstanceStateRunning"):
        call(cvm, "StartInstances", {"InstanceIds": [instance_id]})
    call(cvm, "StopInstances", {"InstanceIds": [instance_id], "StopType": "SOFT"})
    (inst,) = describe(cvm, instance_id)
    assert (inst.InstanceState, inst.LatestOperation, inst.LatestOperationState) == (
        "STOPPING", "StopInstances", "OPERATING")
    emulator.admin.advance(2)
    (inst,) = describe(cvm, instance_id)
    assert (inst.InstanceState, inst.LatestOperationState, inst.StopChargingMode) == (
        "STOPPED", "SUCCESS", "KEEP_CHARGING")
    with api_error("UnsupportedOperation.InstanceStateStopped"):
        call(cvm, "StopInstances", {"InstanceIds": [instance_id]})
    call(cvm, "StartInstances", {"InstanceIds": [instance_id]})
    assert state_of(cvm, instance_id) == "STARTING"
    emulator.admin.advance(2)
    assert state_of(cvm, instance_id) == "RUNNING"
    call(cvm, "RebootInstances", {"InstanceIds": [instance_id]})
    assert state_of(cvm, instance_id) == "REBOOTING"
    emulator.admin.advance(2)
    (inst,) = describe(cvm, instance_id)
    assert (inst.InstanceState, inst.LatestOperation, inst.LatestOperationState) == (
        "RUNNING", "RebootInstances", "SUCCESS")


def test_stop_charging_gives_capacity_back(emulator: EmulatorProcess, cvm: Any) -> None:
    emulator.admin.set_stock(ZONE, SMALL, "POSTPAID_BY_HOUR", 1)
    instance_id = run_one(cvm)
    boot(emulator, cvm, instance_id)
    call(cvm, "StopInstances", {"InstanceIds": [instance_id], "StoppedMode": "STOP_CHARGING"})
    emulator.admin.advance(2)
    (inst,) = describe(cvm, instance_id)
    assert inst.StopChargingMode == "STOP_CHARGING"
    other = run_one(cvm)  # the stopped instance's capacity went back to the pool
    with api_error("ResourceInsufficient.SpecifiedInstanceType"):
        call(cvm, "StartInstances", {"InstanceIds": [instance_id]})
    boot(emulator, cvm, other)
    call(cvm, "TerminateInstances", {"InstanceIds": [other]})
    emulator.admin.advance(1)
    call(cvm, "StartInstances", {"InstanceIds": [instance_id]})
    emulator.admin.advance(2)
    assert state_of(cvm, instance_id) == "RUNNING"
    spot = run_one(cvm, InstanceChargeType="SPOTPAID", InstanceType=SPOT_TYPE)
    boot(emulator, cvm, spot)
    with api_error("UnsupportedOperation.StoppedModeStopCharging"):
        call(cvm, "StopInstances", {"InstanceIds": [spot], "StoppedMode": "STOP_CHARGING"})


def test_action_timer_terminates_at_its_time(emulator: EmulatorProcess, cvm: Any) -> None:
    when = iso_in(emulator, 600)
    timed = run_one(cvm, ActionTimer={"TimerAction": "TerminateInstances", "ActionTime": when},
                    InstanceChargeType="PREPAID", InstanceChargePrepaid={"Period": 1})
    other = run_one(cvm)
    boot(emulator, cvm, timed)
    (timer,) = call(cvm, "DescribeInstancesActionTimer", {"InstanceIds": [timed]}).ActionTimers
    assert (timer.TimerAction, timer.ActionTime, timer.Status, timer.InstanceId) == (
        "TerminateInstances", when, "UNDO", timed)
    later = {"InstanceIds": [other],
             "ActionTimer": {"TimerAction": "TerminateInstances", "ActionTime": iso_in(emulator, 900)}}
    (imported,) = call(cvm, "ImportInstancesActionTimer", later).ActionTimerIds
    with api_error("FailedOperation.MutActionTimerExist"):
        call(cvm, "ImportInstancesActionTimer", later)
    call(cvm, "DeleteInstancesActionTimer", {"ActionTimerIds": [imported]})
    assert call(cvm, "DescribeInstancesActionTimer", {"InstanceIds": [other]}).ActionTimers == []
    emulator.admin.advance(601)
    assert state_of(cvm, timed) in ("TERMINATING", None)  # prepaid, yet no recycle bin (SHUTDOWN)
    assert state_of(cvm, other) == "RUNNING"
    (timer,) = call(cvm, "DescribeInstancesActionTimer", {"StatusList": ["DONE"]}).ActionTimers
    assert timer.InstanceId == timed
