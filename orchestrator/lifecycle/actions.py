"""What ``decide`` can ask for. ``execute`` carries each out against the cloud and the store."""

from __future__ import annotations

from dataclasses import dataclass

from ..plan.models import Placement
from ..state.machine import JobState, NodeState
from ..state.store import NodeRecord


@dataclass(frozen=True)
class Stage:
    """Upload the spec and the bundle (idempotent); the first attempt follows as a StartAttempt."""


@dataclass(frozen=True)
class StartAttempt:
    """Record the next attempt's nodes as launch intents (with their ClientTokens) and go LAUNCHING."""

    placement: Placement
    reason: str


@dataclass(frozen=True)
class Launch:
    """RunInstances for one node whose intent is persisted (the ClientToken makes a repeat harmless): the record
    decide saw."""

    node: NodeRecord


@dataclass(frozen=True)
class MarkNodes:
    """Record what became of the current attempt's nodes (running, lost, failed) with a reason."""

    updates: tuple[tuple[int, NodeState, str], ...]  # (node, state, reason)


@dataclass(frozen=True)
class Move:
    """A transition of the job; ``outcome`` is where a teardown should end."""

    target: JobState
    reason: str
    outcome: JobState | None = None
    keep_until: float | None = None
    reclaimed: bool = False  # the cloud took a spot instance of the attempt back: a ``reclaimed`` notification


@dataclass(frozen=True)
class RequestCancel:
    """control.json for the attempt's agents: stop, after an emergency checkpoint unless ``checkpoint`` is off."""

    reason: str
    checkpoint: bool = True


@dataclass(frozen=True)
class RecordSuccess:
    """A succeeded job's facts where later runs find them: the newest success of its name for its git ref (a
    baseline), and, for a job submitted with `--if-changed`, its inputs in the fingerprint index, if its data did
    not change while it trained."""


@dataclass(frozen=True)
class CreateImage:
    """CreateImage of node 0's instance, named by the spec's template (or adopt the job's tagged image)."""


@dataclass(frozen=True)
class ApplyImageRetention:
    keep_last: int


@dataclass(frozen=True)
class DiscardImage:
    """Delete the job's image that failed (CREATEFAILED): garbage that still counts against the image quota."""

    image_id: str


@dataclass(frozen=True)
class Terminate:
    instance_ids: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class ReleasePool:
    """Give reserved-pool instances back to the pool (never terminate them)."""

    instance_ids: tuple[str, ...]


@dataclass(frozen=True)
class RefreshCredentials:
    """Issue the current attempt's agents new short-lived keys (``reason`` says why, for the log)."""

    reason: str


@dataclass(frozen=True)
class RecordBill:
    pass


@dataclass(frozen=True)
class Wait:
    seconds: float
    reason: str
    tell: bool = False  # worth a line to the user (once while the reason stays the same): routine waits are not
    # A look at agents that train, nothing expected of them but their reports: a controller holding many jobs may
    # spread these looks out (controller/engine.py), and no other wait.
    routine: bool = False


Action = (
    Stage
    | StartAttempt
    | Launch
    | MarkNodes
    | Move
    | RequestCancel
    | RecordSuccess
    | CreateImage
    | ApplyImageRetention
    | DiscardImage
    | Terminate
    | ReleasePool
    | RefreshCredentials
    | RecordBill
    | Wait
)
