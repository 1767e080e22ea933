"""Agent -> controller: the phases of an attempt, the heartbeat's status, the result, the checkpoint manifest."""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from .base import LAYOUT_VERSION, Model

HEARTBEAT_SECONDS = 5.0  # an agent puts its status this often
# A status older than three beats is an agent that went silent, not one whose put is late or in flight (two beats
# counted the many late heartbeats of a loaded COS endpoint as silences): the controller reads its result then,
# and rotates its keys once.
SILENT_AFTER = 3 * HEARTBEAT_SECONDS


class Phase(str, Enum):
    STARTING = "starting"
    SETUP = "setup"
    PULLING = "pulling"  # the job's container image (spec container:)
    SYNCING = "syncing"
    PREFLIGHT = "preflight"
    RESTORING = "restoring"
    TRAINING = "training"
    UPLOADING = "uploading"
    PREEMPTED = "preempted"
    CANCELLED = "cancelled"
    DONE = "done"
    FAILED = "failed"


# The phases that say an attempt ended on a node: result.json follows (agent/attempt.py writes it after).
ENDED_PHASES = frozenset({Phase.PREEMPTED, Phase.CANCELLED, Phase.DONE, Phase.FAILED})


class GpuStat(Model):
    index: int
    utilization: float
    memory_used_mib: float


# Below this a data-parallel training's GPUs spend a fifth of the time waiting, mostly on the next batch.
LOW_UTILISATION = 80.0  # percent
# Longer than a start's warm-up (the first batches, cuDNN's benchmarks, the loader's workers starting) and an
# evaluation pass between epochs.
LOW_FOR_SECONDS = 120.0


class GpuUse(Model):
    """The node's GPU utilisation over the training so far, folded by the agent from every heartbeat's figures
    (agent/gpu_watch.py): one heartbeat's ``gpus`` cannot say that the GPUs have been waiting for minutes."""

    samples: int  # training heartbeats with GPU figures
    mean_utilization: float  # percent: over those heartbeats, of each one's mean across the node's GPUs
    # How long it has stayed below LOW_UTILISATION without a break, up to the latest of those heartbeats
    # (0: that one was busy).
    low_seconds: float

    @property
    def starved(self) -> bool:
        """The node's GPUs stayed below LOW_UTILISATION for more than LOW_FOR_SECONDS of training, up to the
        heartbeat that says this."""
        return self.low_seconds > LOW_FOR_SECONDS


# Named training metrics (trainkit.report(step, val_loss=0.4)), from the progress file to the heartbeat and the
# result: a sweep reads its objective there. Strict finite floats: JSON has no NaN, and a bool or a string is a
# mistake in the script, not a value to optimise.
METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
Metrics = dict[Annotated[str, StringConstraints(pattern=f"^{METRIC_NAME.pattern}$")],
               Annotated[float, Field(strict=True, allow_inf_nan=False)]]
# How many of the training's latest reports of named metrics a heartbeat carries: a sweep's pruner compares trials
# at the same step, so it needs every report, not the newest one a heartbeat (every few seconds) happened to see.
RECENT_METRICS = 32


class MetricsAt(Model):
    """The named metrics as they stood at ``step`` (Progress.metrics at metrics_step)."""

    step: int
    metrics: Metrics


class Status(Model):
    """``status.json``: the agent's heartbeat."""

    layout_version: int = LAYOUT_VERSION
    attempt: int
    node_rank: int
    instance_id: str
    phase: Phase
    time: float
    seq: int  # increases with every write: a stale heartbeat is one whose seq stops moving
    step: int | None = None
    total_steps: int | None = None  # Progress.total_steps: a view's "step N of M" and its ETA
    loss: float | None = None
    metrics: Metrics = Field(default_factory=dict)  # the training's latest value of each (Progress.metrics)
    metrics_step: int | None = None  # the step the newest of them was reported at: a sweep's intermediate value
    recent_metrics: list[MetricsAt] = Field(default_factory=list)  # the last RECENT_METRICS reports, oldest first
    sync_bytes_done: int = 0
    sync_bytes_total: int = 0
    checkpoints_uploaded: int = 0
    latest_checkpoint_step: int | None = None
    gpus: list[GpuStat] = Field(default_factory=list)
    notice_time: str | None = None  # spot/termination-time as the metadata service gave it
    message: str = ""
    # How long the training has run on this node in this attempt, by the agent's monotonic clock (so no clock of
    # another machine enters it): the controller keeps the last one with the bill, and the node's billed time
    # outside it (boot, setup, preflight, sync, uploads, imaging, teardown) is what `cvmjob cost` reports as not
    # training. None: an agent of an earlier release.
    training_seconds: float | None = None
    # None: no GPU figures in the training yet (a node without GPUs never has any), or an agent of an earlier
    # release: either way nothing to tell of its GPUs.
    gpu_use: GpuUse | None = None


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


class ImageContents(Model):
    """What a node left on its system disk for the snapshot, after removing what belonged to the job and not to
    the image (agent/seal.py). Also written on the disk itself, as ``/opt/cvmjob/image.json``."""

    job_id: str
    job_name: str
    attempt: int
    setup: list[str] = Field(default_factory=list)  # the setup commands whose results the image keeps
    data: list[str] = Field(default_factory=list)  # folders of synced data kept (snapshot.include_data), from "/"
    removed: list[str] = Field(default_factory=list)  # what was removed, from "/"
    problem: str = ""  # not empty: the node could not be cleaned, and must not be imaged

    def describe(self) -> str:
        if self.problem:
            return f"the instance could not be cleaned for the image ({self.problem})"
        setup = f"what setup installed ({len(self.setup)} command(s))" if self.setup else "the base image"
        data = f"and the synced data ({', '.join('/' + d for d in self.data)})" if self.data else "and no job data"
        return f"it holds {setup} {data}; the job's keys, agent and logs were removed"


class Result(Model):
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
    # The last metrics the training reported in this attempt, whatever its outcome (a sweep trial's final value).
    metrics: Metrics = Field(default_factory=dict)
    metrics_step: int | None = None
    outputs_uploaded: int = 0
    # The data sync of this attempt (`cvmjob bench` reads COS → NVMe from them); the defaults decode older results.
    sync_bytes: int = 0  # downloaded: files a previous attempt on this node left in place are not counted
    sync_seconds: float | None = None  # None: the attempt ended before its sync did
    time: float
    image: ImageContents | None = None  # node 0 of a job to snapshot, when the training succeeded


class CheckpointEntry(Model):
    name: str
    step: int
    # A checkpoint is a directory (files: paths inside it) or one file (files: {name: crc}), restored as it was.
    kind: Literal["directory", "file"] = "directory"
    files: dict[str, int]  # relative path -> CRC64; objects are at <checkpoints location><name>/<path>
    size: int
    attempt: int
    time: float
    emergency: bool = False
    # The job whose agent wrote it: an agent restores only its own job's checkpoints or those of the job it was
    # told to resume from. None: written by an agent of an earlier release (at its own job's location).
    job: str | None = None


class Manifest(Model):
    """``manifest/<generation>.json`` at a job's checkpoints_location: the complete checkpoints, oldest first;
    written after their files."""

    layout_version: int = LAYOUT_VERSION
    checkpoints: list[CheckpointEntry] = Field(default_factory=list)

    def latest(self) -> CheckpointEntry | None:
        return max(self.checkpoints, key=lambda c: (c.step, c.time), default=None)
