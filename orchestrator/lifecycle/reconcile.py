"""drive(): observe → decide → execute until the job is terminal, holding the job's lease the whole time.

A restarted controller calls the same function: everything it needs is in the store and the cloud.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..plan.models import Plan
from ..providers.tencent.errors import TransientError
from ..providers.tencent.storage import ObjectStore
from ..providers.tencent.vocabulary import ChargeType
from ..spec.models import JobSpec
from ..state.store import JobRecord, PoolStore, Store
from ..tags import owner
from ..target import Target, connect, reconnect
from .actions import Move
from .decide import decide
from .execute import Emit, Executor, PermanentFailure
from .machine import JobState
from .observation import Observation
from .observe import observe
from .settings import settings_from_json

LEASE_SECONDS = 30.0
TRANSIENT_PAUSE = 5.0  # after an action failed transiently beyond its retries


@dataclass
class Controls:
    """How a user (or a signal handler) steers a driven job from outside the loop."""

    interrupted: threading.Event = field(default_factory=threading.Event)  # wake up now
    teardown_now: threading.Event = field(default_factory=threading.Event)  # skip the graceful cancel


def _holder_is_dead(store: Store, job_id: str) -> bool:
    """A lease held by a process of this machine that no longer exists (kill -9, power loss of the laptop) need
    not be waited out: the pid is part of the holder's name."""
    job = store.get(job_id)
    if job is None or not job.lease_owner:
        return False
    parts = job.lease_owner.split("/")
    if len(parts) != 3 or parts[0] != owner() or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return int(parts[1]) == os.getpid()


def drive(
    store: Store,
    job_id: str,
    *,
    emit: Emit = lambda kind, message: None,
    controls: Controls | None = None,
    now: Callable[[], float] = time.time,
    force_lease: bool = False,
    on_round: Callable[[JobRecord, Observation | None], None] | None = None,
) -> JobRecord:
    controls = controls or Controls()
    me = f"{owner()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
    token = store.acquire(job_id, me, LEASE_SECONDS, now(), force=force_lease or _holder_is_dead(store, job_id))
    job = store.get(job_id)
    assert job is not None
    target = reconnect(Target.from_json(job.cloud))
    sdk = connect(target)
    plan = Plan.model_validate(job.plan)
    spec = JobSpec.model_validate(job.spec)
    settings = settings_from_json(job.settings)
    executor = Executor(
        store=store,
        token=token,
        job_id=job_id,
        target=target,
        sdk=sdk,
        state=ObjectStore(sdk, plan.state_bucket),
        spec=spec,
        source_dir=Path(job.source_dir),
        now=now,
        emit=emit,
        interrupted=controls.interrupted,
    )
    renewed = now()
    try:
        while True:
            job = store.get(job_id)
            assert job is not None
            if job.state.is_terminal():
                if on_round is not None:
                    on_round(job, None)
                return job
            if controls.teardown_now.is_set() and job.state not in (JobState.TEARING_DOWN, JobState.PENDING):
                executor.run(
                    Move(
                        JobState.TEARING_DOWN,
                        "cancelled: tearing down at once",
                        outcome=job.outcome or JobState.CANCELLED,
                    )
                )
                continue
            if controls.teardown_now.is_set() and job.state == JobState.PENDING:
                executor.run(Move(JobState.CANCELLED, "cancelled before anything was created"))
                continue
            controls.interrupted.clear()
            nodes = store.nodes(job_id)
            observation = observe(job, nodes, sdk, executor.state, now())
            if settings.pool is not None:
                reserved = [(c.zone, c.instance_type) for c in plan.candidates if c.charge_type == ChargeType.RESERVED]
                observation = replace(observation, pool_idle=PoolStore(store).idle(settings.pool, reserved))
            if on_round is not None:
                on_round(job, observation)
            actions = decide(job, nodes, observation, settings, store.entered_at(job_id))
            for action in actions:
                try:
                    if not executor.run(action):
                        break
                except PermanentFailure as exc:
                    emit("error", str(exc))
                    current = store.get(job_id)
                    assert current is not None
                    if current.state == JobState.TEARING_DOWN:
                        raise  # nothing else to fall back to: the job stays TEARING_DOWN for resume or gc
                    executor.run(Move(JobState.TEARING_DOWN, str(exc), outcome=JobState.FAILED_ERROR))
                    break
                except TransientError as exc:
                    # Still failing after the action's own retries (throttling, a COS outage): look again shortly.
                    # The controller used to die of it (exit 3), leaving the job where it was until a resume.
                    emit("retry", f"{type(action).__name__} failed ({exc.code}); trying again")
                    controls.interrupted.wait(TRANSIENT_PAUSE)
                    break
            if now() - renewed > LEASE_SECONDS / 3:
                store.renew(job_id, token, LEASE_SECONDS, now())
                renewed = now()
    finally:
        store.release(job_id, token)
