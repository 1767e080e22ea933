"""The plan a job runs by: stored with the job, shown by ``cvmjob plan``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..contract import ResumeSource
from ..providers.tencent.vocabulary import ChargeType
from ..spec.compute import GpuDriver
from .sizing import MemoryEstimate


class Placement(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    zone: str
    instance_type: str
    charge_type: ChargeType
    price_per_hour: float | None = None  # CNY per instance-hour, after discount
    on_demand_price_per_hour: float | None = None
    gpus: float = 0
    stock: str = ""
    gpu_memory_gib: int | None = None  # each GPU's (a vGPU slice's share); None: not a known GPU type
    cpus: int = 0  # vCPUs
    bandwidth_gbps: float | None = None  # the instance's network; None: the catalog did not say

    @property
    def billing(self) -> str:
        return self.charge_type.billing

    def label(self) -> str:
        return f"{self.instance_type} in {self.zone} ({self.billing})"


class Rejected(BaseModel):
    """A placement the planner looked at and did not keep, and why (shown by ``cvmjob plan``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    zone: str
    instance_type: str
    charge_type: ChargeType
    reason: str


class PlannedNetwork(BaseModel):
    """What every launch of the job names of the network: the VPC, the subnet of each planned zone, the security
    groups and the public IP's bandwidth (None: no public IP)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vpc_id: str
    subnets: dict[str, str] = Field(default_factory=dict)  # zone -> subnet id
    security_group_ids: list[str] = Field(default_factory=list)
    public_bandwidth_mbps: int | None = None
    hpc_cluster_id: str | None = None  # where the HCC candidates go (the others name none)


class Plan(BaseModel):
    # Frozen: a stored plan's decoding is shared by every reading of the same record (state/store.py).
    model_config = ConfigDict(extra="forbid", frozen=True)

    region: str
    image_id: str
    image_name: str = ""
    nnodes: int = 1
    candidates: list[Placement] = Field(default_factory=list)  # in order of preference
    rejected: list[Rejected] = Field(default_factory=list)
    expected_hours: float = 1.0
    estimated_cost: float | None = None  # CNY, first candidate, all nodes, expected hours
    on_demand_cost: float | None = None  # the same on demand: what spot saves
    state_bucket: str = ""
    # Buckets the job uses in another region, and theirs (network.allow_cross_region): reached there, over the
    # public network. Every other bucket is in the job's region.
    bucket_regions: dict[str, str] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    gpu_memory: MemoryEstimate | None = None  # what each GPU must hold, from instance.need.model
    resume_from: ResumeSource | None = None  # checkpoints.resume_from, resolved at plan time (api.plan)
    network: PlannedNetwork | None = None  # None: planned by a release that named no network (the cloud's defaults)
    gpu_driver: GpuDriver | None = None  # installed at boot on whole GPUs (a public image); None: the image's

    def driver_for(self, instance_type: str) -> GpuDriver | None:
        """What a launch of ``instance_type`` installs: the plan's driver on a type with whole GPUs, else nothing."""
        gpus = next((c.gpus for c in self.candidates if c.instance_type == instance_type), 0)
        return self.gpu_driver if gpus >= 1 else None

    @property
    def primary(self) -> Placement:
        return self.candidates[0]

    def reserved_placements(self) -> list[tuple[str, str]]:
        """(zone, instance type) of the candidates a reserved pool member may serve."""
        return [(c.zone, c.instance_type) for c in self.candidates if c.charge_type == ChargeType.RESERVED]
