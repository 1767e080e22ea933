"""VPC actions. Offset and Limit are strings in this API's schema (tccli sends "5"); they are coerced."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

from ..api3.dispatch import CallContext, Service
from ..api3.params import Params
from ..catalog import REGIONS
from ..errors import ApiError
from .models import default_subnets, default_vpc


def _page(items: list[dict[str, Any]], params: Params) -> list[dict[str, Any]]:
    offset = params.int("Offset", 0) or 0
    limit = params.int("Limit", 20) or 20
    if offset < 0 or not 1 <= limit <= 100:
        raise ApiError("InvalidParameterValue.Range", "Offset must be >= 0 and Limit between 1 and 100.")
    return items[offset : offset + limit]


def _filtered(
    items: Iterable[dict[str, Any]], params: Params, ids_key: str, id_field: str, filter_fields: dict[str, str]
) -> list[dict[str, Any]]:
    ids = params.str_list(ids_key)
    out = [i for i in items if not ids or i[id_field] in ids]
    for flt in params.objs("Filters", max_items=10):
        name = flt.req_str("Name")
        values = flt.str_list("Values", max_items=5)
        field = filter_fields.get(name)
        if field is None:
            raise ApiError("InvalidParameterValue", f"Filter `{name}` is not supported.")
        wanted = {v.lower() for v in values}
        out = [i for i in out if str(i.get(field)).lower() in wanted]
    return out


def build(created: Callable[[], float]) -> Service:
    service = Service("vpc", "2017-03-12")

    def region_of(ctx: CallContext) -> str:
        if ctx.region not in REGIONS:
            raise ApiError(
                "InvalidParameterValue", f"Region `{ctx.region}` is not available here: {', '.join(REGIONS)}."
            )
        return ctx.region

    def created_time() -> str:
        return datetime.fromtimestamp(created(), timezone.utc).strftime("%Y-%m-%d %H:%M:%S")

    @service.action("DescribeVpcs", mutates=False)
    def describe_vpcs(ctx: CallContext, params: Params) -> dict[str, Any]:
        vpc = default_vpc(region_of(ctx))
        items = [
            {
                "VpcName": "Default-VPC",
                "VpcId": vpc.vpc_id,
                "CidrBlock": vpc.cidr,
                "IsDefault": True,
                "EnableMulticast": False,
                "CreatedTime": created_time(),
                "DnsServerSet": ["183.60.83.19", "183.60.82.98"],
                "DomainName": "",
                "EnableDhcp": True,
                "TagSet": [],
                "AssistantCidrSet": [],
            }
        ]
        items = _filtered(
            items,
            params,
            "VpcIds",
            "VpcId",
            {"vpc-id": "VpcId", "vpc-name": "VpcName", "is-default": "IsDefault", "cidr-block": "CidrBlock"},
        )
        return {"TotalCount": len(items), "VpcSet": _page(items, params)}

    @service.action("DescribeSubnets", mutates=False)
    def describe_subnets(ctx: CallContext, params: Params) -> dict[str, Any]:
        items = [
            {
                "VpcId": s.vpc_id,
                "SubnetId": s.subnet_id,
                "SubnetName": f"Default-Subnet-{s.zone}",
                "CidrBlock": s.cidr,
                "IsDefault": True,
                "EnableBroadcast": False,
                "Zone": s.zone,
                "RouteTableId": "rtb-" + s.vpc_id[4:],
                "CreatedTime": created_time(),
                "AvailableIpAddressCount": 4093,
                "TotalIpAddressCount": 4096,
                "NetworkAclId": "",
                "IsRemoteVpcSnat": False,
                "TagSet": [],
            }
            for s in default_subnets(region_of(ctx))
        ]
        items = _filtered(
            items,
            params,
            "SubnetIds",
            "SubnetId",
            {
                "subnet-id": "SubnetId",
                "vpc-id": "VpcId",
                "zone": "Zone",
                "is-default": "IsDefault",
                "subnet-name": "SubnetName",
                "cidr-block": "CidrBlock",
            },
        )
        return {"TotalCount": len(items), "SubnetSet": _page(items, params)}

    @service.action("DescribeSecurityGroups", mutates=False)
    def describe_security_groups(ctx: CallContext, params: Params) -> dict[str, Any]:
        vpc = default_vpc(region_of(ctx))
        items = [
            {
                "SecurityGroupId": vpc.security_group_id,
                "SecurityGroupName": "default",
                "SecurityGroupDesc": "System created security group",
                "ProjectId": "0",
                "IsDefault": True,
                "CreatedTime": created_time(),
                "UpdateTime": created_time(),
                "TagSet": [],
            }
        ]
        items = _filtered(
            items,
            params,
            "SecurityGroupIds",
            "SecurityGroupId",
            {
                "security-group-id": "SecurityGroupId",
                "security-group-name": "SecurityGroupName",
                "is-default": "IsDefault",
                "project-id": "ProjectId",
            },
        )
        return {"TotalCount": len(items), "SecurityGroupSet": _page(items, params)}

    return service
