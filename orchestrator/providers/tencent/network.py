"""VPC: the networks, subnets and security groups a launch names (RunInstances' VirtualPrivateCloud and
SecurityGroupIds). Lookups only: cvmjob creates no network of its own yet.

Omitting the network from RunInstances leaves it to the account's defaults (or the legacy basic network, where a
CAM role cannot be bound), so every launch names it (realcloud.md §1).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._sdk import TencentSdk

_PAGE = 100


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


def default_security_group(sdk: TencentSdk) -> str | None:
    """The project's default security group (what RunInstances binds when none is named); None when absent."""
    found = list(_listed(sdk, "DescribeSecurityGroups", "SecurityGroupSet",
                         {"Filters": [_filter("is-default", "true")]}))
    return str(found[0]["SecurityGroupId"]) if found else None
