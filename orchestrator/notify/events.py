"""Which notifications a transition makes: pure, from the job as it was and where decide() moves it.

The json body is cvmjob's documented event (docs/notifications.md), versioned by ``schema``; every other format is
rendered from it when it is sent, so the store holds one shape."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import EXIT_GATE_FAILED
from ..spec.notify import NotifyEvent, NotifyTarget
from ..state.machine import EXIT_CODES, JobState
from ..state.outbox import NewNotification
from ..state.store import JobRecord

SCHEMA = "cvmjob.notification/v1"


@dataclass(frozen=True)
class Moved:
    """A transition as the notifications see it."""

    target: JobState
    reason: str
    reclaimed: bool = False  # a spot instance of the attempt was taken back


def events_of(move: Moved) -> list[NotifyEvent]:
    if move.target == JobState.SUCCEEDED:
        return ["succeeded"]
    if move.target == JobState.CANCELLED:
        return ["cancelled"]
    if move.target == JobState.FAILED_BUDGET:
        return ["failed", "budget_reached"]
    if move.target.is_terminal():
        return ["failed"]
    return ["reclaimed"] if move.reclaimed else []


def for_move(job: JobRecord, move: Moved, now: float) -> list[NewNotification]:
    """The notifications of ``job`` (as read before the move) taking ``move``, one per target that wants each."""
    return [notice for event in events_of(move) for notice in _notices(job, move, event, now)]


def for_gate(job: JobRecord, missed: Sequence[str], now: float) -> list[NewNotification]:
    """A SUCCEEDED ``job`` whose metrics missed the gates of the `cvmjob run` that waited for it (``missed``: one
    line per gate, its bound and what the job reported)."""
    return _notices(job, Moved(JobState.SUCCEEDED, "; ".join(missed)), "gate_missed", now,
                    exit_code=EXIT_GATE_FAILED)


def _notices(job: JobRecord, move: Moved, event: NotifyEvent, now: float, exit_code: int | None = None
             ) -> list[NewNotification]:
    wanting = [t for t in job.spec.notify or () if event in t.on]
    if not wanting:
        return []
    key = event_id(job, event)
    body = job_event(job, move, event, key, now, exit_code)
    return [NewNotification(subject=job.job_id, key=key, event=event, target=t.model_dump(mode="json"), body=body)
            for t in wanting]


def event_id(job: JobRecord, event: NotifyEvent) -> str:
    """One event of a kind per attempt (a job ends once; an attempt is reclaimed once): the id receivers dedupe by."""
    return f"{job.job_id}/{event}/{job.attempt}"


def job_event(job: JobRecord, move: Moved, event: NotifyEvent, key: str, now: float, exit_code: int | None = None
              ) -> dict[str, Any]:
    """``exit_code``: the run's, where the state's own is not it (a missed gate's)."""
    ended = move.target.is_terminal()
    return {
        "schema": SCHEMA,
        "id": key,
        "event": event,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "job": {
            "id": job.job_id,
            "name": job.name,
            "state": move.target.value,
            "reason": move.reason,
            "attempt": job.attempt,
            "exit_code": exit_code if exit_code is not None else EXIT_CODES[move.target] if ended else None,
            "cost_cny": round(job.cost_cny, 4),
            "image_id": job.image_id,
        },
        "text": _text(job, move, event),
    }


def _text(job: JobRecord, move: Moved, event: NotifyEvent) -> str:
    what = {"reclaimed": f"attempt {job.attempt} reclaimed, recovering",
            "budget_reached": "stopped at its limits.max_cost",
            "gate_missed": "SUCCEEDED but missed its gates"}.get(event, move.target.value)
    return f"cvmjob: job {job.name} ({job.job_id}) {what}: {move.reason} (cost so far {job.cost_cny:.2f} CNY)"


@dataclass(frozen=True)
class SweepEnd:
    """A sweep's end as the notifications see it (sweep/run.py fills it from its view)."""

    study: str
    state: str  # finished | stopped | cancelled
    reason: str  # why it stopped (a limit's words), "" when finished
    trials: int  # trials ended in all: one end per count, so a sweep continued later ends again
    cost_cny: float
    best: dict[str, Any] | None  # {"number", "value", "params"} of the best trial, None without a completed one


def for_sweep(end: SweepEnd, targets: tuple[NotifyTarget, ...], now: float) -> list[NewNotification]:
    event: NotifyEvent = "sweep_finished" if end.state == "finished" else "sweep_stopped"
    wanting = [t for t in targets if event in t.on]
    key = f"sweep:{end.study}/{event}/{end.trials}"
    body = {
        "schema": SCHEMA,
        "id": key,
        "event": event,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "sweep": {"study": end.study, "state": end.state, "reason": end.reason, "trials": end.trials,
                  "cost_cny": round(end.cost_cny, 4), "best": end.best},
        "text": _sweep_text(end),
    }
    return [NewNotification(subject=f"sweep:{end.study}", key=key, event=event, target=t.model_dump(mode="json"),
                            body=body) for t in wanting]


def _sweep_text(end: SweepEnd) -> str:
    what = "finished" if end.state == "finished" else f"{end.state}: {end.reason}" if end.reason else end.state
    best = "" if end.best is None else f"; best trial {end.best['number']} ({end.best['value']})"
    return f"cvmjob: sweep {end.study} {what}: {end.trials} trials, {end.cost_cny:.2f} CNY{best}"
