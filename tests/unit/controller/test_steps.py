"""The engine's step threads: the most urgent first, in order among equals; errors carried, queued work run."""

from __future__ import annotations

import threading
from functools import partial

from orchestrator.controller.steps import StepPool, Urgency


def busy_pool() -> tuple[StepPool, threading.Event]:
    """A pool of one thread, busy until the event is set: what is submitted meanwhile queues."""
    pool = StepPool(1, "test")
    started, gate = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        gate.wait(10)

    pool.submit(Urgency.NOW, hold)
    assert started.wait(10)
    return pool, gate


def test_the_most_urgent_step_runs_first_and_equals_in_the_order_they_came() -> None:
    pool, gate = busy_pool()
    ran: list[str] = []
    for name, urgency in [("r1", Urgency.ROUTINE), ("s1", Urgency.SOON), ("n1", Urgency.NOW),
                          ("r2", Urgency.ROUTINE), ("n2", Urgency.NOW)]:
        pool.submit(urgency, partial(ran.append, name))
    gate.set()
    pool.stop()
    assert ran == ["n1", "n2", "s1", "r1", "r2"]


def test_a_step_carries_its_result_or_its_error_and_stop_runs_what_is_queued() -> None:
    pool = StepPool(2, "test")
    failed = pool.submit(Urgency.NOW, lambda: 1 // 0)
    results = [pool.submit(Urgency.ROUTINE, partial(int, n)) for n in range(20)]
    pool.stop()
    assert isinstance(failed.exception(), ZeroDivisionError)
    assert [r.result() for r in results] == list(range(20))


def test_a_queued_step_hurried_runs_before_the_less_urgent_and_only_once() -> None:
    pool, gate = busy_pool()
    ran: list[str] = []
    for name in ("s1", "s2"):
        pool.submit(Urgency.SOON, partial(ran.append, name))
    late = pool.submit(Urgency.ROUTINE, partial(ran.append, "reclaimed"))
    pool.hurry(late, Urgency.NOW)
    pool.hurry(late, Urgency.NOW)  # twice: it still runs once
    gate.set()
    pool.stop()
    assert ran == ["reclaimed", "s1", "s2"]
    pool.hurry(late, Urgency.NOW)  # done: nothing to hurry
