"""The job spec: everything ``cvmjob run`` needs to know about one training job."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StrictFloat, ValidationInfo, field_validator

from orchestrator.spec.base import SpecModel, field_problem
from orchestrator.spec.compute import BillingSpec, DiskSpec, ImageSpec, InstanceSpec
from orchestrator.spec.container import ContainerSpec
from orchestrator.spec.durations import DAY, HOUR, MINUTE, Duration, within
from orchestrator.spec.fields import (
    Bucket,
    Command,
    Credentials,
    JobName,
    LocalPath,
    PolicyRef,
    Region,
    TagKey,
    TagValue,
    Zone,
)
from orchestrator.spec.network import NetworkSpec
from orchestrator.spec.notify import NotifyTarget
from orchestrator.spec.snapshot import IMAGE_NAME_MAX_LENGTH, SnapshotSpec
from orchestrator.spec.workload import CheckpointSpec, DataSource, EnvName, OutputSpec, TrainSpec


class TeardownSpec(SpecModel):
    """What happens to the instance at the end."""

    on_success: Literal["destroy"] = "destroy"
    """After success (and the snapshot): destroy."""
    on_failure: Literal["destroy", "keep"] = "destroy"
    """After a failure: destroy, or keep it for ``keep_for`` to look around, then destroy."""
    keep_for: Annotated[Duration, within(MINUTE, 7 * DAY)] = 30 * MINUTE
    """How long a failed instance is kept when on_failure is keep."""


class LimitsSpec(SpecModel):
    """Hard limits."""

    max_runtime: Annotated[Duration, within(MINUTE, 30 * DAY)] = 24 * HOUR
    """Longest the job may run, recovery included. Each instance also gets a server-side ActionTimer that
    terminates it shortly after this deadline, even if cvmjob is gone."""
    max_cost: StrictFloat | None = Field(None, gt=0, examples=[50])
    """Stop the job when its estimated cost reaches this many CNY. Unset: no cost limit."""
    bootstrap_timeout: Annotated[Duration, within(10, DAY)] = 15 * MINUTE
    """How long a running instance may go without its agent's first report before the job fails
    (FAILED_BOOTSTRAP); an instance that never reaches RUNNING gets this long on top of 15 minutes."""


class StorageSpec(SpecModel):
    """Where the job's state lives in COS."""

    bucket: Bucket | None = None
    """The state bucket (bundle, status, logs, and checkpoints/outputs by default), in the job's region. Unset:
    cvmjob-<region>-<appid>."""


class PolicyRefs(SpecModel):
    """Named policies: a name is looked up as policies/<kind>/<name>.yaml next to the spec, then among the
    built-in ones; a value with '/' or ending in .yaml is a path relative to the spec file."""

    recovery: PolicyRef = "default"
    """Recovery after spot reclaims and launch failures (built-in: default, aggressive-spot, on-demand-only)."""
    pool: PolicyRef = "default"
    """Reserved-pool behaviour when billing.mode is reserved (built-in: default)."""


class JobSpec(SpecModel):
    """A cvmjob training job: `cvmjob run job.yaml`. Reference: docs/spec.md."""

    model_config = ConfigDict(title="cvmjob job spec")

    name: JobName = Field(examples=["quickstart"])
    """The job's name: 1-40 of a-z, 0-9 and '-'. It becomes part of resource names and tags."""
    region: Region = Field(examples=["ap-guangzhou"])
    """Tencent Cloud region."""
    zones: tuple[Zone, ...] = Field((), examples=[["ap-guangzhou-3", "ap-guangzhou-4"]])
    """Zones to use, in order of preference; each must be in ``region``. Unset: any zone of the region."""
    instance: InstanceSpec = Field(examples=[{"type": "GN7.2XLARGE32"}, {"need": {"gpu": "T4", "count": 1}}])
    """The instance type, or the GPUs it must have."""
    billing: BillingSpec = BillingSpec()
    """How instances are paid for."""
    image: ImageSpec | None = None
    """The image to boot. Unset: the planner picks an official Ubuntu (GPU types get their driver at boot)."""
    disks: DiskSpec = DiskSpec()
    """System and data disks."""
    network: NetworkSpec = NetworkSpec()
    """The VPC, subnets, security groups and public IP of the instances."""
    workdir: LocalPath = "."
    """The local folder shipped to the instance, relative to the spec file; .gitignore is honoured."""
    setup: tuple[Command, ...] = Field((), examples=[["pip install -r requirements.txt"]])
    """Shell commands run on each instance, in ``workdir``, before training."""
    data: tuple[DataSource, ...] = ()
    """COS prefixes synced to local disk before training ($CVMJOB_DATA_DIR/<target>)."""
    train: TrainSpec = Field(examples=[{"command": "python train.py"}])
    """The training command and how torchrun runs it."""
    checkpoints: CheckpointSpec = CheckpointSpec()
    """Checkpoint folder and upload."""
    outputs: OutputSpec = OutputSpec()
    """Output folder and upload."""
    snapshot: SnapshotSpec = SnapshotSpec()
    """Custom image taken after success."""
    teardown: TeardownSpec = TeardownSpec()
    """What happens to instances at the end."""
    limits: LimitsSpec = LimitsSpec()
    """Runtime and cost limits."""
    tags: dict[TagKey, TagValue] = Field(default_factory=dict, max_length=10, examples=[{"team": "ml"}])
    """Up to 10 tags for the instance and images (cvmjob adds its own cvmjob:* tags)."""
    storage: StorageSpec = StorageSpec()
    """The state bucket."""
    credentials: Credentials = "sts"
    """How the instance reaches COS: "sts" (short-lived keys scoped to the job's prefixes, refreshed by
    cvmjob) or "role:<CamRoleName>" (a CAM role bound to the instance)."""
    secrets: tuple[EnvName, ...] = Field((), examples=[["WANDB_API_KEY", "HF_TOKEN"]])
    """Environment variables whose values the training gets without their being written anywhere in plain text:
    read on the machine that runs `cvmjob run` (``--secret NAME`` adds one), delivered to the training through the
    agent's scoped copy in the state bucket. The store, spec.json, job.json and the fingerprint hold the names
    only. Not also in ``train.env``."""
    container: ContainerSpec | None = None
    """The image the training runs in, pulled on every node (docs/spec.md, "Containers"). Unset: the training runs
    on the host, with the boot image's Python."""
    policies: PolicyRefs = PolicyRefs()
    """Named policies."""
    notify: tuple[NotifyTarget, ...] | None = None
    """Where the job's events are posted (docs/notifications.md). Unset: the ``notify`` of your config file
    ($CVMJOB_HOME/config.yaml), if any; ``[]``: none."""

    @property
    def cam_role(self) -> str | None:
        """The CAM role named by ``credentials: role:<name>``; None for "sts"."""
        return self.credentials.removeprefix("role:") if self.credentials.startswith("role:") else None

    @field_validator("zones")
    @classmethod
    def _zones_in_region(cls, zones: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        region = info.data.get("region")
        for index, zone in enumerate(zones):
            if region is not None and zone.rpartition("-")[0] != region:
                raise field_problem(str(index), f"{zone} is not in region {region}. use a zone of {region}, "
                                                f"e.g. {region}-3")
            if zone in zones[:index]:
                raise field_problem(str(index), f"{zone} is listed twice")
        return zones

    @field_validator("secrets")
    @classmethod
    def _secrets_apart(cls, names: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        train = info.data.get("train")
        for index, name in enumerate(names):
            if name in names[:index]:
                raise field_problem(str(index), f"{name} is listed twice")
            if train is not None and name in train.env:
                raise field_problem(str(index), f"{name} is also in train.env, whose values are written in plain "
                                                "text. keep it in one of the two")
        return names

    @field_validator("container")
    @classmethod
    def _login_in_secrets(cls, container: ContainerSpec | None, info: ValidationInfo) -> ContainerSpec | None:
        secrets = info.data.get("secrets", ())
        if container is not None and container.login is not None:
            for field in ("username_secret", "password_secret"):
                name = getattr(container.login, field)
                if name is not None and name not in secrets:
                    raise field_problem(f"login.{field}", f"{name} is not one of the job's secrets. add it to "
                                                          "secrets (its value is read from your environment when "
                                                          "you submit)")
        return container

    @field_validator("data")
    @classmethod
    def _distinct_targets(cls, data: tuple[DataSource, ...]) -> tuple[DataSource, ...]:
        targets = [source.target for source in data]
        for index, target in enumerate(targets):
            if target in targets[:index]:
                first = targets.index(target)
                raise field_problem(f"{index}.target", f"{target!r} is already the target of data.{first}")
        return data

    @field_validator("outputs")
    @classmethod
    def _outputs_apart(cls, outputs: OutputSpec, info: ValidationInfo) -> OutputSpec:
        checkpoints = info.data.get("checkpoints")
        if checkpoints is not None and outputs.dir == checkpoints.dir:
            raise field_problem("dir", f"{outputs.dir!r} is also checkpoints.dir. use different folders")
        return outputs

    @field_validator("snapshot")
    @classmethod
    def _snapshot_name_fits(cls, snapshot: SnapshotSpec, info: ValidationInfo) -> SnapshotSpec:
        name = info.data.get("name")
        if snapshot.enabled and name is not None:
            example = snapshot.example_name(name)
            if len(example) > IMAGE_NAME_MAX_LENGTH:
                raise field_problem("name", f"renders to {len(example)} characters ({example!r}), over the "
                                            f"{IMAGE_NAME_MAX_LENGTH} an image name may have. shorten the template "
                                            "(e.g. '{job_id}') or the job name")
        return snapshot
