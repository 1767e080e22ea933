from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.cvm.v20170312 import models as cvm_models
from tencentcloud.vpc.v20170312 import models

from tests.emulator.cvm_support import admin_instance, boot, run_one, user_data, wait_file, wait_state
from tests.emulator_process import EmulatorProcess


def test_default_vpc_subnets_and_security_group(vpc: Any) -> None:
    vpcs = vpc.DescribeVpcs(models.DescribeVpcsRequest())
    assert vpcs.TotalCount == 1 and vpcs.VpcSet[0].IsDefault
    vpc_id = vpcs.VpcSet[0].VpcId
    assert vpc_id.startswith("vpc-") and len(vpc_id) == 12
    subnets = vpc.DescribeSubnets(models.DescribeSubnetsRequest())
    assert {s.VpcId for s in subnets.SubnetSet} == {vpc_id}
    assert "ap-guangzhou-3" in {s.Zone for s in subnets.SubnetSet}
    groups = vpc.DescribeSecurityGroups(models.DescribeSecurityGroupsRequest())
    assert groups.SecurityGroupSet[0].IsDefault


def test_ids_are_stable(vpc: Any) -> None:
    first = vpc.DescribeVpcs(models.DescribeVpcsRequest()).VpcSet[0].VpcId
    assert vpc.DescribeVpcs(models.DescribeVpcsRequest()).VpcSet[0].VpcId == first


def _create(vpc: Any, name: str = "cvmjob", **tags: str) -> str:
    request = models.CreateSecurityGroupRequest()
    request.from_json_string(json.dumps({"GroupName": name, "GroupDescription": "its nodes admit each other",
                                         "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}))
    return str(vpc.CreateSecurityGroup(request).SecurityGroup.SecurityGroupId)


def _policies(vpc: Any, group: str, **policy_set: Any) -> None:
    request = models.CreateSecurityGroupPoliciesRequest()
    request.from_json_string(json.dumps({"SecurityGroupId": group, "SecurityGroupPolicySet": policy_set}))
    vpc.CreateSecurityGroupPolicies(request)


def _rules(vpc: Any, group: str) -> Any:
    request = models.DescribeSecurityGroupPoliciesRequest()
    request.SecurityGroupId = group
    return vpc.DescribeSecurityGroupPolicies(request).SecurityGroupPolicySet


def test_a_new_group_denies_everything_until_rules_admit_its_members_and_it_is_found_by_its_tag(vpc: Any) -> None:
    group = _create(vpc, **{"cvmjob:managed": "security-group"})
    assert (_rules(vpc, group).Ingress, _rules(vpc, group).Egress) == ([], [])  # "入站和出站规则默认都是全部拒绝"
    _policies(vpc, group, Ingress=[{"Protocol": "ALL", "SecurityGroupId": group, "Action": "ACCEPT"}])
    _policies(vpc, group, Egress=[{"Protocol": "ALL", "CidrBlock": "0.0.0.0/0", "Action": "ACCEPT"}])
    rules = _rules(vpc, group)
    assert [(p.Protocol, p.SecurityGroupId, p.Action) for p in rules.Ingress] == [("ALL", group, "ACCEPT")]
    assert [(p.Protocol, p.CidrBlock) for p in rules.Egress] == [("ALL", "0.0.0.0/0")]
    request = models.DescribeSecurityGroupsRequest()
    request.from_json_string(json.dumps({"Filters": [{"Name": "tag:cvmjob:managed", "Values": ["security-group"]}]}))
    assert [g.SecurityGroupId for g in vpc.DescribeSecurityGroups(request).SecurityGroupSet] == [group]


@pytest.mark.parametrize(("policy_set", "code"), [
    ({"Ingress": [{"Protocol": "ALL", "CidrBlock": "0.0.0.0/0", "Action": "ACCEPT"}],
      "Egress": [{"Protocol": "ALL", "CidrBlock": "0.0.0.0/0", "Action": "ACCEPT"}]}, "InvalidParameter"),
    ({"Ingress": [{"Protocol": "ICMP", "Port": "80", "CidrBlock": "0.0.0.0/0", "Action": "ACCEPT"}]},
     "InvalidParameter"),
    ({"Ingress": [{"Protocol": "TCP", "CidrBlock": "0.0.0.0/0", "SecurityGroupId": "sg-00000000",
                   "Action": "ACCEPT"}]}, "InvalidParameter"),
    ({"Ingress": [{"Protocol": "TCP", "SecurityGroupId": "sg-00000000", "Action": "ACCEPT"}]},
     "InvalidSecurityGroupID.NotFound"),
    ({"Ingress": [{"Protocol": "SCTP", "CidrBlock": "0.0.0.0/0", "Action": "ACCEPT"}]},
     "InvalidParameterValue.Malformed"),
])
def test_rules_tencent_refuses_are_refused(vpc: Any, policy_set: dict[str, Any], code: str) -> None:
    group = _create(vpc)
    with pytest.raises(TencentCloudSDKException) as refused:
        _policies(vpc, group, **policy_set)
    assert refused.value.code == code


def test_an_instance_is_launched_into_a_group_the_account_created(vpc: Any, cvm: Any) -> None:
    group = _create(vpc)
    instance_id = run_one(cvm, SecurityGroupIds=[group])
    request = cvm_models.DescribeInstancesRequest()
    request.InstanceIds = [instance_id]
    assert cvm.DescribeInstances(request).InstanceSet[0].SecurityGroupIds == [group]


# Node 0 listens on its own address (metadata local-ipv4) and writes it; node 1 tries it once it can.
LISTEN = """#!/bin/bash
python3 - <<'PY'
import os, socket, urllib.request
address = urllib.request.urlopen("http://metadata.tencentyun.com/latest/meta-data/local-ipv4").read().decode()
server = socket.socket()
server.bind((address, 0))
server.listen()
with open(os.environ["HOME"] + "/endpoint.tmp", "w") as f:
    f.write(f"{address} {server.getsockname()[1]}")
os.rename(os.environ["HOME"] + "/endpoint.tmp", os.environ["HOME"] + "/endpoint")
while True:
    server.accept()[0].close()
PY
"""
CONNECT = """#!/bin/bash
python3 - <<'PY'
import os, socket, time
path = os.environ["HOME"] + "/../../../{server}/system/root/endpoint"
while not os.path.exists(path):
    time.sleep(0.05)
address, port = open(path).read().split()
for attempt in range(20):
    try:
        socket.create_connection((address, int(port)), timeout=5).close()
        said = "connected"
    except OSError as exc:
        said = type(exc).__name__
    if said == "connected" or attempt == 19:
        break
    time.sleep(0.2)
with open(os.environ["HOME"] + "/said.tmp", "w") as f:
    f.write(said)
os.rename(os.environ["HOME"] + "/said.tmp", os.environ["HOME"] + "/said")
PY
"""


def _pair(emulator: EmulatorProcess, vpc: Any, cvm: Any, groups: list[str]) -> str:
    """What node 1 got when it connected to node 0, both launched into ``groups``."""
    server = run_one(cvm, SecurityGroupIds=groups, UserData=user_data(LISTEN))
    client = run_one(cvm, SecurityGroupIds=groups, UserData=user_data(CONNECT.replace("{server}", server)))
    boot(emulator, cvm, server)
    wait_state(cvm, client, "RUNNING")
    return wait_file(Path(admin_instance(emulator, client)["home"]) / "said", timeout=30)


def test_instances_reach_each_other_as_far_as_their_groups_admit(emulator: EmulatorProcess, vpc: Any,
                                                                 cvm: Any) -> None:
    closed = _create(vpc, "egress only")
    _policies(vpc, closed, Egress=[{"Protocol": "ALL", "CidrBlock": "0.0.0.0/0", "Action": "ACCEPT"}])
    assert _pair(emulator, vpc, cvm, [closed]) == "TimeoutError"  # dropped, as an SG drops a SYN
    _policies(vpc, closed, Ingress=[{"Protocol": "ALL", "SecurityGroupId": closed, "Action": "ACCEPT"}])
    assert _pair(emulator, vpc, cvm, [closed]) == "connected"  # the group admits its own members


def test_the_default_network_is_deleted_in_order_and_made_again_by_create_default_vpc(vpc: Any, cvm: Any) -> None:
    [default] = vpc.DescribeVpcs(models.DescribeVpcsRequest()).VpcSet
    subnets = vpc.DescribeSubnets(models.DescribeSubnetsRequest()).SubnetSet
    in_use = next(s for s in subnets if s.Zone == "ap-guangzhou-3")
    run_one(cvm, Placement={"Zone": "ap-guangzhou-3"})

    def call(action: str, **params: Any) -> Any:
        request = getattr(models, f"{action}Request")()
        request.from_json_string(json.dumps(params))
        return getattr(vpc, action)(request)

    for action, params, code in (("DeleteVpc", {"VpcId": default.VpcId}, "ResourceInUse"),  # it has subnets
                                 ("DeleteSubnet", {"SubnetId": in_use.SubnetId}, "ResourceInUse"),  # an instance
                                 ("DeleteSubnet", {"SubnetId": "subnet-00000000"}, "ResourceNotFound")):
        with pytest.raises(TencentCloudSDKException) as refused:
            call(action, **params)
        assert refused.value.code == code
    for subnet in subnets:
        if subnet.SubnetId != in_use.SubnetId:
            call("DeleteSubnet", SubnetId=subnet.SubnetId)
    with pytest.raises(TencentCloudSDKException) as refused:  # no default subnet left in ap-guangzhou-4
        run_one(cvm, Placement={"Zone": "ap-guangzhou-4"})
    assert refused.value.code == "InvalidParameterValue.SubnetNotExist"
    made = call("CreateDefaultVpc", Zone="ap-guangzhou-4", Force=True).Vpc
    assert made.VpcId == default.VpcId and made.SubnetId in {s.SubnetId for s in subnets}
    run_one(cvm, Placement={"Zone": "ap-guangzhou-4"})
