from __future__ import annotations

import pytest

from orchestrator.providers.tencent.budget import ApiBudget, rate_of


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


def test_rates_are_80_percent_of_the_published_limits() -> None:
    assert rate_of("cvm", "RunInstances") == pytest.approx(8)
    assert rate_of("cvm", "DescribeInstances") == pytest.approx(32)
    assert rate_of("sts", "GetFederationToken") == pytest.approx(16)


@pytest.mark.parametrize(("share", "expected"), [(1.0, 8), (0.5, 4), (0.25, 2)])
def test_calls_per_second_never_exceed_the_share_of_the_rate(share: float, expected: int) -> None:
    clock = FakeClock()
    budget = ApiBudget(share=lambda: share, now=clock.now, sleep=clock.sleep)
    at = []
    for _ in range(expected * 10):
        budget.acquire("cvm", "RunInstances", "ap-guangzhou")
        at.append(clock.t)
    # no window of one second holds more than one second's worth
    for i, start in enumerate(at):
        assert sum(1 for t in at[i:] if t < start + 1.0 - 1e-9) <= expected
    assert at[-1] >= (expected * 10 - expected) / expected - 1e-6  # and no faster overall


def test_buckets_are_per_action_and_region() -> None:
    clock = FakeClock()
    budget = ApiBudget(now=clock.now, sleep=clock.sleep)
    budget.acquire("cvm", "RunInstances", "ap-guangzhou")
    budget.acquire("cvm", "RunInstances", "ap-shanghai")
    budget.acquire("cvm", "TerminateInstances", "ap-guangzhou")
    assert clock.slept == []
    budget.acquire("cvm", "RunInstances", "ap-guangzhou")
    assert clock.slept and budget.waited > 0
