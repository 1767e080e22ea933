"""Which network interface the training's collectives use: the one that holds the node's private address.

NCCL and Gloo pick an interface themselves, and on a CVM they may pick one that cannot reach the other nodes (a
docker bridge, a secondary ENI: Tencent's TACO guide pins eth0 for that reason; on HCC bare metal the VPC address is
on bond0). The agent names the interface that owns the address it publishes for the rendezvous, unless the image's
environment or ``train.env`` already did.
"""

from __future__ import annotations

import fcntl
import ipaddress
import logging
import socket
import struct
import subprocess

log = logging.getLogger(__name__)

_SIOCGIFADDR = 0x8915  # Linux: an interface's primary IPv4 address


def interface_of(address: str) -> str | None:
    """The interface that holds the IPv4 ``address``: its primary address (the kernel's ioctl), else any of its
    addresses as ``ip`` lists them (a secondary one); None when no interface of this host holds it."""
    loopback = ipaddress.ip_address(address).is_loopback
    for _, name in socket.if_nameindex():
        primary = _primary_ipv4(name)
        # Linux answers for all of 127.0.0.0/8 on the loopback interface, whatever one address it lists.
        if primary == address or (loopback and primary is not None and ipaddress.ip_address(primary).is_loopback):
            return name
    return _listed_by_ip(address)


def socket_env(address: str) -> dict[str, str]:
    """NCCL_SOCKET_IFNAME (``=`` for an exact match, not a prefix) and GLOO_SOCKET_IFNAME for ``address``'s
    interface; {} when none holds it (the libraries then choose, as they would)."""
    name = interface_of(address)
    if name is None:
        log.warning("no network interface holds %s: NCCL and Gloo choose their own", address)
        return {}
    return {"NCCL_SOCKET_IFNAME": f"={name}", "GLOO_SOCKET_IFNAME": name}


def _primary_ipv4(name: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
        except OSError:  # no IPv4 address on it
            return None
    return socket.inet_ntoa(answer[20:24])


def _listed_by_ip(address: str) -> str | None:
    try:
        listed = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=10,
                                check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in listed.splitlines():  # "2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0 ..."
        fields = line.split()
        if len(fields) > 3 and fields[2] == "inet" and fields[3].split("/")[0] == address:
            return fields[1]
    return None
