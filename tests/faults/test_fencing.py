"""Fencing: a controller that lost its lease (another took over while it was paused) can neither write anything
nor act in the cloud; it stops when it finds out (FencedOut: one line, exit 3)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from orchestrator.lifecycle import actions as A
from orchestrator.lifecycle.execute import Executor
from orchestrator.lifecycle.lease import LeaseGuard
from orchestrator.plan.models import Placement
from orchestrator.state.machine import JobState, NodeState
from orchestrator.state.store import FencedOut, ImageRecord, LeaseHeld, NodeRecord, Store
from tests.faults.conftest import expect_scenario
from tests.faults.harness import BOOTED_WITHIN, Pool, Record, World, names, scenario
from tests.records import new_job
from tests.waiting import settled

GROUP = "fencing"
PLACEMENT = Placement(zone="ap-guangzhou-3", instance_type="S5.MEDIUM4", charge_type="POSTPAID_BY_HOUR")


def _job(tmp_path: Path) -> tuple[Store, int, int]:
    store = Store(tmp_path / "state.db")
    store.create_job(new_job("job-1", "n", deadline=3600.0), 0.0)
    stale = store.acquire("job-1", "controller-a", 30, now=1.0)
    with pytest.raises(LeaseHeld):
        store.acquire("job-1", "controller-b", 30, now=2.0)
    current = store.acquire("job-1", "controller-b", 30, now=2.0, force=True)
    return store, stale, current


def _dump(path: Path) -> list[Any]:
    db = sqlite3.connect(path)
    try:
        tables = ("jobs", "nodes", "images", "events")
        return [db.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in tables]
    finally:
        db.close()


def test_a_stale_token_writes_nothing(tmp_path: Path, record: Record) -> None:
    """Every fenced write of the store with the stale token raises FencedOut and leaves every table as it was."""
    store, stale, current = _job(tmp_path)
    node = NodeRecord("job-1", 1, 0, "tok", "z", "t", "POSTPAID_BY_HOUR", None, None, NodeState.INTENT)
    before = _dump(tmp_path / "state.db")
    writes: dict[str, Callable[[], None]] = {
        "transition": lambda: store.transition("job-1", stale, JobState.PENDING, JobState.STAGING, "x", 3.0),
        "update": lambda: store.update("job-1", stale, 3.0, attempt=5),
        "note": lambda: store.note("job-1", stale, "note", "x", 3.0),
        "put_node": lambda: store.put_node(stale, node),
        "put_image": lambda: store.put_image(stale, ImageRecord("img-1", "job-1", "n", "CREATING", 3.0, None)),
        "renew": lambda: store.renew("job-1", stale, 30, 3.0),
        "check_lease": lambda: store.check_lease("job-1", stale),
    }
    for name, write in writes.items():
        with pytest.raises(FencedOut):
            write()
        assert _dump(tmp_path / "state.db") == before, name
    store.release("job-1", stale)  # a no-op for a stale token
    assert store.get("job-1").lease_owner == "controller-b"  # type: ignore[union-attr]
    store.transition("job-1", current, JobState.PENDING, JobState.STAGING, "ok", 3.0)
    record.injected = ["a second controller takes the lease (force) from a live one"]
    record.checked = [f"FencedOut and no change for {', '.join(writes)}"]


class Tripwire:
    """Stands for the cloud and COS: any use of it means a stale controller acted."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a stale controller reached the cloud ({name})")


def test_a_stale_controller_acts_on_nothing(tmp_path: Path, record: Record) -> None:
    """The executor with the stale token refuses every action before any cloud call (launch, terminate, image,
    cancel, credentials, staging, bill, the fingerprint index)."""
    store, stale, _ = _job(tmp_path)
    trip: Any = Tripwire()
    guard = LeaseGuard("job-1", 30, lambda: store.check_lease("job-1", stale),
                       lambda: store.renew("job-1", stale, 30, time.time()))
    executor = Executor(store=store, token=stale, job_id="job-1", target=trip, sdk=trip, state=trip, spec=trip,
                        plan=trip, source_dir=tmp_path, guard=guard)
    node = NodeRecord("job-1", 1, 0, "tok", "z", "t", "POSTPAID_BY_HOUR", None, None, NodeState.INTENT)
    every: list[A.Action] = [
        A.Stage(), A.StartAttempt(PLACEMENT, "x"), A.Launch(node), A.MarkNodes(((0, "lost", "x"),)),
        A.Move(JobState.STAGING, "x"), A.RequestCancel("x"), A.CreateImage(), A.ApplyImageRetention(1),
        A.DiscardImage("img-1"), A.Terminate(("ins-1",), "x"), A.RefreshCredentials("x"),
        A.RecordBill(), A.RecordSuccess(),
    ]
    for action in every:
        with pytest.raises(FencedOut):
            executor.run(action)
    executor.run(replace(A.Wait(0.0, "x")))  # waiting touches nothing
    record.injected = ["a stale lease token in the executor"]
    record.checked = [f"FencedOut before any cloud call for {len(every)} action kinds"]


@scenario("stale-controller-wakes-up", GROUP, cost=35)
def stale_controller(w: World) -> None:
    """Controller A is paused (SIGSTOP) mid-job; B takes over (`resume --force`) and drives to TEARING_DOWN while
    TerminateInstances fails, then is paused itself. A wakes up: its next action would be a TerminateInstances; it
    is refused before the call (FencedOut, exit 3, one line). B resumes and finishes the job, once."""
    job_id = w.submit("train.command=exec python3 tiny.py --steps 40 --step-seconds 0.1 --every 5")
    a = w.resume(job_id)
    w.wait_phase(job_id, "training", min_step=3)
    w.pause(a)
    w.note("SIGSTOP of controller A")
    w.inject("error", service="cvm", action="TerminateInstances", code="InternalError", count=None)
    b = w.resume(job_id, "--force")
    w.note("controller B: cvmjob resume --force")
    w.wait_state(job_id, "TEARING_DOWN", timeout=90)
    w.wait(lambda: [c for c in w.admin.calls(action="TerminateInstances") if c["error"]], 30, "B's teardown tries")
    w.pause(b)
    # B's call in flight, if any, lands before A wakes.
    before = settled("B's TerminateInstances calls", lambda: len(w.admin.calls(action="TerminateInstances")), 1.5, 30)
    a_wakes_stale_and_b_finishes(w, job_id, a, b, before)
    assert len(w.admin.instances()) == 1


def a_wakes_stale_and_b_finishes(w: World, job_id: str, a: subprocess.Popen[bytes], b: subprocess.Popen[bytes],
                                 calls: int) -> None:
    """A woken: no TerminateInstances beyond the ``calls`` made, and it stops (exit 3, a line saying its lease is
    stale); then B woken, the faults cleared: it finishes the job, which succeeds once."""
    a.send_signal(signal.SIGCONT)
    w.note("SIGCONT of controller A")
    assert a.wait(90) == 3, w.output()
    assert len(w.admin.calls(action="TerminateInstances")) == calls, "the stale controller called TerminateInstances"
    errors = [line for line in w.output().splitlines() if line.startswith("error:")]
    assert any("stale" in line for line in errors), errors
    w.clear_faults()
    b.send_signal(signal.SIGCONT)
    assert b.wait(90) == 0, w.output()
    assert w.job(job_id).state == JobState.SUCCEEDED
    assert [e.to_state for e in w.store().events(job_id)].count("SUCCEEDED") == 1


@scenario("stale-controller-inside-a-retry", GROUP, cost=40)
def stale_inside_a_retry(w: World) -> None:
    """Controller A is paused (SIGSTOP) inside a retried TerminateInstances that keeps failing; B takes over
    (`resume --force`), tries the call too and is paused. A wakes up between two attempts of its retried call: it
    makes no further cloud call (the lease is checked before every attempt) and stops (FencedOut, exit 3, one
    line). B resumes and finishes the job, once."""
    job_id = w.submit()
    w.inject("error", service="cvm", action="TerminateInstances", code="InternalError", count=None)
    a = w.resume(job_id)

    def terminations() -> int:
        return len(w.admin.calls(action="TerminateInstances"))

    w.wait(terminations, BOOTED_WITHIN, "A's first refused TerminateInstances", every=0.05)
    w.pause(a)
    w.note("SIGSTOP of controller A between two attempts of its retried TerminateInstances")
    by_a = settled("A's TerminateInstances calls", terminations, 1.0, 30)
    b = w.resume(job_id, "--force")
    w.note("controller B: cvmjob resume --force")
    w.wait(lambda: terminations() > by_a, 90, "B's TerminateInstances")
    w.pause(b)
    before = settled("B's TerminateInstances calls", terminations, 1.5, 30)
    a_wakes_stale_and_b_finishes(w, job_id, a, b, before)


@pytest.mark.parametrize("scenario_name", names(GROUP))
def test_fencing_on_the_emulator(scenario_name: str, fault_pool: Pool, record: Record) -> None:
    expect_scenario(fault_pool, scenario_name, record)
