from __future__ import annotations

import json
from typing import Any

import pytest
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.cvm.v20170312 import models as cvm_models
from tencentcloud.vpc.v20170312 import models

from tests.emulator.cvm_support import run_one


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
