"""What outlives a process: the objects in COS that one process writes and another reads (design.md §2).

Each module holds one direction; this package re-exports every name, so ``from orchestrator.contract import X``
works whichever module holds ``X``:
- ``layout``: the state bucket's keys, and which process writes each object;
- ``agent``: controller -> agent (config, keys, secrets, control, rendezvous);
- ``reports``: agent -> controller (phases, status, result, checkpoint manifest);
- ``training``: agent <-> training script (environment, checkpoint signal and names, progress);
- ``shared``: controller -> other machines and later runs (job.json, fingerprints, CI's facts);
- ``tags``: the tags on cloud resources;
- ``decode``: reading any of them once, at the edge; ``base``: the model they share.

This package imports nothing else of ``orchestrator``: the agent's wheel and every layer above read it.
"""

from __future__ import annotations

from .agent import (
    AgentConfig,
    Control,
    CosAccess,
    CredentialsDoc,
    RegistryToken,
    Rendezvous,
    ResumeSource,
    SecretsDoc,
    TemporaryKeys,
)
from .base import LAYOUT_VERSION, Model
from .decode import AGENT_DOC_LIMIT, Unread, UnreadWhy, decode_agent_doc, decode_doc, too_large
from .layout import (
    AGENT_WHEELS_PREFIX,
    CANCEL_NOW_SIGNAL,
    CANCEL_SIGNAL,
    FINGERPRINTS_PREFIX,
    LATEST_PREFIX,
    ROOT,
    SIGNALS_PREFIX,
    CosPlace,
    JobLayout,
    Location,
    agent_wheel_key,
    checkpoints_location,
    latest_key,
    signal_for,
    signalled_phase,
)
from .reports import (
    ENDED_PHASES,
    HEARTBEAT_SECONDS,
    LOW_FOR_SECONDS,
    LOW_UTILISATION,
    METRIC_NAME,
    RECENT_METRICS,
    SILENT_AFTER,
    CheckpointEntry,
    GpuStat,
    GpuUse,
    ImageContents,
    Manifest,
    Metrics,
    MetricsAt,
    Outcome,
    Phase,
    Result,
    Status,
)
from .shared import DataDigest, Fingerprint, FingerprintEntry, JobDoc, RunFacts, RunLabels
from .tags import TAG_ATTEMPT, TAG_JOB, TAG_NAME, TAG_NODE, TAG_OWNER, TAG_POOL, owner
from .training import CHECKPOINT_NAME, CHECKPOINT_SIGNAL, Progress, TrainingEnv, checkpoint_name, checkpoint_step

__all__ = [
    "AGENT_DOC_LIMIT",
    "AGENT_WHEELS_PREFIX",
    "CANCEL_NOW_SIGNAL",
    "CANCEL_SIGNAL",
    "CHECKPOINT_NAME",
    "CHECKPOINT_SIGNAL",
    "ENDED_PHASES",
    "FINGERPRINTS_PREFIX",
    "HEARTBEAT_SECONDS",
    "LATEST_PREFIX",
    "LAYOUT_VERSION",
    "LOW_FOR_SECONDS",
    "LOW_UTILISATION",
    "METRIC_NAME",
    "RECENT_METRICS",
    "ROOT",
    "SIGNALS_PREFIX",
    "SILENT_AFTER",
    "TAG_ATTEMPT",
    "TAG_JOB",
    "TAG_NAME",
    "TAG_NODE",
    "TAG_OWNER",
    "TAG_POOL",
    "AgentConfig",
    "CheckpointEntry",
    "Control",
    "CosAccess",
    "CosPlace",
    "CredentialsDoc",
    "DataDigest",
    "Fingerprint",
    "FingerprintEntry",
    "GpuStat",
    "GpuUse",
    "ImageContents",
    "JobDoc",
    "JobLayout",
    "Location",
    "Manifest",
    "Metrics",
    "MetricsAt",
    "Model",
    "Outcome",
    "Phase",
    "Progress",
    "RegistryToken",
    "Rendezvous",
    "Result",
    "ResumeSource",
    "RunFacts",
    "RunLabels",
    "SecretsDoc",
    "Status",
    "TemporaryKeys",
    "TrainingEnv",
    "Unread",
    "UnreadWhy",
    "agent_wheel_key",
    "checkpoint_name",
    "checkpoint_step",
    "checkpoints_location",
    "decode_agent_doc",
    "decode_doc",
    "latest_key",
    "owner",
    "signal_for",
    "signalled_phase",
    "too_large",
]
