"""drive(): the engine holding one job until it ends, in this process (what `cvmjob run` and `cvmjob resume` do).

A restarted controller calls the same function: everything it needs is in the store and the cloud.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable

from ..home import controller_identity
from ..lifecycle.execute import Emit
from ..state.store import JobRecord, Store
from ..tags import owner
from .engine import LEASE_SECONDS, Controls, Engine, OnRound


def controller_name() -> str:
    """This process as a lease holder: owner (for people to read), this home's identity and the pid (so that a dead
    holder of this home is recognised), and a nonce."""
    return f"{owner()}/{controller_identity()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


def _holder_is_dead(store: Store, job_id: str) -> bool:
    """A lease held by a process of this machine that no longer exists (kill -9, power loss of the laptop) need
    not be waited out."""
    job = store.get(job_id)
    return job is not None and job.lease_owner is not None and died_here(job.lease_owner)


def died_here(holder: str) -> bool:
    """Whether ``holder`` (a controller_name()) was a process of this home that no longer exists: the pid is part
    of the name. False when it cannot tell: another home, though of the same ``$USER@hostname`` (its pids are not
    ours to look at: a CI runner, a container, a second machine of the same name), or a name of an older release."""
    parts = holder.rsplit("/", 3)
    if len(parts) != 4 or parts[0] != owner() or parts[1] != controller_identity() or not parts[2].isdigit():
        return False
    pid = int(parts[2])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return pid == os.getpid()  # this process's pid, not its name: a controller that was here before (a restart)


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
