"""The engine's use of the signals its jobs' agents (and `cvmjob cancel` from machines without its store) put in
the state bucket: which job each makes due, when a signal is deleted, and which are left alone. A real Store on
SQLite, an injected clock, the emulator's COS (test_engine_rounds.py has the rig)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.contract import SIGNALS_PREFIX, JobLayout, Phase, signal_for
from orchestrator.controller.engine import LEASE_SECONDS, SIGNALS_SECONDS, Controls
from tests.emulator_process import EmulatorProcess
from tests.unit.controller.test_engine_rounds import OTHER, T0, Rig, S, rig_on
from tests.waiting import holds_for, wait_until


@pytest.fixture
def rig(emulator: EmulatorProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    with rig_on(emulator, tmp_path, monkeypatch) as made:
        yield made


def attempt_signal(job_id: str, phase: Phase | None) -> str:
    """Where node 0 of the job's first attempt signals ``phase`` (None: the bare key of an earlier release)."""
    base = JobLayout(job_id).signal(1, 0)
    return base if phase is None else signal_for(base, phase)


def put(rig: Rig, *keys: str) -> None:
    for key in keys:
        rig.state.put_bytes(key, b"")


def signals(rig: Rig) -> set[str]:
    return {o.key for o in rig.state.iter_objects(SIGNALS_PREFIX)}


def waiting(rig: Rig, job_id: str, controls: Controls | None = None) -> None:
    """The job KEEPING, held and stepped once: it waits 30 s before its next step."""
    rig.submit(job_id, S.KEEPING, keep_for=60)
    held = rig.hold(job_id, controls=controls)
    rig.stepped(job_id)
    rig.idle(held)


def next_listing(rig: Rig) -> None:
    """Time for the engine to list the signals again (it does at most every SIGNALS_SECONDS)."""
    rig.clock.advance(SIGNALS_SECONDS)


@pytest.mark.parametrize("phase", [Phase.PREEMPTED, Phase.DONE, None], ids=["reclaim", "training-ended", "bare"])
def test_an_agents_signal_makes_its_waiting_job_due_at_once_and_is_deleted_once_used(rig: Rig,
                                                                                    phase: Phase | None) -> None:
    job_id = "job-1"
    waiting(rig, job_id)
    key = attempt_signal(job_id, phase)
    put(rig, key)

    next_listing(rig)
    rig.stepped(job_id, 2)

    assert rig.clock.now() == T0 + SIGNALS_SECONDS  # long before its wait of 30 s was over
    wait_until("the signal deleted", lambda: key not in signals(rig), 5, poll=0.05)
    next_listing(rig)  # listed again: nothing makes it due any more
    holds_for("the job waiting again", lambda: (rig.engine.round(), len(rig.steps.of(job_id)) == 2)[1], 0.3,
              poll=0.02)


def test_a_signal_for_a_job_in_the_middle_of_a_step_is_kept_for_the_listing_after_it(rig: Rig) -> None:
    """The step may have read the agents' documents before the signal was put: it does not count as the signal's
    use, and the job is stepped once more after it, though its step decided to wait."""
    job_id = "job-1"
    rig.submit(job_id, S.KEEPING, keep_for=60)
    gate, entered = rig.steps.stop_at(job_id)
    held = rig.hold(job_id)
    rig.rounds_until("its step begun", entered.is_set)
    key = attempt_signal(job_id, Phase.PREEMPTED)
    put(rig, key)

    next_listing(rig)
    rig.rounds_until("the signal read", lambda: held.signalled is not None)
    gate.set()
    rig.idle(held)  # its step is over: it waits 30 s
    assert key in signals(rig)

    next_listing(rig)
    rig.stepped(job_id, 2)
    wait_until("the signal deleted", lambda: key not in signals(rig), 5, poll=0.05)
    assert rig.clock.now() == T0 + 2 * SIGNALS_SECONDS


@pytest.mark.parametrize("checkpoint", [True, False], ids=["cancel", "cancel-now"])
def test_a_cancel_signal_from_a_machine_without_this_store_requests_the_cancel_here(rig: Rig,
                                                                                   checkpoint: bool) -> None:
    """`cvmjob cancel` where the store is not at hand puts a signal; the engine holding the job records the cancel
    in its store (checkpoint or not, as asked) and acts on it at once."""
    job_id = "job-1"
    waiting(rig, job_id)
    key = JobLayout(job_id).cancel_signal(checkpoint)
    put(rig, key)

    next_listing(rig)
    rig.rounds_until("the cancel acted on", lambda: rig.job(job_id).state == S.TEARING_DOWN)

    job = rig.job(job_id)
    assert job.cancel_requested
    assert job.cancel_checkpoint is checkpoint
    assert any(e.detail.startswith("cancel requested") for e in rig.store.events(job_id))
    wait_until("the signal deleted", lambda: key not in signals(rig), 5, poll=0.05)


def test_signals_of_jobs_not_held_here_are_left_to_their_controllers_unless_the_job_ended_here(rig: Rig) -> None:
    """A job of another store, a job this store has but another controller holds (a cancel signal too: its holder
    records it), an object that names no job: left as they are. A job that ended in this store has no one else to
    read its signals: they are deleted, with the signals used."""
    held = "job-held"
    waiting(rig, held)
    rig.submit("job-other-controller", S.KEEPING)
    rig.store.acquire("job-other-controller", OTHER, ttl=LEASE_SECONDS, now=rig.clock.now())
    ended = rig.submit("job-ended")
    rig.store.request_cancel(ended, rig.clock.now())
    rig.hold(ended)
    rig.engine.start(rig.job(ended))
    rig.rounds_until("the ended job let go", lambda: ended not in rig.engine.held)
    left = {
        attempt_signal("job-of-another-store", Phase.PREEMPTED),
        JobLayout("job-other-controller").cancel_signal(True),
        attempt_signal("job-other-controller", Phase.PREEMPTED),
        f"{SIGNALS_PREFIX}not-a-signal",
    }
    used = {attempt_signal(held, Phase.PREEMPTED), attempt_signal(ended, Phase.DONE)}
    put(rig, *left, *used)

    next_listing(rig)
    rig.stepped(held, 2)
    wait_until("the used signals deleted", lambda: not used & signals(rig), 5, poll=0.05)  # one batch

    assert signals(rig) == left
    assert not rig.job("job-other-controller").cancel_requested
    assert rig.job("job-other-controller").lease_owner == OTHER
    assert rig.steps.of("job-other-controller") == []


@pytest.mark.parametrize(("phase", "ends_it"), [(Phase.PREEMPTED, True), (Phase.DONE, False)],
                         ids=["reclaim", "training-ended"])
def test_only_an_urgent_signal_ends_the_engines_sleep_before_its_tick(emulator: EmulatorProcess, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      phase: Phase, ends_it: bool) -> None:
    """A reclaim's notice runs out: its job's look comes at once, not at the next tick; an ended training's waits
    for the tick like the rest (hundreds of trials ending together are no reason for a round each)."""
    with rig_on(emulator, tmp_path, monkeypatch, tick_seconds=600) as rig:
        controls = Controls()  # a job with controls of its own: an interruption ends the sleep, whatever happens
        job_id = "job-1"
        waiting(rig, job_id, controls)
        put(rig, attempt_signal(job_id, phase))
        next_listing(rig)

        sleeping = threading.Thread(target=rig.engine.sleep, daemon=True)
        sleeping.start()
        try:
            if ends_it:
                wait_until("the sleep over", lambda: not sleeping.is_alive(), 5, poll=0.02)
            else:
                wait_until("the signal read", lambda: rig.engine.held[job_id].signalled is not None, 5, poll=0.02)
                holds_for("the sleep going on", sleeping.is_alive, 0.3, poll=0.05)
        finally:
            controls.interrupted.set()  # the user's Ctrl-C: the end of any sleep
            sleeping.join(5)
        assert not sleeping.is_alive()
        controls.interrupted.clear()

        rig.stepped(job_id, 2)  # either way the job is due now
        assert rig.clock.now() == T0 + SIGNALS_SECONDS
