"""VPC actions. Offset and Limit are strings in this API's schema (tccli sends "5"); they are coerced."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

from ..api3.dispatch import CallContext, Service
from ..api3.params import Params
from ..catalog import REGIONS, zones_of
from ..cvm.tags import tag_filter_values
from ..errors import ApiError
from ..ids import new_id
from .models import PROTOCOLS, DefaultNetwork, Policy, SecurityGroup, SecurityGroups, default_vpc

SG_ID = re.compile(r"sg-[a-z0-9]{8}")


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


def build(created_at: Callable[[], float], groups: SecurityGroups, now: Callable[[], float],
          network: DefaultNetwork, subnet_in_use: Callable[[str], bool]) -> Service:
    """``created_at``: when the account's default network was made; ``now``: the cloud's clock;
    ``subnet_in_use``: whether an instance is in the subnet."""
    service = Service("vpc", "2017-03-12")
    created = now

    def stamp(at: float) -> str:
        return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")

    def region_of(ctx: CallContext) -> str:
        if ctx.region not in REGIONS:
            raise ApiError(
                "InvalidParameterValue", f"Region `{ctx.region}` is not available here: {', '.join(REGIONS)}."
            )
        return ctx.region

    def created_time() -> str:
        return stamp(created_at())

    @service.action("DescribeVpcs", mutates=False)
    def describe_vpcs(ctx: CallContext, params: Params) -> dict[str, Any]:
        vpc = network.vpc(region_of(ctx))
        items = [] if vpc is None else [
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
            for s in network.subnets(region_of(ctx))
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

    @service.action("CreateDefaultVpc")
    def create_default_vpc(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        zones = [z.name for z in zones_of(region)]
        zone = params.str("Zone") or zones[0]
        if zone not in zones:
            raise ApiError("InvalidParameterValue.Malformed", f"`{zone}` is not a zone of {region}.")
        vpc, subnet = network.create_default(region, zone)
        return {"Vpc": {"VpcId": vpc.vpc_id, "SubnetId": subnet.subnet_id, "VpcName": "Default-VPC",
                        "SubnetName": f"Default-Subnet-{zone}", "CidrBlock": subnet.cidr}}

    @service.action("DeleteSubnet")
    def delete_subnet(ctx: CallContext, params: Params) -> dict[str, Any]:
        subnet_id = params.req_str("SubnetId")
        if subnet_id not in {s.subnet_id for s in network.subnets(region_of(ctx))}:
            raise ApiError("ResourceNotFound", f"The subnet `{subnet_id}` does not exist.")
        if subnet_in_use(subnet_id):
            raise ApiError("ResourceInUse", f"The subnet `{subnet_id}` has instances.")
        network.removed.add(subnet_id)
        return {}

    @service.action("DeleteVpc")
    def delete_vpc(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        vpc_id, vpc = params.req_str("VpcId"), network.vpc(region)
        if vpc is None or vpc.vpc_id != vpc_id:
            raise ApiError("InvalidVpcId.NotFound", f"The VPC `{vpc_id}` does not exist.")
        if network.subnets(region):
            raise ApiError("ResourceInUse", f"The VPC `{vpc_id}` still has subnets: delete them first.")
        network.removed.add(vpc_id)
        return {}

    def group_view(group_id: str, name: str, description: str, project: str, default: bool, created: str,
                   tags: list[dict[str, str]]) -> dict[str, Any]:
        return {"SecurityGroupId": group_id, "SecurityGroupName": name, "SecurityGroupDesc": description,
                "ProjectId": project, "IsDefault": default, "CreatedTime": created, "UpdateTime": created,
                "TagSet": tags}

    @service.action("DescribeSecurityGroups", mutates=False)
    def describe_security_groups(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        items = [group_view(default_vpc(region).security_group_id, "default", "System created security group", "0",
                            True, created_time(), [])]
        items += [group_view(g.group_id, g.name, g.description, g.project_id, False, stamp(g.created_at), g.tags)
                  for g in groups.in_region(region)]
        filters = params.objs("Filters", max_items=10)
        by_tag = [f for f in filters if tag_filter_values([], f.req_str("Name")) is not None]
        for flt in by_tag:
            wanted = set(flt.str_list("Values", max_items=5))
            items = [i for i in items if wanted & set(tag_filter_values(i["TagSet"], flt.req_str("Name")) or [])]
        plain = Params({**params.raw(), "Filters": [f.raw() for f in filters if f not in by_tag]})
        items = _filtered(
            items,
            plain,
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

    @service.action("CreateSecurityGroup")
    def create_security_group(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        name = params.req_str("GroupName")
        description = params.req_str("GroupDescription")
        if not 1 <= len(name) <= 60 or len(description) > 100:
            raise ApiError("InvalidParameterValue.TooLong",
                           "GroupName takes 1-60 characters and GroupDescription at most 100.")
        tags = [{"Key": t.req_str("Key"), "Value": t.str("Value", "") or ""} for t in params.objs("Tags")]
        group = SecurityGroup(new_id("sg"), region, name, description, params.str("ProjectId", "0") or "0", tags,
                              created(), [], [])  # a new group denies everything, both ways
        groups.groups[group.group_id] = group
        return {"SecurityGroup": group_view(group.group_id, name, description, group.project_id, False,
                                            stamp(group.created_at), tags)}

    def own_group(region: str, group_id: str) -> SecurityGroup:
        if not SG_ID.fullmatch(group_id):
            raise ApiError("InvalidSecurityGroupID.Malformed", f"`{group_id}` is not a security group id.")
        group = groups.groups.get(group_id)
        if group is None or group.region != region:
            raise ApiError("InvalidSecurityGroupID.NotFound", f"The security group `{group_id}` does not exist.")
        return group

    @service.action("CreateSecurityGroupPolicies")
    def create_security_group_policies(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        group = own_group(region, params.req_str("SecurityGroupId"))
        policy_set = params.obj("SecurityGroupPolicySet", required=True)
        assert policy_set is not None
        ways = {way: policy_set.objs(way) for way in ("Ingress", "Egress") if policy_set.objs(way)}
        if len(ways) != 1:  # "一次请求中只能创建单个方向的规则"
            raise ApiError("InvalidParameter", "One request creates rules of one direction: Ingress or Egress.")
        [(way, given)] = ways.items()
        rules = [_policy(region, p) for p in given]
        target = group.ingress if way == "Ingress" else group.egress
        index = given[0].int("PolicyIndex")
        position = len(target) if index is None else max(0, min(index, len(target)))
        target[position:position] = rules
        group.version += 1
        return {}

    def _policy(region: str, given: Params) -> Policy:
        protocol = (given.str("Protocol", "") or "").upper()
        if protocol not in PROTOCOLS:
            raise ApiError("InvalidParameterValue.Malformed", f"Protocol must be one of {', '.join(PROTOCOLS)}.")
        port = given.str("Port")
        if port is not None and protocol not in ("TCP", "UDP") and port.upper() != "ALL":
            raise ApiError("InvalidParameter", "Port is accepted only with the TCP or UDP protocol.")
        sources = [k for k in ("CidrBlock", "Ipv6CidrBlock", "SecurityGroupId", "AddressTemplate") if k in given]
        if len(sources) != 1:
            raise ApiError("InvalidParameter",
                           "Give exactly one of CidrBlock, Ipv6CidrBlock, SecurityGroupId and AddressTemplate.")
        group_id = given.str("SecurityGroupId")
        if group_id is not None and group_id not in groups.ids(region):
            raise ApiError("InvalidSecurityGroupID.NotFound", f"The security group `{group_id}` does not exist.")
        action = (given.str("Action", "") or "").upper()
        if action not in ("ACCEPT", "DROP"):
            raise ApiError("InvalidParameterValue.Malformed", "Action must be ACCEPT or DROP.")
        cidr = given.str("CidrBlock")
        port = port if port is not None and protocol in ("TCP", "UDP") else "ALL"  # other protocols: ALL or none
        return Policy(protocol, port, cidr, group_id, action, given.str("PolicyDescription", "") or "")

    @service.action("DescribeSecurityGroupPolicies", mutates=False)
    def describe_security_group_policies(ctx: CallContext, params: Params) -> dict[str, Any]:
        region = region_of(ctx)
        group_id = params.req_str("SecurityGroupId")
        rules = groups.rules(region, group_id)
        if rules is None:
            raise ApiError("InvalidSecurityGroupID.NotFound", f"The security group `{group_id}` does not exist.")
        ingress, egress = rules
        version = groups.groups[group_id].version if group_id in groups.groups else 0
        return {"SecurityGroupPolicySet": {"Version": str(version),
                                           "Ingress": [p.to_api(i) for i, p in enumerate(ingress)],
                                           "Egress": [p.to_api(i) for i, p in enumerate(egress)]}}

    return service
