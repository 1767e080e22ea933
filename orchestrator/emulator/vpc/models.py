"""Every region has a default VPC (172.16.0.0/16) with one default subnet per zone and a default security
group, as a new Tencent Cloud account does. Their ids are stable across restarts."""

from __future__ import annotations

from dataclasses import dataclass

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
