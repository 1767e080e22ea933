"""The engine: drives every job it holds, one round at a time (design.md §7).

A round looks at the cloud once per account and region for all the jobs that are due (``observe.look``), and once
that look is back steps each of them on a small pool of threads: read its agents' documents, decide (pure),
execute. The main thread only reads the store and schedules: the looks, the agents' signals and the steps all run
on the pool, so that a slow cloud never holds up the claims of new jobs. A job is due again when decide said (a
``Wait``: fast while it launches or recovers, slow while it trains), at once after any other action, when woken,
or at the next round once a cancel is requested for it. A step still running (an action retrying a throttled
call) delays only its own job.
Steps run most urgent first (controller/steps.py): launches and recoveries, then the jobs booting or ending, then
the looks at training jobs; only the urgent ones wait for API tokens as long as it takes, the others give their
thread back after PATIENCE_SECONDS and come back when their turn is near (providers/tencent/budget.py).
Leases are renewed every third of their life (at every round while a renewal fails); a job whose lease is gone
(another controller took it) or whose step failed for good is dropped, never driven twice. Each job's lease guard
(lifecycle/lease.py) stops its cloud calls, between two attempts of one too, once the lease is known to be another's
or was last renewed longer ago than its TTL less a margin: the job is then dropped without acting again.

``cvmjob run`` is this engine holding one job (``drive``); ``cvmjob controller`` is this engine claiming jobs from
the store (controller/service.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from ..contract import CANCEL_NOW_SIGNAL, CANCEL_SIGNAL, SIGNALS_PREFIX, Phase, signalled_phase
from ..lifecycle.actions import Action, Move, Wait
from ..lifecycle.decide import ACTS_ON_CANCEL, decide
from ..lifecycle.execute import Emit, Ensured, Executor, Next, PermanentFailure
from ..lifecycle.lease import LeaseGuard
from ..lifecycle.observation import Observation
from ..lifecycle.observe import CloudLook, look, observe_agents
from ..notify.deliver import Deliverer
from ..plan.models import Plan
from ..plan.settings import Settings
from ..providers.tencent import TencentSdk
from ..providers.tencent.budget import ApiBudget, OverBudget, patience
from ..providers.tencent.errors import CloudError, NotFoundError, TransientError
from ..providers.tencent.retry import waited
from ..providers.tencent.storage import ObjectStore
from ..state.machine import JobState
from ..state.outbox import Outbox
from ..state.store import FencedOut, JobRecord, NodeRecord, PoolStore, Store, StoreBusy
from ..target import Target, connect, reconnect
from .settings import LEASE_SECONDS
from .steps import StepPool, Urgency

log = logging.getLogger(__name__)

TRANSIENT_PAUSE = 5.0  # after an action failed transiently beyond its retries
IDLE_SECONDS = 1.0  # the longest the engine sleeps without a look at its jobs' wake-ups
WAKE_POLL_SECONDS = 0.1  # how soon a signal handler's request (Controls) is noticed while sleeping
BETWEEN_SECONDS = 0.25  # how often sleep() calls its ``between`` (a controller looking for jobs just submitted)
# How often a state bucket's signals are listed, at most: a reclaim's notice gives minutes. Listing again as soon
# as the last listing came back kept a `cvmjob run` of one job at a hundred COS listings a second.
SIGNALS_SECONDS = 1.0
PATIENCE_SECONDS = 1.0  # the longest a step that is not urgent waits for API tokens, in all
# The looks at training jobs, at most, whatever their number: the ends of attempts and reclaim notices come as
# signals, so such a look is for what nobody signals (a vanished instance, a silent agent), and a thousand jobs
# each looked at every 10 s (policy poll_while_training) kept two cores busy with nothing but that.
ROUTINE_LOOKS_PER_SECOND = 30.0
_URGENT = {JobState.PENDING, JobState.STAGING, JobState.LAUNCHING, JobState.RECOVERING}


def signal_urgency(key: str) -> Urgency:
    """A reclaim's signal (or one that names no phase) is urgent: its notice runs out. A training that ended, failed
    or was cancelled waits behind them: hundreds of trainings ending together (a sweep's trials) were as many
    urgent steps, and the reclaims signalled among them waited for tens of seconds."""
    phase = signalled_phase(key)
    return Urgency.NOW if phase in (None, Phase.PREEMPTED) else Urgency.SOON


@dataclass
class Controls:
    """How a user (or a signal handler) steers a driven job from outside the loop."""

    interrupted: threading.Event = field(default_factory=threading.Event)  # wake up now (once: its step clears it)
    teardown_now: threading.Event = field(default_factory=threading.Event)  # skip the graceful cancel (for good)

    def tear_down_now(self) -> None:
        """Skip the graceful cancel, and wake the engine once for it: a teardown begun waits as decided."""
        self.teardown_now.set()
        self.interrupted.set()


OnRound = Callable[[JobRecord, Observation | None], None]
# Moves after which the next decision needs no new look at the cloud: the job has created nothing there yet.
_NOTHING_CREATED_YET = {(JobState.PENDING, JobState.STAGING), (JobState.STAGING, JobState.LAUNCHING)}


@dataclass
class Held:
    """A job this engine drives, with what acting on it needs."""

    job_id: str
    token: int
    target: Target
    sdk: TencentSdk
    executor: Executor
    settings: Settings
    plan: Plan
    controls: Controls
    on_round: OnRound | None = None
    due_at: float = 0.0
    step: Future[Any] | None = None  # its step in flight, or the look at the cloud its next step waits for
    signalled: Urgency | None = None  # its agents signalled the end of an attempt: how urgent its next step is


_Due = tuple[Held, JobRecord, list[NodeRecord]]  # a job due in a round, as read for it


class Engine:
    def __init__(
        self,
        store: Store,
        owner: str,
        *,
        now: Callable[[], float] = time.time,
        workers: int = 8,
        lease_seconds: float = LEASE_SECONDS,
        raise_errors: bool = False,
        tick_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``raise_errors``: a step's failure ends ``round()`` with it (one job in the foreground); otherwise the
        job is dropped and logged (a service holding many). ``clock``: monotonic, for the leases' guards."""
        self.store = store
        self.owner = owner
        self.now = now
        self.clock = clock
        self.lease_seconds = lease_seconds
        self.raise_errors = raise_errors
        self.tick_seconds = tick_seconds  # the shortest time between two rounds (0: one job, react at once)
        self._round_at = 0.0
        self._ended: list[JobRecord] = []  # the round's jobs that ended and were let go, so far
        self.share = 1.0  # of the API budget: 1 / live controllers of this store (service.py keeps it current)
        self.budget = ApiBudget(share=lambda: self.share, sleep=_token_wait)
        self.held: dict[str, Held] = {}
        self.wake = threading.Event()
        self._connections: dict[str, TencentSdk] = {}
        self._pool = StepPool(workers, "cvmjob-job")
        self._listings: dict[tuple[int, str], Future[tuple[ObjectStore, list[str] | None]]] = {}
        self._listed_at = float("-inf")
        self._step_ended = threading.Event()  # set with wake when a step (not a look, not a listing) ends
        self._looks: list[tuple[Future[dict[str, CloudLook] | CloudError], list[_Due]]] = []
        self._renewed = clock()  # on the monotonic clock: a wall clock stepped back held renewals up
        self._ensured = Ensured()
        # Jobs held with controls of their own (a `cvmjob run` in the foreground): the only ones whose controls
        # sleep() polls, so that a thousand held jobs cost it nothing.
        self._steered: set[str] = set()
        # Sends the store's notifications (any job's: what a killed controller left too), from the first job held.
        self.notifier = Deliverer(Outbox(store), owner, now=now)

    # -- holding jobs ---------------------------------------------------------------------------------------
    def hold(self, job: JobRecord, token: int, *, emit: Emit = lambda kind, message: None,
             controls: Controls | None = None, on_round: OnRound | None = None) -> Held:
        """Drive ``job`` (as read just after its lease was taken with ``token``)."""
        job_id = job.job_id
        target = reconnect(job.target)
        sdk = self._connection(target)
        plan = job.plan
        if controls is not None:
            self._steered.add(job_id)
        controls = controls or Controls()
        guard = LeaseGuard(job_id, self.lease_seconds, partial(self.store.check_lease, job_id, token),
                           lambda: self.store.renew(job_id, token, self.lease_seconds, self.now()), self.clock)
        executor = Executor(
            store=self.store,
            token=token,
            job_id=job_id,
            target=target,
            sdk=sdk,
            state=ObjectStore(sdk, plan.state_bucket),
            spec=job.spec,
            plan=plan,
            source_dir=Path(job.source_dir),
            guard=guard,
            now=self.now,
            emit=emit,
            ensured=self._ensured,
        )
        held = Held(job_id, token, target, sdk, executor, job.settings, plan, controls, on_round)
        self.held[job_id] = held
        self.notifier.start()
        return held

    def _connection(self, target: Target) -> TencentSdk:
        """One connection per account, region and endpoint, shared by its jobs (and their API budget)."""
        key = repr(sorted(target.to_json().items()))
        sdk = self._connections.get(key)
        if sdk is None:
            sdk = connect(target)
            sdk.budget = self.budget
            self._connections[key] = sdk
        return sdk

    def drop(self, job_id: str) -> None:
        held = self.held.get(job_id)
        if held is not None:
            self.store.release(job_id, held.token)  # first: a store too busy for it leaves the job held
            del self.held[job_id]

    def close(self) -> None:
        """Wait for the steps in flight, then give back every lease (another controller may take them at once)."""
        self._pool.stop()
        for job_id in list(self.held):
            self.drop(job_id)
        self.notifier.flush()  # also where it held no job: a sweep's end is recorded after its last trial's

    # -- rounds ---------------------------------------------------------------------------------------------
    def round(self) -> list[JobRecord]:
        """One look at every due job and a step for each; returns the jobs that ended (and are let go)."""
        self._ended = []
        try:
            return self._round()
        except StoreBusy as exc:  # its reads or the lease renewal: the next round tries again
            log.warning("%s; the next round tries again", exc)
            return self._ended  # those let go before it: no later round would report them

    def _round(self) -> list[JobRecord]:
        self._step_looked()
        self._collect()
        now = self._round_at = self.now()
        self._read_signals(now)
        self._list_signals()
        for job_id in self.store.cancels_for(self.owner, ACTS_ON_CANCEL) if self.held else ():
            if (cancelled := self.held.get(job_id)) is not None and cancelled.step is None:
                cancelled.due_at = min(cancelled.due_at, now)
        # Only the due jobs are read, in two queries a round whatever their number: a job changes only through its
        # own steps (or a cancel, which its next look sees).
        records = self.store.get_many(job_id for job_id, held in self.held.items() if self._due(held, now))
        for job in (job for job in records.values() if job.state.is_terminal()):
            held = self.held[job.job_id]
            self.drop(job.job_id)  # a busy store keeps it held: the next round reports it
            self._ended.append(job)
            if held.on_round is not None:
                held.on_round(job, None)
        due = [job for job in records.values() if not job.state.is_terminal()]
        nodes_of = self.store.nodes_of(job.job_id for job in due)
        by_connection: dict[int, list[_Due]] = {}
        for job in due:
            held = self.held[job.job_id]
            by_connection.setdefault(id(held.sdk), []).append((held, job, nodes_of[job.job_id]))
        held_on = Counter(id(h.sdk) for h in self.held.values())
        for group in by_connection.values():
            # On the pool, so that a slow DescribeInstances never holds up the main thread's claims; the round
            # after it came back (it wakes the engine) steps its jobs.
            sdk = group[0][0].sdk
            looking = self._pool.submit(Urgency.NOW, partial(_look, sdk, [(job, nodes) for _, job, nodes in group],
                                                             held_on[id(sdk)]))
            looking.add_done_callback(lambda _: self.wake.set())
            for held, _, _ in group:
                held.step = looking
            self._looks.append((looking, group))
        self._renew()
        return self._ended

    def _step_looked(self) -> None:
        """A step for each job of the looks that came back."""
        waiting = []
        for looking, group in self._looks:
            if not looking.done():
                waiting.append((looking, group))
                continue
            looks = looking.result()
            for held, job, nodes in group:
                if held.step is looking and self.held.get(job.job_id) is held:
                    self._submit(held, job, nodes, looks if isinstance(looks, CloudError) else looks[job.job_id])
        self._looks = waiting

    def _read_signals(self, now: float) -> bool:
        """Jobs whose agents signalled the end of an attempt (contract.SIGNALS_PREFIX) are due now, their next step
        as urgent as signal_urgency says; True when one of them is urgent (the engine need not wait for the tick).

        The listing runs on the step pool, one per bucket at a time, at most every SIGNALS_SECONDS (_list_signals,
        at rounds and while the engine sleeps), and is read
        as soon as it came back (its coming back wakes the engine): a slow COS answer on the main thread delayed
        every job's round, and the claims. A signal is deleted once used, or once its job has ended in this store;
        another store's are left to its controllers. A job in the middle of a step keeps its signal for the next
        listing (the step may have looked before it), and its step, if still queued, is hurried: a reclaimed
        job's routine look waited behind hundreds of teardowns."""
        urgent = False
        for where, listing in list(self._listings.items()):
            if listing.done():
                del self._listings[where]
                state, keys = listing.result()
                if keys is not None:
                    urgent |= self._use_signals(state, keys, now)
        return urgent

    def _list_signals(self) -> None:
        now = self.now()
        if now - self._listed_at < SIGNALS_SECONDS:
            return
        self._listed_at = now
        for held in self.held.values():
            state = held.executor.state
            where = (id(held.sdk), state.bucket)
            if where not in self._listings:
                self._listings[where] = listing = self._pool.submit(Urgency.NOW, partial(_list_signals, state))
                listing.add_done_callback(lambda _: self.wake.set())

    def _use_signals(self, state: ObjectStore, keys: list[str], now: float) -> bool:
        used: list[str] = []
        others: dict[str, list[str]] = {}
        urgent = False
        for key in keys:
            job_id = key[len(SIGNALS_PREFIX) :].split("/", 1)[0]
            signalled = self.held.get(job_id)
            if signalled is None:
                others.setdefault(job_id, []).append(key)
                continue
            kind = key.rpartition("/")[2]
            if kind in (CANCEL_SIGNAL, CANCEL_NOW_SIGNAL):
                # `cvmjob cancel` from a machine without this store: on record here, the signal has done its job
                # (the round's cancels_for acts on it).
                self.store.request_cancel(job_id, now, checkpoint=kind == CANCEL_SIGNAL)
                used.append(key)
                continue
            urgency = signal_urgency(key)
            signalled.signalled = urgency if signalled.signalled is None else min(signalled.signalled, urgency)
            if signalled.step is None:
                signalled.due_at = min(signalled.due_at, now)
                used.append(key)
                urgent |= urgency == Urgency.NOW
            else:
                self._pool.hurry(signalled.step, urgency)
        if others:
            known = self.store.get_many(others)
            used += [k for job_id, ks in others.items() if job_id in known and known[job_id].state.is_terminal()
                     for k in ks]
        if used:
            self._pool.submit(Urgency.SOON, partial(_delete_signals, state, used))
        return urgent

    def start(self, job: JobRecord) -> None:
        """Step a job just held that is still PENDING now, without waiting for a round: nothing of it is in the
        cloud yet for a look to show (it goes on to RunInstances in the same step)."""
        held = self.held.get(job.job_id)
        if held is None or held.step is not None or job.state != JobState.PENDING:
            return
        self._submit(held, job, [], CloudLook())

    def _submit(self, held: Held, job: JobRecord, nodes: list[NodeRecord], seen: CloudLook | CloudError) -> None:
        if job.state in _URGENT or held.controls.teardown_now.is_set():
            urgency = Urgency.NOW
        elif held.signalled is not None:
            urgency = held.signalled
        else:
            urgency = Urgency.ROUTINE if job.state == JobState.RUNNING else Urgency.SOON
        signalled, held.signalled = held.signalled is not None, None
        held.step = self._pool.submit(urgency, partial(self._step, held, job, nodes, seen, urgency, signalled))
        held.step.add_done_callback(self._a_step_ended)

    def _a_step_ended(self, _: object) -> None:
        self._step_ended.set()
        self.wake.set()

    def sleep(self, between: Callable[[], None] | None = None) -> None:
        """Until a job is due, a step ends, a job's controls ask for it, or someone wakes the engine; never less
        than the tick after the last round began (the jobs due meanwhile share the next round's look), unless a
        signal made a job urgent. The looks and listings that come back meanwhile are used at once; only a step
        that ended (its job may be due at once) or an urgent signal ends the sleep early: a listing that found
        nothing is no reason for a round. ``between`` is called every BETWEEN_SECONDS meanwhile."""
        earliest = self._round_at + self.tick_seconds
        idle = [h.due_at for h in self.held.values() if h.step is None]
        until = max(earliest, min([self.now() + IDLE_SECONDS, *idle]))
        called = self.now()
        while (left := until - self.now()) > 0 and not self._asked():
            if between is not None and self.now() - called >= BETWEEN_SECONDS:
                called = self.now()
                between()
            self._list_signals()
            if self.wake.wait(min(left, WAKE_POLL_SECONDS)):
                self.wake.clear()
                self._step_looked()  # a look came back: its jobs' steps need no round
                try:
                    if self._read_signals(self.now()):
                        break  # a reclaim: its look at once, not at the tick
                except StoreBusy as exc:  # the signals stay in COS: the next listing has them again
                    log.warning("%s; the next round reads the signals again", exc)
                if self._step_ended.is_set():
                    self._step_ended.clear()
                    until = min(until, earliest)  # its job may be due at once, at the next tick
        self.wake.clear()

    def _asked(self) -> bool:
        self._steered &= self.held.keys()
        steered = (self.held[job_id] for job_id in self._steered)
        return any(h.controls.interrupted.is_set() for h in steered if h.step is None)

    def _due(self, held: Held, now: float) -> bool:
        if held.step is not None:
            return False
        return held.due_at <= now or held.controls.interrupted.is_set()

    def _collect(self) -> None:
        """Finished steps: their failures, and the jobs to let go because of them."""
        for job_id, held in list(self.held.items()):
            step = held.step
            if step is None or not step.done():
                continue
            held.step = None
            failure = step.exception()
            if failure is None:
                continue
            if isinstance(failure, StoreBusy):
                # Like a crash at that point, which every action is written to survive: step it again shortly.
                log.warning("job %s: %s; stepping it again in %.0f s", job_id, failure, TRANSIENT_PAUSE)
                held.due_at = self.now() + TRANSIENT_PAUSE
                continue
            if self.raise_errors:
                self.drop(job_id)
                raise failure
            log.error("job %s: dropped after %s: %s", job_id, type(failure).__name__, failure)
            if isinstance(failure, FencedOut):
                self.held.pop(job_id, None)  # the lease is another's now: nothing to give back
            else:
                self.drop(job_id)

    def _renew(self) -> None:
        """Every third of the lease's life; while a renewal fails (the store busy or down: it raises), at every
        round, and the guards' clocks go on from the last one that succeeded."""
        started = self.clock()
        if started - self._renewed < self.lease_seconds / 3:
            return
        tokens = {job_id: held.token for job_id, held in self.held.items()}
        gone = self.store.renew_all(self.owner, tokens, self.lease_seconds, self.now())
        self._renewed = started
        for job_id, held in self.held.items():
            if job_id not in gone:
                held.executor.guard.renewed(started)
        for job_id in gone:
            taken = self.held.pop(job_id, None)
            why = f"job {job_id}: lease token {tokens[job_id]} is stale: another controller took it"
            if taken is not None:  # a step of it in flight stops before its next cloud call
                taken.executor.guard.lose(why)
            if self.raise_errors:
                raise FencedOut(why)
            log.warning("job %s: another controller took its lease; letting it go", job_id)

    # -- one job's step -------------------------------------------------------------------------------------
    def _step(self, held: Held, job: JobRecord, nodes: list[NodeRecord], seen: CloudLook | CloudError,
              urgency: Urgency, signalled: bool) -> None:
        with patience(None if urgency == Urgency.NOW else PATIENCE_SECONDS):
            self._step_patiently(held, job, nodes, seen, signalled)

    def _step_patiently(self, held: Held, job: JobRecord, nodes: list[NodeRecord],
                        seen: CloudLook | CloudError, signalled: bool) -> None:
        executor, controls = held.executor, held.controls
        if controls.teardown_now.is_set() and job.state != JobState.TEARING_DOWN:
            if job.state == JobState.PENDING:
                executor.run(Move(JobState.CANCELLED, "cancelled before anything was created"))
            else:
                executor.run(Move(JobState.TEARING_DOWN, "cancelled: tearing down at once",
                                  outcome=job.outcome or JobState.CANCELLED))
            held.due_at = self.now()
            controls.interrupted.clear()
            return
        controls.interrupted.clear()
        while True:
            now = self.now()
            if isinstance(seen, CloudError):
                observation = Observation(now=now, cloud_ok=False, cloud_error=str(seen))
            else:
                observation = observe_agents(job, nodes, seen, executor.state, now, signalled)
                executor.tell_unread(observation.unread)
            if held.settings.pool is not None:
                idle = PoolStore(self.store).idle(held.settings.pool, held.plan.reserved_placements())
                observation = replace(observation, pool_idle=idle)
            if executor.keys_refused is not None:  # decide() retries it, and does not take the silence for a loss
                observation = replace(observation, keys_refused=executor.keys_refused)
            if held.on_round is not None:
                held.on_round(job, observation)
            actions = decide(job, nodes, observation, held.settings, held.plan, job.entered_at)
            held.due_at = self._act(held, job, actions)
            if held.due_at > self.now():
                return
            moved = self.store.get(job.job_id)
            if moved is None or (job.state, moved.state) not in _NOTHING_CREATED_YET:
                return
            # Nothing exists in the cloud yet that a fresh look could show: decide again at once (a new job reached
            # RunInstances three rounds after its submission, a tick each).
            job, nodes = moved, self.store.nodes(job.job_id)

    def _act(self, held: Held, job: JobRecord, actions: list[Action]) -> float:
        """Carry out a round's actions; returns when the job is due again."""
        executor = held.executor
        for action in actions:
            try:
                if executor.run(action) is Next.LOOK_AGAIN:
                    if not isinstance(action, Wait):
                        return self.now()
                    if action.routine:  # a look at a training job: spread over its share of the rate
                        return self.now() + max(action.seconds, len(self.held) / ROUTINE_LOOKS_PER_SECOND)
                    return self.now() + action.seconds
            except PermanentFailure as exc:
                executor.emit("error", str(exc))
                current = self.store.get(job.job_id)
                assert current is not None
                if current.state == JobState.TEARING_DOWN:
                    raise  # nothing else to fall back to: the job stays TEARING_DOWN for resume or gc
                executor.run(Move(JobState.TEARING_DOWN, str(exc), outcome=JobState.FAILED_ERROR))
                return self.now()
            except TransientError as exc:
                # Still failing after the action's own retries (throttling, a COS outage): look again shortly.
                executor.emit("retry", f"{type(action).__name__} failed ({exc.code}); trying again")
                return self.now() + TRANSIENT_PAUSE
            except OverBudget as exc:
                # Stopped before a call, as a crash there would have (every action survives that): the step's
                # thread goes to the urgent jobs, and this one comes back when a token is likely free for it.
                log.debug("job %s: %s", job.job_id, exc)
                return self.now() + exc.ready_in
        return self.now()


def _token_wait(seconds: float) -> None:
    """A call's wait for its API token, after which the job's lease guard is asked again: a controller paused in it
    would otherwise send the call it waited for, its lease long gone (retry.waited)."""
    time.sleep(seconds)
    waited()


def _list_signals(state: ObjectStore) -> tuple[ObjectStore, list[str] | None]:
    """The signals' keys in the bucket; None when it cannot be listed (the regular looks go on)."""
    try:
        return state, [o.key for o in state.iter_objects(SIGNALS_PREFIX)]
    except NotFoundError:  # the state bucket is created at a first job's STAGING: no agent could signal yet
        return state, []
    except CloudError as exc:
        log.warning("cannot list the agents' signals in %s: %s", state.bucket, exc)
        return state, None


def _delete_signals(state: ObjectStore, keys: list[str]) -> None:
    try:
        state.delete(keys)
    except CloudError as exc:  # they are used again, harmlessly, and deleted by the next listing
        log.warning("cannot delete %d used signal(s) in %s: %s", len(keys), state.bucket, exc)


def _look(sdk: TencentSdk, jobs: list[tuple[JobRecord, list[NodeRecord]]],
          among: int) -> dict[str, CloudLook] | CloudError:
    try:
        return look(sdk, jobs, among)
    except CloudError as exc:  # each job's step sees it: a failed look concludes nothing
        return exc
