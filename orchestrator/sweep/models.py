"""What a sweep looks like from outside: the records of `sweep status --output json`, and the report's input."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TrialState(str, Enum):
    """Optuna's words for a trial's state (a cvmjob job's state is finer: see its job)."""

    WAITING = "WAITING"
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    PRUNED = "PRUNED"
    FAIL = "FAIL"


class Preemption(_Model):
    """One spot reclaim of a trial's job: when, and the GPU time its attempt lost (trained since the last
    checkpoint, and the relaunch until training again)."""

    at: float
    gpu_minutes_lost: float


class TrialView(_Model):
    number: int
    state: TrialState
    value: float | None = None  # the first objective's final value
    values: list[float] | None = None  # every objective's, with several
    params: dict[str, Any] = Field(default_factory=dict)
    cost: float = 0.0  # CNY, what the trial's job was billed
    attempts: int = 0  # the job's attempts (a reclaim adds one; the trial stays the same)
    retries: int = 0  # infrastructure failures retried as a new job of the same trial
    job_id: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    preemptions: list[Preemption] = Field(default_factory=list)
    intermediate: dict[int, float] = Field(default_factory=dict)  # step -> the first objective's reported value
    reason: str = ""  # why it failed or was pruned


class Best(_Model):
    number: int
    value: float | None = None
    values: list[float] | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class SweepView(_Model):
    study: str
    directions: list[str]  # "minimize" / "maximize", one per objective
    metrics: list[str]  # the objectives' metric names, in the same order
    state: str  # running, finished, stopped, cancelled
    trials: list[TrialView] = Field(default_factory=list)
    best: Best | None = None  # with several objectives: the first of the Pareto front
    cost: float = 0.0  # CNY, every trial's together
    max_cost: float | None = None
    stopped_reason: str = ""
