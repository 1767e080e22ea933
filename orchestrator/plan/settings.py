"""The knobs ``decide`` reads, born with the plan from the spec and the policies (configure.py), so decide needs no
pydantic model."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backoff:
    initial: float = 5.0
    maximum: float = 60.0
    multiplier: float = 2.0
    jitter: float = 0.2


@dataclass(frozen=True)
class RecoveryRules:
    max_preemptions: int = 5
    max_launch_failures: int = 8
    same_zone_retries: int = 1
    backoff: Backoff = field(default_factory=Backoff)
    next_zone: bool = True
    alternative_types: bool = True
    on_demand_after_preemptions: int | None = None
    on_demand_after_minutes: float | None = None
    give_up_after: float = 3600.0
    heartbeat_stale_after: float = 60.0

    @property
    def falls_back_to_on_demand(self) -> bool:
        """The policy may move the job to on-demand (so its plan carries on-demand placements)."""
        return self.on_demand_after_preemptions is not None or self.on_demand_after_minutes is not None


@dataclass(frozen=True)
class RetryRules:
    """train.retry: the failures that relaunch on a fresh instance, and how many times at most."""

    exit_codes: tuple[int, ...] = ()
    on_hang: bool = False
    max: int = 0
    log_causes: tuple[str, ...] = ()  # spec.workload.LogCause: the failures named in the log tail that retry


@dataclass(frozen=True)
class Settings:
    nnodes: int = 1
    elastic_min_nodes: int | None = None  # torchrun elastic: the attempt goes on while this many nodes remain
    snapshot: bool = True
    snapshot_keep_last: int = 3
    keep_on_failure: bool = False
    keep_for: float = 0.0
    max_cost: float | None = None
    bootstrap_timeout: float = 900.0  # RUNNING instance, no heartbeat yet
    pending_timeout: float = 900.0  # an instance stuck in PENDING
    cancel_grace: float = 180.0  # agents get this long to checkpoint and upload on cancel
    image_timeout: float = 3600.0
    poll_seconds: float = 1.0  # while something is about to change: a launch, a recovery, a teardown
    poll_training_seconds: float = 3.0  # while the agents train: their reports are all there is to see
    recovery: RecoveryRules = field(default_factory=RecoveryRules)
    retry: RetryRules = field(default_factory=RetryRules)
    # billing.mode reserved: the pool, and what to do when every member is busy (policies/pool)
    pool: str | None = None
    pool_when_busy: str = "wait"  # wait | on-demand | fail
    pool_wait_timeout: float = 1800.0
    # The agents hold credentials that expire and are rotated: COS keys (credentials: sts, not a CAM role) or the
    # registry token of container.login.tcr.
    short_lived_keys: bool = True

