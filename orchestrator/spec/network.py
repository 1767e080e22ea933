"""Where the job's instances sit on the network: the VPC, a subnet per zone, the security groups, a public IP."""

from __future__ import annotations

from pydantic import Field, model_validator

from orchestrator.spec.base import SpecModel, field_problem
from orchestrator.spec.fields import HpcClusterId, SecurityGroupId, SubnetId, VpcId, Zone


class PublicIpSpec(SpecModel):
    """A public IP for each instance, billed by the traffic it sends."""

    bandwidth_mbps: int = Field(ge=1, le=200, examples=[10])
    """Its outbound bandwidth cap, in Mbit/s."""


class NetworkSpec(SpecModel):
    """The instances' network. Unset parts: the region's default VPC, the zone's default subnet in it, the VPC's
    default security group, and no public IP (packages then come from Tencent's in-VPC mirror)."""

    vpc_id: VpcId | None = None
    """Your own VPC. Unset: the region's default VPC."""
    subnet_ids: dict[Zone, SubnetId] = Field(default_factory=dict, examples=[{"ap-guangzhou-3": "subnet-ht9h8jdo"}])
    """The subnet of ``vpc_id`` in each zone; a zone without one is not used. Unset: each zone's default subnet."""
    security_groups: tuple[SecurityGroupId, ...] = Field((), max_length=5, examples=[["sg-5u8bpno4"]])
    """Security groups for the instances; the nodes of a multi-node job must admit each other. Unset: the
    default security group of the VPC."""
    public_ip: PublicIpSpec | None = None
    """A public IP for each instance (traffic billed). Unset: none."""
    allow_cross_region: bool = False
    """Let the job use COS buckets of other regions (data, checkpoints, outputs; never the state bucket). Tencent
    serves them on the public network only (billed traffic, slower), so it needs public_ip. Unset: such a bucket
    is refused at plan time."""
    hpc_cluster_id: HpcClusterId | None = None
    """The HPC cluster that HCC types (RDMA between nodes, e.g. HCCPNV4h) are bought into, in its zone: Tencent
    sells them only into one (CreateHpcCluster, or the console). Unset: HCC types are never planned."""

    @model_validator(mode="after")
    def _subnets_of_a_vpc(self) -> NetworkSpec:
        if self.subnet_ids and self.vpc_id is None:
            raise field_problem("subnet_ids", "names subnets of your own VPC: set vpc_id too")
        if self.allow_cross_region and self.public_ip is None:
            raise field_problem("allow_cross_region", "COS of another region is reached over the public network "
                                "only: set public_ip too")
        return self
