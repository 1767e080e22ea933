"""Policy models: how a job recovers from reclaims and launch failures, and how a reserved pool is shared."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, model_validator

from orchestrator.spec.base import SpecModel, field_problem
from orchestrator.spec.durations import DAY, HOUR, MINUTE, Duration, within


class Backoff(SpecModel):
    """Waits between retries in the same zone: ``initial``, then times ``multiplier`` each retry, up to ``max``."""

    initial: Annotated[Duration, within(0, HOUR)] = 5
    """Wait before the first retry."""
    max: Annotated[Duration, within(1, DAY)] = 60
    """Longest wait."""
    multiplier: StrictFloat = Field(2.0, ge=1, le=10)
    """Growth of the wait per retry."""
    jitter: StrictFloat = Field(0.2, ge=0, le=1)
    """Each wait is randomised by up to this fraction either way (0.2: ±20 %), so jobs do not retry in step."""

    @model_validator(mode="after")
    def _ordered(self) -> Backoff:
        if self.max < self.initial:
            raise field_problem("max", f"{self.max}s is less than initial ({self.initial}s)")
        return self


class OnDemandFallback(SpecModel):
    """When a spot job gives up on spot and continues on on-demand; whichever threshold is reached first."""

    after_preemptions: StrictInt | None = Field(None, ge=0)
    """Switch after this many reclaims (1: the first reclaim). Unset: not by count."""
    after_minutes: StrictInt | None = Field(None, ge=0)
    """Switch after this many minutes spent recovering without a running instance (0: at the first recovery).
    Unset: not by time."""

    @model_validator(mode="after")
    def _some_threshold(self) -> OnDemandFallback:
        if self.after_preemptions is None and self.after_minutes is None:
            raise ValueError("set after_preemptions, after_minutes or both; to never fall back, write "
                             "fallback_to_on_demand: null")
        return self


class ReclaimDetection(SpecModel):
    """How a reclaim is noticed when the 2-minute spot notice is missed."""

    heartbeat_stale_after: Annotated[Duration, within(10, HOUR)] = 60
    """An agent heartbeat older than this, together with the cloud no longer showing the instance running,
    counts as a reclaim."""
    poll_while_training: Annotated[Duration, within(1, 10 * MINUTE)] = 10
    """How often a training job is looked at (launches, recoveries and teardowns are looked at every second). An
    attempt that ends on a node (a reclaim notice, the training done or failed) is seen at once all the same: the
    agent signals it, and the controller lists the signals every second. Longer saves requests when many jobs train
    for hours; a silent agent is noticed within this plus heartbeat_stale_after."""


class RecoveryPolicy(SpecModel):
    """What the controller does when an instance is reclaimed or cannot be launched."""

    description: str = ""
    """What the policy is for (shown by the CLI)."""
    max_preemptions: StrictInt = Field(ge=0, le=1000)
    """Reclaims tolerated; one more fails the job."""
    max_launch_failures: StrictInt = Field(ge=0, le=1000)
    """Launch errors (no capacity, sold out, launch failed) tolerated in total, across zones and types."""
    same_zone_retries: StrictInt = Field(ge=0, le=100)
    """Retries in the same zone and type, with ``backoff`` between them, before moving on."""
    backoff: Backoff = Backoff()
    """Waits between same-zone retries."""
    next_zone: StrictBool
    """After the same-zone retries, try the spec's next zone (in the order listed)."""
    alternative_types: StrictBool
    """After the zones, try the spec's instance.alternatives (in order)."""
    fallback_to_on_demand: OnDemandFallback | None = None
    """When a spot job switches to on-demand. Unset: never."""
    give_up_after: Annotated[Duration, within(60, 30 * DAY)]
    """Total time spent recovering (no instance running) after which the job fails."""
    reclaim_detection: ReclaimDetection = ReclaimDetection()
    """How reclaims are detected without the notice."""


class PoolPolicy(SpecModel):
    """How a job uses a reserved pool (billing.mode: reserved)."""

    description: str = ""
    """What the policy is for (shown by the CLI)."""
    when_busy: Literal["wait", "on-demand", "fail"]
    """Every pool instance is in use: wait for one (up to ``wait_timeout``), run on-demand, or fail."""
    wait_timeout: Annotated[Duration, within(60, DAY)] = 30 * MINUTE
    """With when_busy: wait, how long to wait for a free instance before failing."""


POLICY_MODELS: dict[str, type[RecoveryPolicy] | type[PoolPolicy]] = {"recovery": RecoveryPolicy, "pool": PoolPolicy}
PolicyKind = Literal["recovery", "pool"]
