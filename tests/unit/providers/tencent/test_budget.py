from __future__ import annotations

import pytest

from orchestrator.providers.tencent.budget import ApiBudget, OverBudget, patience, rate_of


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


def test_a_patient_call_waits_within_its_patience() -> None:
    clock = FakeClock()
    budget = ApiBudget(now=clock.now, sleep=clock.sleep)
    with patience(1.0):
        for _ in range(8):  # 8/s: the eighth token is 7/8 s away
            budget.acquire("cvm", "TerminateInstances", "ap-guangzhou")
    assert clock.t == pytest.approx(7 / 8)


def test_an_impatient_call_is_sent_away_and_told_when_to_come_back() -> None:
    clock = FakeClock()
    budget = ApiBudget(now=clock.now, sleep=clock.sleep)
    budget.acquire("cvm", "TerminateInstances", "ap-guangzhou")
    with patience(0.0):
        comebacks = []
        for _ in range(3):
            with pytest.raises(OverBudget) as sent_away:
                budget.acquire("cvm", "TerminateInstances", "ap-guangzhou")
            comebacks.append(sent_away.value.ready_in)
    assert clock.slept == []  # nothing waited, nothing was taken
    # one slot (1/8 s) apart, after the token that is 1/8 s away
    assert comebacks == pytest.approx([2 / 8, 3 / 8, 4 / 8])
    clock.t = comebacks[0]
    with patience(0.0):
        budget.acquire("cvm", "TerminateInstances", "ap-guangzhou")  # its turn came: a token is there


def test_without_patience_a_call_waits_as_long_as_it_takes() -> None:
    clock = FakeClock()
    budget = ApiBudget(now=clock.now, sleep=clock.sleep)
    with patience(0.0), patience(None):
        for _ in range(20):
            budget.acquire("cvm", "RunInstances", "ap-guangzhou")
    assert clock.t == pytest.approx(19 / 8)


def test_callers_waiting_together_are_served_in_the_order_they_asked() -> None:
    # Threads asking at the same instant: each is given the next slot at once and sleeps until it (a sleep that
    # does not move this clock stands for threads sleeping side by side), so none can overtake an earlier one.
    clock = FakeClock()
    slept: list[float] = []
    budget = ApiBudget(now=clock.now, sleep=slept.append)
    for _ in range(4):
        budget.acquire("cvm", "RunInstances", "ap-guangzhou")
    assert slept == pytest.approx([1 / 8, 2 / 8, 3 / 8])
    assert budget.waited == pytest.approx(6 / 8)
