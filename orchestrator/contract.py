"""The controller/agent contract: a versioned layout of objects under the job's COS prefix.

The controller and the agent never talk directly (design.md §2). Each object has exactly one writer:
- controller: ``spec.json``, ``bundle/*``, ``attempts/<n>/nodes/<k>/agent.json``, ``attempts/<n>/credentials.json``,
  ``attempts/<n>/control.json``;
- agent: ``attempts/<n>/nodes/<k>/{status.json, result.json, logs/<seq>.log}``, ``attempts/<n>/rendezvous.json``
  (node 0), ``checkpoints/<name>/*`` and ``checkpoints/manifest.json`` (node 0, written last: only what the
  manifest lists is a complete checkpoint), ``outputs/*``.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

LAYOUT_VERSION = 1
ROOT = "cvmjob"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobLayout:
    """Keys of one job's objects in the state bucket."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.prefix = f"{ROOT}/{job_id}/"

    @property
    def spec(self) -> str:
        return self.prefix + "spec.json"

    @property
    def bundle_prefix(self) -> str:
        return self.prefix + "bundle/"

    @property
    def workdir_archive(self) -> str:
        return self.bundle_prefix + "workdir.tar.gz"

    def agent_wheel(self, filename: str) -> str:
        return self.bundle_prefix + filename

    def attempt_prefix(self, attempt: int) -> str:
        return f"{self.prefix}attempts/{attempt}/"

    def node_prefix(self, attempt: int, node: int) -> str:
        return f"{self.attempt_prefix(attempt)}nodes/{node}/"

    def agent_config(self, attempt: int, node: int) -> str:
        return self.node_prefix(attempt, node) + "agent.json"

    def status(self, attempt: int, node: int) -> str:
        return self.node_prefix(attempt, node) + "status.json"

    def result(self, attempt: int, node: int) -> str:
        return self.node_prefix(attempt, node) + "result.json"

    def logs_prefix(self, attempt: int, node: int) -> str:
        return self.node_prefix(attempt, node) + "logs/"

    def log_chunk(self, attempt: int, node: int, seq: int) -> str:
        return f"{self.logs_prefix(attempt, node)}{seq:08d}.log"

    def credentials(self, attempt: int) -> str:
        return self.attempt_prefix(attempt) + "credentials.json"

    def control(self, attempt: int) -> str:
        return self.attempt_prefix(attempt) + "control.json"

    def rendezvous(self, attempt: int) -> str:
        return self.attempt_prefix(attempt) + "rendezvous.json"

    @property
    def checkpoints_prefix(self) -> str:
        return self.prefix + "checkpoints/"

    @property
    def outputs_prefix(self) -> str:
        return self.prefix + "outputs/"


class Location(_Model):
    """A COS place: bucket and key prefix (ending in '/')."""

    bucket: str
    prefix: str


class CosAccess(_Model):
    """How the agent reaches COS. ``endpoint`` is None on Tencent Cloud, ``host:port`` on the emulator."""

    region: str
    endpoint: str | None = None
    appid: str
    # "sts": temporary keys below, refreshed from ``credentials_url``; "role": the CVM role's metadata keys.
    mode: Literal["sts", "role"] = "sts"
    role_name: str | None = None


class TemporaryKeys(_Model):
    secret_id: str
    secret_key: str
    token: str
    expires_at: int


class CredentialsDoc(_Model):
    """``attempts/<n>/credentials.json``: the controller rotates the agent's keys through it."""

    layout_version: int = LAYOUT_VERSION
    keys: TemporaryKeys


class AgentConfig(_Model):
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
    cos: CosAccess
    keys: TemporaryKeys | None = None
    credentials_url: str | None = None  # presigned GET of credentials.json (new keys when these expire)
    workdir_archive_key: str | None = None
    spec: dict[str, object]  # the validated JobSpec as JSON (the agent reads setup/data/train/... from it)
    heartbeat_seconds: float = 5.0
    preemption_poll_seconds: float = 2.0


class Phase(str, Enum):
    STARTING = "starting"
    SETUP = "setup"
    SYNCING = "syncing"
    PREFLIGHT = "preflight"
    RESTORING = "restoring"
    TRAINING = "training"
    UPLOADING = "uploading"
    PREEMPTED = "preempted"
    CANCELLED = "cancelled"
    DONE = "done"
    FAILED = "failed"


class GpuStat(_Model):
    index: int
    utilization: float
    memory_used_mib: float


class Status(_Model):
    """``status.json``: the agent's heartbeat."""

    layout_version: int = LAYOUT_VERSION
    attempt: int
    node_rank: int
    instance_id: str
    phase: Phase
    time: float
    seq: int  # increases with every write: a stale heartbeat is one whose seq stops moving
    step: int | None = None
    loss: float | None = None
    sync_bytes_done: int = 0
    sync_bytes_total: int = 0
    checkpoints_uploaded: int = 0
    latest_checkpoint_step: int | None = None
    gpus: list[GpuStat] = Field(default_factory=list)
    notice_time: str | None = None  # spot/termination-time as the metadata service gave it
    message: str = ""


class Outcome(str, Enum):
    SUCCEEDED = "succeeded"
    TRAINING_FAILED = "training_failed"
    SETUP_FAILED = "setup_failed"
    PREFLIGHT_FAILED = "preflight_failed"
    SYNC_FAILED = "sync_failed"
    HUNG = "hung"
    PREEMPTED = "preempted"
    CANCELLED = "cancelled"
    AGENT_ERROR = "agent_error"


class Result(_Model):
    """``result.json``: written once, when the agent is done with this attempt on this node."""

    layout_version: int = LAYOUT_VERSION
    attempt: int
    node_rank: int
    instance_id: str
    outcome: Outcome
    exit_code: int | None = None
    reason: str = ""
    log_tail: str = ""
    final_step: int | None = None
    outputs_uploaded: int = 0
    time: float


class Control(_Model):
    """``control.json``: the controller asks the agents of an attempt to stop (cancel: checkpoint, upload,
    exit)."""

    layout_version: int = LAYOUT_VERSION
    action: Literal["cancel"]
    reason: str
    time: float


class Rendezvous(_Model):
    """``rendezvous.json``: node 0's address for torchrun's c10d rendezvous (multi-node)."""

    layout_version: int = LAYOUT_VERSION
    host: str
    port: int
    instance_id: str


class CheckpointEntry(_Model):
    name: str
    step: int
    files: dict[str, int]  # relative path -> CRC64
    size: int
    attempt: int
    time: float
    emergency: bool = False


class Manifest(_Model):
    """``checkpoints/manifest.json``: the complete checkpoints, oldest first; written after their files."""

    layout_version: int = LAYOUT_VERSION
    checkpoints: list[CheckpointEntry] = Field(default_factory=list)

    def latest(self) -> CheckpointEntry | None:
        return max(self.checkpoints, key=lambda c: (c.step, c.time), default=None)
