"""The lease guard with a fake monotonic clock (issue 27, item 7)."""

from __future__ import annotations

import pytest

from orchestrator.lifecycle.lease import LeaseGuard, LeaseLost
from orchestrator.state.store import FencedOut


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def guard(clock: Clock, asked: list[int]) -> LeaseGuard:
    return LeaseGuard("job-1", 30.0, lambda: asked.append(1), clock)


def test_it_refuses_once_the_last_renewal_is_older_than_the_ttl_less_a_margin() -> None:
    clock, asked = Clock(), list[int]()
    g = guard(clock, asked)
    clock.t += 19.9
    g.check()
    clock.t += 0.2  # 20.1 s: past two thirds of a 30 s lease, though the lease itself has 10 s left
    with pytest.raises(LeaseLost, match="last renewed 20 s ago"):
        g.check()
    g.renewed(clock.t - 1)  # a renewal that started a second ago counts from then
    g.check()
    g.renewed(0.0)  # an older renewal, reported late, moves nothing back
    g.check()


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
