"""The one RunInstances request builder: a job's launch, the plan's DryRun probe and a reserved pool's purchase all
ask here, so a rule about prices, disks, roles, networks or images is written once."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Protocol

from ..contract.tags import TAG_ATTEMPT, TAG_JOB, TAG_NAME, TAG_NODE, TAG_OWNER, owner
from ..plan.models import PlannedNetwork
from ..providers.tencent import compute
from ..providers.tencent.vocabulary import ChargeType, needs_hpc_cluster
from ..spec.models import JobSpec


class Where(Protocol):
    """A zone, an instance type and a way to pay (a plan's Placement, a node's record)."""

    @property
    def zone(self) -> str: ...

    @property
    def instance_type(self) -> str: ...

    @property
    def charge_type(self) -> ChargeType: ...


def launch_request(
    spec: JobSpec | None,
    where: Where,
    image_id: str,
    *,
    client_token: str,
    name: str,
    tags: dict[str, str],
    user_data_b64: str | None = None,
    terminate_at: datetime | None = None,
    prepaid_months: int | None = None,
    prepaid_renew: bool = False,
    count: int = 1,
    network: PlannedNetwork | None = None,
) -> compute.LaunchRequest:
    """What RunInstances (or its DryRun, or InquiryPriceRunInstances) is asked for. ``spec`` None: a reserved pool
    member bought for no job yet (the cloud's default disks; each job re-images it with its own image).
    ``network``: the plan's (its subnet in ``where``'s zone); None: a plan of a release that named none."""
    disks = spec.disks if spec is not None else None
    spot = where.charge_type == ChargeType.SPOT
    return compute.LaunchRequest(
        zone=where.zone,
        instance_type=where.instance_type,
        charge_type=where.charge_type,
        image_id=image_id,
        client_token=client_token,
        name=name,
        tags={**(spec.tags if spec is not None else {}), **tags},
        user_data_b64=user_data_b64,
        terminate_at=terminate_at,
        system_disk=None if disks is None else compute.Disk(disks.system.type, disks.system.size_gib),
        data_disks=() if disks is None else tuple(compute.Disk(d.type, d.size_gib) for d in disks.data),
        spot_max_price=spec.billing.spot_max_price if spec is not None and spot else None,
        prepaid_months=prepaid_months,
        prepaid_renew=prepaid_renew,
        cam_role=None if spec is None else spec.cam_role,
        count=count,
        vpc_id=None if network is None else network.vpc_id,
        subnet_id=None if network is None else network.subnets.get(where.zone),
        security_group_ids=() if network is None else tuple(network.security_group_ids),
        public_bandwidth_mbps=None if network is None else network.public_bandwidth_mbps,
        hpc_cluster_id=network.hpc_cluster_id if network is not None and needs_hpc_cluster(where.instance_type)
        else None,
    )


def client_token(job_id: str, attempt: int, node: int) -> str:
    """Deterministic per (job, attempt, node) and at most 64 ASCII characters (RunInstances' limit): a launch
    repeated after a crash is the same launch."""
    return "cvmjob-" + hashlib.sha256(f"{job_id}/{attempt}/{node}".encode()).hexdigest()[:40]


def node_tags(spec: JobSpec, job_id: str, attempt: int, node: int) -> dict[str, str]:
    """cvmjob's own tags on a job's instance (design.md §4): a lookup by them finds it again after a crash."""
    return {TAG_JOB: job_id, TAG_ATTEMPT: str(attempt), TAG_NODE: str(node), TAG_NAME: spec.name,
            TAG_OWNER: owner()}


def node_name(spec: JobSpec, job_id: str, attempt: int, node: int) -> str:
    return f"cvmjob-{spec.name}-{job_id}-a{attempt}n{node}"
