from __future__ import annotations

import dataclasses

from orchestrator.lifecycle.recovery import (
    CAPACITY,
    PREEMPTED,
    QUOTA,
    QUOTA_REASON,
    RETRY,
    RETRY_REASON,
    AttemptSummary,
    Backoff,
    GiveUp,
    Relaunch,
    next_placement,
    summarize,
)
from orchestrator.plan.models import Placement
from orchestrator.plan.settings import Backoff as BackoffRule
from orchestrator.plan.settings import RecoveryRules
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.state.machine import JobState, NodeState
from orchestrator.state.store import NodeRecord

SPOT_A = Placement(zone="z-3", instance_type="GN7.2XLARGE32", charge_type="SPOTPAID", price_per_hour=1.7)
SPOT_B = Placement(zone="z-4", instance_type="GN7.2XLARGE32", charge_type="SPOTPAID", price_per_hour=1.7)
OD_A = Placement(zone="z-3", instance_type="GN7.2XLARGE32", charge_type="POSTPAID_BY_HOUR", price_per_hour=8.7)
CANDIDATES = [SPOT_A, SPOT_B, OD_A]
RULES = RecoveryRules(
    max_preemptions=3,
    max_launch_failures=5,
    same_zone_retries=1,
    backoff=BackoffRule(initial=10, maximum=60, multiplier=2, jitter=0),
    on_demand_after_preemptions=2,
    give_up_after=3600,
)


def attempt(n: int, p: Placement, kind: str, at: float) -> AttemptSummary:
    return AttemptSummary(n, p, kind, "reason", at)


def test_first_attempt_is_the_first_candidate() -> None:
    assert next_placement([], CANDIDATES, RULES, 0, "job") == Relaunch(SPOT_A, "first attempt")


def test_after_a_reclaim_the_same_placement_is_tried_at_once() -> None:
    choice = next_placement([attempt(1, SPOT_A, PREEMPTED, 100)], CANDIDATES, RULES, 101, "job")
    assert isinstance(choice, Relaunch) and choice.placement == SPOT_A


def test_capacity_failure_backs_off_then_retries_then_moves_zone() -> None:
    history = [attempt(1, SPOT_A, CAPACITY, 100)]
    assert isinstance(next_placement(history, CANDIDATES, RULES, 105, "job"), Backoff)
    retry = next_placement(history, CANDIDATES, RULES, 111, "job")
    assert isinstance(retry, Relaunch) and retry.placement == SPOT_A
    history.append(attempt(2, SPOT_A, CAPACITY, 120))
    moved = next_placement(history, CANDIDATES, RULES, 121, "job")
    assert isinstance(moved, Relaunch) and moved.placement == SPOT_B


def test_sold_out_everywhere_falls_back_to_on_demand_when_the_policy_has_a_fallback() -> None:
    history = [
        attempt(1, SPOT_A, CAPACITY, 100),
        attempt(2, SPOT_A, CAPACITY, 120),
        attempt(3, SPOT_B, CAPACITY, 130),
        attempt(4, SPOT_B, CAPACITY, 150),
    ]
    choice = next_placement(history, CANDIDATES, RULES, 200, "job")
    assert isinstance(choice, Relaunch) and choice.placement == OD_A


def test_without_fallback_sold_out_everywhere_gives_up_listing_what_was_tried() -> None:
    rules = RecoveryRules(
        max_launch_failures=10, same_zone_retries=0, on_demand_after_preemptions=None, on_demand_after_minutes=None
    )
    history = [attempt(1, SPOT_A, CAPACITY, 100), attempt(2, SPOT_B, CAPACITY, 110)]
    choice = next_placement(history, CANDIDATES, rules, 200, "job")
    assert isinstance(choice, GiveUp) and choice.state == JobState.FAILED_NO_CAPACITY
    assert "z-3" in choice.reason and "z-4" in choice.reason


def test_giving_up_names_every_placement_tried_once_with_its_count_and_latest_reason() -> None:
    zones = [Placement(zone=f"z-{i}", instance_type="GN7.2XLARGE32", charge_type="SPOTPAID") for i in range(4)]
    history = [AttemptSummary(i, zones[i // 3], CAPACITY, f"sold out {i}", 100 + i) for i in range(12)]
    rules = RecoveryRules(max_launch_failures=12, on_demand_after_preemptions=None, on_demand_after_minutes=None)
    choice = next_placement(history, zones, rules, 200, "job")
    assert isinstance(choice, GiveUp) and choice.state == JobState.FAILED_NO_CAPACITY
    assert choice.reason == "12 launches failed (policy limit 12); tried: " + "; ".join(
        f"GN7.2XLARGE32 in z-{i} (spot) (3 times): sold out {3 * i + 2}" for i in range(4)
    )


def test_a_fallback_after_zero_minutes_moves_to_on_demand_at_the_first_failed_spot_launch() -> None:
    # as the builtin on-demand-only policy: "a failed spot launch moves it to on-demand for good"
    rules = RecoveryRules(same_zone_retries=2, on_demand_after_preemptions=1, on_demand_after_minutes=0)
    choice = next_placement([attempt(1, SPOT_A, CAPACITY, 100)], CANDIDATES, rules, 100, "job")
    assert isinstance(choice, Relaunch) and choice.placement == OD_A


def test_time_limits_count_from_the_end_of_the_last_attempt_that_ran() -> None:
    rules = RecoveryRules(max_preemptions=10, give_up_after=7200, on_demand_after_minutes=30)
    hours = 3 * 3600.0
    # a launch failure, then hours of training, then a reclaim: a new recovery, on spot, not given up
    history = [attempt(1, SPOT_A, CAPACITY, 0), attempt(2, SPOT_B, PREEMPTED, hours)]
    assert next_placement(history, CANDIDATES, rules, hours + 1, "job") == Relaunch(
        SPOT_B, "after a reclaim in GN7.2XLARGE32 in z-4 (spot)"
    )
    history.append(attempt(3, SPOT_B, PREEMPTED, 2 * hours))
    choice = next_placement(history, CANDIDATES, rules, 2 * hours + 1, "job")
    assert isinstance(choice, Relaunch) and choice.placement == SPOT_B
    # 30 minutes into this recovery: on-demand; two hours: give up
    history.append(attempt(4, SPOT_B, CAPACITY, 2 * hours + 60))
    choice = next_placement(history, CANDIDATES, rules, 2 * hours + 1800, "job")
    assert isinstance(choice, Relaunch) and choice.placement == OD_A
    choice = next_placement(history, CANDIDATES, rules, 2 * hours + 7201, "job")
    assert isinstance(choice, GiveUp) and choice.reason.startswith("still no capacity after 120 min")


def test_preemptions_switch_to_on_demand_then_give_up_beyond_the_limit() -> None:
    history = [attempt(1, SPOT_A, PREEMPTED, 100), attempt(2, SPOT_A, PREEMPTED, 200)]
    choice = next_placement(history, CANDIDATES, RULES, 201, "job")
    assert isinstance(choice, Relaunch) and choice.placement == OD_A
    history += [attempt(3, OD_A, PREEMPTED, 300), attempt(4, OD_A, PREEMPTED, 400)]
    assert next_placement(history, CANDIDATES, RULES, 401, "job") == GiveUp(
        JobState.FAILED_PREEMPTED, "reclaimed 4 times, more than the policy's 3"
    )


def test_launch_failures_are_bounded() -> None:
    history = [attempt(i, SPOT_A, CAPACITY, 100 + i) for i in range(5)]
    choice = next_placement(history, CANDIDATES, RULES, 200, "job")
    assert isinstance(choice, GiveUp) and choice.state == JobState.FAILED_NO_CAPACITY


def test_jitter_is_deterministic_per_job() -> None:
    rules = RecoveryRules(backoff=BackoffRule(initial=10, maximum=60, multiplier=2, jitter=0.5))
    history = [attempt(1, SPOT_A, CAPACITY, 100)]
    first = next_placement(history, CANDIDATES, rules, 100, "job-a")
    assert first == next_placement(history, CANDIDATES, rules, 100, "job-a")
    assert isinstance(first, Backoff)


def test_a_quota_refusal_is_not_retried_and_rules_out_its_zone_for_that_way_of_paying() -> None:
    other_type = Placement(zone="z-3", instance_type="GN7.5XLARGE80", charge_type="SPOTPAID", price_per_hour=2.7)
    candidates = [SPOT_A, other_type, SPOT_B, OD_A]
    history = [attempt(1, SPOT_A, QUOTA, 100)]
    moved = next_placement(history, candidates, RULES, 100.5, "job")  # no backoff, no retry in z-3 for spot
    assert isinstance(moved, Relaunch) and moved.placement == SPOT_B
    history.append(attempt(2, SPOT_B, QUOTA, 101))
    fallback = next_placement(history, candidates, RULES, 101.5, "job")
    assert isinstance(fallback, Relaunch) and fallback.placement == OD_A  # on demand has a quota of its own


def test_a_node_the_quota_refused_summarizes_as_a_quota_attempt() -> None:
    node = NodeRecord(job_id="job-1", attempt=1, node=0, client_token="t", zone="z-3", instance_type="GN7.2XLARGE32",
                      charge_type=ChargeType.SPOT, price_per_hour=1.7, instance_id=None, state=NodeState.FAILED,
                      ended_at=5.0,
                      end_reason=f"{QUOTA_REASON}LimitExceeded.SpotQuota: 50 vCPU")
    stock = dataclasses.replace(node, attempt=2, end_reason="ResourceInsufficient: x")
    assert [s.kind for s in summarize([node, stock])] == [QUOTA, CAPACITY]


def test_a_retry_goes_to_another_zone_first_and_is_not_a_reclaim() -> None:
    node = NodeRecord(job_id="job-1", attempt=1, node=0, client_token="t", zone="z-3", instance_type="GN7.2XLARGE32",
                      charge_type=ChargeType.SPOT, price_per_hour=1.7, instance_id="ins-1", state=NodeState.LOST,
                      ended_at=5.0, end_reason=f"{RETRY_REASON}the training exited with 3")
    [summary] = summarize([node])
    assert summary.kind == RETRY
    choice = next_placement([summary], CANDIDATES, RULES, 6, "job")
    assert isinstance(choice, Relaunch) and choice.placement == SPOT_B
    same_zone_only = dataclasses.replace(RULES, next_zone=False)
    choice = next_placement([summary], CANDIDATES, same_zone_only, 6, "job")
    assert isinstance(choice, Relaunch) and choice.placement.zone == "z-3"
    retries = [dataclasses.replace(summary, attempt=n) for n in range(1, RULES.max_preemptions + 3)]
    assert isinstance(next_placement(retries, CANDIDATES, RULES, 6, "job"), Relaunch)  # not counted as reclaims
