"""Controller -> agent: what one node's agent is given (its config, its keys, the job's control) and the rendezvous of
a multi-node attempt."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import LAYOUT_VERSION, Model
from .layout import Location
from .reports import HEARTBEAT_SECONDS


class ResumeSource(Model):
    """``checkpoints.resume_from`` as resolved when the job was planned: the job whose latest complete checkpoint
    an attempt starts from while its own job has none yet."""

    job_id: str
    checkpoints: Location  # that job's checkpoints_location


class CosAccess(Model):
    """How the agent reaches COS. ``endpoint`` is None on Tencent Cloud, ``host:port`` on the emulator."""

    region: str
    endpoint: str | None = None
    appid: str
    # "sts": temporary keys below, refreshed from ``credentials_url``; "role": the CVM role's metadata keys.
    mode: Literal["sts", "role"] = "sts"
    role_name: str | None = None
    # Buckets of other regions (network.allow_cross_region) and theirs: reached there, over the public network.
    bucket_regions: dict[str, str] = Field(default_factory=dict)


class TemporaryKeys(Model):
    secret_id: str
    secret_key: str
    token: str
    expires_at: int


class RegistryToken(Model):
    """A temporary login to a Tencent Container Registry enterprise instance (``container.login.tcr``), from the
    controller's CreateInstanceToken: valid for an hour, so rotated with the keys."""

    registry: str  # the instance's domain, <name>.tencentcloudcr.com
    username: str
    token: str = Field(repr=False)
    expires_at: int


class CredentialsDoc(Model):
    """``attempts/<n>/credentials.json``: the controller rotates the agent's keys, and its registry login,
    through it. ``keys`` is None when the instances have a CAM role (only the registry token is rotated)."""

    layout_version: int = LAYOUT_VERSION
    keys: TemporaryKeys | None = None
    registry: RegistryToken | None = None


class AgentConfig(Model):
    """``agent.json``: everything one node's agent needs, fetched by the bootstrap through a presigned URL."""

    layout_version: int = LAYOUT_VERSION
    job_id: str
    job_name: str
    attempt: int
    node_rank: int
    nnodes: int
    state: Location  # the job prefix in the state bucket
    checkpoints: Location
    outputs: Location
    # Another job's checkpoints to start from while this job has none of its own (checkpoints.resume_from);
    # the keys below may read there.
    resume_from: ResumeSource | None = None
    cos: CosAccess
    keys: TemporaryKeys | None = None
    credentials_url: str | None = None  # presigned GET of credentials.json (new keys when these expire)
    registry: RegistryToken | None = None  # the registry login of container.login.tcr, as first issued
    workdir_archive_key: str | None = None
    signal_key: str | None = None  # put once the status says the attempt ended (SIGNALS_PREFIX)
    spec: dict[str, object]  # the validated JobSpec as JSON (the agent reads setup/data/train/... from it)
    heartbeat_seconds: float = HEARTBEAT_SECONDS
    preemption_poll_seconds: float = 2.0
    bandwidth_gbps: float | None = None  # the instance's network, as the plan's placement has it: sizes transfers
    # The package index pip uses in setup and training unless they name one: Tencent's in-VPC mirror for an
    # instance without a public IP (it reaches no other); None: pip's own.
    pip_index: str | None = None
    # Where the job's container image is pulled from when it is on Docker Hub: Tencent's mirror of it, for an
    # instance without a public IP (it reaches no other); None: Docker Hub itself, or no container.
    docker_hub_mirror: str | None = None
    # The NVIDIA driver version the node's UserData installs (Tencent's auto-install); the agent waits for it
    # before the setup commands. None: the image has what it has.
    gpu_driver: str | None = None
    # The instances' security groups, named when the nodes cannot reach each other.
    security_groups: list[str] = Field(default_factory=list)
    # secrets.json (JobLayout.secrets), read with the keys above, when the spec names ``secrets``: their values
    # reach the training's environment and no document (this one is in COS once per attempt and node).
    secrets_key: str | None = None


class SecretsDoc(Model):
    """``secrets.json``: the values of the spec's ``secrets``, read from the submitting machine's environment. Put
    once at submission under the job's prefix, which only the job's own agents' scoped keys (and the account's)
    may read, so that any controller process relaunching an attempt has nothing to carry; the store, spec.json,
    job.json, agent.json and the fingerprint hold the names alone."""

    layout_version: int = LAYOUT_VERSION
    values: dict[str, str] = Field(repr=False)  # name -> value; never in a repr, a log line or a traceback


class Control(Model):
    """``control.json``: the controller asks the agents of an attempt to stop (cancel: checkpoint, upload,
    exit). Without ``checkpoint`` the training is stopped at once (a pruned sweep trial: nothing resumes it)."""

    layout_version: int = LAYOUT_VERSION
    action: Literal["cancel"]
    reason: str
    checkpoint: bool = True
    time: float


class Rendezvous(Model):
    """``rendezvous.json``: node 0's address for torchrun's c10d rendezvous (multi-node)."""

    layout_version: int = LAYOUT_VERSION
    host: str
    port: int
    instance_id: str
