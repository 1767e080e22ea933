"""Whether the instances reach the job's container registry: an enterprise instance of Tencent Container Registry
is reached without a public IP only from a VPC it has private access to (realcloud.md §5.2)."""

from __future__ import annotations

from .models import PlannedNetwork


def registry_unreachable(registry_id: str, domain: str, network: PlannedNetwork | None,
                         linked: set[str]) -> str | None:
    """The plan's problem when the instances could not pull from ``domain`` (``registry_id``), linked to the VPCs
    ``linked``; None when they can."""
    if network is None or network.public_bandwidth_mbps is not None or network.vpc_id in linked:
        return None
    subnet = next(iter(network.subnets.values()), "<subnet>")
    return (f"container.login.tcr: the instances have no public IP, and {domain} is reached from a VPC only over "
            f"its private access, which {network.vpc_id} does not have: add it (the TCR console's access control, "
            f"or `tccli tcr ManageInternalEndpoint --RegistryId {registry_id} --Operation Create --VpcId "
            f"{network.vpc_id} --SubnetId {subnet}`, then its DNS resolution), or set network.public_ip")
