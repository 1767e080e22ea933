"""execute: carry out one action against the cloud, COS and the store.

Crash safety (design.md §4): the intent is persisted before every cloud mutation and the outcome after it, and
every mutation is idempotent when repeated from the store after a crash: RunInstances carries a ClientToken
derived from (job, attempt, node); CreateImage is preceded by a lookup of the job's tagged images; terminating
something already gone is success.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..contract import Control
from ..notify import events as notify
from ..providers.tencent.retry import guarded, retrying
from ..state import jobdoc
from .actions import (
    Action,
    ApplyImageRetention,
    CreateImage,
    DiscardImage,
    Launch,
    MarkNodes,
    Move,
    RecordBill,
    RecordSuccess,
    RefreshCredentials,
    ReleasePool,
    RequestCancel,
    Stage,
    StartAttempt,
    Terminate,
    Wait,
)
from .acts.attempts import Attempts
from .acts.base import Emit, Ensured, Next, PermanentFailure
from .acts.images import Images
from .acts.instances import Instances
from .acts.records import Records

__all__ = ["Emit", "Ensured", "Executor", "Next", "PermanentFailure"]


@dataclass
class Executor(Attempts, Instances, Images, Records):
    """Carries out decide's actions, one family of them per base class; ``run`` is the one way in (the lease guard
    is asked before every action and every attempt of its cloud calls), the handlers behind it are private."""

    def run(self, action: Action) -> Next:
        """Carry out ``action``, and say whether the round goes on with its next action."""
        if not isinstance(action, Wait):
            # A stale controller (another took the lease while it was paused) must not act at all: its writes to
            # the store are fenced, but its cloud calls came first (a Terminate, a Launch, the agents' keys).
            self.guard.check(waited=True)  # the store asked once (or the lease renewed on the spot)
        handler: Callable[[Executor, Any], Next] = _HANDLERS[type(action)]
        with guarded(self.guard.check):  # and before every attempt of its cloud calls (lifecycle/lease.py)
            return handler(self, action)

    # -- job transitions ---------------------------------------------------------------------------------
    def _move(self, action: Move) -> Next:
        job = self.job()
        changes: dict[str, Any] = {}
        if action.outcome is not None:
            changes["outcome"] = action.outcome
        if action.keep_until is not None:
            changes["keep_until"] = action.keep_until
        now = self.now()
        notices = notify.for_move(job, notify.Moved(action.target, action.reason, action.reclaimed), now)
        self.store.transition(self.job_id, self.token, job.state, action.target, action.reason, now,
                              notices=notices, **changes)
        self.emit("state", f"{action.target.value}: {action.reason}")
        if action.target.is_terminal() and job.spec.secrets:
            # Nothing launches a job that has ended: its secrets' one copy goes with it.
            retrying(lambda: self.state.delete([self.layout.secrets]))
        if job.attempt > 0:  # before its first attempt a job has nothing to follow, and no COS write delays a launch
            jobdoc.publish(self.state, self.job(), self.store.nodes(self.job_id), self.store.events(self.job_id))
        return Next.LOOK_AGAIN

    def _request_cancel(self, action: RequestCancel) -> Next:
        job = self.job()
        control = Control(action="cancel", reason=action.reason, checkpoint=action.checkpoint, time=self.now())
        retrying(lambda: self.state.put_json(self.layout.control(job.attempt), control.model_dump(mode="json")))
        return Next.CONTINUE

    def _wait(self, action: Wait) -> Next:
        """Says a wait worth telling, once while it lasts; the engine schedules the next look."""
        if action.tell and action.reason != self._told:
            self.emit("wait", action.reason)
        self._told = action.reason if action.tell else ""
        return Next.LOOK_AGAIN


_HANDLERS: dict[type, Callable[[Executor, Any], Next]] = {
    Stage: Executor._stage,
    StartAttempt: Executor._start_attempt,
    ReleasePool: Executor._release_pool,
    RefreshCredentials: Executor._refresh_credentials,
    Launch: Executor._launch,
    MarkNodes: Executor._mark_nodes,
    Terminate: Executor._terminate,
    Move: Executor._move,
    RequestCancel: Executor._request_cancel,
    Wait: Executor._wait,
    CreateImage: Executor._create_image,
    ApplyImageRetention: Executor._apply_image_retention,
    DiscardImage: Executor._discard_image,
    RecordBill: Executor._record_bill,
    RecordSuccess: Executor._record_success,
}
