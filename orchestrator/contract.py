"""The controller/agent contract: a versioned layout of objects under the job's COS prefix.

The controller and the agent never talk directly (design.md §2). Each object has exactly one writer:
- controller: ``spec.json``, ``bundle/*``, ``attempts/<n>/nodes/<k>/agent.json``, ``attempts/<n>/credentials.json``,
  ``attempts/<n>/control.json``; and, beside the jobs' folders, the agent wheel the jobs of a bucket share
  (``_agent/<sha256>/<wheel>``: a sweep of a thousand trials uploads it once);
- agent: ``attempts/<n>/nodes/<k>/{status.json, result.json, logs/<seq>.log}``, ``attempts/<n>/rendezvous.json``
  (node 0), ``checkpoints/<name>/*`` and ``checkpoints/manifest/<generation>.json`` (node 0, written last: only
  what the manifest lists is a complete checkpoint), ``outputs/*``.

A job's checkpoints live at ``checkpoints_location``: its own ``checkpoints/`` prefix, or ``<upload_to><job id>/``
(jobs sharing an ``upload_to`` never share a manifest). Each manifest generation is written create-only, so two
writers of one manifest (a stale agent of an earlier attempt and the current one) cannot lose each other's entries
(agent/manifest.py); ``checkpoints/manifest.json`` is what agents of an earlier release wrote, still read.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Protocol, TypeVar
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

LAYOUT_VERSION = 1
ROOT = "cvmjob"
# One small object per node whose attempt ended, beside the jobs' folders (no job id starts with "_"): a
# controller lists this prefix once a round and looks at those jobs at once, so it need not read every training
# node's status every few seconds to see a reclaim notice within seconds.
SIGNALS_PREFIX = f"{ROOT}/_signals/"
AGENT_WHEELS_PREFIX = f"{ROOT}/_agent/"
CANCEL_SIGNAL, CANCEL_NOW_SIGNAL = "cancel", "cancel-now"  # JobLayout.cancel_signal: with a checkpoint, without
# `cvmjob run --if-changed`: one object per set of inputs a job succeeded on (orchestrator/fingerprint.py).
FINGERPRINTS_PREFIX = f"{ROOT}/_fingerprints/"


def agent_wheel_key(sha256: str, filename: str) -> str:
    """Content-addressed: jobs of one release share the object, and another release never overwrites it."""
    return f"{AGENT_WHEELS_PREFIX}{sha256}/{filename}"

HEARTBEAT_SECONDS = 5.0  # an agent puts its status this often
# A status older than three beats is an agent that went silent, not one whose put is late or in flight (two beats
# counted the many late heartbeats of a loaded COS endpoint as silences): the controller reads its result then,
# and rotates its keys once.
SILENT_AFTER = 3 * HEARTBEAT_SECONDS


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobLayout:
    """Keys of one job's objects in the state bucket."""

    def __init__(self, job_id: str, prefix: str | None = None) -> None:
        self.job_id = job_id
        # The agent is given the prefix (AgentConfig.state) rather than deriving it, so the two never disagree.
        self.prefix = prefix if prefix is not None else f"{ROOT}/{job_id}/"

    @property
    def spec(self) -> str:
        return self.prefix + "spec.json"

    @property
    def job_doc(self) -> str:
        return self.prefix + "job.json"

    @property
    def bundle_prefix(self) -> str:
        return self.prefix + "bundle/"

    @property
    def workdir_archive(self) -> str:
        return self.bundle_prefix + "workdir.tar.gz"

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

    @property
    def signals_prefix(self) -> str:
        return f"{SIGNALS_PREFIX}{self.job_id}/"

    def signal(self, attempt: int, node: int) -> str:
        return f"{self.signals_prefix}{attempt}-{node}"

    def cancel_signal(self, checkpoint: bool) -> str:
        """`cvmjob cancel` from a machine whose store does not hold the job: the controller driving it reads the
        signals every round and requests the cancel in its own store."""
        return f"{self.signals_prefix}{CANCEL_SIGNAL if checkpoint else CANCEL_NOW_SIGNAL}"

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


class CosPlace(Protocol):
    """A bucket and a key prefix (a Location, a spec's CosUri)."""

    @property
    def bucket(self) -> str: ...

    @property
    def prefix(self) -> str: ...


def checkpoints_location(job_id: str, state_bucket: str, upload_to: CosPlace | None) -> Location:
    """Where a job's checkpoints and their manifest live: ``<upload_to><job id>/`` when the spec sets
    ``checkpoints.upload_to`` (one prefix per job, however many jobs name the same place), else the job's own
    ``checkpoints/`` in the state bucket. The executor (the agent's config), `cvmjob status` and the resolution of
    ``checkpoints.resume_from`` all ask here."""
    if upload_to is None:
        return Location(bucket=state_bucket, prefix=JobLayout(job_id).checkpoints_prefix)
    return Location(bucket=upload_to.bucket, prefix=f"{upload_to.prefix}{job_id}/")


class ResumeSource(_Model):
    """``checkpoints.resume_from`` as resolved when the job was planned: the job whose latest complete checkpoint
    an attempt starts from while its own job has none yet."""

    job_id: str
    checkpoints: Location  # that job's checkpoints_location


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
    # Another job's checkpoints to start from while this job has none of its own (checkpoints.resume_from);
    # the keys below may read there.
    resume_from: ResumeSource | None = None
    cos: CosAccess
    keys: TemporaryKeys | None = None
    credentials_url: str | None = None  # presigned GET of credentials.json (new keys when these expire)
    workdir_archive_key: str | None = None
    signal_key: str | None = None  # put once the status says the attempt ended (SIGNALS_PREFIX)
    spec: dict[str, object]  # the validated JobSpec as JSON (the agent reads setup/data/train/... from it)
    heartbeat_seconds: float = HEARTBEAT_SECONDS
    preemption_poll_seconds: float = 2.0
    bandwidth_gbps: float | None = None  # the instance's network, as the plan's placement has it: sizes transfers


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


# The phases that say an attempt ended on a node: result.json follows (agent/attempt.py writes it after).
ENDED_PHASES = frozenset({Phase.PREEMPTED, Phase.CANCELLED, Phase.DONE, Phase.FAILED})


def signal_for(base: str, phase: Phase) -> str:
    """Where an agent puts the signal of ``phase`` (one of ENDED_PHASES) at its ``AgentConfig.signal_key``: the
    phase is in the key, so that a listing of the signals alone tells a reclaim (urgent: its notice runs out) from
    a training that ended, without reading a document per signal."""
    return f"{base}.{phase.value}"


def signalled_phase(key: str) -> Phase | None:
    """The phase a signal's key names; None when it names none (an agent of an earlier release put it)."""
    _, dot, name = key.rpartition(".")
    try:
        return Phase(name) if dot else None
    except ValueError:
        return None


class GpuStat(_Model):
    index: int
    utilization: float
    memory_used_mib: float


class GpuUse(_Model):
    """The node's GPU utilisation over the training so far, folded by the agent from every heartbeat's figures
    (orchestrator/gpu_watch.py): one heartbeat's ``gpus`` cannot say that the GPUs have been waiting for minutes."""

    samples: int  # training heartbeats with GPU figures
    mean_utilization: float  # percent: over those heartbeats, of each one's mean across the node's GPUs
    # How long it has stayed below gpu_watch.LOW_UTILISATION without a break, up to the latest of those heartbeats
    # (0: that one was busy).
    low_seconds: float


# Named training metrics (trainkit.report(step, val_loss=0.4)), from the progress file to the heartbeat and the
# result: a sweep reads its objective there. Strict finite floats: JSON has no NaN, and a bool or a string is a
# mistake in the script, not a value to optimise.
METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
Metrics = dict[Annotated[str, StringConstraints(pattern=f"^{METRIC_NAME.pattern}$")],
               Annotated[float, Field(strict=True, allow_inf_nan=False)]]
# How many of the training's latest reports of named metrics a heartbeat carries: a sweep's pruner compares trials
# at the same step, so it needs every report, not the newest one a heartbeat (every few seconds) happened to see.
RECENT_METRICS = 32


class MetricsAt(_Model):
    """The named metrics as they stood at ``step`` (Progress.metrics at metrics_step)."""

    step: int
    metrics: Metrics


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


class ImageContents(_Model):
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
    # The last metrics the training reported in this attempt, whatever its outcome (a sweep trial's final value).
    metrics: Metrics = Field(default_factory=dict)
    metrics_step: int | None = None
    outputs_uploaded: int = 0
    # The data sync of this attempt (`cvmjob bench` reads COS → NVMe from them); the defaults decode older results.
    sync_bytes: int = 0  # downloaded: files a previous attempt on this node left in place are not counted
    sync_seconds: float | None = None  # None: the attempt ended before its sync did
    time: float
    image: ImageContents | None = None  # node 0 of a job to snapshot, when the training succeeded


class Control(_Model):
    """``control.json``: the controller asks the agents of an attempt to stop (cancel: checkpoint, upload,
    exit). Without ``checkpoint`` the training is stopped at once (a pruned sweep trial: nothing resumes it)."""

    layout_version: int = LAYOUT_VERSION
    action: Literal["cancel"]
    reason: str
    checkpoint: bool = True
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


class Manifest(_Model):
    """``manifest/<generation>.json`` at a job's checkpoints_location: the complete checkpoints, oldest first;
    written after their files."""

    layout_version: int = LAYOUT_VERSION
    checkpoints: list[CheckpointEntry] = Field(default_factory=list)

    def latest(self) -> CheckpointEntry | None:
        return max(self.checkpoints, key=lambda c: (c.step, c.time), default=None)


# -- Reading what the agents wrote: the training on a node holds keys that can write these objects too ---------------

# The most of a status or a result that is read: an agent writes a few KiB (a result's log tail is at most 64 KiB of
# text, a few times that JSON-escaped; a status carries RECENT_METRICS reports of the training's metrics). More is
# not an agent's document, and reading it whole would hold whatever the training put there in memory.
AGENT_DOC_LIMIT = 1024 * 1024
_SAID = 160  # characters of the document's own text (a field's name, an instance id) a reason repeats at most


class UnreadWhy(str, Enum):
    TOO_LARGE = "too large"
    NOT_JSON = "not JSON"
    WRONG_SHAPE = "wrong shape"
    NOT_THIS_NODES = "not this node's"


@dataclass(frozen=True)
class Unread:
    """An agent document that is there but is not taken for one: as good as absent, and why (said once in the
    job's events: a training that keeps writing garbage must not add an event every round)."""

    key: str
    why: UnreadWhy
    detail: str  # printable, one line, short: it may repeat what the training wrote

    def describe(self, verdict: str = "taken as absent") -> str:
        return f"{self.key}: {self.detail}; {verdict}"


_Doc = TypeVar("_Doc", bound=BaseModel)
_NodeDoc = TypeVar("_NodeDoc", Status, Result)


def _printable(text: str) -> str:
    cut = "".join(c if c.isprintable() else "?" for c in text[:_SAID])
    return cut + ("..." if len(text) > _SAID else "")


def too_large(key: str, size: int | None, limit: int) -> Unread:
    said = f"{size} bytes, " if size is not None else ""
    return Unread(key, UnreadWhy.TOO_LARGE, f"{said}more than the {limit} bytes an agent writes")


def decode_doc(key: str, data: bytes, model: type[_Doc], limit: int) -> _Doc | Unread:
    """``data`` as a ``model``, or why it is not one: never an exception, whatever the bytes."""
    if len(data) > limit:
        return too_large(key, len(data), limit)
    try:
        return model.model_validate_json(data)  # no recursion limit to hit: a "[[[[..." is invalid JSON here
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
        if first["type"] == "json_invalid":
            return Unread(key, UnreadWhy.NOT_JSON, "not JSON")
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        return Unread(key, UnreadWhy.WRONG_SHAPE,
                      f"not a {model.__name__.lower()} of layout {LAYOUT_VERSION} ({_printable(where)}: "
                      f"{_printable(first['msg'])})")


def decode_agent_doc(key: str, data: bytes, model: type[_NodeDoc], attempt: int, node: int,
                     instance_id: str | None) -> _NodeDoc | Unread:
    """A node's status or result, taken only when it is the one expected there: of ``attempt``, ``node`` and, unless
    ``instance_id`` is None (a reader that does not know the node's instance: `cvmjob status`), of that instance.
    The three fields have been in both documents since layout 1: no earlier document lacks them."""
    doc = decode_doc(key, data, model, AGENT_DOC_LIMIT)
    if isinstance(doc, Unread):
        return doc
    if (doc.attempt, doc.node_rank) != (attempt, node):
        return Unread(key, UnreadWhy.NOT_THIS_NODES,
                      f"written as attempt {doc.attempt} node {doc.node_rank}'s, not attempt {attempt} node {node}'s")
    if instance_id is not None and doc.instance_id != instance_id:
        return Unread(key, UnreadWhy.NOT_THIS_NODES,
                      f"written by instance {_printable(doc.instance_id)}, not by the node's {instance_id}")
    return doc


# -- The training-script contract (design.md §3): between the agent and the training processes of one node ----------


class TrainingEnv(str, Enum):
    """Environment variables the agent gives every training process (torchrun adds RANK, WORLD_SIZE, ...)."""

    DATA_DIR = "CVMJOB_DATA_DIR"
    CHECKPOINT_DIR = "CVMJOB_CHECKPOINT_DIR"
    OUTPUT_DIR = "CVMJOB_OUTPUT_DIR"
    RESUME_FROM = "CVMJOB_RESUME_FROM"  # the restored checkpoint's path; "" on a fresh start
    JOB_ID = "CVMJOB_JOB_ID"
    ATTEMPT = "CVMJOB_ATTEMPT"
    CHECKPOINT_INTERVAL = "CVMJOB_CHECKPOINT_INTERVAL"  # only when the spec sets checkpoints.interval_steps
    PROGRESS_FILE = "CVMJOB_PROGRESS_FILE"  # where rank 0 reports its step (Progress)


# Sent by the agent to every training process: "write a checkpoint now" (a spot notice, a cancel). The launcher
# and processes without a handler ignore it: the agent starts them with SIGUSR1 ignored.
CHECKPOINT_SIGNAL = signal.SIGUSR1

# A checkpoint is complete when an entry named ``step-<N>`` (a directory, or a file with an optional extension:
# ``step-<N>.pt``) appears in $CVMJOB_CHECKPOINT_DIR by atomic rename; N is the last completed step. Names
# starting with "." are work in progress and never read.
CHECKPOINT_NAME = re.compile(r"step-(?P<step>[0-9]+)(?:\.[A-Za-z0-9_.-]+)?")


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}"


def checkpoint_step(name: str) -> int | None:
    """The step of a complete checkpoint's name; None for anything else."""
    match = CHECKPOINT_NAME.fullmatch(name)
    return int(match["step"]) if match else None


class Progress(_Model):
    """``$CVMJOB_PROGRESS_FILE``: rank 0's last completed step, replaced by atomic rename (trainkit.report).

    It feeds the heartbeat and hang detection; ``stopped`` tells the agent that the ranks agreed to stop after a
    requested checkpoint (possibly requested by another node's agent). ``metrics`` holds the latest value of every
    name reported so far, ``metrics_step`` the step the newest of them was reported at (``step`` moves on every
    report, a validation metric only every few). The format is in trainkit's docstring, for scripts without it."""

    step: int
    loss: float | None = None
    time: float
    stopped: bool = False
    metrics: Metrics = Field(default_factory=dict)
    metrics_step: int | None = None


class DataDigest(_Model):
    """One data entry's listing at a moment: the sha256 of its objects' keys, sizes and ETags."""

    bucket: str
    prefix: str
    objects: int
    bytes: int
    sha256: str


class Fingerprint(_Model):
    """What a job's result depends on (orchestrator/fingerprint.py)."""

    cvmjob_version: str
    spec_sha256: str
    workdir_sha256: str
    image_id: str
    data: list[DataDigest]


class FingerprintEntry(_Model):
    """``_fingerprints/<digest>.json``: the job that succeeded on these inputs, and what it left."""

    layout_version: int = LAYOUT_VERSION
    job_id: str
    name: str
    finished_at: float
    fingerprint: Fingerprint
    outputs: Location
    metrics: Metrics = Field(default_factory=dict)
    image_id: str | None = None


class JobDoc(_Model):
    """``job.json``: the job's records as the store of its controller holds them (orchestrator/jobdoc.py)."""

    layout_version: int = LAYOUT_VERSION
    job: dict[str, Any]
    nodes: list[dict[str, Any]]
    events: list[dict[str, Any]]


# `cvmjob run` from CI: the newest job of each name that succeeded for each git ref, a later run's baseline.
LATEST_PREFIX = f"{ROOT}/_latest/"


def latest_key(name: str, ref: str) -> str:
    return f"{LATEST_PREFIX}{name}/{quote(ref or '-', safe='')}.json"


class RunLabels(_Model):
    """Where a job was submitted from, as its CI system says (orchestrator/ci/facts.py reads them)."""

    ref: str = ""  # the git branch or tag
    sha: str = ""
    run_url: str = ""


class RunFacts(_Model):
    """One job as its summary tells it; ``_latest/<name>/<ref>.json`` holds the newest succeeded one's."""

    job_id: str
    name: str
    state: str
    metrics: dict[str, float]
    cost_cny: float | None
    duration_seconds: float | None
    attempts: int
    reclaims: int
    finished_at: float | None
    ref: str | None  # the git ref it ran for
    up_to_date: bool = False  # `--if-changed` found a job that succeeded on the same inputs: this is that job
