"""Every region has a default VPC (172.16.0.0/16) with one default subnet per zone and a default security
group, as a new Tencent Cloud account does. Their ids are stable across restarts."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..catalog import ZONES, zones_of
from ..ids import stable_id


@dataclass(frozen=True)
class Subnet:
    subnet_id: str
    vpc_id: str
    zone: str
    cidr: str
    index: int


@dataclass(frozen=True)
class Vpc:
    vpc_id: str
    region: str
    cidr: str
    security_group_id: str


def default_vpc(region: str) -> Vpc:
    return Vpc(stable_id("vpc", region), region, "172.16.0.0/16", stable_id("sg", region, "default"))


def default_subnets(region: str) -> list[Subnet]:
    vpc = default_vpc(region)
    return [
        Subnet(stable_id("subnet", zone.name), vpc.vpc_id, zone.name, f"172.16.{16 * i}.0/20", i)
        for i, zone in enumerate(zones_of(region))
    ]


def subnet_for_zone(zone: str) -> Subnet | None:
    region = next((z.region for z in ZONES if z.name == zone), None)
    if region is None:
        return None
    return next((s for s in default_subnets(region) if s.zone == zone), None)


class DefaultNetwork:
    """The regions' default VPCs and their zones' default subnets as the account has them: all there at first (an
    account that has launched in the console), removed by DeleteSubnet and DeleteVpc, made again by CreateDefaultVpc
    (which the SDK documents as returning the default VPC and a subnet of the zone asked for)."""

    def __init__(self) -> None:
        self.removed: set[str] = set()  # ids of default VPCs and subnets deleted

    def vpc(self, region: str) -> Vpc | None:
        vpc = default_vpc(region)
        return None if vpc.vpc_id in self.removed else vpc

    def subnets(self, region: str) -> list[Subnet]:
        if self.vpc(region) is None:
            return []
        return [s for s in default_subnets(region) if s.subnet_id not in self.removed]

    def create_default(self, region: str, zone: str) -> tuple[Vpc, Subnet]:
        """The default VPC, and the zone's default subnet, made again where they were deleted."""
        subnet = next(s for s in default_subnets(region) if s.zone == zone)
        vpc = default_vpc(region)
        self.removed -= {vpc.vpc_id, subnet.subnet_id}
        return vpc, subnet

    def to_state(self) -> list[str]:
        return sorted(self.removed)

    def restore(self, state: list[str]) -> None:
        self.removed = set(state)


PROTOCOLS = ("TCP", "UDP", "ICMP", "ICMPV6", "GRE", "ALL")


@dataclass(frozen=True)
class Policy:
    """One rule: a protocol (and ports for TCP/UDP), one source or destination (a CIDR or a security group, which
    stands for the private addresses of its members as they change), and ACCEPT or DROP."""

    protocol: str
    port: str  # "ALL", "80" or "8000-8010"
    cidr: str | None
    group: str | None
    action: str
    description: str = ""

    def to_api(self, index: int) -> dict[str, object]:
        return {"PolicyIndex": index, "Protocol": self.protocol, "Port": self.port, "CidrBlock": self.cidr or "",
                "SecurityGroupId": self.group or "", "Action": self.action, "PolicyDescription": self.description,
                "Ipv6CidrBlock": "", "ModifyTime": ""}



@dataclass
class SecurityGroup:
    group_id: str
    region: str
    name: str
    description: str
    project_id: str
    tags: list[dict[str, str]]
    created_at: float
    ingress: list[Policy]
    egress: list[Policy]
    version: int = 0


@dataclass(frozen=True)
class DefaultGroup:
    """A region's default group as the system creates it: it opens all IPv4 traffic both ways."""

    group_id: str
    ingress: tuple[Policy, ...] = (Policy("ALL", "ALL", "0.0.0.0/0", None, "ACCEPT", "system created"),)
    egress: tuple[Policy, ...] = (Policy("ALL", "ALL", "0.0.0.0/0", None, "ACCEPT", "system created"),)


class SecurityGroups:
    """The account's own groups (created through the API; a new one denies everything both ways)."""

    def __init__(self) -> None:
        self.groups: dict[str, SecurityGroup] = {}

    def in_region(self, region: str) -> list[SecurityGroup]:
        return [g for g in self.groups.values() if g.region == region]

    def ids(self, region: str) -> set[str]:
        return {g.group_id for g in self.in_region(region)} | {default_vpc(region).security_group_id}

    def rules(self, region: str, group_id: str) -> tuple[list[Policy], list[Policy]] | None:
        """Ingress and egress of the group; None when the region has no such group."""
        if group_id == default_vpc(region).security_group_id:
            default = DefaultGroup(group_id)
            return list(default.ingress), list(default.egress)
        group = self.groups.get(group_id)
        return None if group is None or group.region != region else (group.ingress, group.egress)

    def to_state(self) -> list[dict[str, Any]]:
        return [{**asdict(g), "ingress": [asdict(p) for p in g.ingress], "egress": [asdict(p) for p in g.egress]}
                for g in self.groups.values()]

    def restore(self, state: list[dict[str, Any]]) -> None:
        for item in state:
            rules = {way: [Policy(**p) for p in item[way]] for way in ("ingress", "egress")}
            group = SecurityGroup(**{**item, **rules})
            self.groups[group.group_id] = group
