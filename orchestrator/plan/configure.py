"""Settings for a job: the spec's knobs and its recovery policy, resolved once at submission."""

from __future__ import annotations

from ..policy.models import PoolPolicy, RecoveryPolicy
from ..spec.models import JobSpec
from .settings import Backoff, RecoveryRules, RetryRules, Settings


def settings_for(spec: JobSpec, recovery: RecoveryPolicy, pool: PoolPolicy) -> Settings:
    fallback = recovery.fallback_to_on_demand
    return Settings(
        nnodes=spec.train.nnodes,
        elastic_min_nodes=spec.train.elastic_min_nodes,
        snapshot=spec.snapshot.enabled,
        snapshot_keep_last=spec.snapshot.keep_last,
        keep_on_failure=spec.teardown.on_failure == "keep",
        keep_for=float(spec.teardown.keep_for),
        max_cost=spec.limits.max_cost,
        bootstrap_timeout=float(spec.limits.bootstrap_timeout),
        image_timeout=float(spec.snapshot.timeout),
        pool=spec.billing.pool,
        pool_when_busy=pool.when_busy,
        pool_wait_timeout=float(pool.wait_timeout),
        short_lived_keys=spec.cam_role is None or (spec.container is not None and spec.container.tcr is not None),
        poll_training_seconds=float(recovery.reclaim_detection.poll_while_training),
        retry=RetryRules() if (retry := spec.train.retry) is None else RetryRules(
            exit_codes=retry.on_exit_codes, on_hang=retry.on_hang, max=retry.max, log_causes=retry.on_log),
        recovery=RecoveryRules(
            max_preemptions=recovery.max_preemptions,
            max_launch_failures=recovery.max_launch_failures,
            same_zone_retries=recovery.same_zone_retries,
            backoff=Backoff(
                initial=float(recovery.backoff.initial),
                maximum=float(recovery.backoff.max),
                multiplier=recovery.backoff.multiplier,
                jitter=recovery.backoff.jitter,
            ),
            next_zone=recovery.next_zone,
            alternative_types=recovery.alternative_types,
            on_demand_after_preemptions=fallback.after_preemptions if fallback else None,
            on_demand_after_minutes=float(fallback.after_minutes)
            if fallback and fallback.after_minutes is not None
            else None,
            give_up_after=float(recovery.give_up_after),
            heartbeat_stale_after=float(recovery.reclaim_detection.heartbeat_stale_after),
        ),
    )
