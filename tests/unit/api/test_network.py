"""The network every launch names: the plan resolves the VPC, a subnet per zone and the security groups (the spec's,
else the region's defaults), refuses what does not exist, and its DryRun and the launch send the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import api
from orchestrator.plan.planner import PlanError
from orchestrator.providers.tencent import TencentSdk, compute, network
from orchestrator.staging.launch import client_token, launch_request, node_name, node_tags
from tests.emulator_process import EmulatorProcess

SMALL = """\
name: small
region: ap-guangzhou
zones: [ap-guangzhou-3, ap-guangzhou-4]
instance: {type: S5.MEDIUM4}
train: {command: python train.py}
"""


def small(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(SMALL, encoding="utf-8")
    return path


def refusal(tmp_path: Path, *overrides: str) -> list[str]:
    with pytest.raises(PlanError) as refused:
        api.plan(small(tmp_path), list(overrides))
    return refused.value.problems


def test_the_plan_names_the_default_vpc_each_zones_subnet_and_cvmjobs_group_made_once(
        cloud: EmulatorProcess, sdk: TencentSdk, tmp_path: Path) -> None:
    first = api.plan(small(tmp_path))
    planned = first.plan.network
    vpc = network.default_vpc(sdk)
    assert planned is not None and planned.vpc_id == vpc and vpc is not None
    zone_subnets = {s.zone: s.subnet_id for s in network.subnets(sdk, vpc) if s.is_default}
    assert planned.subnets == {z: zone_subnets[z] for z in ("ap-guangzhou-3", "ap-guangzhou-4")}
    [group] = planned.security_group_ids
    assert f"network: created the cvmjob security group {group} in ap-guangzhou (its members admit each other on " \
           "every port; all egress)" in first.notes
    again = api.plan(small(tmp_path))
    assert again.plan.network == planned and not [n for n in again.notes if "security group" in n]
    rules = sdk.call("vpc", "DescribeSecurityGroupPolicies", {"SecurityGroupId": group})["SecurityGroupPolicySet"]
    assert [(r["Protocol"], r["SecurityGroupId"]) for r in rules["Ingress"]] == [("ALL", group)]
    assert [(r["Protocol"], r["CidrBlock"]) for r in rules["Egress"]] == [("ALL", "0.0.0.0/0")]
    assert planned.public_bandwidth_mbps is None


def test_an_account_without_a_default_network_gets_one_made_and_said(
        cloud: EmulatorProcess, sdk: TencentSdk, tmp_path: Path) -> None:
    vpc = str(network.default_vpc(sdk))
    for subnet in network.subnets(sdk, vpc):
        sdk.call("vpc", "DeleteSubnet", {"SubnetId": subnet.subnet_id})
    sdk.call("vpc", "DeleteVpc", {"VpcId": vpc})
    assert network.default_vpc(sdk) is None
    report = api.plan(small(tmp_path))
    remade = network.default_vpc(sdk)
    subnets = {s.zone: s.subnet_id for s in network.subnets(sdk, str(remade))}
    assert set(subnets) == {"ap-guangzhou-3", "ap-guangzhou-4"}  # the zones the job may use, no other
    assert report.notes[:2] == [
        f"network: created the default VPC {remade} of ap-guangzhou (the account had none), with the default subnet "
        f"{subnets['ap-guangzhou-3']} of ap-guangzhou-3",
        f"network: created the default subnet {subnets['ap-guangzhou-4']} of ap-guangzhou-4 in {remade}"]
    assert report.plan.network is not None and report.plan.network.subnets == subnets
    assert cloud.admin.calls(action="RunInstances")[-1]["params"]["VirtualPrivateCloud"] == {
        "VpcId": remade, "SubnetId": subnets["ap-guangzhou-3"]}  # the DryRun names them


def test_a_group_made_before_a_crash_gets_its_missing_rules(cloud: EmulatorProcess, sdk: TencentSdk) -> None:
    made = sdk.call("vpc", "CreateSecurityGroup", {"GroupName": "cvmjob", "GroupDescription": "d", "Tags": [
        {"Key": "cvmjob:managed", "Value": network.MANAGED_GROUP}]})["SecurityGroup"]["SecurityGroupId"]
    assert network.ensure_security_group(sdk, "cvmjob:managed") == (made, False)
    rules = sdk.call("vpc", "DescribeSecurityGroupPolicies", {"SecurityGroupId": made})["SecurityGroupPolicySet"]
    assert (len(rules["Ingress"]), len(rules["Egress"])) == (1, 1)
    assert network.ensure_security_group(sdk, "cvmjob:managed") == (made, False)  # nothing added twice
    rules = sdk.call("vpc", "DescribeSecurityGroupPolicies", {"SecurityGroupId": made})["SecurityGroupPolicySet"]
    assert (len(rules["Ingress"]), len(rules["Egress"])) == (1, 1)


def test_what_the_spec_names_and_the_cloud_lacks_is_one_refusal_each(
        cloud: EmulatorProcess, sdk: TencentSdk, tmp_path: Path) -> None:
    vpc = network.default_vpc(sdk)
    assert refusal(tmp_path, "network.vpc_id=vpc-00000000") == [
        "network.vpc_id: vpc-00000000 does not exist in ap-guangzhou. check the id, or leave it unset for the "
        "default VPC"]
    zone4 = next(s.subnet_id for s in network.subnets(sdk, str(vpc)) if s.zone == "ap-guangzhou-4")
    assert refusal(tmp_path, f"network.vpc_id={vpc}", f"network.subnet_ids.ap-guangzhou-3={zone4}",
                   "network.security_groups=[sg-00000000]") == [
        f"network.subnet_ids.ap-guangzhou-3: {zone4} is in ap-guangzhou-4. name a subnet of {vpc} in "
        "ap-guangzhou-3",
        "network.security_groups: sg-00000000 does not exist in ap-guangzhou"]
    assert cloud.admin.calls(action="RunInstances") == []


def test_a_zone_without_a_subnet_named_is_rejected_and_the_next_leads(
        cloud: EmulatorProcess, sdk: TencentSdk, tmp_path: Path) -> None:
    vpc = str(network.default_vpc(sdk))
    zone4 = next(s.subnet_id for s in network.subnets(sdk, vpc) if s.zone == "ap-guangzhou-4")
    plan = api.plan(small(tmp_path), [f"network.vpc_id={vpc}", f"network.subnet_ids.ap-guangzhou-4={zone4}"]).plan
    assert {c.zone for c in plan.candidates} == {"ap-guangzhou-4"}
    assert [r.reason for r in plan.rejected if r.zone == "ap-guangzhou-3"] == [
        f"{vpc} has no subnet in this zone (network.subnet_ids)"]
    assert plan.network is not None and plan.network.subnets == {"ap-guangzhou-4": zone4}


def test_the_dry_run_and_the_launch_send_the_same_network_and_the_instance_is_in_it(
        cloud: EmulatorProcess, sdk: TencentSdk, tmp_path: Path) -> None:
    report = api.plan(small(tmp_path), ["network.public_ip.bandwidth_mbps=10"])
    spec, plan = report.spec, report.plan
    probe = launch_request(spec, plan.primary, plan.image_id, client_token="cvmjob-plan-dry-run",
                           name=f"cvmjob-{spec.name}", tags={}, network=plan.network).params()
    launch = launch_request(spec, plan.primary, plan.image_id, client_token=client_token("job-1", 1, 0),
                            name=node_name(spec, "job-1", 1, 0), tags=node_tags(spec, "job-1", 1, 0),
                            network=plan.network).params()
    sent = ("VirtualPrivateCloud", "SecurityGroupIds", "InternetAccessible", "ImageId", "Placement")
    assert {k: probe.get(k) for k in sent} == {k: launch.get(k) for k in sent}
    assert launch["InternetAccessible"] == {"InternetChargeType": "TRAFFIC_POSTPAID_BY_HOUR",
                                            "PublicIpAssigned": True, "InternetMaxBandwidthOut": 10}
    [instance_id] = compute.run_instances(sdk, launch_request(
        spec, plan.primary, plan.image_id, client_token=client_token("job-1", 1, 0), name="n", tags={},
        network=plan.network))
    described = sdk.call("cvm", "DescribeInstances", {"InstanceIds": [instance_id]})["InstanceSet"][0]
    assert plan.network is not None
    assert described["VirtualPrivateCloud"]["SubnetId"] == plan.network.subnets[plan.primary.zone]
    assert described["SecurityGroupIds"] == plan.network.security_group_ids
