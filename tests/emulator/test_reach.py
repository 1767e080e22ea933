"""Which ports of one instance another reaches, by their security groups (emulator/vpc/reach.py)."""

from __future__ import annotations

from orchestrator.emulator.vpc.models import Policy
from orchestrator.emulator.vpc.reach import Member, parse_ports, tcp_ports

ANYWHERE = Policy("ALL", "ALL", "0.0.0.0/0", None, "ACCEPT")
GROUPS: dict[str, tuple[list[Policy], list[Policy]]] = {
    "sg-open": ([ANYWHERE], [ANYWHERE]),
    "sg-new": ([], []),  # as CreateSecurityGroup makes it
    "sg-self": ([Policy("ALL", "ALL", None, "sg-self", "ACCEPT")], [ANYWHERE]),
    "sg-egress": ([], [ANYWHERE]),
    "sg-ports": ([Policy("TCP", "22", "0.0.0.0/0", None, "DROP"), Policy("TCP", "1-1024,29400-29500", None,
                                                                        "sg-ports", "ACCEPT")], [ANYWHERE]),
    "sg-subnet": ([Policy("TCP", "ALL", "172.16.0.0/20", None, "ACCEPT")], [ANYWHERE]),
}


def ports(source: tuple[str, ...], destination: tuple[str, ...], vpc: str = "vpc-1",
          address: str = "172.16.0.2") -> list[tuple[int, int]]:
    return tcp_ports(Member(address, "vpc-1", source), Member("172.16.0.3", vpc, destination), GROUPS.get)


def test_a_connection_needs_the_sources_egress_and_the_destinations_ingress() -> None:
    assert ports(("sg-open",), ("sg-open",)) == [(1, 65535)]
    assert ports(("sg-new",), ("sg-open",)) == []  # a new group lets nothing out...
    assert ports(("sg-open",), ("sg-new",)) == []  # ...nor in
    assert ports(("sg-egress",), ("sg-egress",)) == []  # out, but not in
    assert ports(("sg-open",), ("sg-open",), vpc="vpc-2") == []  # another VPC


def test_a_group_that_names_itself_admits_its_members_only() -> None:
    assert ports(("sg-self",), ("sg-self",)) == [(1, 65535)]
    assert ports(("sg-open",), ("sg-self",)) == []


def test_the_first_rule_that_names_a_port_decides_it() -> None:
    assert ports(("sg-ports",), ("sg-ports",)) == [(1, 21), (23, 1024), (29400, 29500)]
    assert ports(("sg-open",), ("sg-subnet",)) == [(1, 65535)]
    assert ports(("sg-open",), ("sg-subnet",), address="172.16.16.2") == []  # outside the CIDR block


def test_a_later_group_admits_what_an_earlier_one_does_not_decide() -> None:
    assert ports(("sg-egress", "sg-self"), ("sg-egress", "sg-self")) == [(1, 65535)]


def test_ports_are_parsed_as_the_api_writes_them() -> None:
    assert parse_ports("ALL") == [(1, 65535)]
    assert parse_ports("80") == [(80, 80)]
    assert parse_ports("8000-8010,80, 81") == [(80, 81), (8000, 8010)]
