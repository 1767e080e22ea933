"""What `cvmjob cost` makes of the store's records: each job's bill and where it came from, its share billed outside
training, and the groups by name, tag and sweep."""

from __future__ import annotations

from dataclasses import replace

import pytest

from orchestrator.billing.costs import RUNNING_SOURCE, UNRECORDED_SOURCE, group, job_cost, job_costs, total
from orchestrator.providers.tencent.vocabulary import ChargeType
from orchestrator.state.machine import JobState, NodeState
from orchestrator.state.store import JobRecord, NodeRecord
from tests.records import job_record, spec

NOW = 50_000.0


def job(job_id: str = "job-1", name: str = "demo", state: JobState = JobState.SUCCEEDED, cost: float = 3.0,
        tags: dict[str, str] | None = None) -> JobRecord:
    return job_record(job_id, name, state, spec=spec(name, tags=tags or {}), created_at=1000.0, updated_at=9000.0,
                      deadline=NOW, cost_cny=cost)


# One hour billed at 3 CNY/h, of which 45 minutes trained: 15 minutes (0.75 CNY) were boot, sync, upload, teardown.
NODE = NodeRecord("job-1", 1, 0, "tok", "ap-guangzhou-3", "GN7.2XLARGE32", ChargeType.ON_DEMAND, 3.0, "ins-1",
                  NodeState.GONE, launched_at=1000.0, running_at=1100.0, ended_at=4700.0, cost_cny=3.0,
                  cost_source="bill", training_seconds=2700.0)


def test_an_ended_job_costs_its_bill_of_which_the_time_outside_training_at_its_price() -> None:
    cost = job_cost(job(), [NODE], NOW)
    assert (cost.cost_cny, cost.source) == (3.0, "bill")
    assert (cost.not_training_seconds, cost.not_training_cny) == (900.0, 0.75)
    assert (cost.instance_types, cost.billing) == (("GN7.2XLARGE32",), ("on-demand",))


def test_every_attempt_counts_a_reclaimed_spot_attempt_and_its_on_demand_retry() -> None:
    # The spot attempt trained 10 of its 20 minutes before the reclaim; the bill had no line for it yet.
    reclaimed = replace(NODE, charge_type=ChargeType.SPOT, price_per_hour=0.6, instance_id="ins-0", running_at=0.0,
                        ended_at=1200.0, cost_cny=0.2, cost_source="estimate", training_seconds=600.0)
    cost = job_cost(job(cost=3.2), [reclaimed, replace(NODE, attempt=2)], NOW)
    assert cost.source == "bill+estimate" and cost.billing == ("spot", "on-demand")
    assert cost.not_training_seconds == 1500.0 and cost.not_training_cny == pytest.approx(0.75 + 0.1)


def test_the_share_outside_training_is_never_more_than_the_bill() -> None:
    # The controller saw 3600 s; the bill (to the second, from RUNNING) was for less.
    cost = job_cost(job(cost=0.1), [replace(NODE, cost_cny=0.1, training_seconds=0.0)], NOW)
    assert cost.not_training_cny == 0.1


def test_nodes_that_never_ran_add_nothing_and_a_launch_that_failed_has_no_instance() -> None:
    never_ran = replace(NODE, node=1, instance_id="ins-2", running_at=None, cost_cny=0.0, training_seconds=None)
    no_instance = replace(NODE, node=2, instance_id=None, state=NodeState.FAILED, cost_cny=None, cost_source=None)
    cost = job_cost(job(), [NODE, never_ran, no_instance], NOW)
    assert cost.not_training_cny == 0.75 and cost.instance_types == ("GN7.2XLARGE32",)


def test_what_is_not_known_says_so() -> None:
    # Billed before cvmjob recorded the training's time and the bill's source (store revision 0006).
    old = job_cost(job(), [replace(NODE, cost_source=None, training_seconds=None)], NOW)
    assert (old.source, old.not_training_cny, old.not_training_seconds) == (UNRECORDED_SOURCE, None, None)
    # Still running: an estimate from its price so far, its share not training not known before its bill.
    running = job_cost(job(state=JobState.RUNNING, cost=0.0), [replace(NODE, ended_at=None, cost_cny=None)],
                       1100.0 + 1800)
    assert (running.cost_cny, running.source, running.not_training_cny) == (1.5, RUNNING_SOURCE, None)


def test_groups_by_name_tag_and_sweep_with_the_total() -> None:
    costs = job_costs(
        [job("job-1", "bert", tags={"team": "nlp", "env": "prod"}), job("job-2", "bert", cost=1.0),
         job("job-3", "resnet", cost=2.0, tags={"team": "vision"})],
        {"job-1": [NODE], "job-3": [replace(NODE, job_id="job-3", cost_cny=2.0, training_seconds=None)]},
        NOW, sweeps={"job-3": "lr-sweep"})
    assert [(g.key, g.jobs, g.cost_cny, g.not_training_cny, g.unknown) for g in group(costs, "name")] == [
        ("bert", 2, 4.0, 0.75, 0), ("resnet", 1, 2.0, 0.0, 1)]
    # A job counts in each of its tags' groups; an untagged one in "-".
    assert [(g.key, g.cost_cny) for g in group(costs, "tag")] == [
        ("env=prod", 3.0), ("team=nlp", 3.0), ("team=vision", 2.0), ("-", 1.0)]
    assert [(g.key, g.jobs) for g in group(costs, "sweep")] == [("-", 2), ("lr-sweep", 1)]
    everything = total(costs)
    assert (everything.jobs, everything.cost_cny, everything.not_training_cny, everything.unknown) == (3, 6.0, 0.75, 1)
