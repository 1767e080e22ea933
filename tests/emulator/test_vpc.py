from __future__ import annotations

from typing import Any

from tencentcloud.vpc.v20170312 import models


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
