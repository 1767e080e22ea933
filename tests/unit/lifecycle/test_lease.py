"""The lease guard with a fake monotonic clock (issue 27, item 7)."""

from __future__ import annotations

import pytest

from orchestrator.lifecycle.lease import LeaseGuard, LeaseLost
from orchestrator.state.store import FencedOut, StoreBusy


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Store:
    """The lease's row as the guard sees it: renewals answer, fail (the store down) or find it taken."""

    def __init__(self) -> None:
        self.answer: Exception | None = StoreBusy("the store did not answer")
        self.renewals = 0

    def renew(self) -> None:
        self.renewals += 1
        if self.answer is not None:
            raise self.answer


def guard(clock: Clock, asked: list[int], store: Store | None = None) -> LeaseGuard:
    return LeaseGuard("job-1", 30.0, lambda: asked.append(1), (store or Store()).renew, clock)


def test_it_refuses_once_renewals_failed_for_longer_than_the_ttl_less_a_margin() -> None:
    clock, asked, store = Clock(), list[int](), Store()
    g = guard(clock, asked, store)
    clock.t += 19.9
    g.check()
    assert store.renewals == 0
    clock.t += 0.2  # 20.1 s: past two thirds of a 30 s lease, though the lease itself has 10 s left
    with pytest.raises(LeaseLost, match=r"last renewed 20 s ago.*the store cannot renew it now"):
        g.check()
    g.renewed(clock.t - 1)  # a renewal that started a second ago counts from then
    g.check()
    g.renewed(0.0)  # an older renewal, reported late, moves nothing back
    g.check()


def test_a_controller_late_to_renew_renews_on_the_spot_unless_another_took_the_job() -> None:
    # Fifty controllers on two cores renewed 23 s apart: each took its own lease, that nobody else had, for lost,
    # and died (fault row 16 on PostgreSQL).
    clock, asked, store = Clock(), list[int](), Store()
    g = guard(clock, asked, store)
    store.answer = None
    clock.t += 25
    g.check()  # renewed, fenced by its token: still this controller's
    assert store.renewals == 1
    clock.t += 10
    g.check()  # counted from that renewal
    assert store.renewals == 1
    store.answer = FencedOut("job job-1: lease token 7 is stale (current 9)")
    clock.t += 25
    with pytest.raises(LeaseLost, match="stale"):
        g.check()
    store.answer = None
    with pytest.raises(LeaseLost, match="stale"):
        g.check()  # known to be another's: no renewal brings it back


def test_only_a_check_after_a_wait_asks_the_store() -> None:
    clock, asked = Clock(), list[int]()
    g = guard(clock, asked)
    g.check()
    assert asked == []  # the action's own check came just before
    g.check(waited=True)
    g.check(waited=True)
    assert asked == [1, 1]


def test_a_lease_known_to_be_another_s_refuses_at_once() -> None:
    clock, asked = Clock(), list[int]()
    g = guard(clock, asked)
    g.lose("job job-1: lease token 7 is stale: another controller took it")
    with pytest.raises(FencedOut, match="stale"):
        g.check()
    assert asked == []


def test_a_gap_since_the_last_check_asks_the_store_before_the_next_call() -> None:
    # A controller SIGSTOPped between two actions woke up within the renew deadline, and its next action's first
    # call went out: only a wait asked the store (stale-controller-inside-a-retry, once in a clean-clone run).
    clock, asked = Clock(), list[int]()
    g = guard(clock, asked)
    clock.t += 5.0
    g.check()
    assert asked == []  # calls of one action follow each other
    clock.t += 5.1
    g.check()
    assert asked == [1]  # a pause nothing else saw
    g.check()
    assert asked == [1]
