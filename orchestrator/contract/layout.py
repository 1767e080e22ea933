"""The state bucket's layout: a versioned layout of objects under the job's COS prefix.

The controller and the agent never talk directly (design.md §2). Each object has exactly one writer:
- the submitting CLI (api.submit): ``secrets.json`` (the values of the spec's ``secrets``, read by the agents);
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

from typing import Protocol
from urllib.parse import quote

from .base import Model
from .reports import Phase

ROOT = "cvmjob"
# One small object per node whose attempt ended, beside the jobs' folders (no job id starts with "_"): a
# controller lists this prefix once a round and looks at those jobs at once, so it need not read every training
# node's status every few seconds to see a reclaim notice within seconds.
SIGNALS_PREFIX = f"{ROOT}/_signals/"
AGENT_WHEELS_PREFIX = f"{ROOT}/_agent/"
CANCEL_SIGNAL, CANCEL_NOW_SIGNAL = "cancel", "cancel-now"  # JobLayout.cancel_signal: with a checkpoint, without
# `cvmjob run --if-changed`: one object per set of inputs a job succeeded on (orchestrator/ci/fingerprint.py).
FINGERPRINTS_PREFIX = f"{ROOT}/_fingerprints/"


def agent_wheel_key(sha256: str, filename: str) -> str:
    """Content-addressed: jobs of one release share the object, and another release never overwrites it."""
    return f"{AGENT_WHEELS_PREFIX}{sha256}/{filename}"


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
    def secrets(self) -> str:
        return self.prefix + "secrets.json"

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


class Location(Model):
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


# `cvmjob run` from CI: the newest job of each name that succeeded for each git ref, a later run's baseline.
LATEST_PREFIX = f"{ROOT}/_latest/"


def latest_key(name: str, ref: str) -> str:
    return f"{LATEST_PREFIX}{name}/{quote(ref or '-', safe='')}.json"
