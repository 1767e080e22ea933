"""What each node's agent is given for an attempt: where it reads and writes, what its short-lived keys may touch,
and its agent.json. Pure: the executor makes the calls (STS, the presigning, the puts)."""

from __future__ import annotations

from dataclasses import dataclass

from ..contract import AgentConfig, CosAccess, JobLayout, Location, RegistryToken, TemporaryKeys, checkpoints_location
from ..plan.models import Placement, Plan
from ..providers.tencent import sts
from ..spec.models import JobSpec
from ..target import Target
from . import bootstrap


@dataclass(frozen=True)
class Locations:
    """The job's three places in COS, as its agents are told them."""

    state: Location  # the job's prefix in the state bucket
    checkpoints: Location
    outputs: Location


def locations(job_id: str, spec: JobSpec, state_bucket: str) -> Locations:
    layout = JobLayout(job_id)
    out = spec.outputs.upload_to
    return Locations(
        state=Location(bucket=state_bucket, prefix=layout.prefix),
        checkpoints=checkpoints_location(job_id, state_bucket, spec.checkpoints.upload_to),
        outputs=Location(bucket=out.bucket, prefix=out.prefix) if out else
        Location(bucket=state_bucket, prefix=layout.outputs_prefix),
    )


def grants(job_id: str, spec: JobSpec, plan: Plan) -> list[sts.Grant]:
    """What the agents' keys may do: write the job's places and its signal, read its data and the checkpoints it
    resumes from (another job's: never written). The job's state prefix holds its secrets.json, which these keys
    read: another job's keys reach it only where that job's own data or outputs name a place above it."""
    where = locations(job_id, spec, plan.state_bucket)
    places = [(loc.bucket, loc.prefix, True) for loc in (where.state, where.checkpoints, where.outputs)]
    places += [(d.source.bucket, d.source.prefix, False) for d in spec.data]
    if plan.resume_from is not None:
        places.append((plan.resume_from.checkpoints.bucket, plan.resume_from.checkpoints.prefix, False))
    places.append((plan.state_bucket, JobLayout(job_id).signals_prefix, True))
    return [sts.Grant(bucket, prefix, write, plan.bucket_regions.get(bucket)) for bucket, prefix, write in places]


def federation_name(job_id: str) -> str:
    """GetFederationToken's Name: at most 32 characters of [A-Za-z0-9+=,.@_-]."""
    return f"cvmjob{job_id.replace('-', '')}"[:32]


def agent_configs(job_id: str, spec: JobSpec, plan: Plan, target: Target, attempt: int, placement: Placement,
                  keys: TemporaryKeys | None, credentials_url: str | None,
                  registry: RegistryToken | None = None) -> list[AgentConfig]:
    """Every node's agent.json of ``attempt`` on ``placement``. ``keys`` is None when the instances have a CAM role
    (``spec.cam_role``): the agents take the role's keys from the metadata service; ``credentials_url`` is None
    too unless a registry token (container.login.tcr) is rotated through it."""
    layout = JobLayout(job_id)
    where = locations(job_id, spec, plan.state_bucket)
    role = spec.cam_role
    cos = CosAccess(region=target.region, endpoint=target.endpoint, appid=target.appid,
                    mode="role" if role else "sts", role_name=role, bucket_regions=plan.bucket_regions)
    return [
        AgentConfig(
            job_id=job_id,
            job_name=spec.name,
            attempt=attempt,
            node_rank=node,
            nnodes=spec.train.nnodes,
            state=where.state,
            checkpoints=where.checkpoints,
            outputs=where.outputs,
            resume_from=plan.resume_from,
            cos=cos,
            keys=keys,
            credentials_url=credentials_url,
            registry=registry,
            workdir_archive_key=layout.workdir_archive,
            signal_key=layout.signal(attempt, node),
            spec=spec.model_dump(mode="json"),
            bandwidth_gbps=placement.bandwidth_gbps,
            pip_index=bootstrap.pip_index(plan),
            docker_hub_mirror=bootstrap.docker_hub_mirror(plan) if spec.container is not None else None,
            gpu_driver=driver.driver if (driver := plan.driver_for(placement.instance_type)) else None,
            security_groups=[] if plan.network is None else list(plan.network.security_group_ids),
            secrets_key=layout.secrets if spec.secrets else None,
        )
        for node in range(spec.train.nnodes)
    ]
