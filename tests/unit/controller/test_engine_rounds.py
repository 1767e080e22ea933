"""The engine's rounds, at its functions: which jobs it holds and steps, in which order and when, its leases, and
the API budget its connections share. A real Store on SQLite, an injected clock, the emulator for the cloud.

The jobs are mostly put in states whose decisions need no cloud call (KEEPING waits, a PENDING job cancelled ends,
a RUNNING job without nodes tears down), so that a step's effect is the store's record of it; ``on_round`` (the
engine's own hook for a job's round) tells which jobs were stepped, and in which order."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from orchestrator.contract.tags import TAG_ATTEMPT, TAG_JOB, TAG_NODE
from orchestrator.controller.engine import LEASE_SECONDS, TRANSIENT_PAUSE, Controls, Engine, Held
from orchestrator.lifecycle.lease import LeaseLost
from orchestrator.lifecycle.observation import Observation
from orchestrator.plan.settings import Settings
from orchestrator.providers.tencent import StaticCredential, TencentSdk, compute
from orchestrator.providers.tencent.budget import OverBudget, patience
from orchestrator.providers.tencent.storage import ObjectStore
from orchestrator.providers.tencent.vocabulary import ChargeType, InstanceState
from orchestrator.state import store as store_module
from orchestrator.state.machine import JobState
from orchestrator.state.store import FencedOut, JobRecord, Store, StoreBusy
from orchestrator.target import Target
from tests.emulator_process import EmulatorProcess
from tests.records import REGION, new_job, plan
from tests.waiting import holds_for, wait_until

ZONE, IMAGE, SMALL = "ap-guangzhou-3", "img-487zeit5", "S5.MEDIUM4"
T0 = 1_000.0  # the wall clock when a test begins
ME, OTHER = "me", "other"
S = JobState
# The states a job is put in (fenced writes with a setup lease, as its controllers would have made them).
_PATHS: dict[JobState, list[JobState]] = {
    S.PENDING: [],
    S.STAGING: [S.STAGING],
    S.LAUNCHING: [S.STAGING, S.LAUNCHING],
    S.BOOTING: [S.STAGING, S.LAUNCHING, S.BOOTING],
    S.RUNNING: [S.STAGING, S.LAUNCHING, S.BOOTING, S.RUNNING],
    S.KEEPING: [S.STAGING, S.LAUNCHING, S.BOOTING, S.KEEPING],
    S.TEARING_DOWN: [S.STAGING, S.TEARING_DOWN],
}


@dataclass
class Clock:
    """The engine's wall clock and its monotonic one, moved only by the test."""

    wall: float = T0
    mono: float = 50.0

    def now(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


@dataclass
class Steps:
    """The jobs' rounds, in the order they were stepped (``on_round``), and a gate a job's step may stop at."""

    taken: list[tuple[str, JobState]] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)  # on_round(job, None): the round that let it go
    gates: dict[str, threading.Event] = field(default_factory=dict)  # for the job's next step only
    every_gate: list[threading.Event] = field(default_factory=list)
    entered: dict[str, threading.Event] = field(default_factory=dict)
    fail: dict[str, BaseException] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hook(self, job: JobRecord, observation: Observation | None) -> None:
        if observation is None:
            self.ended.append(job.job_id)
            return
        with self.lock:
            self.taken.append((job.job_id, job.state))
        if (entered := self.entered.get(job.job_id)) is not None:
            entered.set()
        if (gate := self.gates.pop(job.job_id, None)) is not None:
            assert gate.wait(10), f"the gate of {job.job_id} was never opened"
        if (failure := self.fail.pop(job.job_id, None)) is not None:
            raise failure

    def of(self, job_id: str) -> list[JobState]:
        with self.lock:
            return [state for taken, state in self.taken if taken == job_id]

    def order(self) -> list[str]:
        with self.lock:
            return [job_id for job_id, _ in self.taken]

    def stop_at(self, job_id: str) -> tuple[threading.Event, threading.Event]:
        """The job's next step waits in its ``on_round`` until the returned gate is set; ``entered`` is set once it
        does."""
        gate, entered = threading.Event(), threading.Event()
        self.gates[job_id], self.entered[job_id] = gate, entered
        self.every_gate.append(gate)
        return gate, entered


class Rig:
    """An engine (owner ``me``) over a store in tmp_path, its jobs on the emulator."""

    def __init__(self, emulator: EmulatorProcess, tmp_path: Path, *, workers: int = 4,
                 raise_errors: bool = False, tick_seconds: float = 0.0) -> None:
        self.emulator = emulator
        self.tmp_path = tmp_path
        self.clock = Clock()
        self.store = Store(tmp_path / "state.db")
        self.target = Target("emulator", REGION, emulator.appid, emulator.endpoint)
        self.sdk = TencentSdk(StaticCredential(emulator.secret_id, emulator.secret_key), REGION, emulator.endpoint,
                              emulator.appid)
        self.bucket = f"cvmjob-{uuid.uuid4().hex[:8]}-{emulator.appid}"
        self.state = ObjectStore(self.sdk, self.bucket)
        self.state.create_bucket()
        (tmp_path / "train.py").write_text("print('hello')\n")
        self.steps = Steps()
        self.engine = Engine(self.store, ME, now=self.clock.now, clock=self.clock.monotonic, workers=workers,
                             lease_seconds=LEASE_SECONDS, raise_errors=raise_errors, tick_seconds=tick_seconds)

    # -- jobs ------------------------------------------------------------------------------------------------
    def submit(self, job_id: str, state: JobState = S.PENDING, *, target: Target | None = None,
               keep_for: float | None = None, settings: Settings | None = None) -> str:
        """A job in ``state``, with no lease; KEEPING ones are kept ``keep_for`` seconds from now."""
        self.store.create_job(new_job(job_id, job_plan=plan(state_bucket=self.bucket), target=target or self.target,
                                      settings=settings, source_dir=str(self.tmp_path)), now=self.clock.now())
        path = _PATHS[state]
        if path:
            token = self.store.acquire(job_id, "setup", ttl=60, now=self.clock.now())
            previous = S.PENDING
            for step in path:
                changes: dict[str, Any] = {}
                if step == S.KEEPING:
                    changes = {"outcome": S.FAILED, "keep_until": self.clock.now() + (keep_for or 30.0)}
                if step == S.TEARING_DOWN:
                    changes = {"outcome": S.CANCELLED}
                self.store.transition(job_id, token, previous, step, f"test: {step.value}", self.clock.now(),
                                      **changes)
                previous = step
            self.store.release(job_id, token)
        return job_id

    def hold(self, job_id: str, *, controls: Controls | None = None) -> Held:
        """The job's lease taken by this engine, and the job held (what a claim does)."""
        token = self.store.acquire(job_id, ME, ttl=LEASE_SECONDS, now=self.clock.now())
        return self.engine.hold(self.job(job_id), token, controls=controls, on_round=self.steps.hook)

    def job(self, job_id: str) -> JobRecord:
        found = self.store.get(job_id)
        assert found is not None
        return found

    def lease_owner(self, job_id: str) -> str | None:
        job = self.job(job_id)
        return job.lease_owner if job.lease_expires > self.clock.now() else None

    # -- rounds ----------------------------------------------------------------------------------------------
    def rounds_until(self, what: str, predicate: Callable[[], object], timeout: float = 5.0) -> list[JobRecord]:
        """Rounds, at the clock's current time, until ``predicate()`` holds; the jobs they let go."""
        ended: list[JobRecord] = []

        def another() -> object:
            ended.extend(self.engine.round())
            return predicate()

        wait_until(what, another, timeout, poll=0.01)
        return ended

    def stepped(self, job_id: str, times: int = 1) -> None:
        self.rounds_until(f"{job_id} stepped {times} time(s)", lambda: len(self.steps.of(job_id)) >= times)

    def idle(self, held: Held) -> None:
        """Until the job's step (or the look its step waits for) is over and collected."""
        self.rounds_until(f"{held.job_id}'s step over", lambda: held.step is None)

    # -- the cloud -------------------------------------------------------------------------------------------
    def launch(self, job_id: str, charge_type: ChargeType = ChargeType.ON_DEMAND) -> str:
        """A running instance tagged as ``job_id``'s, of an attempt it does not have (a stray to tear down)."""
        (instance_id,) = compute.run_instances(self.sdk, compute.LaunchRequest(
            zone=ZONE, instance_type=SMALL, charge_type=charge_type, image_id=IMAGE,
            client_token=uuid.uuid4().hex, name="engine-test",
            tags={TAG_JOB: job_id, TAG_ATTEMPT: "9", TAG_NODE: "0"}))
        self.emulator.admin.advance(5)  # booted: a PENDING instance cannot be terminated
        return instance_id

    def terminations(self) -> list[dict[str, Any]]:
        """TerminateInstances calls the emulator received."""
        return self.emulator.admin.calls(service="cvm", action="TerminateInstances")

    def up(self, instance_id: str) -> bool:
        found = compute.describe(self.sdk, [instance_id]).get(instance_id)
        return found is not None and found.state == InstanceState.RUNNING

    def close(self) -> None:
        self.engine.close()
        self.store.close()


@contextmanager
def rig_on(emulator: EmulatorProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
           **options: Any) -> Iterator[Rig]:
    # The engine connects to a job's target as `cvmjob controller` does: with the keys the environment gives.
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", emulator.secret_id)
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", emulator.secret_key)
    made = Rig(emulator, tmp_path, **options)
    try:
        yield made
    finally:
        for gate in made.steps.every_gate:
            gate.set()  # a test that failed with a step stopped: let it go, so that close() returns
        made.close()


@pytest.fixture
def rig(emulator: EmulatorProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    with rig_on(emulator, tmp_path, monkeypatch) as made:
        yield made


# -- holding jobs ------------------------------------------------------------------------------------------------
def test_the_engine_drives_the_jobs_it_could_lease_and_leaves_one_held_elsewhere(rig: Rig) -> None:
    """What a claim gives the engine is all it touches: a job another controller leases is neither claimed nor
    stepped, not even to act on a cancel requested for it (its own controller does)."""
    free, elsewhere = rig.submit("job-free"), rig.submit("job-elsewhere")
    rig.store.acquire(elsewhere, OTHER, ttl=LEASE_SECONDS, now=rig.clock.now())
    for job_id in (free, elsewhere):
        rig.store.request_cancel(job_id, rig.clock.now())
    now = rig.clock.now()
    claimed = rig.store.claim(ME, LEASE_SECONDS, now, 10, held=rig.engine.held.keys())
    assert [job_id for job_id, _ in claimed] == [free]
    for job_id, token in claimed:
        rig.engine.hold(rig.job(job_id), token, on_round=rig.steps.hook)

    ended = rig.rounds_until("the free job let go", lambda: free not in rig.engine.held)

    assert [job.job_id for job in ended] == [free]
    assert rig.job(free).state == S.CANCELLED
    assert rig.store.claim(ME, LEASE_SECONDS, now, 10, held=rig.engine.held.keys()) == []
    assert rig.job(elsewhere).state == S.PENDING
    assert rig.lease_owner(elsewhere) == OTHER
    assert rig.steps.of(elsewhere) == []


def test_start_steps_a_job_just_held_while_pending_without_a_round(rig: Rig) -> None:
    """A new job's first steps need no look at the cloud: start() steps it at once, once. A job held in any other
    state, or one not held, waits for its round."""
    new, keeping = rig.submit("job-new"), rig.submit("job-keeping", S.KEEPING)
    rig.store.request_cancel(new, rig.clock.now())  # its step ends it, with no cloud call
    rig.hold(new)
    rig.hold(keeping)

    rig.engine.start(rig.job(new))
    rig.engine.start(rig.job(new))  # its step in flight: not a second one
    rig.engine.start(rig.job(keeping))
    rig.engine.start(rig.job(rig.submit("job-not-held")))
    wait_until("the new job cancelled", lambda: rig.job(new).state == S.CANCELLED, 5, poll=0.01)
    rig.engine.close()  # every step started has run

    assert rig.steps.order() == [new]


def test_a_job_that_ended_is_returned_by_the_next_round_and_its_lease_given_back(rig: Rig) -> None:
    job_id = rig.submit("job-1")
    rig.store.request_cancel(job_id, rig.clock.now())
    rig.hold(job_id)
    rig.engine.start(rig.job(job_id))
    wait_until("the job cancelled", lambda: rig.job(job_id).state == S.CANCELLED, 5, poll=0.01)

    ended = rig.rounds_until("the job let go", lambda: job_id not in rig.engine.held)

    assert [job.job_id for job in ended] == [job_id]
    assert ended[0].state == S.CANCELLED
    assert rig.steps.ended == [job_id]  # its on_round heard of the end
    assert rig.lease_owner(job_id) is None
    assert rig.engine.round() == []  # once


# -- which jobs a round steps, and in which order ----------------------------------------------------------------
def test_a_round_steps_the_jobs_due_and_not_those_whose_wait_runs_on(rig: Rig) -> None:
    """A job is due again when its decision's wait is over (to the second: at its end, not after); a round before
    that leaves it, though it looks at and steps the jobs of the same connection that are due."""
    soon = rig.submit("job-soon", S.KEEPING, keep_for=5)
    later = rig.submit("job-later", S.KEEPING, keep_for=20)
    for job_id in (soon, later):
        rig.hold(job_id)
    rig.rounds_until("both stepped", lambda: rig.steps.of(soon) and rig.steps.of(later))

    rig.clock.advance(5)
    rig.rounds_until("the job due stepped again", lambda: rig.job(soon).state == S.TEARING_DOWN)
    rig.engine.close()  # the round's steps have all run

    assert rig.steps.of(soon) == [S.KEEPING, S.KEEPING]
    assert rig.steps.of(later) == [S.KEEPING]
    assert rig.job(later).state == S.KEEPING


def test_a_job_waiting_is_due_at_once_when_interrupted_and_the_interruption_is_used_up(rig: Rig) -> None:
    controls = Controls()
    job_id = rig.submit("job-1", S.KEEPING, keep_for=20)
    rig.hold(job_id, controls=controls)
    rig.stepped(job_id)

    controls.interrupted.set()  # `cvmjob run`'s Ctrl-C handler, or a user's wake-up
    rig.stepped(job_id, 2)

    wait_until("the interruption used", lambda: not controls.interrupted.is_set(), 5, poll=0.01)
    assert rig.job(job_id).state == S.KEEPING  # still kept: it was woken, nothing more


def test_a_cancel_requested_makes_a_waiting_job_due_at_the_next_round(rig: Rig) -> None:
    job_id = rig.submit("job-1", S.KEEPING, keep_for=20)
    rig.hold(job_id)
    rig.stepped(job_id)

    rig.store.request_cancel(job_id, rig.clock.now())  # `cvmjob cancel`, from any process
    rig.rounds_until("the cancel acted on", lambda: rig.job(job_id).state == S.TEARING_DOWN)

    assert rig.clock.now() == T0  # long before its wait was over
    assert rig.steps.of(job_id) == [S.KEEPING, S.KEEPING]


def test_a_job_whose_step_is_still_running_is_not_stepped_again(rig: Rig) -> None:
    """Its step in flight (an action retrying a throttled call) delays only that job: the other jobs' rounds go
    on, and it is never looked at or stepped twice at once."""
    slow, other = rig.submit("job-slow", S.KEEPING), rig.submit("job-other", S.KEEPING, keep_for=5)
    gate, entered = rig.steps.stop_at(slow)
    rig.hold(slow)
    rig.hold(other)
    rig.rounds_until("the slow job's step started", entered.is_set)
    rig.stepped(other)

    rig.clock.advance(5)  # the other job's wait is over; the slow one would be due too, but for its step
    rig.rounds_until("the other job stepped again", lambda: rig.job(other).state == S.TEARING_DOWN)
    gate.set()
    rig.engine.close()

    assert rig.steps.of(slow) == [S.KEEPING]
    assert rig.steps.of(other) == [S.KEEPING, S.KEEPING]


def test_the_steps_of_a_round_run_most_urgent_first(emulator: EmulatorProcess, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """On one step thread, busy: the launches and recoveries first, then the jobs booting or ending, then the looks
    at training jobs (the engine's docstring), whatever order the round found them in."""
    with rig_on(emulator, tmp_path, monkeypatch, workers=1) as rig:
        # Named so that the round finds them least urgent first (its query gives them in the order of their ids).
        jobs = {S.RUNNING: "job-a-running", S.KEEPING: "job-b-keeping", S.LAUNCHING: "job-c-launching"}
        helds = [rig.hold(rig.submit(job_id, state)) for state, job_id in jobs.items()]
        rig.engine.round()  # one look at the cloud for all of them, on the pool; their steps at the next round
        wait_until("their look done", lambda: all(h.step is not None and h.step.done() for h in helds), 5, poll=0.01)
        # The only step thread is taken meanwhile by a new job's first step: the round's steps all queue.
        busy = rig.submit("job-busy")
        rig.store.request_cancel(busy, rig.clock.now())
        gate, entered = rig.steps.stop_at(busy)
        rig.hold(busy)
        rig.engine.start(rig.job(busy))
        assert entered.wait(5)

        rig.engine.round()  # submits the steps of the jobs the look came back for
        gate.set()
        rig.engine.close()

        assert rig.steps.order() == [busy, jobs[S.LAUNCHING], jobs[S.KEEPING], jobs[S.RUNNING]]


def test_a_teardown_asked_at_once_makes_a_waiting_job_due_and_skips_the_graceful_cancel(rig: Rig) -> None:
    """A second Ctrl-C of `cvmjob run` (the first, under CI): the job waits no more, and tears down without asking
    its agents for a checkpoint."""
    controls = Controls()
    job_id = rig.submit("job-1", S.KEEPING, keep_for=20)
    rig.hold(job_id, controls=controls)
    rig.stepped(job_id)

    controls.tear_down_now()
    rig.rounds_until("the teardown begun", lambda: rig.job(job_id).state == S.TEARING_DOWN)

    assert rig.clock.now() == T0  # long before its wait was over
    job = rig.job(job_id)
    assert job.reason == "cancelled: tearing down at once"
    assert job.outcome == S.FAILED  # what it was kept for stays its outcome


def test_a_teardown_asked_at_once_still_waits_as_decided_once_begun(rig: Rig) -> None:
    """Once the teardown asked at once has begun, the job waits for its instances to go the way any teardown does
    (a look every poll_seconds, as decided), not a look at every round: `cvmjob run`'s sleep ends at once while
    it is set, so that each round looked at the cloud again as soon as the last step ended."""
    controls = Controls()
    controls.tear_down_now()
    job_id = rig.submit("job-1", S.TEARING_DOWN)
    instance_id = rig.launch(job_id, ChargeType.RESERVED)
    compute.terminate(rig.sdk, [instance_id])  # a prepaid instance goes to the recycle bin first: it stays there
    rig.hold(job_id, controls=controls)
    rig.stepped(job_id)  # decided: wait for the instance to be gone

    holds_for("the job waiting", lambda: (rig.engine.round(), len(rig.steps.of(job_id)) == 1)[1], 0.5, poll=0.02)


# -- steps that fail ---------------------------------------------------------------------------------------------
def test_a_job_whose_step_failed_for_good_is_dropped_and_its_lease_given_back(rig: Rig) -> None:
    failing, other = rig.submit("job-failing", S.KEEPING), rig.submit("job-other", S.KEEPING)
    rig.steps.fail[failing] = RuntimeError("a bug in its step")
    rig.hold(failing)
    rig.hold(other)

    rig.rounds_until("the failed job dropped", lambda: failing not in rig.engine.held)

    assert rig.lease_owner(failing) is None  # another controller may take it at once
    assert rig.job(failing).state == S.KEEPING
    assert other in rig.engine.held  # the others go on
    rig.stepped(other)


def test_a_step_failure_ends_the_round_with_it_when_the_engine_raises_errors(
        emulator: EmulatorProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cvmjob run`: one job in the foreground, whose failure is the command's."""
    with rig_on(emulator, tmp_path, monkeypatch, raise_errors=True) as rig:
        job_id = rig.submit("job-1", S.KEEPING)
        rig.steps.fail[job_id] = RuntimeError("a bug in its step")
        rig.hold(job_id)

        with pytest.raises(RuntimeError, match="a bug in its step"):
            rig.rounds_until("the failure raised", lambda: False)

        assert job_id not in rig.engine.held
        assert rig.lease_owner(job_id) is None


def test_a_step_the_store_was_too_busy_for_is_stepped_again_after_a_pause(rig: Rig) -> None:
    """Like a crash at that point, which every action survives: the job is kept, and due again shortly."""
    job_id = rig.submit("job-1", S.KEEPING, keep_for=TRANSIENT_PAUSE)
    rig.steps.fail[job_id] = StoreBusy("database is locked")
    held = rig.hold(job_id)
    rig.stepped(job_id)
    rig.idle(held)
    assert job_id in rig.engine.held
    assert rig.lease_owner(job_id) == ME

    rig.clock.advance(TRANSIENT_PAUSE)
    rig.rounds_until("the job stepped again", lambda: rig.job(job_id).state == S.TEARING_DOWN)

    assert rig.steps.of(job_id) == [S.KEEPING, S.KEEPING]


def test_a_job_that_ended_in_a_round_the_store_was_too_busy_to_finish_is_still_reported(
        emulator: EmulatorProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cvmjob run` returns when a round reports its job ended; another process writing to the SQLite file for
    longer than the busy timeout, just then, must not lose that report."""
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.2)
    with rig_on(emulator, tmp_path, monkeypatch) as rig:
        job_id = rig.submit("job-1")
        rig.store.request_cancel(job_id, rig.clock.now())
        rig.hold(job_id)
        rig.engine.start(rig.job(job_id))
        wait_until("the job cancelled", lambda: rig.job(job_id).state == S.CANCELLED, 5, poll=0.01)

        other = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process writing (readers go on: WAL)
            reported = rig.engine.round()
        finally:
            other.execute("ROLLBACK")
            other.close()
        for _ in range(3):
            reported += rig.engine.round()

        assert [job.job_id for job in reported] == [job_id]


# -- leases ------------------------------------------------------------------------------------------------------
def test_leases_are_renewed_every_third_of_their_life(rig: Rig) -> None:
    job_id = rig.submit("job-1", S.KEEPING, keep_for=60)
    rig.hold(job_id)
    taken_until = rig.job(job_id).lease_expires

    rig.clock.advance(LEASE_SECONDS / 3 - 0.5)
    rig.engine.round()
    assert rig.job(job_id).lease_expires == taken_until

    rig.clock.advance(0.5)
    rig.engine.round()
    assert rig.job(job_id).lease_expires == rig.clock.now() + LEASE_SECONDS


def test_a_job_whose_lease_another_controller_took_is_dropped_at_the_renewal_never_to_be_stepped(rig: Rig) -> None:
    """Found at the renewal: let go without giving the lease back (it is the other's), its guard told at once (a
    step of it in flight stops before its next cloud call); the other jobs' leases are renewed."""
    taken, kept = rig.submit("job-taken", S.KEEPING, keep_for=60), rig.submit("job-kept", S.KEEPING, keep_for=60)
    held_taken = rig.hold(taken)
    rig.hold(kept)
    their_token = rig.store.acquire(taken, OTHER, ttl=LEASE_SECONDS, now=rig.clock.now(), force=True)

    rig.clock.advance(LEASE_SECONDS / 3)
    rig.engine.round()  # looks at both (both due), then renews

    assert taken not in rig.engine.held
    assert kept in rig.engine.held
    assert rig.job(kept).lease_expires == rig.clock.now() + LEASE_SECONDS
    assert (rig.lease_owner(taken), rig.job(taken).lease_token) == (OTHER, their_token)
    with pytest.raises(LeaseLost):
        held_taken.executor.guard.check()
    rig.stepped(kept)  # the look the round made for both came back: only the job still held is stepped
    rig.engine.close()
    assert rig.steps.of(taken) == []


def test_a_lease_taken_over_ends_the_round_with_it_when_the_engine_raises_errors(
        emulator: EmulatorProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with rig_on(emulator, tmp_path, monkeypatch, raise_errors=True) as rig:
        job_id = rig.submit("job-1", S.KEEPING)
        rig.hold(job_id)
        rig.store.acquire(job_id, OTHER, ttl=LEASE_SECONDS, now=rig.clock.now(), force=True)
        rig.clock.advance(LEASE_SECONDS / 3)

        with pytest.raises(FencedOut, match="another controller took it"):
            rig.engine.round()

        assert job_id not in rig.engine.held
        assert rig.lease_owner(job_id) == OTHER


def test_a_job_taken_over_before_the_renewal_noticed_is_dropped_before_its_next_action(rig: Rig) -> None:
    """Its step asks the store before acting (`cvmjob resume --force` took it a moment ago): nothing is done."""
    job_id = rig.submit("job-1")
    rig.store.request_cancel(job_id, rig.clock.now())
    rig.hold(job_id)
    their_token = rig.store.acquire(job_id, OTHER, ttl=LEASE_SECONDS, now=rig.clock.now(), force=True)

    rig.rounds_until("the job dropped", lambda: job_id not in rig.engine.held)

    assert rig.steps.of(job_id) == [S.PENDING]  # it was looked at, and decided to end
    assert rig.job(job_id).state == S.PENDING  # but did not
    assert (rig.lease_owner(job_id), rig.job(job_id).lease_token) == (OTHER, their_token)


# -- letting jobs go ---------------------------------------------------------------------------------------------
def test_drop_gives_the_lease_back_for_another_controller_to_take_at_once(rig: Rig) -> None:
    job_id = rig.submit("job-1", S.KEEPING)
    rig.hold(job_id)

    rig.engine.drop(job_id)
    rig.engine.drop(job_id)  # not held any more: nothing to do
    rig.engine.drop("job-never-held")

    assert rig.engine.held == {}
    assert rig.lease_owner(job_id) is None
    rig.store.acquire(job_id, OTHER, ttl=LEASE_SECONDS, now=rig.clock.now())  # no LeaseHeld: no force needed


def test_drop_after_a_takeover_leaves_the_new_holders_lease_alone(rig: Rig) -> None:
    job_id = rig.submit("job-1", S.KEEPING)
    rig.hold(job_id)
    their_token = rig.store.acquire(job_id, OTHER, ttl=LEASE_SECONDS, now=rig.clock.now(), force=True)

    rig.engine.drop(job_id)

    assert (rig.lease_owner(job_id), rig.job(job_id).lease_token) == (OTHER, their_token)


def test_close_lets_the_steps_in_flight_finish_then_gives_every_lease_back(rig: Rig) -> None:
    busy, waiting = rig.submit("job-busy"), rig.submit("job-waiting", S.KEEPING)
    rig.store.request_cancel(busy, rig.clock.now())
    gate, entered = rig.steps.stop_at(busy)
    rig.hold(busy)
    rig.hold(waiting)
    rig.engine.start(rig.job(busy))
    assert entered.wait(5)

    closing = threading.Thread(target=rig.engine.close)
    closing.start()
    holds_for("the leases kept while a step runs", lambda: rig.lease_owner(busy) == ME
              and rig.lease_owner(waiting) == ME, 0.3, poll=0.05)
    gate.set()
    closing.join(5)

    assert not closing.is_alive()
    assert rig.job(busy).state == S.CANCELLED  # its step ran to its end
    assert rig.engine.held == {}
    assert rig.lease_owner(busy) is None
    assert rig.lease_owner(waiting) is None


# -- the API budget ----------------------------------------------------------------------------------------------
def test_the_jobs_of_one_target_share_a_connection_and_every_connection_the_engines_budget(rig: Rig) -> None:
    """The engine's share of the API rate (1 / live controllers, kept current by the service) is read at every
    call, whichever job's connection makes it."""
    first, second = rig.hold(rig.submit("job-1")), rig.hold(rig.submit("job-2"))
    elsewhere = rig.hold(rig.submit("job-3", target=Target("emulator", "ap-shanghai", rig.emulator.appid,
                                                           rig.emulator.endpoint)))
    assert first.sdk is second.sdk
    assert elsewhere.sdk is not first.sdk
    assert first.sdk.budget is elsewhere.sdk.budget is rig.engine.budget

    rig.engine.share = 0.0  # no part of any rate for now
    for held in (first, elsewhere):
        with patience(0.5), pytest.raises(OverBudget):
            compute.find_by_tags(held.sdk, {TAG_JOB: held.job_id})
    rig.engine.share = 0.5
    for held in (first, elsewhere):
        with patience(0.5):
            assert compute.find_by_tags(held.sdk, {TAG_JOB: held.job_id}) == []


def _stepped_over_budget(rig: Rig, job_id: str, controls: Controls | None = None) -> tuple[Held, str]:
    """A job tearing down a running instance, held, its look at the cloud back; the engine's share of the API rate
    then taken away, and the job's step begun (it wants TerminateInstances)."""
    rig.submit(job_id, S.TEARING_DOWN)
    instance_id = rig.launch(job_id)
    held = rig.hold(job_id, controls=controls)
    rig.engine.round()
    wait_until("the look back", lambda: held.step is not None and held.step.done(), 5, poll=0.01)
    rig.engine.share = 0.0
    rig.stepped(job_id)
    return held, instance_id


def test_a_step_that_is_not_urgent_gives_its_thread_back_when_over_the_budget(rig: Rig) -> None:
    """A teardown waits behind the launches: over the budget it stops before its call (no thread held while it
    waits for a token) and comes back when a token is likely free, the job still held."""
    job_id = "job-1"
    held, instance_id = _stepped_over_budget(rig, job_id)
    rig.idle(held)

    assert job_id in rig.engine.held
    assert rig.terminations() == []
    assert rig.up(instance_id)
    assert rig.job(job_id).state == S.TEARING_DOWN

    rig.engine.share = 1.0
    rig.clock.advance(1.0)  # the budget's guess of when its token is free
    rig.rounds_until("the instance terminated", lambda: not rig.up(instance_id))
    assert len(rig.terminations()) == 1
    assert job_id in rig.engine.held


def test_an_urgent_step_waits_for_its_token_as_long_as_it_takes(rig: Rig) -> None:
    """A teardown asked to go at once (a second Ctrl-C of `cvmjob run`) keeps its thread until its token comes."""
    job_id = "job-1"
    controls = Controls()
    controls.tear_down_now()
    held, instance_id = _stepped_over_budget(rig, job_id, controls)
    holds_for("no call while the engine has no share of the rate", lambda: not rig.terminations(), 0.5, poll=0.05)
    assert held.step is not None and not held.step.done()

    rig.engine.share = 1.0  # without a round or a clock moved: the step goes on by itself
    wait_until("the instance terminated", lambda: not rig.up(instance_id), 5, poll=0.05)
    def over() -> bool:
        rig.clock.advance(1.0)  # the teardown looks again as it decided, every poll_seconds
        return job_id not in rig.engine.held

    ended = rig.rounds_until("the teardown over", over)
    assert [(job.job_id, job.state) for job in ended] == [(job_id, S.CANCELLED)]


def test_a_wait_for_a_token_asks_the_lease_again_before_the_call_goes(rig: Rig) -> None:
    """Another controller took the job while its step waited for a token: the call it waited for is not sent,
    and the job is let go without touching the other's lease."""
    job_id = "job-1"
    controls = Controls()
    controls.tear_down_now()
    held, instance_id = _stepped_over_budget(rig, job_id, controls)
    step = held.step
    holds_for("no call while the engine has no share of the rate", lambda: not rig.terminations(), 0.5, poll=0.05)
    their_token = rig.store.acquire(job_id, OTHER, ttl=LEASE_SECONDS, now=rig.clock.now(), force=True)

    rig.rounds_until("the job dropped", lambda: job_id not in rig.engine.held)

    assert rig.terminations() == []
    assert rig.up(instance_id)
    assert (rig.lease_owner(job_id), rig.job(job_id).lease_token) == (OTHER, their_token)
    assert step is not None
    assert isinstance(step.exception(), FencedOut)  # the store said so, asked after the wait
