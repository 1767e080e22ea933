"""What runs: data to sync, the training command, checkpoints and outputs."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StrictBool, StrictInt, WithJsonSchema, model_validator

from orchestrator.spec.base import SpecModel, field_problem
from orchestrator.spec.cos import CosDir
from orchestrator.spec.durations import DAY, Duration, within
from orchestrator.spec.fields import Command, EnvValue, InstancePath, Matches


class DataSource(SpecModel):
    """A COS prefix synced to the instance's local disk before training starts."""

    source: CosDir = Field(examples=["cos://datasets-1250000000/mnist/"])
    """Where the data is: cos://<name>-<appid>/<prefix>."""
    target: InstancePath = Field(examples=["mnist"])
    """The folder under $CVMJOB_DATA_DIR the data lands in."""


_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_RESERVED_ENV_PREFIX = "CVMJOB_"
# torchrun sets these for every worker; a value from the spec would be overwritten.
_TORCHRUN_ENV = frozenset(
    {"RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}
)


def _env_name(name: str) -> str:
    if _ENV_NAME.fullmatch(name) is None:
        raise ValueError(f"{name!r} is not a valid variable name: use A-Z, 0-9 and _, not starting with a digit")
    if name.startswith(_RESERVED_ENV_PREFIX):
        raise ValueError(f"{name!r}: names starting with {_RESERVED_ENV_PREFIX} are set by cvmjob")
    if name in _TORCHRUN_ENV:
        raise ValueError(f"{name!r} is set by torchrun for each worker")
    return name


EnvName = Annotated[str, AfterValidator(_env_name), WithJsonSchema({"type": "string", "pattern": _ENV_NAME.pattern})]


def _nproc(value: object) -> object:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"{value!r} is not 'auto' or a whole number >= 1")


NprocPerNode = Annotated[Annotated[StrictInt, Field(ge=1)] | Literal["auto"], BeforeValidator(_nproc)]


# The transient failures train.retry.on_log finds in a training's log (lifecycle/log_causes.py has their signs).
LogCause = Literal["nccl_timeout", "gpu_xid"]


class RetrySpec(SpecModel):
    """When a failed attempt is tried again on a fresh instance (resuming from the last checkpoint), as an NCCL
    timeout, a GPU's Xid error or a node that hangs deserve."""

    on_exit_codes: tuple[Annotated[StrictInt, Field(ge=1, le=255)], ...] = ()
    """A training process's exit codes that retry (as the agent saw the worker exit; a signal's death is 128 + its
    number, e.g. 137 for SIGKILL). Unset: none."""
    on_hang: StrictBool = False
    """Retry a training that hangs past train.hang_timeout."""
    on_log: tuple[LogCause, ...] = ("nccl_timeout", "gpu_xid")
    """Failures named in the training's last 50 lines of output that retry, whatever its exit code: nccl_timeout
    (PyTorch's NCCL watchdog timed a collective out), gpu_xid (a GPU's Xid error: the kernel's "NVRM: Xid" line, an
    uncorrectable ECC error, a GPU fallen off the bus). Default: both; [] turns them off."""
    max: StrictInt = Field(2, ge=1, le=20)
    """Retries at most, over the job's life; then the failure is the job's end, as without retry."""

    @model_validator(mode="after")
    def _something_to_retry(self) -> RetrySpec:
        if not self.on_exit_codes and not self.on_hang and not self.on_log:
            raise field_problem("on_exit_codes", "nothing retries: list exit codes or log causes (on_log), or set "
                                                 "on_hang: true")
        if len(set(self.on_log)) != len(self.on_log):
            raise field_problem("on_log", "a cause is listed twice")
        if len(set(self.on_exit_codes)) != len(self.on_exit_codes):
            raise field_problem("on_exit_codes", "an exit code is listed twice")
        return self


class TrainSpec(SpecModel):
    """The training command, run under torchrun on every node."""

    command: Command = Field(examples=["python train.py --epochs 3"])
    """The command torchrun starts in each worker, e.g. ``python train.py --epochs 3``."""
    nproc_per_node: NprocPerNode = "auto"
    """Worker processes per node: "auto" starts one per GPU, or ``cpu_nproc`` on an instance without CUDA."""
    cpu_nproc: StrictInt = Field(2, ge=1, le=256)
    """Worker processes per node when the instance has no CUDA device and nproc_per_node is "auto"."""
    nnodes: StrictInt = Field(1, ge=1, le=64)
    """Nodes (instances)."""
    elastic_min_nodes: StrictInt | None = Field(None, ge=1)
    """Elastic training: keep going with at least this many nodes (torchrun --nnodes=min:max). Unset: fixed."""
    max_restarts: StrictInt = Field(0, ge=0, le=100)
    """torchrun --max-restarts: worker group restarts on the same instances before the attempt fails."""
    env: dict[EnvName, EnvValue] = Field(default_factory=dict, examples=[{"NCCL_DEBUG": "WARN"}],
                                         json_schema_extra={"additionalProperties": False})
    """Environment variables for the workers. Names starting with CVMJOB_ are reserved."""
    hang_timeout: Annotated[Duration, within(10, 7 * DAY)] | None = None
    """No progress (no new step in the heartbeat) for this long means the job is hung. Unset: never."""
    retry: RetrySpec | None = None
    """Relaunch on a fresh instance for the listed exit codes or a hang (docs/spec.md, "train.retry"). Unset: a
    failed training ends the job."""

    @model_validator(mode="after")
    def _elastic_range(self) -> TrainSpec:
        if self.elastic_min_nodes is not None and self.elastic_min_nodes > self.nnodes:
            raise field_problem("elastic_min_nodes", f"{self.elastic_min_nodes} is more than nnodes "
                                                     f"({self.nnodes}). use 1..{self.nnodes}")
        if self.retry is not None and self.retry.on_hang and self.hang_timeout is None:
            raise field_problem("retry.on_hang", "a hang is only seen with train.hang_timeout set. set it (e.g. "
                                                 "hang_timeout: 30m)")
        return self


# checkpoints.resume_from: a job id (or a unique prefix of one: job-<hex>), or the newest job of a name.
LATEST_OF = "latest-of:"
_JOB_NAME = r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?"  # JobName's form (fields.py), unanchored
ResumeFrom = Annotated[str, Matches(rf"^(?:job-[0-9a-f]{{1,8}}|{LATEST_OF}{_JOB_NAME})$",
                                    "a job id (or a unique prefix of one), or latest-of:<job name>",
                                    "latest-of:quickstart")]


class CheckpointSpec(SpecModel):
    """Checkpoints: the script writes them, the agent uploads each complete one to COS."""

    dir: InstancePath = "checkpoints"
    """Where the script writes checkpoints ($CVMJOB_CHECKPOINT_DIR), relative to the job's folder."""
    upload_to: CosDir | None = None
    """Where they go in COS. Unset: the job's own prefix in the state bucket."""
    keep_last: StrictInt = Field(3, ge=1, le=1000)
    """Complete checkpoints kept in COS; older ones are deleted."""
    interval_steps: StrictInt | None = Field(None, ge=1)
    """A hint for the script: checkpoint every this many steps (passed as CVMJOB_CHECKPOINT_INTERVAL)."""
    resume_from: ResumeFrom | None = Field(None, examples=["job-1a2b3c4d", "latest-of:quickstart"])
    """Start from another job's latest complete checkpoint while this job has none of its own: a job id (or a
    unique prefix), or ``latest-of:<name>`` (the newest job of that name with one; none: a fresh start). Unset: a
    job resumes only its own checkpoints."""


class OutputSpec(SpecModel):
    """Outputs: uploaded to COS when training ends."""

    dir: InstancePath = "outputs"
    """Where the script writes outputs ($CVMJOB_OUTPUT_DIR), relative to the job's folder."""
    upload_to: CosDir | None = None
    """Where they go in COS. Unset: the job's own prefix in the state bucket."""
