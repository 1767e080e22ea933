"""VPC: the networks, subnets and security groups a launch names (RunInstances' VirtualPrivateCloud and
SecurityGroupIds), and the one security group cvmjob keeps per region for its jobs.

Omitting the network from RunInstances leaves it to the account's defaults (or the legacy basic network, where a
CAM role cannot be bound), so every launch names it (realcloud.md §1).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._sdk import TencentSdk

_PAGE = 100
# Tencent's software mirror, reached from inside a VPC without a public IP ("Private network access address:
# http://mirrors.tencentyun.com/"; realcloud.md §2.1): PyPI, and the GPU driver's installer.
MIRROR = "http://mirrors.tencentyun.com"
PIP_MIRROR = f"{MIRROR}/pypi/simple"
# Its Docker Hub mirror (the same page's "registry-mirrors"): an instance without a public IP reaches Docker Hub
# only through it (TKE's FAQ: such an instance "cannot pull images from Docker Hub"; realcloud.md §2.1).
DOCKER_HUB_MIRROR = "mirror.ccs.tencentyun.com"
# The API's equivalent of the console's "install the GPU driver automatically" (doc 560/112129, realcloud.md §3.1):
# this script reads its versions from user_define_install_info.ini in the temporary folder and installs them.
DRIVER_INSTALLER = f"{MIRROR}/install/GPU/auto_install.sh"
DRIVER_SETTINGS = "user_define_install_info.ini"
DRIVER_LOG = "auto_install.log"


@dataclass(frozen=True)
class Subnet:
    subnet_id: str
    vpc_id: str
    zone: str
    is_default: bool


def _listed(sdk: TencentSdk, action: str, items: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every item, a page at a time; this API's Offset and Limit are strings."""
    offset = 0
    while True:
        result = sdk.call("vpc", action, {**params, "Offset": str(offset), "Limit": str(_PAGE)})
        page = result.get(items) or []
        yield from page
        offset += len(page)
        if len(page) < _PAGE or offset >= int(result.get("TotalCount") or 0):
            return


def _filter(name: str, *values: str) -> dict[str, Any]:
    return {"Name": name, "Values": list(values)}


def default_vpc(sdk: TencentSdk) -> str | None:
    """The region's default VPC; None when the account has none there."""
    found = list(_listed(sdk, "DescribeVpcs", "VpcSet", {"Filters": [_filter("is-default", "true")]}))
    return str(found[0]["VpcId"]) if found else None


def create_default_vpc(sdk: TencentSdk, zone: str) -> tuple[str, str]:
    """The region's default VPC and ``zone``'s default subnet in it, made where the account has none (CreateDefaultVpc
    returns them when they exist; Force: the default VPC even on an account that also has the classic network)."""
    made = sdk.call("vpc", "CreateDefaultVpc", {"Zone": zone, "Force": True})["Vpc"]
    return str(made["VpcId"]), str(made["SubnetId"])


def vpc_exists(sdk: TencentSdk, vpc_id: str) -> bool:
    return any(v["VpcId"] == vpc_id for v in _listed(sdk, "DescribeVpcs", "VpcSet",
                                                     {"Filters": [_filter("vpc-id", vpc_id)]}))


def subnets(sdk: TencentSdk, vpc_id: str) -> list[Subnet]:
    """The VPC's subnets, in every zone."""
    return [Subnet(str(s["SubnetId"]), str(s["VpcId"]), str(s["Zone"]), bool(s.get("IsDefault")))
            for s in _listed(sdk, "DescribeSubnets", "SubnetSet", {"Filters": [_filter("vpc-id", vpc_id)]})]


def security_groups(sdk: TencentSdk, ids: list[str]) -> set[str]:
    """Which of ``ids`` exist in the region."""
    if not ids:
        return set()
    found = _listed(sdk, "DescribeSecurityGroups", "SecurityGroupSet", {"SecurityGroupIds": ids})
    return {str(g["SecurityGroupId"]) for g in found}


# The group every job of the region shares unless its spec names groups: its members admit each other on every
# protocol and port (torchrun's rendezvous, then NCCL's own connections), and may reach anything (COS, mirrors).
# A group created through the API denies everything both ways until rules say otherwise.
MANAGED_GROUP = "security-group"
_FROM_MEMBERS = {"Protocol": "ALL", "Action": "ACCEPT", "PolicyDescription": "cvmjob: the nodes of a job"}
_ANYWHERE = {"Protocol": "ALL", "CidrBlock": "0.0.0.0/0", "Action": "ACCEPT", "PolicyDescription": "cvmjob"}


def _managed_groups(sdk: TencentSdk, tag_key: str) -> list[str]:
    return sorted(str(g["SecurityGroupId"]) for g in _listed(
        sdk, "DescribeSecurityGroups", "SecurityGroupSet", {"Filters": [_filter(f"tag:{tag_key}", MANAGED_GROUP)]}))


def managed_security_group(sdk: TencentSdk, tag_key: str) -> str | None:
    """cvmjob's group of the region, if a plan made it already (the oldest, as ensure_security_group uses)."""
    found = _managed_groups(sdk, tag_key)
    return found[0] if found else None


def ensure_security_group(sdk: TencentSdk, tag_key: str) -> tuple[str, bool]:
    """cvmjob's group of the region (tagged ``tag_key``), created with its rules if it is missing, its rules added
    if a crash came between; and whether it was created now. Two controllers creating it at once make two
    groups: the oldest id is used from then on."""
    found = _managed_groups(sdk, tag_key)
    created = not found
    if created:
        answer = sdk.call("vpc", "CreateSecurityGroup", {
            "GroupName": "cvmjob", "GroupDescription": "cvmjob: a job's nodes admit each other; all egress",
            "Tags": [{"Key": tag_key, "Value": MANAGED_GROUP}]})
        found = [str(answer["SecurityGroup"]["SecurityGroupId"])]
    group = found[0]
    rules = sdk.call("vpc", "DescribeSecurityGroupPolicies", {"SecurityGroupId": group})["SecurityGroupPolicySet"]
    if not any(r.get("SecurityGroupId") == group and r.get("Protocol") == "ALL" and r.get("Action") == "ACCEPT"
               for r in rules.get("Ingress") or []):
        sdk.call("vpc", "CreateSecurityGroupPolicies", {"SecurityGroupId": group, "SecurityGroupPolicySet": {
            "Ingress": [{**_FROM_MEMBERS, "SecurityGroupId": group}]}})
    if not any(r.get("CidrBlock") == "0.0.0.0/0" and r.get("Protocol") == "ALL" and r.get("Action") == "ACCEPT"
               for r in rules.get("Egress") or []):
        sdk.call("vpc", "CreateSecurityGroupPolicies", {"SecurityGroupId": group, "SecurityGroupPolicySet": {
            "Egress": [_ANYWHERE]}})
    return group, created
