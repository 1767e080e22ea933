"""drive(): the engine holding one job until it ends, in this process (what `cvmjob run` and `cvmjob resume` do).

A restarted controller calls the same function: everything it needs is in the store and the cloud.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..lifecycle.execute import Emit
from ..state.home import controller_name, died_here
from ..state.store import JobRecord, Store
from .engine import Controls, Engine, OnRound
from .settings import LEASE_SECONDS


def _holder_is_dead(store: Store, job_id: str) -> bool:
    """A lease held by a process of this machine that no longer exists (kill -9, power loss of the laptop) need
    not be waited out."""
    job = store.get(job_id)
    return job is not None and job.lease_owner is not None and died_here(job.lease_owner)


def drive(
    store: Store,
    job_id: str,
    *,
    emit: Emit = lambda kind, message: None,
    controls: Controls | None = None,
    now: Callable[[], float] = time.time,
    force_lease: bool = False,
    on_round: OnRound | None = None,
    me: str | None = None,
) -> JobRecord:
    """``me``: the lease holder's name the job was submitted with (api.submit's lease), if any."""
    me = me or controller_name()
    token = store.acquire(job_id, me, LEASE_SECONDS, now(), force=force_lease or _holder_is_dead(store, job_id))
    engine = Engine(store, me, now=now, workers=1, raise_errors=True)
    try:
        job = store.get(job_id)
        assert job is not None  # its lease was just taken
        engine.hold(job, token, emit=emit, controls=controls, on_round=on_round)
        while True:
            for job in engine.round():
                if job.job_id == job_id:
                    return job
            engine.sleep()
    finally:
        engine.close()
