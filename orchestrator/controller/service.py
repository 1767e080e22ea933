"""`cvmjob controller`: a long-running engine that drives every job it can claim from the store.

Several replicas may share one store (PostgreSQL for a team): each claims unleased or expired jobs (SELECT … FOR
UPDATE SKIP LOCKED), renews its leases every third of their life, and takes 1 / (live replicas) of every API
budget. A replica that dies is noticed by its leases running out: the others take its jobs within the lease TTL,
and the jobs' ClientTokens and tags make sure no attempt gets a second instance. SIGTERM or SIGINT drains: no
more claims, the steps in flight finish, the leases are given back at once, and the process exits.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from tenacity import Retrying, retry_if_exception_type, wait_random_exponential

from ..state.home import controller_name
from ..state.store import Store, StoreBusy, StoreError, StoreUnreachable
from .engine import Engine
from .settings import ServiceSettings

log = logging.getLogger(__name__)

CLAIM_BATCH = 50  # jobs claimed per round at most: a thousand pending jobs are taken in twenty rounds, not one stall
IDLE_EXIT_SECONDS = 30.0
OUTAGE_MAX_WAIT = 15.0  # the longest pause between two tries of a store that does not answer


class Service:
    def __init__(self, store: Store, settings: ServiceSettings = ServiceSettings(), *,
                 say: Callable[[str], None] = print, now: Callable[[], float] = time.time) -> None:
        self.store = store
        self.settings = settings
        self.say = say
        self.now = now
        self.name = controller_name()
        self.engine = Engine(store, self.name, now=now, workers=settings.workers, lease_seconds=settings.lease_seconds,
                             tick_seconds=settings.tick_seconds)
        self.draining = threading.Event()
        self._beat_at = 0.0
        self._replicas = 1
        self._idle_since: float | None = None

    def run(self) -> None:
        """Until drained (``draining`` set, e.g. by a signal handler) or, with exit_when_idle, out of work."""
        try:
            try:
                self._register()
            except StoreUnreachable as exc:
                self._outlast(exc)
            self.say(f"controller {self.name}: driving up to {self.settings.max_jobs} jobs")
            while not self.draining.is_set():
                try:
                    self._beat()
                    self._claim()
                except StoreUnreachable as exc:  # no round while it lasts: every step would fail on the store
                    self._outlast(exc)
                    continue
                except StoreBusy as exc:  # the jobs held go on; the next round claims
                    self.say(f"controller: {exc}; claiming again at the next round")
                for job in self.engine.round():
                    self.say(f"{job.job_id} {job.state.value}: {job.reason}")
                if self._idle_for_good():
                    self.say("controller: no job left to drive; exiting")
                    break
                self.engine.sleep(between=self._start_new)
        finally:
            self._stop()

    def _stop(self) -> None:
        held = len(self.engine.held)
        try:
            self.engine.close()  # the steps in flight finish; every lease is given back
            self.store.remove_controller(self.name)
        except StoreError as exc:  # unreachable or damaged: the leases it holds run out by themselves
            self.say(f"controller {self.name}: stopped without handing its jobs back ({exc}); their leases run out "
                     f"within {self.settings.lease_seconds:.0f} s")
            return
        self.say(f"controller {self.name}: stopped, {held} job(s) handed back")

    def _outlast(self, outage: StoreUnreachable) -> None:
        """Wait out an unreachable store: said once, tried again with jittered exponential backoff (up to
        OUTAGE_MAX_WAIT between tries) until it answers or the service drains. The jobs held are not dropped: their
        steps in flight finish or fail on the store and are stepped again after it is back, and the leases that ran
        out meanwhile are renewed, or found taken by another replica and let go, at the next round (the fence
        keeps both from writing)."""
        self.say(f"controller: {outage}; the jobs it holds wait, and the store is tried again with backoff")
        began = time.monotonic()
        retrying = Retrying(
            retry=retry_if_exception_type(StoreUnreachable),
            wait=wait_random_exponential(multiplier=0.5, max=OUTAGE_MAX_WAIT),
            stop=lambda _: self.draining.is_set(),
            sleep=self._pause,
            reraise=True,
        )
        try:
            retrying(self._beat, force=True)
        except StoreUnreachable:  # drained meanwhile
            return
        self.say(f"controller: the store answers again after {time.monotonic() - began:.0f} s; driving on")

    def _pause(self, seconds: float) -> None:
        self.draining.wait(seconds)  # a drain ends it at once

    def _register(self) -> None:
        self.store.register_controller(self.name, self.now(), {"host": socket.gethostname(), "pid": os.getpid()})

    def drain(self) -> None:
        self.draining.set()
        self.engine.wake.set()

    def _beat(self, force: bool = False) -> None:
        if not force and self.now() - self._beat_at < self.settings.lease_seconds / 3:
            return
        self._beat_at = self.now()
        if not self.store.beat_controller(self.name, self.now()):  # its record was swept: it is alive all the same
            self._register()

    def _start_new(self) -> None:
        """Between rounds: a job just submitted is claimed and started at once, not at the next tick (its first
        steps need no look at the cloud)."""
        if self.draining.is_set():
            return
        try:
            if self.store.unclaimed_pending(self.now()):
                self._claim()
        except StoreUnreachable:  # said by the round's claim, which waits it out
            return
        except StoreBusy as exc:
            self.say(f"controller: {exc}; claiming again at the next round")

    def _claim(self) -> None:
        """Claim what this replica may, hold it, and start the new jobs at once (their first steps need no look at
        the cloud: they waited a round for one)."""
        # Every round: a replica that died stops counting as soon as its record goes stale, so the others' share
        # grows to its jobs within the lease TTL (counted every third of it, takeover took a third longer).
        self._replicas = max(1, len(self.store.live_controllers(self.now(), self.settings.lease_seconds)))
        self.engine.share = 1.0 / self._replicas
        # A fair share of the active jobs, so that replicas started together split the work; once a replica is
        # gone, the share of the others grows to take its jobs.
        active = self.store.count_active()
        fair = -(-active // self._replicas)
        room = min(CLAIM_BATCH, self.settings.max_jobs - len(self.engine.held), fair - len(self.engine.held))
        if room <= 0:
            return
        claimed = dict(self.store.claim(self.name, self.settings.lease_seconds, self.now(), room,
                                        held=self.engine.held.keys()))
        found = self.store.get_many(claimed)
        jobs = [found[job_id] for job_id in claimed if job_id in found]  # in the claim's order: oldest first
        for job in jobs:
            self.say(f"{job.job_id} claimed ({job.state.value})")
            self.engine.hold(job, claimed[job.job_id], emit=self._emitter(job.job_id))
            self.engine.start(job)

    def _emitter(self, job_id: str) -> Callable[[str, str], None]:
        return lambda kind, message: self.say(f"{job_id} {kind}: {message}")

    def _idle_for_good(self) -> bool:
        if not self.settings.exit_when_idle or self.engine.held:
            self._idle_since = None
            return False
        self._idle_since = self._idle_since or self.now()
        return self.now() - self._idle_since > IDLE_EXIT_SECONDS
