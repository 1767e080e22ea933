"""The executor's context and what its families of actions share: the job, its state bucket, the lease guard,
the store; what is said to the user and in the job's events."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ...contract import (
    JobLayout,
    Unread,
    UnreadWhy,
    agent_wheel_key,
)
from ...plan.models import Plan
from ...providers.tencent import TencentSdk
from ...providers.tencent.errors import AuthError
from ...providers.tencent.retry import retrying
from ...providers.tencent.storage import ObjectStore
from ...spec.models import JobSpec
from ...staging import bundle
from ...state.store import JobRecord, NodeRecord, PoolStore, Store
from ...target import Target
from ..lease import LeaseGuard
from ..observation import KeysRefused

ACTION_TIMER_MARGIN = 600.0  # the instance's own deadline trails the job's by this much
CREDENTIAL_SECONDS = 7200  # GetFederationToken maximum for a root account
MAX_PRESIGN_SECONDS = 7 * 24 * 3600

Emit = Callable[[str, str], None]


class Next(Enum):
    """What the round does after an action."""

    CONTINUE = "continue"  # on with the round's next action
    LOOK_AGAIN = "look again"  # the job or the cloud changed (or a Wait): a new look before anything else


class PermanentFailure(RuntimeError):
    """A cloud error no retry or other placement fixes (bad parameters, permissions): the job fails."""


class AgentKeysRefused(PermanentFailure):
    """The cloud refused to issue the agents' short-lived COS keys; the message names the permission. Fatal to an
    attempt that has none yet; a refresh is retried while the agents' keys last (decide.py)."""


def keys_refusal(exc: AuthError) -> str:
    return (f"the cloud refused new COS keys for the agents ({exc.code}: {exc.message}); the controller's key needs "
            "the CAM action sts:GetFederationToken")


@dataclass
class Ensured:
    """What has been made sure of in state buckets: that one exists, that an agent wheel is in it. An engine's
    executors share one, so that a controller staging a thousand jobs asks COS once, not once a job. A bucket or
    wheel deleted behind a live controller is not noticed (the agents then fail to boot, and the job says so)."""

    _done: set[tuple[str, str]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def once(self, state: ObjectStore, what: str, ensure: Callable[[], None]) -> None:
        where = (f"{state.sdk.region}/{state.bucket}", what)
        with self._lock:
            if where in self._done:
                return
        ensure()  # two threads may both ensure: each step of it is idempotent
        with self._lock:
            self._done.add(where)

def pool_holder(node: NodeRecord) -> str:
    """Who holds a pool member: one node of one attempt of one job."""
    return f"{node.job_id}/a{node.attempt}n{node.node}"


@dataclass
class ExecutorBase:
    """One job's executor: what it acts on and with, and the helpers its families share."""

    store: Store
    token: int
    job_id: str
    target: Target
    sdk: TencentSdk
    state: ObjectStore
    spec: JobSpec
    plan: Plan
    source_dir: Path
    guard: LeaseGuard  # consulted before every action and every attempt of its cloud calls
    now: Callable[[], float] = time.time
    emit: Emit = lambda kind, message: None
    ensured: Ensured = field(default_factory=Ensured)  # shared by the executors of one engine
    _told: str = ""  # the reason of the last Wait told to the user, while it lasts
    _unread_told: set[tuple[str, UnreadWhy]] = field(default_factory=set)  # agent documents said to be taken absent
    # The cloud's refusal of the agents' new keys, until keys are issued again: decide() reads it (Observation) to
    # retry with backoff and not to take the silence it causes for a lost instance. A restarted controller learns
    # it again by its first try.
    keys_refused: KeysRefused | None = None

    @property
    def layout(self) -> JobLayout:
        return JobLayout(self.job_id)

    def job(self) -> JobRecord:
        job = self.store.get(self.job_id)
        assert job is not None
        return job

    @property
    def pools(self) -> PoolStore:
        return PoolStore(self.store)

    @property
    def pool(self) -> str | None:
        return self.spec.billing.pool

    def tell_unread(self, unread: Iterable[Unread]) -> None:
        """Says in the job's events (and to the user) each agent document that was there but not taken, once for
        its key and reason: a training that keeps writing garbage there would otherwise add an event every round."""
        for doc in unread:
            if (doc.key, doc.why) not in self._unread_told:
                self.store.note(self.job_id, self.token, "agent", doc.describe(), self.now())
                self.emit("agent", doc.describe())
                self._unread_told.add((doc.key, doc.why))

    def _ensure_bucket(self) -> None:
        if not self.state.bucket_exists():
            self.emit("stage", f"creating the state bucket {self.state.bucket}")
            retrying(self.state.create_bucket)

    def _agent_wheel(self) -> str:
        """The key of this release's agent wheel in the state bucket, put there unless it is already."""
        wheel = bundle.agent_wheel()
        key = agent_wheel_key(wheel.sha256, wheel.name)

        def ensure() -> None:
            if self.state.head(key) is None:
                retrying(lambda: self.state.put_bytes(key, wheel.data))

        self.ensured.once(self.state, key, ensure)
        return key

    def _presign_seconds(self, job: JobRecord) -> int:
        return int(min(MAX_PRESIGN_SECONDS, max(3600.0, job.deadline - self.now() + 3600)))
