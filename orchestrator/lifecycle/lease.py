"""Whether this controller may still act on a job: its lease guard (issue 27, item 7; client-go's leader election).

The store fences every write with the lease token, but a cloud call comes before the write that records it: a
controller paused inside a retried call (SIGSTOP, a VM migration, a store that stopped answering) woke up and sent
TerminateInstances 33 s after another had taken the job over. So every attempt of every cloud call an action makes
consults the job's guard first (retry.guarded):
- once the last successful renewal is older than the lease's TTL less a margin, the lease may have expired and
  another controller may hold the job: the guard renews it on the spot, fenced by its token (no other controller
  took it since: it is this one's again), and refuses when that fails (another holds it, or the store does not
  answer: renewals have failed for longer than the TTL less the margin). The age is read on the monotonic clock,
  which no change of the wall clock moves; the margin covers the other controllers' clocks and the time the
  renewal took to commit. A controller merely late to renew (a loaded machine: fifty controllers on two cores)
  goes on; one another took over does not.
- after a wait (a retry's backoff, or a wait for an API token), or a gap since its last check longer than an
  action's calls leave (a pause nothing else saw: a controller SIGSTOPped between two actions), it asks the store
  whether the lease is still this controller's: a takeover by `cvmjob resume --force` does not wait for the TTL.
- once the engine learns that the job was taken over (its renewal said so), it refuses at once.
The engine drops a job whose guard refused, without acting on it again (controller/engine.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..state.store import FencedOut, StoreError

# Acting stops a third of the TTL before the lease would expire (client-go: a 10 s renew deadline of a 15 s lease).
MARGIN_FRACTION = 1 / 3
# Checks of one action's calls follow each other within seconds; a longer gap since the last one is a wait or a
# pause (SIGSTOP, a VM migration) nothing else saw, after which the store is asked before the next call.
GAP_SECONDS = 5.0


class LeaseLost(FencedOut):
    """The guard refused: this controller can no longer tell that it holds the job's lease."""

    def hint(self) -> str:
        return f"{self}. `cvmjob resume` goes on with the job once its store answers"


@dataclass
class LeaseGuard:
    """One job's guard. ``confirm`` asks the store whether the lease is still ours (raises FencedOut if not);
    ``reclaim`` renews it, fenced by its token (raises FencedOut, or StoreError when the store does not answer);
    ``clock`` is monotonic (injected by tests)."""

    job_id: str
    ttl: float
    confirm: Callable[[], None]
    reclaim: Callable[[], None]
    clock: Callable[[], float] = time.monotonic
    renewed_at: float = field(init=False)  # on ``clock``: when the lease was last taken or renewed
    checked_at: float = field(init=False)  # on ``clock``: the last check that let a call go
    _lost: str = ""

    def __post_init__(self) -> None:
        self.renewed_at = self.checked_at = self.clock()  # made just after the lease was taken

    @property
    def deadline(self) -> float:
        """How long after a renewal this controller still acts on the job."""
        return self.ttl * (1 - MARGIN_FRACTION)

    def renewed(self, at: float) -> None:
        """The lease was renewed by a call that started at ``at`` (on ``clock``): its expiry counts from then."""
        self.renewed_at = max(self.renewed_at, at)

    def lose(self, why: str) -> None:
        """The lease is known to be another's (or gone): every later check refuses."""
        self._lost = why

    def check(self, waited: bool = False) -> None:
        """Before an action or a cloud call (``waited``: after a wait, a retry's or an API token's): raises
        FencedOut (LeaseLost) unless the job may still be acted on."""
        if self._lost:
            raise LeaseLost(self._lost)
        started = self.clock()
        waited = waited or started - self.checked_at > GAP_SECONDS  # a controller paused before its next call
        self._check(started, waited)
        self.checked_at = started

    def _check(self, started: float, waited: bool) -> None:
        age = started - self.renewed_at
        if age > self.deadline:
            try:
                self.reclaim()
            except FencedOut as exc:
                self.lose(str(exc))
                raise LeaseLost(str(exc)) from exc
            except StoreError as exc:
                raise LeaseLost(
                    f"job {self.job_id}: its lease was last renewed {age:.0f} s ago, longer than the "
                    f"{self.deadline:.0f} s this controller acts on a lease of {self.ttl:.0f} s without renewing it, "
                    f"and the store cannot renew it now ({exc}); another controller may hold the job"
                ) from exc
            self.renewed(started)
            return
        if waited:
            self.confirm()
