"""What the controller sees of one job at one moment: the cloud's instances and images, and the agents'
documents in COS. Built by ``observe``; read by the pure ``decide``."""

from __future__ import annotations

from dataclasses import dataclass

from ..contract import Result, Status, Unread
from ..providers.tencent.compute import InstanceView
from ..providers.tencent.images import ImageView


@dataclass(frozen=True)
class NodeSeen:
    node: int
    instance_id: str | None
    instance: InstanceView | None  # None: the cloud answered that it does not exist (or no id yet)
    status: Status | None
    result: Result | None


@dataclass(frozen=True)
class KeysRefused:
    """The cloud refused the agents' new short-lived keys: the stated reason (it names the missing permission),
    the last refusal's time and how many in a row."""

    reason: str
    at: float
    tries: int


@dataclass(frozen=True)
class Observation:
    now: float
    # False when the instance lookup failed: nothing may then be concluded about instances (design.md §4).
    cloud_ok: bool
    cloud_error: str = ""
    nodes: tuple[NodeSeen, ...] = ()
    # Live instances tagged with this job that are not the current attempt's (older attempts, lost intents).
    strays: tuple[InstanceView, ...] = ()
    image: ImageView | None = None
    # False when the agents' documents could not be read (COS unreachable): no conclusion about the agents.
    agents_ok: bool = True
    agents_error: str = ""
    # The agents' documents that were there but not taken (not JSON, too large, another attempt's...): the nodes'
    # status or result above is None for them, as if absent. The engine says each once in the job's events.
    unread: tuple[Unread, ...] = ()
    # Reserved jobs: idle pool members matching the plan's placements (None for other billing modes).
    pool_idle: int | None = None
    # The refresh of the agents' keys was refused (and not issued since): their silence is this controller's doing.
    keys_refused: KeysRefused | None = None
