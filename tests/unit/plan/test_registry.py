"""plan/registry.py: a TCR enterprise instance is reached without a public IP only from a VPC linked to it."""

from __future__ import annotations

from orchestrator.plan.models import PlannedNetwork
from orchestrator.plan.registry import registry_unreachable

DOMAIN = "team.tencentcloudcr.com"
PRIVATE = PlannedNetwork(vpc_id="vpc-aaaaaaaa", subnets={"ap-guangzhou-3": "subnet-bbbbbbbb"})


def test_a_vpc_without_private_access_is_one_line_naming_the_call_that_links_it() -> None:
    said = registry_unreachable("tcr-a1b2c3d4", DOMAIN, PRIVATE, {"vpc-other000"})
    assert said is not None and "\n" not in said
    assert said.startswith("container.login.tcr: the instances have no public IP")
    assert ("ManageInternalEndpoint --RegistryId tcr-a1b2c3d4 --Operation Create --VpcId vpc-aaaaaaaa "
            "--SubnetId subnet-bbbbbbbb") in said and "network.public_ip" in said


def test_a_linked_vpc_or_a_public_ip_reaches_it() -> None:
    assert registry_unreachable("tcr-a1b2c3d4", DOMAIN, PRIVATE, {"vpc-aaaaaaaa"}) is None
    public = PRIVATE.model_copy(update={"public_bandwidth_mbps": 10})
    assert registry_unreachable("tcr-a1b2c3d4", DOMAIN, public, set()) is None
