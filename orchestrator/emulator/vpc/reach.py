"""Which TCP ports of one instance another reaches, by their security groups (docs/emulator.md, "Networks").

A connection passes when the source's groups let it out to the destination and the destination's groups let it
in from the source. Each side's rules are read in order, its groups in the order they are bound and each group's
rules by PolicyIndex (SDK-VPC ``SecurityGroupPolicy``); the first rule that matches the peer, the protocol and the
port decides, and no match denies (a group made through the API has no rule and denies everything: SDK-VPC
``CreateSecurityGroup``). A rule's peer is a CIDR block or a security group, which stands for its members' private
addresses (SDK-VPC ``CreateSecurityGroupPolicies``). Instances of different VPCs never reach each other (no
peering here).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .models import Policy

Ports = list[tuple[int, int]]  # sorted, disjoint, inclusive ranges
ALL_PORTS: Ports = [(1, 65535)]
Rules = Callable[[str], "tuple[list[Policy], list[Policy]] | None"]  # group id -> (ingress, egress)


@dataclass(frozen=True)
class Member:
    address: str  # the private (VPC) address
    vpc_id: str
    groups: tuple[str, ...]  # in the order they are bound


def tcp_ports(source: Member, destination: Member, rules: Rules) -> Ports:
    """The TCP ports on ``destination`` that ``source`` may connect to."""
    if source.vpc_id != destination.vpc_id:
        return []
    out = _allowed(_policies(source.groups, rules, egress=True), destination)
    into = _allowed(_policies(destination.groups, rules, egress=False), source)
    return _intersect(out, into)


def _policies(groups: Sequence[str], rules: Rules, egress: bool) -> list[Policy]:
    found: list[Policy] = []
    for group in groups:
        both = rules(group)
        if both is not None:
            found += both[1] if egress else both[0]
    return found


def _allowed(policies: list[Policy], peer: Member) -> Ports:
    """First match per port: the ports the first rule naming them accepts, among rules that match ``peer``."""
    undecided: Ports = list(ALL_PORTS)
    accepted: Ports = []
    for policy in policies:
        if policy.protocol not in ("TCP", "ALL") or not _matches(policy, peer):
            continue
        ports = ALL_PORTS if policy.protocol == "ALL" else parse_ports(policy.port)
        decided = _intersect(undecided, ports)
        if policy.action == "ACCEPT":
            accepted = _union(accepted, decided)
        undecided = _subtract(undecided, ports)
        if not undecided:
            break
    return accepted


def _matches(policy: Policy, peer: Member) -> bool:
    if policy.group is not None:
        return policy.group in peer.groups
    if policy.cidr:
        try:
            return ipaddress.ip_address(peer.address) in ipaddress.ip_network(policy.cidr, strict=False)
        except ValueError:
            return False
    return False


def parse_ports(text: str) -> Ports:
    """``ALL``, ``80``, ``8000-8010`` or a comma list of those."""
    if text.strip().upper() in ("", "ALL"):
        return list(ALL_PORTS)
    ranges: Ports = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        ranges = _union(ranges, [(int(low), int(high or low))])
    return ranges


def _union(a: Ports, b: Ports) -> Ports:
    merged: Ports = []
    for low, high in sorted(a + b):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _intersect(a: Ports, b: Ports) -> Ports:
    return [(max(l1, l2), min(h1, h2)) for l1, h1 in a for l2, h2 in b if max(l1, l2) <= min(h1, h2)]


def _subtract(a: Ports, b: Ports) -> Ports:
    left = a
    for low, high in b:
        cut: Ports = []
        for l1, h1 in left:
            if h1 < low or l1 > high:
                cut.append((l1, h1))
                continue
            if l1 < low:
                cut.append((l1, low - 1))
            if h1 > high:
                cut.append((high + 1, h1))
        left = cut
    return left
