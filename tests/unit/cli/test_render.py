"""The bill shown in the summary and in `status --output json`: per attempt, total, and against on demand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from orchestrator.cli.render import accounting
from orchestrator.state.store import NodeRecord

NODE = NodeRecord(
    job_id="job-1",
    attempt=1,
    node=0,
    client_token="t",
    zone="ap-guangzhou-3",
    instance_type="GN7.2XLARGE32",
    charge_type="SPOTPAID",
    price_per_hour=2.0,
    instance_id="ins-1",
    state="gone",
    running_at=1000.0,
    ended_at=1000.0 + 1800,
    cost_cny=1.0,
    on_demand_price_per_hour=10.0,
)


def test_spot_attempts_are_billed_each_and_compared_with_on_demand_for_their_running_time() -> None:
    second = replace(NODE, attempt=2, instance_id="ins-2", running_at=5000.0, ended_at=5900.0, cost_cny=0.5)
    bill = accounting([NODE, second])
    assert bill["per_attempt"] == {1: 1.0, 2: 0.5}
    assert bill["total_cny"] == 1.5
    assert bill["on_demand_cny"] == pytest.approx(7.5)  # 1800 s + 900 s at 10 CNY/h
    assert bill["saved_cny"] == pytest.approx(6.0)


def test_an_on_demand_job_saves_nothing_whatever_the_controller_saw_of_its_running_time() -> None:
    # The controller saw 1810 s (5.03 CNY) between RUNNING and gone; the cloud billed 1807 s.
    on_demand = replace(NODE, charge_type="POSTPAID_BY_HOUR", price_per_hour=10.0, ended_at=2810.0, cost_cny=5.02)
    bill = accounting([on_demand])
    assert bill["total_cny"] == bill["on_demand_cny"] == 5.02
    assert bill["saved_cny"] == 0


def test_a_pool_node_is_compared_by_its_running_time() -> None:
    pool = replace(NODE, charge_type="PREPAID", price_per_hour=0.0, cost_cny=0.0)
    bill = accounting([pool])
    assert bill["total_cny"] == 0 and bill["on_demand_cny"] == 5.0 and bill["saved_cny"] == 5.0


def test_a_node_without_a_bill_yet_counts_nothing() -> None:
    running = replace(NODE, cost_cny=None, ended_at=None)
    assert accounting([running]) == {"per_attempt": {1: 0.0}, "total_cny": 0.0, "on_demand_cny": 0.0, "saved_cny": 0.0}

