"""The sweep's pure decisions: a job's end for its trial, the money and time a next trial needs, the brakes."""

from __future__ import annotations

import pytest

from orchestrator.state.machine import TERMINAL, JobState
from orchestrator.sweep.rules import (
    Ending,
    NextTrial,
    Spend,
    consecutive_failures,
    ending,
    may_start,
    placements_to_avoid,
    started,
)

NOW = 1000.0


def test_every_end_of_a_job_means_something_for_its_trial() -> None:
    assert {state: ending(state) for state in TERMINAL}  # none is missing
    assert ending(JobState.SUCCEEDED) == Ending.COMPLETE
    assert ending(JobState.FAILED) == Ending.TRAINING
    assert ending(JobState.FAILED_NO_CAPACITY) == Ending.INFRASTRUCTURE
    assert ending(JobState.FAILED_PREEMPTED) == Ending.INFRASTRUCTURE  # more reclaims than its policy allows


@pytest.mark.parametrize(("spent", "left", "next_cost", "allowed"), [
    (0.0, 0.0, 10.0, True),
    (5.0, 4.0, 1.0, True),  # exactly at the cap
    (5.0, 4.0, 1.01, False),
    (9.5, 0.0, 1.0, False),
])
def test_a_trial_starts_only_if_spent_running_and_its_own_fit_under_the_cap(
        spent: float, left: float, next_cost: float, allowed: bool) -> None:
    reason = may_start(Spend(spent, 0, left, 0), NextTrial(next_cost, 0, 60), max_cost=10.0, gpu_hours=None,
                       now=NOW, deadline=None)
    assert (reason is None) == allowed
    if not allowed:
        assert reason is not None and reason.startswith("budget.max_cost:")


def test_an_unpriced_trial_does_not_start_under_a_cap() -> None:
    reason = may_start(Spend(0, 0, 0, 0), NextTrial(None, 0, 60), max_cost=10.0, gpu_hours=None, now=NOW,
                       deadline=None)
    assert reason is not None and "no price" in reason


def test_gpu_hours_and_the_deadline_are_limits_too() -> None:
    assert "gpu_hours" in (may_start(Spend(0, 3, 0, 1.5), NextTrial(1, 1, 60), max_cost=None, gpu_hours=5,
                                     now=NOW, deadline=None) or "")
    assert "deadline" in (may_start(Spend(0, 0, 0, 0), NextTrial(1, 0, 600), max_cost=None, gpu_hours=None,
                                    now=NOW, deadline=NOW + 300) or "")
    assert may_start(Spend(0, 0, 0, 0), NextTrial(1, 0, 600), max_cost=None, gpu_hours=None, now=NOW,
                     deadline=NOW + 601) is None


def test_the_brake_counts_training_failures_in_a_row_only() -> None:
    T, C, Cloud, X = Ending.TRAINING, Ending.COMPLETE, Ending.INFRASTRUCTURE, Ending.CANCELLED
    assert consecutive_failures([T, T, C, T, Cloud, T, X]) == 2  # the cloud's failures and cancels do not reset it
    assert consecutive_failures([T, T, C]) == 0
    assert consecutive_failures([]) == 0


def test_a_placement_that_failed_often_enough_is_avoided() -> None:
    failures = [("z3", "GN7"), ("z3", "GN7"), ("z4", "GN7"), ("z3", "GN7")]
    assert placements_to_avoid(failures, 3) == {("z3", "GN7")}
    assert placements_to_avoid(failures, 4) == set()


def test_a_started_trial_counts_its_share_of_the_cap_or_else_the_estimate() -> None:
    spend, estimate = Spend(5.0, 1.0, 2.0, 0.5), NextTrial(cost=3.0, gpu_hours=0.25, seconds=600)
    assert started(spend, estimate, 1.5) == Spend(5.0, 1.0, 3.5, 0.75)
    assert started(spend, estimate, None) == Spend(5.0, 1.0, 5.0, 0.75)
    assert started(spend, NextTrial(cost=None, gpu_hours=0.0, seconds=600), None) == spend
