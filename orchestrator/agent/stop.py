"""A request to end the attempt early: a cancel from the controller or a spot reclaim notice.

Set from the watcher threads, read by the phases and the training supervisor. The first request fixes the
kind (a cancelled job stays cancelled even if a reclaim notice follows); a later one can only bring the
deadline closer.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Literal

from orchestrator.contract import Outcome

from .errors import AttemptEnded

CANCEL_GRACE_SECONDS = 300.0  # a cancel gets this long for the checkpoint, its upload and the outputs
# A cancel without a checkpoint: the training gets a few seconds after SIGTERM, then the outputs, the last logs and
# the result go out; the controller tears down after lifecycle.decide.STOP_NOW_GRACE whatever happens.
STOP_NOW_SECONDS = 10.0
STOP_NOW_TRAINING_GRACE = 3.0


@dataclass(frozen=True)
class StopRequest:
    kind: Literal["cancel", "preempt"]
    reason: str
    deadline: float  # time.monotonic() by which the node must be done: the reclaim, or the cancel grace
    notice_time: str | None = None  # spot/termination-time as the metadata service wrote it
    checkpoint: bool = True  # ask the training for an emergency checkpoint first (a cancel may do without)

    @property
    def outcome(self) -> Outcome:
        return Outcome.PREEMPTED if self.kind == "preempt" else Outcome.CANCELLED

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


class StopSignal:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._request: StopRequest | None = None
        self.event = threading.Event()

    def request(self, request: StopRequest) -> None:
        with self._lock:
            if self._request is None:
                self._request = request
            elif request.deadline < self._request.deadline:
                self._request = replace(self._request, deadline=request.deadline,
                                        notice_time=self._request.notice_time or request.notice_time)
        self.event.set()

    @property
    def current(self) -> StopRequest | None:
        with self._lock:
            return self._request

    def check(self) -> None:
        """Between steps of the phases before training: end the attempt now if a stop was requested."""
        request = self.current
        if request is not None:
            raise AttemptEnded(request.outcome, f"stopped before training: {request.reason}")
